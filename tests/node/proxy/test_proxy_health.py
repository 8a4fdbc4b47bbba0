"""/healthz goes stale when syncs stop; /metrics reports the sync numbers; health check node
ports report local endpoints."""

from __future__ import annotations

import json
import socket

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from kube.clock import FakeClock
from node.proxy.health import (
    ProxyMetrics,
    ServiceHealth,
    ServiceHealthServer,
    health_app,
    metrics_app,
)
from tests.servers import free_port


async def test_healthz_before_after_and_long_after_a_sync() -> None:
    clock = FakeClock()
    metrics = ProxyMetrics(clock)
    async with TestClient(TestServer(health_app(metrics, timeout=60.0))) as client:
        response = await client.get("/healthz")
        assert response.status == 503
        assert json.loads(await response.text())["lastUpdated"] is None
        metrics.synced("full", 0.5, rules={"nat": 10}, chains={"nat": 5})
        await clock.advance(59.0)
        response = await client.get("/healthz")
        assert response.status == 200
        body = json.loads(await response.text())
        assert body["lastUpdated"] < body["currentTime"]
        await clock.advance(2.0)
        assert (await client.get("/healthz")).status == 503


async def test_metrics_render_sync_numbers() -> None:
    metrics = ProxyMetrics(FakeClock())
    metrics.synced("full", 0.5, rules={"nat": 10, "filter": 2}, chains={"nat": 5})
    metrics.synced("partial", 0.003, rules={"nat": 12, "filter": 2}, chains={"nat": 6})
    metrics.failed()
    async with TestClient(TestServer(metrics_app(metrics))) as client:
        response = await client.get("/metrics")
        assert response.status == 200
        text = await response.text()
    assert 'kubeproxy_sync_proxy_rules_duration_seconds_count{kind="full"} 1' in text
    assert 'kubeproxy_sync_proxy_rules_duration_seconds_count{kind="partial"} 1' in text
    assert 'kubeproxy_sync_proxy_rules_total{kind="partial"} 1' in text
    assert 'kubeproxy_sync_proxy_rules_iptables_total{table="nat"} 12' in text
    assert 'kubeproxy_sync_proxy_rules_iptables_chains{table="nat"} 6' in text
    assert "kubeproxy_sync_proxy_rules_iptables_restore_failures_total 1" in text
    assert "kubeproxy_sync_proxy_rules_last_timestamp_seconds 1767225600" in text


async def test_health_check_node_port_reports_local_endpoints() -> None:
    server = ServiceHealthServer("127.0.0.1")
    port = free_port()
    try:
        await server.update({port: ServiceHealth("ns", "web", 2)})
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200
                body = await response.json()
            assert body["service"] == {"namespace": "ns", "name": "web"}
            assert body["localEndpoints"] == 2
            await server.update({port: ServiceHealth("ns", "web", 0)})
            async with session.get(f"http://127.0.0.1:{port}/") as response:
                assert response.status == 503
        await server.update({})
        assert server.ports == []
    finally:
        await server.close()


async def test_a_port_in_use_is_logged_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    server = ServiceHealthServer("127.0.0.1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        await server.update({port: ServiceHealth("ns", "web", 1)})
    assert server.ports == [] and "cannot serve health check node port" in caplog.text
    await server.close()
