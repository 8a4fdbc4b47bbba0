"""A tiny resource metrics API for the autoscaler's server test: ``metrics.k8s.io/v1beta1``
PodMetrics over HTTPS, with the values a test sets, behind an APIService.

Run as ``python -m tests.controlplane.controllers.podmetrics_server --kubeconfig K --cert C
--key K --usage FILE [--address A] [--port N]``; it prints ``serving on port N`` once it
listens.  As the metrics-server does, it reports the Running pods of the namespace and label
selector asked for; each of their containers uses what ``--usage`` (a JSON object of
resource to quantity, read on every request) says at that moment, over a 1 s window.  It
believes only the aggregator (a client certificate of the requestheader CA the API server
publishes) and authorizes nothing further: the API server already has.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path

from aiohttp import web

from kube.api import codec
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.metrics_v1beta1 import GROUP, VERSION, ContainerMetrics, PodMetrics
from kube.api.meta_v1 import ObjectMeta
from kube.client import delegation
from kube.client.rest import Client
from tests.controlplane.apiserver.extension_server import flags, serve

PREFIX = f"/apis/{GROUP}/{VERSION}"
RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": f"{GROUP}/{VERSION}",
    "resources": [
        {"name": "pods", "namespaced": True, "kind": "PodMetrics", "verbs": ["get", "list"]},
    ],
}


class Metrics:
    def __init__(
        self, client: Client, authenticator: delegation.RequestHeaderAuthenticator, usage: Path
    ) -> None:
        self.client = client
        self.authenticator = authenticator
        self.usage = usage

    async def handle(self, request: web.Request) -> web.StreamResponse:
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        cert = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if self.authenticator.authenticate(cert, list(request.headers.items())) is None:
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        if request.path == PREFIX:
            return web.json_response(RESOURCES)
        parts = request.path.removeprefix(PREFIX + "/").split("/")
        if len(parts) != 3 or parts[0] != "namespaces" or parts[2] != "pods":
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        listed = await self.client.list(
            Pod, parts[1], label_selector=request.query.get("labelSelector") or None
        )
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
            for pod in listed.items
            if pod.status is not None and pod.status.phase == "Running"
        ]
        body = {
            "kind": "PodMetricsList",
            "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {},
            "items": codec.to_builtins(items),
        }
        return web.json_response(body)


if __name__ == "__main__":
    parser = flags()
    parser.add_argument("--usage", type=Path, required=True)
    arguments = parser.parse_args()
    asyncio.run(
        serve(arguments, lambda client, auth: Metrics(client, auth, arguments.usage).handle)
    )
