"""A backend for ``pods/proxy`` and ``services/proxy`` tests: an HTTP server on this machine's
own address (the API server dials only global unicast pod IPs, and EndpointSlices refuse
loopback), and the Pod, Services and EndpointSlices that lead to it, made with kubectl."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import subprocess
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from aiohttp import web

from tests.servers import Kubectl, host_address


@dataclass
class Backend:
    """An HTTP server standing in for a pod: what it answers is what it was asked."""

    address: str
    port: int
    release: asyncio.Event
    """``/stream`` sends its first line, then its last once this is set."""


@contextlib.asynccontextmanager
async def serve_backend() -> AsyncIterator[Backend]:
    """The backend, on this machine's address and a free port, while in the block."""
    address = host_address()
    release = asyncio.Event()

    async def echo(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "method": request.method,
                "path": request.path,
                "query": request.query_string,
                "body": (await request.read()).decode(),
                "headers": {k.lower(): v for k, v in request.headers.items()},
            },
            headers={"Access-Control-Allow-Origin": "*", "X-Backend": "yes"},
        )

    async def moved(request: web.Request) -> web.Response:
        host = request.headers.get("Host", "")
        return web.Response(status=302, headers={"Location": f"http://{host}/elsewhere"})

    async def redirect_home(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "/home/"})

    async def page(request: web.Request) -> web.Response:
        links = f'<a href="/docs/">d</a><img src="http://{request.host}/i.png">'
        return web.Response(
            body=gzip.compress(f"<html><body>{links}</body></html>".encode()),
            headers={"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip"},
        )

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"first\n")
        await release.wait()
        await response.write(b"last\n")
        await response.write_eof()
        return response

    async def websocket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("echo.example",))
        await ws.prepare(request)
        async for message in ws:
            await ws.send_str(f"echo {message.data}")
        return ws

    app = web.Application()
    app.router.add_get("/ws", websocket)
    app.router.add_get("/stream", stream)
    app.router.add_get("/page", page)
    app.router.add_get("/to-home", redirect_home)
    app.router.add_get("/moved", moved)
    app.router.add_route("*", "/{tail:.*}", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, address, 0)
    await site.start()
    try:
        yield Backend(address, int(runner.addresses[0][1]), release)
    finally:
        await runner.cleanup()


def create(kubectl: Kubectl, *objects: Mapping[str, object]) -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    kubectl.run("create", "-f", "-", input=json.dumps(listed))


def _pod_manifest(name: str, ports: list[int]) -> dict[str, object]:
    container: dict[str, object] = {"name": "app", "image": "busybox"}
    if ports:
        container["ports"] = [{"containerPort": p} for p in ports]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container]},
    }


def _service(name: str, port: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"ports": [port]},
    }


def _slice(
    kubectl: Kubectl,
    service: str,
    address: str,
    port: dict[str, object],
    pod: str,
    *,
    ready: bool = True,
) -> dict[str, object]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"{service}-abcde", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": [address],
                "conditions": {"ready": ready},
                "targetRef": {"kind": "Pod", "namespace": kubectl.namespace, "name": pod},
            }
        ],
        "ports": [{**port, "protocol": "TCP"}],
    }


def serve_web(kubectl: Kubectl, backend: Backend) -> None:
    """Pod ``web`` (its container declaring the backend's port, its IP the backend's), Service
    ``web`` (one unnamed port 80) and ``named`` (port ``http``, 8080), both backed by it;
    Service ``empty`` whose slice has no endpoints, ``unready`` whose one endpoint is not ready and
    ``stray`` whose endpoint's Pod (``pending``) does not have its address; as a user would
    make them."""
    create(
        kubectl,
        _pod_manifest("web", [backend.port]),
        _pod_manifest("pending", []),
        _service("web", {"port": 80, "targetPort": backend.port}),
        _service("named", {"name": "http", "port": 8080, "targetPort": backend.port}),
        _service("empty", {"port": 80}),
        {**_slice(kubectl, "empty", backend.address, {"port": 80}, "web"), "endpoints": []},
        _slice(kubectl, "web", backend.address, {"port": backend.port}, "web"),
        _slice(kubectl, "named", backend.address, {"name": "http", "port": backend.port}, "web"),
        _service("unready", {"port": 80}),
        _slice(kubectl, "unready", backend.address, {"port": backend.port}, "web", ready=False),
        _service("stray", {"port": 80}),
        _slice(kubectl, "stray", backend.address, {"port": backend.port}, "pending"),
    )
    status = {"status": {"podIP": backend.address}}
    kubectl.run(
        "patch", "pod", "web", "--subresource=status", "--type=merge", "-p", json.dumps(status)
    )


def raw(kubectl: Kubectl, path: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    return kubectl.run(
        "get", "--raw", f"/api/v1/namespaces/{kubectl.namespace}/{path}", check=check
    )
