"""``kubelab lab ui``'s server: one page on the host's loopback, fed live from informers.

The cluster is read one way only, as every component reads it: a ``SharedInformerFactory``
(``kube.client``) over the host kubeconfig keeps Nodes, Pods, Services and EndpointSlices;
the lab's namespaces are read through ``kubelab.lab.ui.facts.Facts``.  Any change marks the
document stale; ``publish`` rebuilds it (``kubelab.lab.ui.model.topology``) at most every
``DEBOUNCE`` seconds and, when it differs, hands it to every open ``/api/events`` stream
(Server-Sent Events), so a new pod is on the page a fraction of a second after its watch event.

Whether the API answers is probed every ``PROBE_INTERVAL`` (``GET /readyz``, no retries) and
is part of the document, so the page says when the API is unreachable; the informers'
reflectors re-list and watch again on their own once it is back (a control-plane restart).

Access: the URL carries a random token, as Jupyter's does; a page loaded with it gets it as
an HttpOnly, SameSite=Strict cookie (named after the token), which the page's own requests
then carry.  Any request without either is a 401.  Read-only by default: the page never
writes to the API, and a trace (which sends a probe and adds marking tables to the lab's
namespaces for its duration) is refused unless the server was started with ``allow_trace``.

Routes: ``/`` the page, ``/static/...`` its script, style and the vendored Cytoscape.js,
``/api/state``, ``/api/events``, ``/api/story?pod=NS/NAME``, ``/api/chains?service=NS/NAME
&node=NODE``, ``POST /api/trace`` with ``{"source": ..., "destination": ...}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from aiohttp import web

from kube.api.kinds.core_v1.node import Node as NodeObject
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import EndpointSlice
from kube.client.errors import ApiError, ClientError
from kube.client.informers import SharedInformerFactory
from kube.client.interface import ApiClient
from kube.client.rest import Client
from kubelab.lab import trace
from kubelab.lab.processes import CommandError
from kubelab.lab.topology import Lab
from kubelab.lab.ui import facts as lab_facts
from kubelab.lab.ui.model import Cluster, NodeNetwork, pod_id, topology
from kubelab.story import chain
from kubelab.story import gather as story

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
DEBOUNCE = 0.1
PROBE_INTERVAL = 1.0
FACTS_INTERVAL = 2.0
KEEPALIVE = 15.0
VENDORED = ("cytoscape.min.js", "cytoscape-dagre.min.js")
"""What ``make setup`` copies from npm into ``static/vendor`` (``make ui-vendor``)."""

Prober = Callable[[], Awaitable[None]]
"""Raises (``ClientError``, ``ApiError``, ``OSError``) when the API does not answer."""
Tracer = Callable[[str, str], Awaitable[dict[str, Any]]]
Storyteller = Callable[[str, str], Awaitable[list[dict[str, Any]]]]


def missing_vendored(static: Path = STATIC) -> list[str]:
    """The vendored files the page needs that are not there (``make setup`` not run)."""
    return [name for name in VENDORED if not (static / "vendor" / name).is_file()]


def new_token() -> str:
    return secrets.token_urlsafe(24)


def cookie_name(token: str) -> str:
    """The token's cookie, named after it: cookies do not tell ports apart, so two pages of two
    servers on one host must not overwrite each other's."""
    return "kubelab-ui-" + hashlib.sha256(token.encode()).hexdigest()[:12]


def token_ok(expected: str, request: web.Request) -> bool:
    """The request carries the token, in its query or its cookie (compared in constant time)."""
    given = request.query.get("token") or request.cookies.get(cookie_name(expected)) or ""
    return hmac.compare_digest(given.encode(), expected.encode())


