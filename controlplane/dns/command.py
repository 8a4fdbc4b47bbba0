"""``kubelab dns``: the cluster DNS server, run as the ``kube-dns`` Deployment in kube-system.

Flags:

- ``--kubeconfig``: optional; without it the in-cluster configuration is used (the pod's
  service-account token and CA, the ``KUBERNETES_SERVICE_*`` variables).
- ``--cluster-domain`` (``cluster.local``), ``--ttl`` (30 seconds, CoreDNS's default).
- ``--listen IP:PORT`` (``0.0.0.0:53``): UDP and TCP; port 0 picks a free one.
- ``--upstream-resolv-conf`` (``/etc/resolv.conf``): its nameservers receive every question
  outside the cluster zone; with none, those questions are REFUSED.
- ``--health-port`` 8080 (``/healthz``), ``--ready-port`` 8181 (``/ready``),
  ``--metrics-port`` 9153 (``/metrics``), all on the ``--listen`` address (see
  :mod:`controlplane.dns.health`).

The server starts listening and answering at once (NXDOMAIN for cluster names until the caches
fill, which ``/ready`` reports), as CoreDNS does.  The first answer for each Service's name
is told as an Event on it (:mod:`controlplane.dns.firstanswers`).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from kube import component

DEFAULT_LISTEN = "0.0.0.0:53"
DEFAULT_TTL = 30
DEFAULT_HEALTH_PORT = 8080
DEFAULT_READY_PORT = 8181
DEFAULT_METRICS_PORT = 9153


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}")
    return int(text)


def _ttl(text: str) -> int:
    if not text.isdigit() or int(text) > 2**31 - 1:
        raise argparse.ArgumentTypeError(f"expected a TTL in seconds, got {text!r}")
    return int(text)


def _domain(text: str) -> str:
    import dns.exception
    import dns.name

    try:
        name = dns.name.from_text(text)
    except dns.exception.DNSException as error:
        raise argparse.ArgumentTypeError(f"invalid cluster domain {text!r}: {error}") from None
    if name == dns.name.root:
        raise argparse.ArgumentTypeError("the cluster domain cannot be the root")
    return name.to_text(omit_final_dot=True)


def add_flags(parser: argparse.ArgumentParser) -> None:
    component.add_client_flags(parser, required=False)
    parser.add_argument(
        "--cluster-domain",
        type=_domain,
        default="cluster.local",
        help="the zone Services are published under (default: cluster.local)",
    )
    parser.add_argument(
        "--listen",
        type=component.address,
        default=component.address(DEFAULT_LISTEN),
        help=f"IP:PORT to serve DNS on, UDP and TCP (default: {DEFAULT_LISTEN}; port 0: any)",
    )
    parser.add_argument(
        "--ttl",
        type=_ttl,
        default=DEFAULT_TTL,
        help=f"TTL of cluster records and of negative answers (default: {DEFAULT_TTL})",
    )
    parser.add_argument(
        "--upstream-resolv-conf",
        type=Path,
        default=Path("/etc/resolv.conf"),
        help="resolv.conf whose nameservers answer names outside the cluster domain; "
        "without nameservers they are REFUSED (default: /etc/resolv.conf)",
    )
    for name, default, path in (
        ("health", DEFAULT_HEALTH_PORT, "/healthz"),
        ("ready", DEFAULT_READY_PORT, "/ready"),
        ("metrics", DEFAULT_METRICS_PORT, "/metrics"),
    ):
        parser.add_argument(
            f"--{name}-port",
            type=_port,
            default=default,
            help=f"port of {path} on the --listen address (default: {default}; 0: any free)",
        )


async def run_dns(args: argparse.Namespace, stop: asyncio.Event) -> int:
    from controlplane.dns.firstanswers import FirstAnswers
    from controlplane.dns.forward import UpstreamForwarder, read_resolv_conf
    from controlplane.dns.health import DNSMetrics, health_app, metrics_app, ready_app
    from controlplane.dns.server import DNSServer, Responder
    from controlplane.dns.source import InformerState
    from controlplane.dns.zone import ClusterZone
    from kube.client.events import EventRecorder
    from kube.client.informers import SharedInformerFactory
    from kube.client.kubeconfig import KubeconfigError
    from kube.client.rest import Client

    upstreams = read_resolv_conf(args.upstream_resolv_conf)
    options = {"qps": args.kube_api_qps, "burst": args.kube_api_burst}
    try:
        if args.kubeconfig is not None:
            client = Client.from_kubeconfig(args.kubeconfig, user_agent="kubelab-dns", **options)
        else:
            client = Client.in_cluster(user_agent="kubelab-dns", **options)
    except KubeconfigError as error:
        print(f"kubelab dns: {error}", file=sys.stderr)
        return 2
    async with client, EventRecorder(client, "kubelab-dns", host=socket.gethostname()) as events:
        informers = SharedInformerFactory(client)
        state = InformerState(informers)
        metrics = DNSMetrics()
        zone = ClusterZone(state, args.cluster_domain, args.ttl)
        forwarder = UpstreamForwarder(upstreams) if upstreams else None
        first_answers = FirstAnswers(state, zone.origin, events)
        server = DNSServer(Responder(zone, forwarder, metrics, first_answers))
        host = args.listen[0]
        runners = []
        try:
            port = await server.start(*args.listen)
            ports = []
            for app, wanted in (
                (health_app(), args.health_port),
                (ready_app(lambda: state.synced), args.ready_port),
                (metrics_app(metrics), args.metrics_port),
            ):
                runner, bound = await component.serve_health(app, host, wanted)
                runners.append(runner)
                ports.append(bound)
            informers.start()
            print(
                f"kubelab dns: serving {args.cluster_domain} on {host}:{port} (udp, tcp); "
                f"upstreams: {', '.join(map(str, upstreams)) or 'none (REFUSED)'}; "
                f"/healthz on port {ports[0]}, /ready on port {ports[1]}, "
                f"/metrics on port {ports[2]}",
                flush=True,
            )
            await stop.wait()
            return 0
        finally:
            await informers.shutdown()
            await server.close()
            for runner in runners:
                await runner.cleanup()


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)

    def run(args: argparse.Namespace) -> int:
        return component.run(lambda stop: run_dns(args, stop))

    return run
