"""external.metrics.k8s.io/v1beta1: the values an external metrics adapter answers with.

An adapter registered by an APIService serves metrics of things outside the cluster (a queue's
length): ``GET .../namespaces/NS/METRIC?labelSelector=...`` answers an
``ExternalMetricValueList``, one value per series the selector matches.  The
HorizontalPodAutoscaler sums them for its External metrics.  As with custom metrics, the API
server never serves these itself: plain structures in upstream's field order.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from kube.api.meta_v1 import ListMeta, TypeMeta
from kube.api.struct import QuantityValue, Time, meta

GROUP = "external.metrics.k8s.io"
VERSION = "v1beta1"


class ExternalMetricValue(TypeMeta):
    """One value of an external metric: its name, labels, time, window and value."""

    metric_name: Annotated[str | None, meta(doc="The name of the metric.")] = None
    metric_labels: Annotated[
        dict[str, str] | None, meta(doc="The set of labels that identify a single time series.")
    ] = None
    timestamp: Annotated[Time | None, meta(doc="When the metric was read.")] = None
    window_seconds: Annotated[
        int | None, meta(doc="The window ([timestamp-window, timestamp]) of the value.")
    ] = msgspec.field(default=None, name="window")
    value: Annotated[QuantityValue | None, meta(doc="The value of the metric.")] = None


class ExternalMetricValueList(TypeMeta):
    """The values of one external metric, one per matching series."""

    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[ExternalMetricValue] | None = None
