"""Where the HorizontalPodAutoscaler reads metrics: one narrow interface, read over REST.

The autoscaler asks four questions (upstream's ``pkg/controller/podautoscaler/metrics``):

* ``resource_metric``: the CPU or memory each pod a selector matches uses (a container's, or
  the pod's containers' sum), from the resource metrics API, ``metrics.k8s.io/v1beta1``
  PodMetrics (the metrics-server);
* ``raw_metric``: a custom metric of each such pod (``custom.metrics.k8s.io/v1beta2``,
  ``.../pods/*/METRIC``);
* ``object_metric``: a custom metric describing one object (``.../RESOURCE/NAME/METRIC``);
* ``external_metric``: the values of an external metric (``external.metrics.k8s.io/v1beta1``).

Values are integers in thousandths of the unit (Go's ``MilliValue``), as upstream computes
with them.  Every failure is a ``MetricsError`` whose text is upstream's: it ends up in the
autoscaler's condition and events.  ``RestMetricsClient`` asks the API server, which proxies
the metrics groups to whatever extension servers their APIServices name; when none is
registered the request fails, and so does the metric, as upstream's.  Tests hand the
autoscaler a fake of ``MetricsClient`` instead.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

from controlplane.controllers.discovery import NoKindMatchError, RESTMapper
from kube import component
from kube.api import codec, quantity
from kube.api.kinds.autoscaling_v2 import CrossVersionObjectReference
from kube.api.kinds.custom_metrics_v1beta2 import MetricValue, MetricValueList
from kube.api.kinds.external_metrics_v1beta1 import ExternalMetricValueList
from kube.api.kinds.metrics_v1beta1 import PodMetrics
from kube.api.labels import Selector
from kube.client.errors import ApiError, ClientError
from kube.client.interface import ApiClient

CUSTOM_METRICS = "/apis/custom.metrics.k8s.io/v1beta2"
EXTERNAL_METRICS = "/apis/external.metrics.k8s.io/v1beta1"
DEFAULT_WINDOW = 60.0
"""The window of a custom metric that states none (upstream's metricServerDefaultMetricWindow)."""


class MetricsError(Exception):
    """A metric could not be read; the text says why, as upstream's does."""


@dataclass(frozen=True)
class PodMetric:
    """One pod's value of a metric: thousandths of its unit, read at ``timestamp`` as the
    rate over the ``window`` seconds before it."""

    value: int
    timestamp: datetime.datetime
    window: float


PodMetricsInfo = dict[str, PodMetric]
"""Pod name -> its value."""


class MetricsClient(Protocol):
    """The metrics the autoscaler reads; every method raises ``MetricsError``."""

    async def resource_metric(
        self, resource: str, namespace: str, selector: Selector, container: str
    ) -> tuple[PodMetricsInfo, datetime.datetime]:
        """The use of ``resource`` by each pod ``selector`` matches (by ``container`` of it
        when not empty), and when it was read."""
        ...

    async def raw_metric(
        self, name: str, namespace: str, selector: Selector, metric_selector: Selector
    ) -> tuple[PodMetricsInfo, datetime.datetime]:
        """The custom metric ``name`` of each pod ``selector`` matches."""
        ...

    async def object_metric(
        self,
        name: str,
        namespace: str,
        described: CrossVersionObjectReference,
        metric_selector: Selector,
    ) -> tuple[int, datetime.datetime]:
        """The custom metric ``name`` of the object ``described``."""
        ...

    async def external_metric(
        self, name: str, namespace: str, selector: Selector
    ) -> tuple[list[int], datetime.datetime]:
        """The values of the external metric ``name`` whose labels ``selector`` matches."""
        ...


def error_text(error: Exception) -> str:
    """What Go's ``err.Error()`` says: an API error's message, else the text."""
    return error.message if isinstance(error, ApiError) else str(error)


def milli(value: str | int | float | None) -> int:
    """A quantity in thousandths of its unit, rounded up (Go's ``MilliValue``)."""
    return quantity.Quantity.parse(value if value is not None else 0).milli_value()


def _window(text: str | None) -> float:
    try:
        return component.parse_duration(text or "0")
    except ValueError:
        return 0.0


def _at(when: datetime.datetime | None) -> datetime.datetime:
    return when or datetime.datetime.min.replace(tzinfo=datetime.UTC)


def pod_usage(items: list[PodMetrics], resource: str, container: str) -> PodMetricsInfo:
    """Each pod's use of ``resource``: one container's, or the sum over its containers (a pod
    missing it in any container, or with no containers, is left out, as upstream's)."""
    found: PodMetricsInfo = {}
    for item in items:
        name = item.metadata.name or ""
        containers = item.containers or []
        if container:
            match = next((c for c in containers if c.name == container), None)
            if match is None:
                raise MetricsError(
                    f"failed to get container metrics: container {container} not present in "
                    f"metrics for pod {item.metadata.namespace}/{name}"
                )
            chosen = [match] if resource in (match.usage or {}) else []
        else:
            chosen = containers
            if any(resource not in (c.usage or {}) for c in containers):
                chosen = []
        if chosen:
            total = sum(milli((c.usage or {})[resource]) for c in chosen)
            found[name] = PodMetric(total, _at(item.timestamp), _window(item.window))
    return found


class RestMetricsClient:
    """``MetricsClient`` over the API server's aggregated metrics groups."""

    def __init__(self, client: ApiClient, mapper: RESTMapper) -> None:
        self._client = client
        self._mapper = mapper

    async def resource_metric(
        self, resource: str, namespace: str, selector: Selector, container: str
    ) -> tuple[PodMetricsInfo, datetime.datetime]:
        try:
            listed = await self._client.list(PodMetrics, namespace, label_selector=str(selector))
        except (ApiError, ClientError) as error:
            raise MetricsError(
                f"unable to fetch metrics from resource metrics API: {error_text(error)}"
            ) from None
        if not listed.items:
            raise MetricsError("no metrics returned from resource metrics API")
        return pod_usage(listed.items, resource, container), _at(listed.items[0].timestamp)

    async def raw_metric(
        self, name: str, namespace: str, selector: Selector, metric_selector: Selector
    ) -> tuple[PodMetricsInfo, datetime.datetime]:
        path = f"{CUSTOM_METRICS}/namespaces/{quote(namespace)}/pods/*/{quote(name)}"
        items = await self._custom(path, {"labelSelector": str(selector)}, metric_selector)
        if not items:
            raise MetricsError("no metrics returned from custom metrics API")
        found = {
            (item.described_object.name if item.described_object else None) or "": PodMetric(
                milli(item.value),
                _at(item.timestamp),
                DEFAULT_WINDOW if item.window_seconds is None else float(item.window_seconds),
            )
            for item in items
        }
        return found, _at(items[0].timestamp)

    async def object_metric(
        self,
        name: str,
        namespace: str,
        described: CrossVersionObjectReference,
        metric_selector: Selector,
    ) -> tuple[int, datetime.datetime]:
        api_version = described.api_version or "v1"
        if described.kind == "Namespace" and "/" not in api_version:
            path = f"{CUSTOM_METRICS}/namespaces/{quote(namespace)}/metrics/{quote(name)}"
        else:
            try:
                found = await self._mapper.resource_for(api_version, described.kind or "")
            except (NoKindMatchError, ApiError, ClientError) as error:
                raise MetricsError(
                    f"unable to fetch metrics from custom metrics API: {error_text(error)}"
                ) from None
            plural = found.path.plural if not found.path.group else found.group_resource
            path = (
                f"{CUSTOM_METRICS}/namespaces/{quote(namespace)}/{plural}/"
                f"{quote(described.name or '')}/{quote(name)}"
            )
        items = await self._custom(path, {}, metric_selector)
        if len(items) != 1:
            raise MetricsError(
                "unable to fetch metrics from custom metrics API: the custom metrics API server "
                f"returned {len(items)} results when we asked for exactly one"
            )
        return milli(items[0].value), _at(items[0].timestamp)

    async def external_metric(
        self, name: str, namespace: str, selector: Selector
    ) -> tuple[list[int], datetime.datetime]:
        path = f"{EXTERNAL_METRICS}/namespaces/{quote(namespace)}/{quote(name)}"
        try:
            data = await self._client.request("GET", path, params=_selector(selector))
            items = codec.decode_json(data, ExternalMetricValueList).obj.items or []
        except (ApiError, ClientError, codec.DecodeError) as error:
            raise MetricsError(
                f"unable to fetch metrics from external metrics API: {error_text(error)}"
            ) from None
        if not items:
            raise MetricsError("no metrics returned from external metrics API")
        return [milli(item.value) for item in items], _at(items[0].timestamp)

    async def _custom(
        self, path: str, params: dict[str, str], metric_selector: Selector
    ) -> list[MetricValue]:
        if not metric_selector.empty:
            params["metricLabelSelector"] = str(metric_selector)
        try:
            data = await self._client.request("GET", path, params=params)
            return codec.decode_json(data, MetricValueList).obj.items or []
        except (ApiError, ClientError, codec.DecodeError) as error:
            raise MetricsError(
                f"unable to fetch metrics from custom metrics API: {error_text(error)}"
            ) from None


def _selector(selector: Selector) -> dict[str, str]:
    return {} if selector.empty else {"labelSelector": str(selector)}
