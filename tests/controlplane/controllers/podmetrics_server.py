"""Tiny metrics APIs for the autoscaler's server test, over HTTPS, with the values a test sets:
the resource metrics API (``metrics.k8s.io/v1beta1`` PodMetrics), a custom metrics API
(``custom.metrics.k8s.io/v1beta2``, metrics of pods) and an external metrics API
(``external.metrics.k8s.io/v1beta1``), each behind its APIService.

Run as ``python -m tests.controlplane.controllers.podmetrics_server --kubeconfig K --cert C
--key K --usage FILE --custom FILE --external FILE [--address A] [--port N]``; it prints
``serving on port N`` once it listens. As the metrics-server does, it reports the Running pods
of the namespace and label selector asked for; each of their containers uses what ``--usage`` (a
JSON object of resource to quantity, read on every request) says at that moment, over a 1 s
window; each of them has the custom metrics ``--custom`` names (metric to quantity, read
likewise). As an external metrics adapter does, it answers each metric named in ``--external``
(a JSON object of metric name to its series, each a list of labels and value, read on every
request) with the series whose labels the request's selector matches. It believes only the
aggregator (a client certificate of the requestheader CA the API server publishes) and
authorizes nothing further: the API server already has.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path

from aiohttp import web

from kube.api import codec
from kube.api.kinds import custom_metrics_v1beta2 as custom
from kube.api.kinds import external_metrics_v1beta1 as external
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.kinds.metrics_v1beta1 import GROUP, VERSION, ContainerMetrics, PodMetrics
from kube.api.labels import parse_selector
from kube.api.meta_v1 import ObjectMeta
from kube.client import delegation
from kube.client.rest import Client
from tests.controlplane.apiserver.extension_server import flags, remote_user, serve

PREFIX = f"/apis/{GROUP}/{VERSION}"
EXTERNAL = f"/apis/{external.GROUP}/{external.VERSION}"
CUSTOM = f"/apis/{custom.GROUP}/{custom.VERSION}"


def _not_found() -> web.Response:
    return web.json_response({"kind": "Status", "code": 404}, status=404)


def _resources(prefix: str, names: list[str], kind: str) -> web.Response:
    """The discovery document of a group version (``prefix``): its resources by name."""
    return web.json_response(
        {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": prefix.removeprefix("/apis/"),
            "resources": [
                {"name": name, "namespaced": True, "kind": kind, "verbs": ["get", "list"]}
                for name in names
            ],
        }
    )


class Metrics:
    def __init__(
        self,
        client: Client,
        authenticator: delegation.RequestHeaderAuthenticator,
        usage: Path,
        custom: Path,
        series: Path,
    ) -> None:
        self.client = client
        self.authenticator = authenticator
        self.usage = usage
        self.custom = custom
        self.series = series

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if remote_user(self.authenticator, request) is None:
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        if request.path == PREFIX:
            return _resources(PREFIX, ["pods"], "PodMetrics")
        if request.path.startswith(EXTERNAL):
            return self.external(request)
        if request.path.startswith(CUSTOM):
            return await self.pods_metric(request)
        parts = request.path.removeprefix(PREFIX + "/").split("/")
        if len(parts) != 3 or parts[0] != "namespaces" or parts[2] != "pods":
            return _not_found()
        usage = json.loads(self.usage.read_text())
        now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        items = [
            PodMetrics(
                metadata=ObjectMeta(
                    name=pod.metadata.name,
                    namespace=pod.metadata.namespace,
                    labels=pod.metadata.labels,
                ),
                timestamp=now,
                window="1s",
                containers=[
                    ContainerMetrics(name=c.name, usage=dict(usage))
                    for c in (pod.spec.containers if pod.spec else None) or []
                ],
            ).typed()
            for pod in await self.running_pods(parts[1], request)
        ]
        body = {
            "kind": "PodMetricsList",
            "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {},
            "items": codec.to_builtins(items),
        }
        return web.json_response(body)

    async def running_pods(self, namespace: str, request: web.Request) -> list[Pod]:
        """The Running pods of ``namespace`` the request's label selector matches."""
        listed = await self.client.list(
            Pod, namespace, label_selector=request.query.get("labelSelector") or None
        )
        return [p for p in listed.items if p.status is not None and p.status.phase == "Running"]

    async def pods_metric(self, request: web.Request) -> web.Response:
        """``/apis/custom.metrics.k8s.io/v1beta2[/namespaces/NS/pods/*/METRIC]``."""
        values: dict[str, str] = json.loads(self.custom.read_text())
        if request.path == CUSTOM:
            return _resources(CUSTOM, [f"pods/{name}" for name in values], "MetricValueList")
        parts = request.path.removeprefix(CUSTOM + "/").split("/")
        if len(parts) != 5 or parts[0] != "namespaces" or parts[2:4] != ["pods", "*"]:
            return _not_found()
        if parts[4] not in values:
            return _not_found()
        now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        listed = custom.MetricValueList(
            kind="MetricValueList",
            api_version=f"{custom.GROUP}/{custom.VERSION}",
            items=[
                custom.MetricValue(
                    described_object=ObjectReference(
                        kind="Pod", namespace=pod.metadata.namespace, name=pod.metadata.name
                    ),
                    metric=custom.MetricIdentifier(name=parts[4]),
                    timestamp=now,
                    window_seconds=60,
                    value=values[parts[4]],
                )
                for pod in await self.running_pods(parts[1], request)
            ],
        )
        return web.json_response(codec.to_builtins(listed))

    def external(self, request: web.Request) -> web.Response:
        """``/apis/external.metrics.k8s.io/v1beta1[/namespaces/NS/METRIC]``."""
        series: dict[str, list[tuple[dict[str, str], str]]] = json.loads(self.series.read_text())
        if request.path == EXTERNAL:
            return _resources(EXTERNAL, list(series), "ExternalMetricValueList")
        parts = request.path.removeprefix(EXTERNAL + "/").split("/")
        if len(parts) != 3 or parts[0] != "namespaces" or parts[2] not in series:
            return _not_found()
        selector = parse_selector(request.query.get("labelSelector", ""))
        now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        listed = external.ExternalMetricValueList(
            kind="ExternalMetricValueList",
            api_version=f"{external.GROUP}/{external.VERSION}",
            items=[
                external.ExternalMetricValue(
                    metric_name=parts[2],
                    metric_labels=labels,
                    timestamp=now,
                    window_seconds=60,
                    value=value,
                )
                for labels, value in series[parts[2]]
                if selector.matches(labels)
            ],
        )
        return web.json_response(codec.to_builtins(listed))


if __name__ == "__main__":
    parser = flags()
    parser.add_argument("--usage", type=Path, required=True)
    parser.add_argument("--custom", type=Path, required=True)
    parser.add_argument("--external", type=Path, required=True)
    arguments = parser.parse_args()
    asyncio.run(
        serve(
            arguments,
            lambda client, auth: (
                Metrics(client, auth, arguments.usage, arguments.custom, arguments.external).handle
            ),
        )
    )
