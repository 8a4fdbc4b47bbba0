"""``kubelab ingress``: the lab's Ingress controller, run as the ``kubelab-ingress`` Deployment
in kube-system (see ``kubelab.lab.addons``).

Flags, named after ingress-nginx's where it has one:

- ``--kubeconfig``: optional; without it the in-cluster configuration is used.
- ``--controller-class`` (``kubelab.io/ingress``): the ``spec.controller`` of the IngressClasses
  whose Ingresses this controller serves.
- ``--publish-service NAMESPACE/NAME``: the controller's own LoadBalancer Service, whose
  load-balancer addresses are written to every served Ingress's ``status.loadBalancer``.
- ``--http-address`` (``0.0.0.0:80``) and ``--https-address`` (``0.0.0.0:443``): the proxy's
  listeners; port 0 picks a free one.
- ``--healthz-address`` (``0.0.0.0:10254``): ``/healthz`` (200 while the process serves) and
  ``/ready`` (200 once the caches have synced and the first table is in place, 503 before).

The proxy listens at once with an empty table (every request 404) and routes as soon as the
caches fill.  TLS connections whose server name no Ingress names get a self-signed certificate
made at start, "Kubernetes Ingress Controller Fake Certificate", as ingress-nginx's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from kube import component

if TYPE_CHECKING:
    from aiohttp import web

    from controlplane.ingress.routing import Certificate

FAKE_CERTIFICATE = "Kubernetes Ingress Controller Fake Certificate"
FAKE_HOST = "ingress.local"


def _service(text: str) -> str:
    namespace, slash, name = text.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, got {text!r}")
    return text


def add_flags(parser: argparse.ArgumentParser) -> None:
    from controlplane.ingress.controller import CONTROLLER

    component.add_client_flags(parser, required=False)
    parser.add_argument(
        "--controller-class",
        default=CONTROLLER,
        help=f"spec.controller of the IngressClasses served (default: {CONTROLLER})",
    )
    parser.add_argument(
        "--publish-service",
        type=_service,
        help="NAMESPACE/NAME of the LoadBalancer Service whose addresses go to Ingress status",
    )
    for name, default, what in (
        ("http", "0.0.0.0:80", "HTTP"),
        ("https", "0.0.0.0:443", "HTTPS"),
        ("healthz", "0.0.0.0:10254", "/healthz and /ready"),
    ):
        parser.add_argument(
            f"--{name}-address",
            type=component.address,
            default=component.address(default),
            help=f"IP:PORT to serve {what} on (default: {default}; port 0: any)",
        )


def default_certificate() -> Certificate:
    """A self-signed certificate for server names no Ingress names (see the docstring)."""
    from controlplane.ingress.routing import Certificate
    from kube.pki import CertificateAuthority

    issuer = CertificateAuthority.create(FAKE_CERTIFICATE)
    pair = issuer.issue(FAKE_CERTIFICATE, server=True, dns_names=[FAKE_HOST])
    return Certificate(pair.cert_pem, pair.key_pem, "(default)")


def health_app(ready: Callable[[], bool]) -> web.Application:
    from aiohttp import web

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readiness(_: web.Request) -> web.Response:
        return web.Response(text="ok") if ready() else web.Response(status=503, text="not synced")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/ready", readiness)
    return app


async def run_ingress(args: argparse.Namespace, stop: asyncio.Event) -> int:
    from controlplane.ingress.controller import IngressController
    from controlplane.ingress.proxy import IngressProxy
    from controlplane.ingress.routing import RoutingTable
    from kube.client.informers import SharedInformerFactory
    from kube.client.kubeconfig import KubeconfigError
    from kube.client.rest import Client

    options = {"qps": args.kube_api_qps, "burst": args.kube_api_burst}
    try:
        if args.kubeconfig is not None:
            client = Client.from_kubeconfig(
                args.kubeconfig, user_agent="kubelab-ingress", **options
            )
        else:
            client = Client.in_cluster(user_agent="kubelab-ingress", **options)
    except KubeconfigError as error:
        print(f"kubelab ingress: {error}", file=sys.stderr)
        return 2
    proxy = IngressProxy(RoutingTable(), default_certificate())
    tables = 0

    def swap(table: RoutingTable) -> None:
        nonlocal tables
        proxy.swap(table)
        tables += 1

    async with client:
        informers = SharedInformerFactory(client)
        controller = IngressController(
            client,
            informers,
            swap,
            controller=args.controller_class,
            publish_service=args.publish_service,
        )
        health = None
        try:
            http, https = await proxy.start(args.http_address, args.https_address)
            health, health_port = await component.serve_health(
                health_app(lambda: tables > 0), *args.healthz_address
            )
            informers.start()
            host = args.http_address[0]
            print(
                f"kubelab ingress: serving class controller {args.controller_class} "
                f"on {host}:{http} (http) and {args.https_address[0]}:{https} (https); "
                f"/healthz and /ready on port {health_port}",
                flush=True,
            )
            return await component.until_stopped(controller.run(), stop, "ingress")
        finally:
            await informers.shutdown()
            await proxy.close()
            if health is not None:
                await health.cleanup()


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)

    def run(args: argparse.Namespace) -> int:
        return component.run(lambda stop: run_ingress(args, stop))

    return run
