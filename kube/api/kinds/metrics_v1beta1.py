"""metrics.k8s.io/v1beta1: NodeMetrics and PodMetrics, the resource metrics API.

What ``kubectl top`` and the HorizontalPodAutoscaler read: the CPU (in cores, a rate over
``window``) and memory working set of each node and of each container of each pod, as the
metrics-server last scraped them from the kubelets.  The kinds are declared here, once, as every
kind is, but the API server itself does not serve them: they are ``aggregated``, served by the
metrics-server behind the APIService ``v1beta1.metrics.k8s.io``, and only read (get and list).
Their tables are upstream metrics-server's: the name, one column per resource in ``usage``
(sorted; a pod's summed over its containers) and the window.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Annotated

from kube.api.kinds.core_v1.pod import ResourceList
from kube.api.meta_v1 import Resource
from kube.api.printing import NAME_COLUMN, Column
from kube.api.quantity import Quantity
from kube.api.scheme import kind
from kube.api.struct import QuantityValue, Struct, Time, atomic, meta

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
READ_ONLY = ("get", "list")
"""The verbs upstream's metrics-server serves both resources with."""

_USAGE_DOC = "The memory usage is the memory working set."


class ContainerMetrics(Struct):
    """The usage of one container of a pod."""

    name: Annotated[
        str | None, meta(doc="Container name corresponding to the one from pod.spec.containers.")
    ] = None
    usage: Annotated[ResourceList | None, meta(doc=_USAGE_DOC)] = None


def usage_cell(resource: str) -> Column:
    """A column showing ``usage[resource]`` of a NodeMetrics, or its containers' sum for a
    PodMetrics, in the quantity's canonical form (what upstream's table prints)."""

    def cell(o: NodeMetrics | PodMetrics, now: datetime.datetime) -> str:
        return str(total_usage(o).get(resource, Quantity.parse(0)))

    return Column(resource, cell, format="quantity")


def total_usage(o: NodeMetrics | PodMetrics) -> dict[str, Quantity]:
    """A node's usage, or the sum of a pod's containers' usage, resource by resource."""
    if isinstance(o, NodeMetrics):
        return _parsed(o.usage or {})
    summed: dict[str, Quantity] = {}
    for container in o.containers or []:
        for resource, amount in _parsed(container.usage or {}).items():
            summed[resource] = summed.get(resource, Quantity.parse(0)) + amount
    return summed


def _parsed(usage: Mapping[str, QuantityValue]) -> dict[str, Quantity]:
    return {resource: Quantity.parse(amount) for resource, amount in usage.items()}


COLUMNS = (
    NAME_COLUMN,
    usage_cell("cpu"),
    usage_cell("memory"),
    Column("Window", lambda o, now: o.window or "", format="duration"),
)

_TIMESTAMP_DOC = (
    "The following fields define time interval from which metrics were collected from the "
    "interval [Timestamp-Window, Timestamp]."
)
_WINDOW_DOC = "The window, as Go prints a duration (10s, 1m0s)."


@kind(
    group=GROUP,
    version=VERSION,
    plural="nodes",
    namespaced=False,
    verbs=READ_ONLY,
    columns=COLUMNS,
    aggregated=True,
)
class NodeMetrics(Resource):
    """NodeMetrics sets resource usage metrics of a node."""

    timestamp: Annotated[Time | None, meta(doc=_TIMESTAMP_DOC)] = None
    window: Annotated[str | None, meta(doc=_WINDOW_DOC)] = None
    usage: Annotated[ResourceList | None, meta(doc=_USAGE_DOC)] = None


@kind(
    group=GROUP,
    version=VERSION,
    plural="pods",
    verbs=READ_ONLY,
    columns=COLUMNS,
    aggregated=True,
)
class PodMetrics(Resource):
    """PodMetrics sets resource usage metrics of a pod."""

    timestamp: Annotated[Time | None, meta(doc=_TIMESTAMP_DOC)] = None
    window: Annotated[str | None, meta(doc=_WINDOW_DOC)] = None
    containers: Annotated[
        list[ContainerMetrics] | None,
        atomic(doc="Metrics for all containers are collected within the same time window."),
    ] = None
