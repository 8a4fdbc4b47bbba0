"""``kubelab dns`` as users and the add-on's Deployment run it: a process with flags, serving
DNS, /healthz, /ready and /metrics, stopped by SIGTERM."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import dns.rcode
import pytest

from kube.client.rest import Client
from kubelab.cli import build_parser
from tests.controlplane.dns.dnsharness import LOOPBACK, ask, eventually, service, texts
from tests.servers import ServerProcess, start_component


@dataclass
class DNSProcess:
    process: asyncio.subprocess.Process
    port: int
    health: int
    ready: int
    metrics: int


@pytest.fixture
async def dns_process(apiserver: ServerProcess, tmp_path: Path) -> AsyncIterator[DNSProcess]:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("search example.org\noptions ndots:5\n")  # no nameserver: REFUSED
    process, line = await start_component(
        "dns",
        "--kubeconfig",
        str(apiserver.kubeconfig),
        f"--listen={LOOPBACK}:0",
        "--health-port=0",
        "--ready-port=0",
        "--metrics-port=0",
        "--ttl=11",
        f"--upstream-resolv-conf={resolv}",
    )
    try:
        match = re.search(
            r"on 127\.0\.0\.1:(\d+) .*/healthz on port (\d+), /ready on port (\d+), "
            r"/metrics on port (\d+)",
            line,
        )
        assert match, line
        yield DNSProcess(process, *(int(group) for group in match.groups()))
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 30)


async def _get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://{LOOPBACK}:{port}{path}") as response,
    ):
        return response.status, await response.text()


async def test_serves_dns_health_ready_and_metrics(
    dns_process: DNSProcess, client: Client, namespace: str
) -> None:
    assert await _get(dns_process.health, "/healthz") == (200, "ok")
    for _ in range(100):
        status, _ = await _get(dns_process.ready, "/ready")
        if status == 200:
            break
        await asyncio.sleep(0.1)
    assert status == 200

    created = await client.create(service("web", namespace))
    assert created.spec is not None
    name = f"web.{namespace}.svc.cluster.local."
    answer = await eventually(lambda: ask(dns_process.port, name), lambda r: bool(r.answer))
    assert texts(answer) == {created.spec.cluster_ip}
    assert answer.answer[0].ttl == 11
    assert (await ask(dns_process.port, "example.org.", tcp=True)).rcode() == dns.rcode.REFUSED

    status, metrics = await _get(dns_process.metrics, "/metrics")
    assert status == 200
    assert re.search(r'kubelab_dns_requests_total\{proto="udp",type="A"\} [1-9]', metrics)
    assert re.search(r'kubelab_dns_responses_total\{rcode="REFUSED"\} 1', metrics)
    assert 'kubelab_dns_request_duration_seconds_bucket{proto="tcp",le="+Inf"} 1' in metrics

    dns_process.process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(dns_process.process.wait(), 30) == 0


async def test_without_kubeconfig_outside_a_pod_it_says_why() -> None:
    process, _ = await start_component("dns", "--listen=127.0.0.1:0")
    assert await asyncio.wait_for(process.wait(), 30) == 2
    assert process.stderr is not None
    error = (await process.stderr.read()).decode()
    assert "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined" in error


@pytest.mark.parametrize(
    "flag",
    ["--listen=localhost:53", "--listen=0.0.0.0:70000", "--ttl=-1", "--cluster-domain=a..b"],
    ids=["listen-host", "listen-port", "ttl", "domain"],
)
def test_bad_flags_are_refused(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["dns", flag])
    assert exit_info.value.code == 2
    assert "kubelab dns: error: argument" in capsys.readouterr().err
