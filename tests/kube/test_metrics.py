"""The text exposition format, as Prometheus parses it."""

from __future__ import annotations

from kube.metrics import Registry


def test_render() -> None:
    registry = Registry()
    requests = registry.counter("apiserver_request_total", "Requests.", ["verb", "code"])
    latency = registry.histogram(
        "apiserver_request_duration_seconds", "Latency.", ["verb"], buckets=[0.1, 1]
    )
    watchers = registry.gauge("apiserver_registered_watchers", "Watchers.")
    requests.inc("get", "200")
    requests.inc("get", "200")
    latency.observe(0.05, "get")
    latency.observe(0.5, "get")
    latency.observe(5, "get")
    watchers.set(value=3)
    assert latency.count("get") == 3
    assert registry.render().splitlines() == [
        "# HELP apiserver_request_total Requests.",
        "# TYPE apiserver_request_total counter",
        'apiserver_request_total{verb="get",code="200"} 2',
        "# HELP apiserver_request_duration_seconds Latency.",
        "# TYPE apiserver_request_duration_seconds histogram",
        'apiserver_request_duration_seconds_bucket{verb="get",le="0.1"} 1',
        'apiserver_request_duration_seconds_bucket{verb="get",le="1"} 2',
        'apiserver_request_duration_seconds_bucket{verb="get",le="+Inf"} 3',
        'apiserver_request_duration_seconds_sum{verb="get"} 5.55',
        'apiserver_request_duration_seconds_count{verb="get"} 3',
        "# HELP apiserver_registered_watchers Watchers.",
        "# TYPE apiserver_registered_watchers gauge",
        "apiserver_registered_watchers 3",
    ]