class Ui:
    """The live document and its subscribers; see the module docstring."""

    def __init__(
        self,
        lab: Lab,
        client: ApiClient,
        facts: lab_facts.Facts,
        probe: Prober,
        *,
        story: Storyteller,
        trace: Tracer | None = None,
    ) -> None:
        self.lab = lab
        self.facts = facts
        self.probe = probe
        self.story = story
        self.trace = trace
        self.factory = SharedInformerFactory(client)
        self.nodes = self.factory.informer_for(NodeObject)
        self.pods = self.factory.informer_for(Pod)
        self.services = self.factory.informer_for(Service)
        self.slices = self.factory.informer_for(EndpointSlice)
        self.networks: dict[str, NodeNetwork] = {}
        self._veths: dict[str, str] = {}
        """The host end of each pod's veth, by pod UID (a pod made again has a new one)."""
        self.api: dict[str, Any] = {"reachable": False, "message": "not probed yet", "since": ""}
        self.document: dict[str, Any] = {}
        self.version = 0
        self._stale = asyncio.Event()
        self._published = asyncio.Condition()
        self._trace_lock = asyncio.Lock()
        for informer in (self.nodes, self.pods, self.services, self.slices):
            informer.add_change_handler(lambda _obj: self._stale.set())

    async def run(self) -> None:
        """Informers, probes and publishing, until cancelled."""
        self.factory.start()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._probe_loop())
                group.create_task(self._facts_loop())
                group.create_task(self._publish_loop())
        finally:
            await self.factory.shutdown()

    def build(self) -> dict[str, Any]:
        cluster = Cluster(
            nodes=self.nodes.lister.list(),
            pods=self.pods.lister.list(),
            services=self.services.lister.list(),
            slices=self.slices.lister.list(),
        )
        veths = {
            pod_id(p.metadata.namespace or "", p.metadata.name or ""): self._veths[uid]
            for p in cluster.pods
            if (uid := p.metadata.uid or "") in self._veths
        }
        document = topology(self.lab, cluster, self.networks, veths)
        document["api"] = dict(self.api)
        document["traceAllowed"] = self.trace is not None
        return document

    async def _publish_loop(self) -> None:
        while True:
            await self._stale.wait()
            await asyncio.sleep(DEBOUNCE)
            self._stale.clear()
            document = self.build()
            if document != self.document:
                async with self._published:
                    self.document = document
                    self.version += 1
                    self._published.notify_all()

    async def next_document(self, seen: int) -> tuple[int, dict[str, Any]]:
        """The document once its version is past ``seen``."""
        async with self._published:
            await self._published.wait_for(lambda: self.version > seen)
            return self.version, self.document

    async def _probe_loop(self) -> None:
        while True:
            try:
                await self.probe()
                reachable, message = True, "answering"
            except (ClientError, ApiError, OSError, TimeoutError) as error:
                reachable, message = False, str(error) or type(error).__name__
            if reachable != self.api["reachable"] or message != self.api["message"]:
                now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
                self.api = {"reachable": reachable, "message": message, "since": now}
                self._stale.set()
            await asyncio.sleep(PROBE_INTERVAL)

    async def _facts_loop(self) -> None:
        while True:
            networks = await asyncio.gather(*(self.facts.network(n) for n in self.lab.nodes))
            self.networks = {n.name: net for n, net in zip(self.lab.nodes, networks, strict=True)}
            pods = {p.metadata.uid or "": p for p in self.pods.lister.list()}
            unknown = [uid for uid in pods if not self._veths.get(uid)]
            found = await asyncio.gather(*(self.facts.pod_veth(pods[uid]) for uid in unknown))
            self._veths = {uid: v for uid, v in self._veths.items() if uid in pods}
            self._veths.update(zip(unknown, found, strict=True))
            self._stale.set()
            await asyncio.sleep(FACTS_INTERVAL)

    async def chains(self, service: str, node_name: str) -> dict[str, Any]:
        namespace, _, name = service.partition("/")
        node = self.lab.node(node_name)
        listing = await self.facts.proxy_rules(node)
        return lab_facts.chain_graph(listing, namespace, name)

    async def run_trace(self, source: str, destination: str) -> dict[str, Any]:
        assert self.trace is not None
        async with self._trace_lock:
            return await self.trace(source, destination)


