"""A small real extension API server for the aggregation tests: ``wardle.example.com/v1alpha1``
Flunders (namespaced, get/list/watch), over HTTPS, trusting only the aggregator.

Run as ``python -m tests.controlplane.apiserver.extension_server --kubeconfig K --cert C --key
K --record FILE [--address A] [--port N]``; it prints ``serving on port N`` once it listens.  As
a real extension server does, it reads ``kube-system/extension-apiserver-authentication`` for
the requestheader CA and allowed names, believes ``X-Remote-*`` headers only from a client
certificate of that CA (``kube.client.delegation``), and asks the API server with a
SubjectAccessReview whether the user may do what it asks.  Each request's path and user go to
``--record`` as a JSON line.

It serves two flunders in every namespace; a watch sends them as ADDED and stays open;
``flunders/NAME/echo`` is a websocket that echoes (exec-like streams through the proxy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web

from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.client import delegation
from kube.client.rest import Client

GROUP, VERSION = "wardle.example.com", "v1alpha1"
PREFIX = f"/apis/{GROUP}/{VERSION}"
FLUNDERS = ("alpha", "beta")
RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": f"{GROUP}/{VERSION}",
    "resources": [
        {
            "name": "flunders",
            "singularName": "flunder",
            "namespaced": True,
            "kind": "Flunder",
            "verbs": ["get", "list", "watch"],
            "shortNames": ["fl"],
            "categories": ["wardle"],
        }
    ],
}


def flunder(namespace: str, name: str) -> dict[str, Any]:
    return {
        "kind": "Flunder",
        "apiVersion": f"{GROUP}/{VERSION}",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"{namespace}-{name}",
            "resourceVersion": "1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"reference": name},
    }


def remote_user(
    authenticator: delegation.RequestHeaderAuthenticator, request: web.Request
) -> delegation.RemoteUser | None:
    """Who the aggregator says sent ``request``, if the aggregator's client certificate
    vouches for it."""
    ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
    cert = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    return authenticator.authenticate(cert, list(request.headers.items()))


class Wardle:
    def __init__(
        self, client: Client, authenticator: delegation.RequestHeaderAuthenticator, record: Path
    ) -> None:
        self.client = client
        self.authenticator = authenticator
        self.record = record

    async def handle(self, request: web.Request) -> web.StreamResponse:
        user = remote_user(self.authenticator, request)
        with self.record.open("a") as out:
            out.write(
                json.dumps(
                    {
                        "path": request.path,
                        "user": user.name if user else None,
                        "groups": list(user.groups) if user else [],
                        "authorization": request.headers.get("Authorization"),
                    }
                )
                + "\n"
            )
        if user is None:
            return _status(401, "Unauthorized", "Unauthorized")
        if request.path == PREFIX:
            return web.json_response(RESOURCES)
        parts = request.path.removeprefix(PREFIX + "/").split("/")
        if len(parts) not in (3, 4, 5) or parts[0] != "namespaces" or parts[2] != "flunders":
            return _status(404, "NotFound", "the server could not find the requested resource")
        namespace, name = parts[1], parts[3] if len(parts) >= 4 else ""
        if len(parts) == 5:
            if parts[4] != "echo" or request.headers.get("Upgrade", "").lower() != "websocket":
                return _status(404, "NotFound", "the server could not find the requested resource")
            return await self.echo(request, user)
        watch = request.query.get("watch", "").lower() in ("true", "1")
        verb = "watch" if watch else "get" if name else "list"
        allowed, reason = await delegation.authorize(
            self.client,
            user,
            verb=verb,
            group=GROUP,
            version=VERSION,
            resource="flunders",
            namespace=namespace,
            name=name,
        )
        if not allowed:
            return _status(403, "Forbidden", f"flunders is forbidden: {reason}")
        if name:
            if name not in FLUNDERS:
                return _status(404, "NotFound", f'flunders.{GROUP} "{name}" not found')
            return web.json_response(flunder(namespace, name))
        if watch:
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            for each in FLUNDERS:
                event = {"type": "ADDED", "object": flunder(namespace, each)}
                await response.write(json.dumps(event).encode() + b"\n")
            await asyncio.sleep(3600)
            return response
        return web.json_response(
            {
                "kind": "FlunderList",
                "apiVersion": f"{GROUP}/{VERSION}",
                "metadata": {"resourceVersion": "1"},
                "items": [flunder(namespace, each) for each in FLUNDERS],
            }
        )

    async def echo(self, request: web.Request, user: delegation.RemoteUser) -> web.StreamResponse:
        """``flunders/NAME/echo``: a websocket (``v5.channel.k8s.io`` offered) that greets the
        user by name, then sends every binary message back."""
        socket = web.WebSocketResponse(protocols=("v5.channel.k8s.io",))
        await socket.prepare(request)
        await socket.send_str(f"hello {user.name}")
        async for message in socket:
            if message.type == WSMsgType.BINARY:
                await socket.send_bytes(message.data)
        return socket


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return web.json_response(body, status=code)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(
    args: argparse.Namespace,
    handler: Callable[[Client, delegation.RequestHeaderAuthenticator], Handler],
) -> None:
    """Serve ``handler`` (made from a client of the API server and an authenticator of the
    aggregator's requests) over HTTPS on ``--address:--port`` with ``--cert``/``--key``,
    until cancelled; prints ``serving on port N`` once it listens."""
    client = Client.from_kubeconfig(args.kubeconfig)
    published = await client.get(ConfigMap, delegation.CONFIGMAP, delegation.NAMESPACE)
    config = delegation.from_configmap(published.data or {})
    assert config is not None, "the API server published no requestheader settings"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    context.load_verify_locations(cadata=config.ca_pem.decode())
    context.verify_mode = ssl.CERT_OPTIONAL
    app = web.Application()
    app.router.add_route(
        "*", "/{tail:.*}", handler(client, delegation.RequestHeaderAuthenticator(config))
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.address, args.port, ssl_context=context)
    await site.start()
    print(f"serving on port {runner.addresses[0][1]}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        await client.close()


def flags() -> argparse.ArgumentParser:
    """The flags every extension server here takes."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--cert", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    return parser


if __name__ == "__main__":
    parser = flags()
    parser.add_argument("--record", type=Path, required=True)
    arguments = parser.parse_args()
    asyncio.run(
        serve(arguments, lambda client, auth: Wardle(client, auth, arguments.record).handle)
    )
