"""``deep_copy``: an equal object that shares nothing with the original."""

from __future__ import annotations

import datetime

from kube.api.kinds.autoscaling_v2 import (
    HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerStatus,
    MetricStatus,
    MetricValueStatus,
    ResourceMetricStatus,
)
from kube.api.struct import deep_copy


def test_a_deep_copy_is_equal_and_shares_nothing() -> None:
    moment = datetime.datetime(2026, 11, 29, 14, 0, 0, 123456, tzinfo=datetime.UTC)
    status = HorizontalPodAutoscalerStatus(
        current_replicas=1,
        desired_replicas=2,
        last_scale_time=datetime.datetime(2026, 1, 1, 1, 1, 1),
        current_metrics=[
            MetricStatus(
                type="Resource",
                resource=ResourceMetricStatus(
                    name="cpu", current=MetricValueStatus(average_value="100m")
                ),
            )
        ],
        conditions=[
            HorizontalPodAutoscalerCondition(type="AbleToScale", last_transition_time=moment)
        ],
    )
    copied = deep_copy(status)
    assert copied == status
    assert copied.conditions is not None and status.conditions is not None
    assert copied.conditions[0].last_transition_time == moment
    assert copied.last_scale_time == datetime.datetime(2026, 1, 1, 1, 1, 1)
    copied.conditions[0].status = "True"
    copied.conditions.append(HorizontalPodAutoscalerCondition(type="ScalingActive"))
    assert status.conditions == [
        HorizontalPodAutoscalerCondition(type="AbleToScale", last_transition_time=moment)
    ]
