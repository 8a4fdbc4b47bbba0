"""``kubelab metrics-server``: scrape the kubelets, serve metrics.k8s.io/v1beta1.

Flags, as upstream's metrics-server spells them:

- ``--kubeconfig``: optional; without it the in-cluster configuration (the pod's
  service-account token and CA).  The same credentials authenticate it to the kubelets.
- ``--bind-address`` (``0.0.0.0``) and ``--secure-port`` (10250; 0 picks a free one): the
  HTTPS API the aggregator proxies to.  ``--tls-cert-file``/``--tls-private-key-file``: its
  serving certificate; without them a self-signed one is made at start, as upstream's
  ``--cert-dir`` does (the lab's APIService then skips verification, as upstream's manifest).
- ``--metric-resolution`` (15s): how often every kubelet is scraped.
- ``--kubelet-request-timeout`` (10s): how long one kubelet may take to answer.
- ``--kubelet-preferred-address-types``
  (``Hostname,InternalDNS,InternalIP,ExternalDNS,ExternalIP``); the port is the node's
  status port always (upstream's ``--kubelet-use-node-status-port``).
- ``--kubelet-certificate-authority``: the CA of the kubelets' serving certificates (default:
  the API server's CA from the client configuration); ``--kubelet-insecure-tls`` skips it.

Requests are authenticated with the requestheader settings the API server publishes in
``kube-system/extension-apiserver-authentication`` (read at start, retried until there), and
authorized by SubjectAccessReviews.  It prints ``serving on port N`` once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import ssl
import sys
from collections.abc import Callable
from pathlib import Path

from kube import component

DEFAULT_PORT = 10250
DEFAULT_RESOLUTION = 15.0
DEFAULT_TIMEOUT = 10.0
log = logging.getLogger("kubelab.metrics-server")


def _address_types(text: str) -> list[str]:
    from controlplane.metricsserver.scraper import DEFAULT_ADDRESS_TYPES

    types = [t for t in text.split(",") if t]
    unknown = [t for t in types if t not in DEFAULT_ADDRESS_TYPES]
    if unknown or not types:
        raise argparse.ArgumentTypeError(
            f"address types must be among {','.join(DEFAULT_ADDRESS_TYPES)}, got {text!r}"
        )
    return types


def add_flags(parser: argparse.ArgumentParser) -> None:
    from controlplane.metricsserver.scraper import DEFAULT_ADDRESS_TYPES

    component.add_client_flags(parser, required=False)
    parser.add_argument("--bind-address", default="0.0.0.0", help="address of the HTTPS API")
    parser.add_argument(
        "--secure-port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port of the HTTPS API (default: {DEFAULT_PORT}; 0: any free port)",
    )
    parser.add_argument("--tls-cert-file", type=Path, help="serving certificate (PEM)")
    parser.add_argument("--tls-private-key-file", type=Path, help="its private key (PEM)")
    parser.add_argument(
        "--metric-resolution",
        type=component.duration,
        default=DEFAULT_RESOLUTION,
        help="how often the kubelets are scraped (default: 15s)",
    )
    parser.add_argument(
        "--kubelet-request-timeout",
        type=component.duration,
        default=DEFAULT_TIMEOUT,
        help="how long one kubelet may take to answer (default: 10s)",
    )
    parser.add_argument(
        "--kubelet-preferred-address-types",
        type=_address_types,
        default=list(DEFAULT_ADDRESS_TYPES),
        help="node address types to reach kubelets at, in order "
        f"(default: {','.join(DEFAULT_ADDRESS_TYPES)})",
    )
    parser.add_argument(
        "--kubelet-certificate-authority",
        type=Path,
        help="CA of the kubelets' serving certificates (default: the API server's CA)",
    )
    parser.add_argument(
        "--kubelet-insecure-tls",
        action="store_true",
        help="do not verify the kubelets' serving certificates",
    )


def _serving_context(args: argparse.Namespace, requestheader_ca: bytes) -> ssl.SSLContext:
    from kube.pki import CertificateAuthority, load_certificate

    if (args.tls_cert_file is None) != (args.tls_private_key_file is None):
        raise SystemExit(
            "kubelab metrics-server: --tls-cert-file and --tls-private-key-file go together"
        )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    if args.tls_cert_file is not None:
        context.load_cert_chain(args.tls_cert_file, args.tls_private_key_file)
    else:
        own = CertificateAuthority.create("metrics-server-ca")
        pair = own.issue("metrics-server", server=True, dns_names=["localhost"])
        load_certificate(context, pair.cert_pem, pair.key_pem)
    context.load_verify_locations(cadata=requestheader_ca.decode())
    context.verify_mode = ssl.CERT_OPTIONAL
    return context


async def run_metrics_server(args: argparse.Namespace, stop: asyncio.Event) -> int:
    from aiohttp import web

    from controlplane.metricsserver.api import MetricsAPI
    from controlplane.metricsserver.scraper import KubeletClient, Scraper
    from controlplane.metricsserver.storage import Storage
    from kube.api.kinds.core_v1.cluster import ConfigMap
    from kube.api.kinds.core_v1.node import Node
    from kube.api.kinds.core_v1.pod import Pod
    from kube.client import delegation, incluster
    from kube.client.errors import ApiError, ClientError
    from kube.client.informers import LABELS_INDEX, SharedInformerFactory, index_by_labels
    from kube.client.kubeconfig import KubeconfigError
    from kube.client.rest import Client
    from kube.clock import RealClock
    from kube.pki import client_ssl_context

    options = {"qps": args.kube_api_qps, "burst": args.kube_api_burst}
    agent = "kubelab-metrics-server"
    try:
        if args.kubeconfig is not None:
            client = Client.from_kubeconfig(args.kubeconfig, user_agent=agent, **options)
        else:
            client = Client.in_cluster(user_agent=agent, **options)
    except KubeconfigError as error:
        print(f"kubelab metrics-server: {error}", file=sys.stderr)
        return 2
    config = client.config
    kubelet_ca = (
        args.kubelet_certificate_authority.read_bytes()
        if args.kubelet_certificate_authority is not None
        else config.ca_pem
    )
    token = config.token
    token_file = incluster.TokenFile(config.token_file) if config.token_file else None
    kubelets = KubeletClient(
        client_ssl_context(
            kubelet_ca, config.cert_pem, config.key_pem, verify=not args.kubelet_insecure_tls
        ),
        token_file.current if token_file else (lambda: token) if token else None,
    )
    clock = RealClock()
    async with client:
        requestheader: delegation.RequestHeaderConfig | None = None
        while requestheader is None:
            with contextlib.suppress(ApiError, ClientError):
                published = await client.get(ConfigMap, delegation.CONFIGMAP, delegation.NAMESPACE)
                requestheader = delegation.from_configmap(published.data or {})
            if requestheader is None:
                log.info("waiting for the API server's requestheader settings")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)
                if stop.is_set():
                    return 0
        informers = SharedInformerFactory(client, clock=clock)
        nodes, pods = informers.informer_for(Node), informers.informer_for(Pod)
        pods.add_indexers({LABELS_INDEX: index_by_labels})
        storage = Storage()
        scraper = Scraper(
            nodes.lister.list,
            kubelets,
            clock,
            timeout=args.kubelet_request_timeout,
            address_types=args.kubelet_preferred_address_types,
        )
        api = MetricsAPI(
            storage,
            nodes.lister,
            pods.lister,
            client,
            delegation.RequestHeaderAuthenticator(requestheader),
            clock,
        )
        runner = web.AppRunner(api.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(
            runner,
            args.bind_address,
            args.secure_port,
            ssl_context=_serving_context(args, requestheader.ca_pem),
        )
        await site.start()
        informers.start()
        print(f"kubelab metrics-server: serving on port {runner.addresses[0][1]}", flush=True)

        async def scrape_forever() -> None:
            await informers.wait_for_cache_sync()
            while True:
                storage.store(await scraper.scrape())
                await asyncio.sleep(args.metric_resolution)

        scraping = asyncio.create_task(scrape_forever())
        try:
            await stop.wait()
            return 0
        finally:
            scraping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await scraping
            await informers.shutdown()
            await runner.cleanup()
            await kubelets.close()


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)
    return lambda args: component.run(lambda stop: run_metrics_server(args, stop))