def app(ui: Ui, token: str) -> web.Application:
    """The page's routes behind the token check."""

    @web.middleware
    async def authorize(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not token_ok(token, request):
            return web.Response(status=401, text="kubelab lab ui: open the URL with its token\n")
        return await handler(request)

    async def index(request: web.Request) -> web.StreamResponse:
        response = web.FileResponse(STATIC / "index.html")
        response.set_cookie(cookie_name(token), token, httponly=True, samesite="Strict")
        return response

    async def state(request: web.Request) -> web.Response:
        return web.json_response(ui.document or ui.build())

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        seen = -1
        version, document = ui.version, ui.document or ui.build()
        with contextlib.suppress(ConnectionResetError):  # the page went away
            while True:
                if version != seen:
                    await response.write(f"data: {json.dumps(document)}\n\n".encode())
                    seen = version
                try:
                    version, document = await asyncio.wait_for(ui.next_document(seen), KEEPALIVE)
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
        return response

    async def told(request: web.Request) -> web.Response:
        namespace, _, name = request.query.get("pod", "").partition("/")
        if not namespace or not name:
            return _error(400, "expected ?pod=NAMESPACE/NAME")
        try:
            return web.json_response(await ui.story(namespace, name))
        except (story.StoryError, ApiError, ClientError, OSError) as error:
            return _error(502, f"no story for pod {namespace}/{name}: {error}")

    async def chains(request: web.Request) -> web.Response:
        service, node = request.query.get("service", ""), request.query.get("node", "")
        if "/" not in service or not node:
            return _error(400, "expected ?service=NAMESPACE/NAME&node=NODE")
        try:
            return web.json_response(await ui.chains(service, node))
        except KeyError:
            return _error(404, f"no node {node} in lab {ui.lab.name}")
        except CommandError as error:
            return _error(502, str(error))

    async def traced(request: web.Request) -> web.Response:
        if ui.trace is None:
            return _error(403, "traces are off: start kubelab lab ui with --allow-trace")
        try:
            body = await request.json()
            source, destination = str(body["source"]), str(body["destination"])
        except (ValueError, KeyError, TypeError):
            return _error(400, 'expected {"source": ..., "destination": ...}')
        try:
            return web.json_response(await ui.run_trace(source, destination))
        except (trace.TraceError, CommandError, ApiError, ClientError, OSError) as error:
            return _error(400, f"trace {source} -> {destination}: {error}")

    application = web.Application(middlewares=[authorize])
    application.add_routes(
        [
            web.get("/", index),
            web.get("/api/state", state),
            web.get("/api/events", events),
            web.get("/api/story", told),
            web.get("/api/chains", chains),
            web.post("/api/trace", traced),
            web.static("/static", STATIC),
        ]
    )
    return application


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def serve(ui: Ui, token: str, host: str, port: int, ready: Callable[[str], None]) -> None:
    """Serve until cancelled; ``ready`` gets the URL to open (with the token)."""
    runner = web.AppRunner(app(ui, token), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    ready(f"http://{host}:{bound}/?token={token}")
    try:
        await ui.run()
    finally:
        with contextlib.suppress(Exception):
            await runner.cleanup()


def lab_story(client: Client) -> Storyteller:
    """A pod's story (``kubelab story pod/NAME -o json``) read with the page's client."""

    async def tell_pod(namespace: str, name: str) -> list[dict[str, Any]]:
        evidence = await story.gather(client, Pod, name, namespace)
        return [step.to_json() for step in chain.tell(evidence)]

    return tell_pod


def lab_trace(lab: Lab) -> Tracer:
    """``kubelab lab trace SOURCE DESTINATION -o json``."""

    async def run(source: str, destination: str) -> dict[str, Any]:
        return asdict(await trace.run_trace(lab, source, destination))

    return run
