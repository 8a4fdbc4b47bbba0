"""The kubelet's summary in upstream's two shapes (/stats/summary's JSON and /metrics/resource's
Prometheus text, read back with kube.metrics.parse as the metrics-server reads it), and CPU
rates from two cumulative measurements."""

from __future__ import annotations

import datetime

from kube.metrics import parse
from node.kubelet.stats import (
    ContainerStats,
    CPUStats,
    MemoryStats,
    NodeStats,
    PodStats,
    Rates,
    Summary,
    resource_metrics,
    summary_json,
)

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, 250000, tzinfo=datetime.UTC)
START = datetime.datetime(2026, 1, 1, 11, 0, 0, tzinfo=datetime.UTC)

SUMMARY = Summary(
    NodeStats(
        "node-1",
        START,
        CPUStats(T0, 12_500_000_000, 300_000_000),
        MemoryStats(T0, 1_073_741_824, 2_147_483_648),
    ),
    [
        PodStats(
            "default",
            "web",
            "u1",
            START,
            [
                ContainerStats(
                    "app", START, CPUStats(T0, 1_500_000_000), MemoryStats(T0, 10_485_760)
                )
            ],
            CPUStats(T0, 1_600_000_000, 20_000_000),
            MemoryStats(T0, 11_534_336, 12_000_000),
        )
    ],
)


def test_summary_json_is_upstreams_shape() -> None:
    assert summary_json(SUMMARY) == {
        "node": {
            "nodeName": "node-1",
            "startTime": "2026-01-01T11:00:00Z",
            "cpu": {
                "time": "2026-01-01T12:00:00Z",
                "usageNanoCores": 300_000_000,
                "usageCoreNanoSeconds": 12_500_000_000,
            },
            "memory": {
                "time": "2026-01-01T12:00:00Z",
                "usageBytes": 2_147_483_648,
                "workingSetBytes": 1_073_741_824,
            },
        },
        "pods": [
            {
                "podRef": {"name": "web", "namespace": "default", "uid": "u1"},
                "startTime": "2026-01-01T11:00:00Z",
                "containers": [
                    {
                        "name": "app",
                        "startTime": "2026-01-01T11:00:00Z",
                        "cpu": {
                            "time": "2026-01-01T12:00:00Z",
                            "usageCoreNanoSeconds": 1_500_000_000,
                        },
                        "memory": {"time": "2026-01-01T12:00:00Z", "workingSetBytes": 10_485_760},
                    }
                ],
                "cpu": {
                    "time": "2026-01-01T12:00:00Z",
                    "usageNanoCores": 20_000_000,
                    "usageCoreNanoSeconds": 1_600_000_000,
                },
                "memory": {
                    "time": "2026-01-01T12:00:00Z",
                    "usageBytes": 12_000_000,
                    "workingSetBytes": 11_534_336,
                },
            }
        ],
    }


MS = 1767268800250
LABELS = 'container="app",namespace="default",pod="web"'


def test_resource_metrics_text_is_upstreams() -> None:
    assert resource_metrics(SUMMARY).splitlines() == [
        "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the "
        "container in core-seconds",
        "# TYPE container_cpu_usage_seconds_total counter",
        f"container_cpu_usage_seconds_total{{{LABELS}}} 1.5 {MS}",
        "# HELP container_memory_working_set_bytes [STABLE] Current working set of the container "
        "in bytes",
        "# TYPE container_memory_working_set_bytes gauge",
        f"container_memory_working_set_bytes{{{LABELS}}} 10485760 {MS}",
        "# HELP container_start_time_seconds [STABLE] Start time of the container since unix "
        "epoch in seconds",
        "# TYPE container_start_time_seconds gauge",
        f"container_start_time_seconds{{{LABELS}}} 1767265200",
        "# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in "
        "core-seconds",
        "# TYPE node_cpu_usage_seconds_total counter",
        f"node_cpu_usage_seconds_total 12.5 {MS}",
        "# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes",
        "# TYPE node_memory_working_set_bytes gauge",
        f"node_memory_working_set_bytes 1073741824 {MS}",
        "# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in "
        "core-seconds",
        "# TYPE pod_cpu_usage_seconds_total counter",
        f'pod_cpu_usage_seconds_total{{namespace="default",pod="web"}} 1.6 {MS}',
        "# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes",
        "# TYPE pod_memory_working_set_bytes gauge",
        f'pod_memory_working_set_bytes{{namespace="default",pod="web"}} 11534336 {MS}',
        "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container "
        "metrics, 0 otherwise",
        "# TYPE resource_scrape_error gauge",
        "resource_scrape_error 0",
    ]


def test_resource_metrics_parse_back_and_report_a_failed_measurement() -> None:
    samples = {(s.name, s.labels.get("container", "")): s for s in parse(resource_metrics(SUMMARY))}
    app = samples[("container_cpu_usage_seconds_total", "app")]
    assert (app.labels["pod"], app.value, app.timestamp) == ("web", 1.5, MS)
    assert [(s.name, s.value) for s in parse(resource_metrics(None))] == [
        ("resource_scrape_error", 1.0)
    ]


def test_rates_need_two_measurements_forward_in_time() -> None:
    rates = Rates()
    assert rates.cpu("a", T0, 1_000).usage_nano_cores is None
    later = T0 + datetime.timedelta(seconds=4)
    assert rates.cpu("a", later, 2_000_001_000).usage_nano_cores == 500_000_000
    assert rates.cpu("a", later, 2_000_001_000).usage_nano_cores is None, "no time passed"
    restarted = later + datetime.timedelta(seconds=1)
    assert rates.cpu("a", restarted, 5).usage_nano_cores is None, "a new cgroup starts again"
    rates.keep(set())
    assert rates.cpu("a", restarted + datetime.timedelta(seconds=1), 10).usage_nano_cores is None
