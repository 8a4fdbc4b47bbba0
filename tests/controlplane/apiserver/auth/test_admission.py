"""The built-in admission stages: Priority and DefaultTolerationSeconds, through the API."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api.kinds.core_v1.pod import Container, Pod, Toleration
from kube.api.kinds.scheduling_v1 import PriorityClass
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests import builders


def pod(name: str, namespace: str, **spec: Any) -> Pod:
    return builders.pod(name, namespace, containers=[Container(name="c", image="app")], **spec)


async def test_priority_class_becomes_priority(client: Client, namespace: str) -> None:
    await client.create(PriorityClass(metadata=ObjectMeta(name=f"{namespace}-high"), value=1000))
    created = await client.create(pod("p", namespace, priority_class_name=f"{namespace}-high"))
    assert created.spec is not None
    assert (created.spec.priority, created.spec.preemption_policy) == (
        1000,
        "PreemptLowerPriority",
    )
    plain = await client.create(pod("q", namespace))
    assert plain.spec is not None and plain.spec.priority == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"priority_class_name": "no-such-class"},
            "no PriorityClass with name no-such-class was found",
            id="unknown-class",
        ),
        pytest.param(
            {"priority_class_name": "system-node-critical"},
            "pods with system-node-critical priorityClass is not permitted in",
            id="system-class-outside-kube-system",
        ),
        pytest.param(
            {"priority": 5},
            "the integer value of priority (5) must not be provided in pod spec",
            id="priority-set-by-hand",
        ),
    ],
)
async def test_priority_refusals(
    client: Client, namespace: str, spec: dict[str, object], message: str
) -> None:
    with pytest.raises(ApiError) as refused:
        await client.create(pod("p", namespace, **spec))
    assert refused.value.code == 403 and message in refused.value.message


async def test_pods_tolerate_unready_nodes_for_five_minutes(client: Client, namespace: str) -> None:
    created = await client.create(pod("p", namespace))
    assert created.spec is not None
    defaults = [
        (t.key, t.operator, t.effect, t.toleration_seconds) for t in created.spec.tolerations or ()
    ]
    assert defaults == [
        ("node.kubernetes.io/not-ready", "Exists", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "Exists", "NoExecute", 300),
    ]
    own = Toleration(key="node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute")
    custom = await client.create(pod("q", namespace, tolerations=[own]))
    assert custom.spec is not None
    keys = [(t.key, t.toleration_seconds) for t in custom.spec.tolerations or ()]
    assert keys == [("node.kubernetes.io/unreachable", None), ("node.kubernetes.io/not-ready", 300)]
