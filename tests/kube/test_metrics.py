"""The text exposition format, as Prometheus parses it."""

from __future__ import annotations

import datetime

import pytest

from kube.metrics import ParseError, Registry, Sample, parse


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


def test_collected_values_carry_their_timestamp_and_parse_back() -> None:
    registry = Registry()
    cpu = registry.counter("cpu_seconds_total", "CPU.", ["pod"])
    at = datetime.datetime(2026, 1, 1, 0, 0, 1, 500000, tzinfo=datetime.UTC)
    cpu.collected('we"ird\\pod\n', value=2.25, at=at)
    text = registry.render()
    assert text.splitlines()[-1] == 'cpu_seconds_total{pod="we\\"ird\\\\pod\\n"} 2.25 1767225601500'
    assert list(parse(text + "up 1\n\n")) == [
        Sample("cpu_seconds_total", {"pod": 'we"ird\\pod\n'}, 2.25, 1767225601500),
        Sample("up", {}, 1.0, None),
    ]


@pytest.mark.parametrize(
    "line",
    ["up one", 'up{pod="x} 1', '{pod="x"} 1', 'up{pod="x",,} 1'],
    ids=["value", "unclosed-label", "no-name", "empty-label"],
)
def test_parse_refuses_what_is_not_a_sample(line: str) -> None:
    with pytest.raises(ParseError):
        list(parse(line))
