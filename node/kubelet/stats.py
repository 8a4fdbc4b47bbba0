"""The kubelet's resource usage: one summary, served as /stats/summary and /metrics/resource.

A ``StatsProvider`` measures the node, and each running pod and container of it, once per
request: CPU as cumulative core-nanoseconds (and, from the provider's previous measurement of
the same thing, a rate in nanocores) and memory as usage and working set, each with the moment
it was measured.  The real kubelet's provider reads cgroups (``cgroupstats``); the hollow
kubelet's makes usage up (``node.hollow.usage``).  Both answer with the same ``Summary``, which
this module writes in upstream's two shapes:

- ``summary_json``: upstream's stats/v1alpha1 ``Summary`` (``node`` with ``nodeName``,
  ``startTime``, ``cpu`` and ``memory``; ``pods`` with ``podRef``, ``startTime``,
  ``containers``, ``cpu`` and ``memory``), the part of it the kubelet measures here: no
  network, filesystem, volume or swap figures;
- ``resource_metrics``: the Prometheus text of upstream's resource metrics collector (the
  families in the order upstream's registry gathers them, by name; each sample stamped with its
  measurement's time in milliseconds), which is what the metrics-server scrapes.

``Rates`` turns cumulative CPU into nanocores as cAdvisor does, from two measurements of the
same key; the first measurement of a key has no rate.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kube.api.printing import rfc3339
from kube.metrics import Registry


@dataclass(frozen=True)
class CPUStats:
    time: datetime.datetime
    usage_core_nano_seconds: int
    usage_nano_cores: int | None = None
    """None until a second measurement gives a rate."""


@dataclass(frozen=True)
class MemoryStats:
    time: datetime.datetime
    working_set_bytes: int
    usage_bytes: int | None = None


@dataclass(frozen=True)
class ContainerStats:
    name: str
    start_time: datetime.datetime
    cpu: CPUStats | None = None
    memory: MemoryStats | None = None


@dataclass(frozen=True)
class PodStats:
    namespace: str
    name: str
    uid: str
    start_time: datetime.datetime
    containers: Sequence[ContainerStats] = ()
    cpu: CPUStats | None = None
    memory: MemoryStats | None = None


@dataclass(frozen=True)
class NodeStats:
    node_name: str
    start_time: datetime.datetime
    cpu: CPUStats | None = None
    memory: MemoryStats | None = None


@dataclass(frozen=True)
class Summary:
    node: NodeStats
    pods: Sequence[PodStats] = ()


class StatsProvider(Protocol):
    """Measures the node and its pods now (the kubelet server asks once per request)."""

    async def summary(self) -> Summary: ...


class Rates:
    """Nanocores from two measurements of cumulative CPU of the same key (a cgroup path, a
    container id).  Keys not measured in a round are forgotten (``keep``)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[datetime.datetime, int]] = {}

    def cpu(self, key: str, time: datetime.datetime, cumulative_ns: int) -> CPUStats:
        """The CPU stats of ``key`` measured now; a rate when an earlier measurement of the
        same key lies before ``time`` and below ``cumulative_ns`` (not a restarted cgroup)."""
        before = self._last.get(key)
        self._last[key] = (time, cumulative_ns)
        rate = None
        if before is not None and before[0] < time and before[1] <= cumulative_ns:
            seconds = (time - before[0]).total_seconds()
            rate = int((cumulative_ns - before[1]) / seconds)
        return CPUStats(time, cumulative_ns, rate)

    def keep(self, keys: set[str]) -> None:
        for gone in self._last.keys() - keys:
            del self._last[gone]


def _cpu_json(cpu: CPUStats | None) -> dict[str, Any]:
    if cpu is None:
        return {}
    body: dict[str, Any] = {"time": rfc3339(cpu.time)}
    if cpu.usage_nano_cores is not None:
        body["usageNanoCores"] = cpu.usage_nano_cores
    body["usageCoreNanoSeconds"] = cpu.usage_core_nano_seconds
    return {"cpu": body}


def _memory_json(memory: MemoryStats | None) -> dict[str, Any]:
    if memory is None:
        return {}
    body: dict[str, Any] = {"time": rfc3339(memory.time)}
    if memory.usage_bytes is not None:
        body["usageBytes"] = memory.usage_bytes
    body["workingSetBytes"] = memory.working_set_bytes
    return {"memory": body}


def summary_json(summary: Summary) -> dict[str, Any]:
    """The summary as upstream's /stats/summary writes it (fields it omits when empty left out)."""
    node = summary.node
    return {
        "node": {
            "nodeName": node.node_name,
            "startTime": rfc3339(node.start_time),
            **_cpu_json(node.cpu),
            **_memory_json(node.memory),
        },
        "pods": [
            {
                "podRef": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
                "startTime": rfc3339(pod.start_time),
                "containers": [
                    {
                        "name": container.name,
                        "startTime": rfc3339(container.start_time),
                        **_cpu_json(container.cpu),
                        **_memory_json(container.memory),
                    }
                    for container in pod.containers
                ],
                **_cpu_json(pod.cpu),
                **_memory_json(pod.memory),
            }
            for pod in summary.pods
        ],
    }


CONTAINER_LABELS = ("container", "namespace", "pod")
POD_LABELS = ("namespace", "pod")
NANO = 1e9


def resource_metrics(summary: Summary | None) -> str:
    """/metrics/resource: upstream's resource metrics collector's families (the stable ones
    and the container start times); None: measuring failed, ``resource_scrape_error`` 1."""
    registry = Registry()
    container_cpu = registry.counter(
        "container_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
        CONTAINER_LABELS,
    )
    container_memory = registry.gauge(
        "container_memory_working_set_bytes",
        "[STABLE] Current working set of the container in bytes",
        CONTAINER_LABELS,
    )
    container_start = registry.gauge(
        "container_start_time_seconds",
        "[STABLE] Start time of the container since unix epoch in seconds",
        CONTAINER_LABELS,
    )
    node_cpu = registry.counter(
        "node_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
    )
    node_memory = registry.gauge(
        "node_memory_working_set_bytes", "[STABLE] Current working set of the node in bytes"
    )
    pod_cpu = registry.counter(
        "pod_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
        POD_LABELS,
    )
    pod_memory = registry.gauge(
        "pod_memory_working_set_bytes",
        "[STABLE] Current working set of the pod in bytes",
        POD_LABELS,
    )
    registry.gauge(
        "resource_scrape_error",
        "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
    ).set(value=1 if summary is None else 0)
    if summary is None:
        return registry.render()
    node = summary.node
    if node.cpu is not None:
        node_cpu.collected(value=node.cpu.usage_core_nano_seconds / NANO, at=node.cpu.time)
    if node.memory is not None:
        node_memory.collected(value=node.memory.working_set_bytes, at=node.memory.time)
    for pod in summary.pods:
        ref = (pod.namespace, pod.name)
        for c in pod.containers:
            labels = (c.name, *ref)
            container_start.set(*labels, value=c.start_time.timestamp())
            if c.cpu is not None:
                value = c.cpu.usage_core_nano_seconds / NANO
                container_cpu.collected(*labels, value=value, at=c.cpu.time)
            if c.memory is not None:
                value = c.memory.working_set_bytes
                container_memory.collected(*labels, value=value, at=c.memory.time)
        if pod.cpu is not None:
            pod_cpu.collected(*ref, value=pod.cpu.usage_core_nano_seconds / NANO, at=pod.cpu.time)
        if pod.memory is not None:
            pod_memory.collected(*ref, value=pod.memory.working_set_bytes, at=pod.memory.time)
    return registry.render()
