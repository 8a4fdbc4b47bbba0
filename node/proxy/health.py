"""The kube-proxy's health and metrics: ``/healthz`` (port 10256) and ``/metrics``.

``/healthz`` answers as upstream's proxier health server does: 200 while syncs keep happening,
503 before the first sync and when the last successful one is older than the health timeout
(twice the sync period: a full sync is due every period, so missing two means the sync loop
is stuck or every restore fails).  The body is JSON with ``lastUpdated`` and ``currentTime``.

:class:`ProxyMetrics` holds the numbers the proxier reports after each sync, in a
:class:`kube.metrics.Registry` so they render in the Prometheus text format: the sync
duration histogram by kind (full or partial), full and partial sync counts, failed restores,
the time of the last successful sync, and how many rules and chains are programmed.

:class:`ServiceHealthServer` serves the ``healthCheckNodePort`` of every LoadBalancer Service
with externalTrafficPolicy Local, as upstream's service health server does: 200 while the node
has local endpoints for the Service, 503 when it has none, so a load balancer sends traffic
only to nodes that can serve it without leaving the node (and so keep the client's IP).
"""

from __future__ import annotations

import datetime
import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from kube.clock import Clock
from kube.metrics import CONTENT_TYPE, Registry

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger(__name__)

DEFAULT_HEALTHZ_PORT = 10256
DEFAULT_METRICS_PORT = 10249
SYNC_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ProxyMetrics:
    """The proxier's metrics and the state ``/healthz`` reads."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.registry = Registry()
        self.sync_duration = self.registry.histogram(
            "kubeproxy_sync_proxy_rules_duration_seconds",
            "How long a sync of the proxy rules took, by kind (full or partial).",
            ("kind",),
            SYNC_BUCKETS,
        )
        self.syncs = self.registry.counter(
            "kubeproxy_sync_proxy_rules_total", "Successful syncs, by kind.", ("kind",)
        )
        self.failures = self.registry.counter(
            "kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
            "Syncs whose iptables-restore failed (the next sync is full).",
        )
        self.last_sync = self.registry.gauge(
            "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
            "Unix time of the last successful sync.",
        )
        self.rules = self.registry.gauge(
            "kubeproxy_sync_proxy_rules_iptables_total", "Rules programmed, by table.", ("table",)
        )
        self.chains = self.registry.gauge(
            "kubeproxy_sync_proxy_rules_iptables_chains", "Chains programmed, by table.", ("table",)
        )
        self.last_sync_monotonic = -math.inf

    def synced(
        self, kind: str, seconds: float, rules: dict[str, int], chains: dict[str, int]
    ) -> None:
        """Record a successful sync of ``kind`` (``full`` or ``partial``)."""
        self.sync_duration.observe(seconds, kind)
        self.syncs.inc(kind)
        self.last_sync.set(value=self.clock.now().timestamp())
        self.last_sync_monotonic = self.clock.monotonic()
        for table, count in rules.items():
            self.rules.set(table, value=count)
        for table, count in chains.items():
            self.chains.set(table, value=count)

    def failed(self) -> None:
        self.failures.inc()

    def healthy(self, timeout: float) -> bool:
        """Whether a sync succeeded within the last ``timeout`` seconds."""
        return self.clock.monotonic() - self.last_sync_monotonic <= timeout

    def render(self) -> str:
        return self.registry.render()


def healthz_body(metrics: ProxyMetrics) -> str:
    now = metrics.clock.now()
    age = metrics.clock.monotonic() - metrics.last_sync_monotonic
    last = now - datetime.timedelta(seconds=age) if math.isfinite(age) else None
    return json.dumps(
        {
            "lastUpdated": last.isoformat() if last else None,
            "currentTime": now.isoformat(),
        }
    )


def health_app(metrics: ProxyMetrics, timeout: float) -> web.Application:
    """``/healthz`` (stale after ``timeout`` seconds without a sync)."""
    from aiohttp import web

    async def healthz(_: web.Request) -> web.Response:
        status = 200 if metrics.healthy(timeout) else 503
        return web.Response(
            status=status, text=healthz_body(metrics), content_type="application/json"
        )

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    return app


def metrics_app(metrics: ProxyMetrics) -> web.Application:
    """``/metrics`` in the Prometheus text format."""
    from aiohttp import web

    async def render(_: web.Request) -> web.Response:
        return web.Response(body=metrics.render().encode(), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/metrics", render)
    return app


class ServiceHealth(NamedTuple):
    """What one health check node port reports."""

    namespace: str
    name: str
    local_endpoints: int


class ServiceHealthServer:
    """One HTTP listener per health check node port, on ``address``.

    ``update`` opens listeners for new ports, closes those no longer wanted and changes what
    the others report; a port that cannot be opened is logged and retried at the next update.
    """

    def __init__(self, address: str = "0.0.0.0") -> None:
        self.address = address
        self._health: dict[int, ServiceHealth] = {}
        self._runners: dict[int, web.AppRunner] = {}

    async def update(self, wanted: Mapping[int, ServiceHealth]) -> None:
        from aiohttp import web

        from kube.component import serve_health

        self._health = dict(wanted)
        for port in set(self._runners) - set(wanted):
            await self._runners.pop(port).cleanup()
        for port in set(wanted) - set(self._runners):
            app = web.Application()
            app.router.add_get("/{tail:.*}", self._handler(port))
            try:
                self._runners[port], _ = await serve_health(app, self.address, port)
            except OSError as e:
                log.warning("cannot serve health check node port %d: %s", port, e)

    def _handler(self, port: int) -> Callable[[web.Request], Awaitable[web.Response]]:
        from aiohttp import web

        async def health(_: web.Request) -> web.Response:
            current = self._health.get(port, ServiceHealth("", "", 0))
            body = {
                "service": {"namespace": current.namespace, "name": current.name},
                "localEndpoints": current.local_endpoints,
                "serviceProxyHealthy": True,
            }
            status = 200 if current.local_endpoints else 503
            return web.json_response(body, status=status)

        return health

    @property
    def ports(self) -> list[int]:
        return sorted(self._runners)

    async def close(self) -> None:
        await self.update({})
