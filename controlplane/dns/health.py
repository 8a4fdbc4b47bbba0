"""The cluster DNS's HTTP endpoints and metrics, on the ports CoreDNS uses.

- ``/healthz`` on port 8080 (CoreDNS's ``health`` plugin serves ``/health`` there): 200 while
  the process runs its listeners; the liveness probe.
- ``/ready`` on port 8181 (CoreDNS's ``ready`` plugin): 200 once the Service, EndpointSlice
  and Namespace caches have synced, 503 before; the readiness probe, so the ``kube-dns``
  Service never sends a query to a server that would answer NXDOMAIN for lack of data.
- ``/metrics`` on port 9153 (CoreDNS's ``prometheus`` plugin, the port the ``kube-dns``
  Service names ``metrics``): queries by protocol and type, responses by rcode, forwarded
  queries by outcome, and the latency of answers.

Three ports rather than one so each probe can be pointed at a port that serves nothing else,
as the upstream manifests do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import dns.rcode
import dns.rdatatype

from kube.metrics import CONTENT_TYPE, Registry

if TYPE_CHECKING:
    from aiohttp import web

LATENCY_BUCKETS = tuple(0.00025 * 2**i for i in range(16))
"""250 µs to about 8 s, doubling (CoreDNS's buckets)."""
COMMON_TYPES = frozenset(
    dns.rdatatype.RdataType.make(name)
    for name in ("A", "AAAA", "ANY", "CNAME", "MX", "NS", "PTR", "SOA", "SRV", "TXT")
)


def type_label(rdtype: int) -> str:
    """The type's name for a label; ``other`` for the rest, so clients cannot make a series
    per number."""
    if rdtype in COMMON_TYPES:
        return dns.rdatatype.to_text(dns.rdatatype.RdataType.make(rdtype))
    return "other"


class DNSMetrics:
    """The numbers the server records per query."""

    def __init__(self) -> None:
        self.registry = Registry()
        self.requests = self.registry.counter(
            "kubelab_dns_requests_total",
            "Queries received, by transport (udp, tcp) and question type.",
            ("proto", "type"),
        )
        self.responses = self.registry.counter(
            "kubelab_dns_responses_total", "Responses sent, by rcode.", ("rcode",)
        )
        self.malformed = self.registry.counter(
            "kubelab_dns_malformed_requests_total",
            "Packets that were not a DNS query (answered FORMERR when they had a header).",
        )
        self.forwarded = self.registry.counter(
            "kubelab_dns_forward_requests_total",
            "Queries forwarded upstream, by outcome (answered, failed, refused: no upstream).",
            ("outcome",),
        )
        self.duration = self.registry.histogram(
            "kubelab_dns_request_duration_seconds",
            "Time from receiving a query to having its response, by transport.",
            ("proto",),
            LATENCY_BUCKETS,
        )

    def answered(self, proto: str, rcode: int, seconds: float) -> None:
        self.responses.inc(dns.rcode.to_text(dns.rcode.Rcode.make(rcode)))
        self.duration.observe(seconds, proto)


def _text_app(path: str, check: Callable[[], tuple[int, str]]) -> web.Application:
    from aiohttp import web

    async def handle(_: web.Request) -> web.Response:
        status, text = check()
        return web.Response(status=status, text=text)

    app = web.Application()
    app.router.add_get(path, handle)
    return app


def health_app() -> web.Application:
    """``/healthz``: the process is alive and its event loop turns."""
    return _text_app("/healthz", lambda: (200, "ok"))


def ready_app(synced: Callable[[], bool]) -> web.Application:
    """``/ready``: 200 once ``synced()``, 503 before."""
    return _text_app("/ready", lambda: (200, "ok") if synced() else (503, "caches not synced"))


def metrics_app(metrics: DNSMetrics) -> web.Application:
    from aiohttp import web

    async def handle(_: web.Request) -> web.Response:
        response = web.Response(body=metrics.registry.render().encode())
        response.headers["Content-Type"] = CONTENT_TYPE
        return response

    app = web.Application()
    app.router.add_get("/metrics", handle)
    return app
