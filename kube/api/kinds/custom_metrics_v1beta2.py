"""custom.metrics.k8s.io/v1beta2: the values a custom metrics adapter answers with.

An adapter (Prometheus Adapter, KEDA) registered by an APIService serves metrics describing
Kubernetes objects: ``GET .../namespaces/NS/pods/*/METRIC?labelSelector=...`` for every pod a
selector matches, ``.../namespaces/NS/RESOURCE/NAME/METRIC`` for one object.  Both answer a
``MetricValueList``.  The HorizontalPodAutoscaler reads them for its Pods and Object metrics.
Nothing here is a stored resource: the API server never serves these itself, so they are plain
structures in upstream's field order, decoded by the client that reads them.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.meta_v1 import LabelSelector, ListMeta, TypeMeta
from kube.api.struct import QuantityValue, Struct, Time, meta

GROUP = "custom.metrics.k8s.io"
VERSION = "v1beta2"


class MetricIdentifier(Struct):
    """A metric's name and the selector that narrowed it."""

    name: Annotated[str | None, meta(doc="The name of the given metric.")] = None
    selector: Annotated[
        LabelSelector | None, meta(doc="The label selector used to narrow the metric.")
    ] = None


class MetricValue(TypeMeta):
    """The value of one metric of one object, at a time, over a window."""

    described_object: Annotated[
        ObjectReference | None, meta(doc="A reference to the described object.")
    ] = None
    metric: MetricIdentifier | None = None
    timestamp: Annotated[Time | None, meta(doc="When the metric was read.")] = None
    window_seconds: Annotated[
        int | None, meta(doc="The window ([timestamp-window, timestamp]) of the value.")
    ] = None
    value: Annotated[QuantityValue | None, meta(doc="The value of the metric.")] = None


class MetricValueList(TypeMeta):
    """The values of one metric for a list of objects."""

    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[MetricValue] | None = None
