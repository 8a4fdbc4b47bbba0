"""The metrics-server without processes: decoding a kubelet's /metrics/resource (as the
kubelet's own renderer writes it), CPU rates and windows from two scrapes, what is dropped as
incomplete or inconsistent, the kubelet address chosen, and a round over several nodes where
one fails, one answers nonsense and one hangs past its timeout."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from controlplane.metricsserver.scraper import ScrapeError, Scraper, decode, kubelet_url
from controlplane.metricsserver.storage import Batch, Point, Storage, Usage
from kube.api.kinds.core_v1.node import (
    DaemonEndpoint,
    Node,
    NodeAddress,
    NodeDaemonEndpoints,
    NodeStatus,
)
from kube.api.meta_v1 import ObjectMeta
from kube.clock import FakeClock
from kubelab.cli import build_parser
from node.kubelet.stats import resource_metrics
from tests.node.kubelet.test_stats import SUMMARY, T0

WHEN = T0.replace(microsecond=250000)
SECOND = datetime.timedelta(seconds=1)


def test_decode_reads_what_the_kubelet_writes() -> None:
    batch = decode(resource_metrics(SUMMARY), "node-1", T0 + SECOND)
    assert batch.nodes == {"node-1": Point(WHEN, 12_500_000_000, 1_073_741_824)}
    started = datetime.datetime(2026, 1, 1, 11, 0, tzinfo=datetime.UTC)
    assert batch.pods == {
        ("default", "web"): {"app": Point(WHEN, 1_500_000_000, 10_485_760, started)}
    }


def test_decode_drops_incomplete_points_and_defaults_the_timestamp() -> None:
    text = "\n".join(
        [
            "node_cpu_usage_seconds_total 3.5",
            "node_memory_working_set_bytes 1000",
            'container_cpu_usage_seconds_total{container="a",namespace="n",pod="p"} 1 1000',
            'container_memory_working_set_bytes{container="a",namespace="n",pod="p"} 0 1000',
            'container_cpu_usage_seconds_total{container="b",namespace="n",pod="q"} 1 1000',
            'container_memory_working_set_bytes{container="b",namespace="n",pod="q"} 7 1000',
        ]
    )
    batch = decode(text, "node-1", T0)
    assert batch.nodes == {"node-1": Point(T0, 3_500_000_000, 1000)}
    at = datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.UTC)
    assert batch.pods == {("n", "q"): {"b": Point(at, 1_000_000_000, 7)}}
    assert decode("node_memory_working_set_bytes 1000\n", "node-1", T0).nodes == {}


def _batch(at: datetime.datetime, node_cpu: int, container_cpu: int, started: int = 0) -> Batch:
    start = T0 + datetime.timedelta(seconds=started)
    return Batch(
        nodes={"n1": Point(at, node_cpu, 2048)},
        pods={("ns", "web"): {"app": Point(at, container_cpu, 1024, start)}},
    )


def test_storage_rates_over_the_window_of_the_last_two_points() -> None:
    storage = Storage()
    assert not storage.ready()
    storage.store(_batch(T0, 10_000_000_000, 1_000_000_000))
    assert not storage.ready()
    assert storage.node("n1") is None, "one point is no rate"
    assert storage.pod("ns", "web") is None
    later = T0 + 15 * SECOND
    storage.store(_batch(later, 13_000_000_000, 4_000_000_000))
    assert storage.ready()
    assert storage.node("n1") == Usage(later, 15 * SECOND, 200_000_000, 2048)
    assert storage.pod("ns", "web") == {"app": Usage(later, 15 * SECOND, 200_000_000, 1024)}
    storage.store(_batch(later, 14_000_000_000, 4_500_000_000))
    assert storage.node("n1") == Usage(later, 15 * SECOND, 266_666_666, 2048), "prev kept"
    restarted = later + 15 * SECOND
    storage.store(_batch(restarted, 15_000_000_000, 100, started=20))
    assert storage.pod("ns", "web") is None, "the cumulative CPU went backwards"
    storage.store(Batch())
    assert storage.node("n1") is None, "a node missing from a round is forgotten"


def test_kubelet_url_follows_the_preferred_address_types_and_status_port() -> None:
    node = Node(
        metadata=ObjectMeta(name="n1"),
        status=NodeStatus(
            addresses=[
                NodeAddress(type="Hostname", address="n1"),
                NodeAddress(type="InternalIP", address="10.0.0.7"),
            ],
            daemon_endpoints=NodeDaemonEndpoints(kubelet_endpoint=DaemonEndpoint(port=10251)),
        ),
    )
    assert kubelet_url(node) == "https://n1:10251/metrics/resource"
    assert kubelet_url(node, ["InternalIP"]) == "https://10.0.0.7:10251/metrics/resource"
    assert kubelet_url(node, ["ExternalIP"]) is None


class Kubelets:
    """Answers by URL: text, a failure, or never."""

    def __init__(self, answers: dict[str, str | None]) -> None:
        self.answers = answers

    async def __call__(self, url: str) -> str:
        answer = self.answers[url]
        if answer is None:
            await asyncio.sleep(3600)
        if answer == "refused":
            raise ScrapeError(f"GET {url}: connection refused")
        assert answer is not None
        return answer


def _node(name: str, address: str) -> Node:
    return Node(
        metadata=ObjectMeta(name=name),
        status=NodeStatus(addresses=[NodeAddress(type="InternalIP", address=address)]),
    )


@pytest.mark.parametrize("hung", [False, True], ids=["all-answer", "one-hangs"])
async def test_a_round_keeps_the_nodes_that_answered_in_time(hung: bool) -> None:
    nodes = [_node(name, f"10.0.0.{i}") for i, name in enumerate("abcd", 1)]
    text = resource_metrics(SUMMARY)
    fetch = Kubelets(
        {
            "https://10.0.0.1:10250/metrics/resource": text,
            "https://10.0.0.2:10250/metrics/resource": "refused",
            "https://10.0.0.3:10250/metrics/resource": None if hung else text,
            "https://10.0.0.4:10250/metrics/resource": "node_memory_working_set_bytes NaN\n",
        }
    )
    scraper = Scraper(lambda: nodes, fetch, FakeClock(T0), timeout=0.2)
    batch = await asyncio.wait_for(scraper.scrape(), 5)
    assert sorted(batch.nodes) == (["a"] if hung else ["a", "c"])


def test_command_flags_are_upstreams() -> None:
    args = build_parser().parse_args(["metrics-server"])
    assert (args.secure_port, args.metric_resolution, args.kubelet_request_timeout) == (
        10250,
        15.0,
        10.0,
    )
    assert args.kubelet_preferred_address_types == [
        "Hostname",
        "InternalDNS",
        "InternalIP",
        "ExternalDNS",
        "ExternalIP",
    ]
    with pytest.raises(SystemExit):
        build_parser().parse_args(
            ["metrics-server", "--kubelet-preferred-address-types", "InternalIP,Bogus"]
        )
