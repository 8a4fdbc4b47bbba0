"""Synthetic resource usage for hollow nodes, so autoscaling can be exercised at scale.

A hollow container runs nothing, so its usage is made up, as told: the pod annotation
``kubelab.io/hollow-usage`` (JSON, container name → ``{"cpu": "250m", "memory": "64Mi"}``)
or else the fleet's ``UsageProfile`` (every container alike).  A node uses its profile's own
share (the system's) plus its running pods'.  CPU time is integrated, so the cumulative
figures stay monotonic and the rate the metrics-server computes from two of them is exactly
what was asked.  A changed annotation changes the rate from the moment the hollow kubelet hears
of it (``usage_changed``), as a cgroup's counter shows a step when it happens: a step between
two scrapes then shows, in part, at the second one, not only at the one after (the
autoscaler's reaction to a load step would otherwise take a whole scrape interval more than
upstream's).  Without that call, the rate changes at the measurement that sees the annotation.
A container has used its CPU since its pod started (as a cgroup's counter has), so even the
first measurement is not zero, which the metrics-server would take for missing.  Measurements
are taken at whole milliseconds, as /metrics/resource stamps them, so the rate holds to the
nanocore.

``HollowUsage`` is one node's ``stats.StatsProvider``; the kubelet server serves it as it
serves a real kubelet's cgroup readings.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kube.api.keys import object_key
from kube.api.kinds.core_v1.pod import Pod
from kube.api.quantity import Quantity, QuantityError
from kube.clock import Clock
from node.kubelet.stats import ContainerStats, CPUStats, MemoryStats, NodeStats, PodStats, Summary

LOG = logging.getLogger("kubelab.hollow")

USAGE_ANNOTATION = "kubelab.io/hollow-usage"
NANOS_PER_MILLICORE_MS = 1000
"""Nanoseconds of CPU time one millicore uses in one millisecond."""


@dataclass(frozen=True)
class Usage:
    """A steady usage: CPU in millicores, memory working set in bytes."""

    cpu_millis: int = 0
    memory: int = 0

    @classmethod
    def parse(cls, resources: Mapping[str, object]) -> Usage:
        """From ``{"cpu": "250m", "memory": "64Mi"}`` (either may be left out); ValueError
        naming the resource when one is not a quantity."""
        amounts = {}
        for name in ("cpu", "memory"):
            value = resources.get(name, 0)
            if not isinstance(value, str | int | float):
                raise ValueError(f"{name}: must be a quantity")
            try:
                amounts[name] = Quantity.parse(value)
            except QuantityError as error:
                raise ValueError(f"{name}: {error}") from None
        return cls(amounts["cpu"].milli_value(), amounts["memory"].value())

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.cpu_millis + other.cpu_millis, self.memory + other.memory)


@dataclass(frozen=True)
class UsageProfile:
    """What every hollow container uses unless its pod says otherwise, and each node's own."""

    container: Usage = Usage(cpu_millis=10, memory=16 * 1024 * 1024)
    node: Usage = Usage(cpu_millis=100, memory=512 * 1024 * 1024)


def container_usage(pod: Pod, profile: UsageProfile) -> dict[str, Usage]:
    """Each container's usage: the annotation's entry, else the profile's.  A malformed
    annotation is logged and the profile used."""
    containers = (pod.spec.containers if pod.spec else None) or []
    names = [c.name or "" for c in containers]
    usage = dict.fromkeys(names, profile.container)
    raw = (pod.metadata.annotations or {}).get(USAGE_ANNOTATION)
    if raw is None:
        return usage
    try:
        told = json.loads(raw)
        if not isinstance(told, dict):
            raise ValueError("must be a JSON object of container name to usage")
        for name, resources in told.items():
            if name in usage:
                if not isinstance(resources, dict):
                    raise ValueError(f"{name}: must be an object of resource to quantity")
                usage[name] = Usage.parse(resources)
    except ValueError as error:
        LOG.warning("pod %s: annotation %s: %s", object_key(pod), USAGE_ANNOTATION, error)
        return dict.fromkeys(names, profile.container)
    return usage


class _Counter:
    """Cumulative CPU nanoseconds of one thing: the rate in force since the last measurement,
    integrated up to this one; the rate asked for now holds from here on."""

    def __init__(self, since: datetime.datetime, cpu_millis: int) -> None:
        self.at = since
        self.cpu_millis = cpu_millis
        self.total = 0

    def advance(self, now: datetime.datetime, cpu_millis: int) -> int:
        elapsed_ms = max((now - self.at) // datetime.timedelta(milliseconds=1), 0)
        self.total += self.cpu_millis * elapsed_ms * NANOS_PER_MILLICORE_MS
        self.at, self.cpu_millis = max(now, self.at), cpu_millis
        return self.total


class HollowUsage:
    """One hollow node's ``StatsProvider``.  ``pods`` lists the pods bound to it."""

    def __init__(
        self,
        node_name: str,
        pods: Callable[[], Iterable[Pod]],
        profile: UsageProfile,
        clock: Clock,
    ) -> None:
        self.node_name = node_name
        self.pods = pods
        self.profile = profile
        self.clock = clock
        self.start_time = _whole_ms(clock.now())
        self._node = _Counter(self.start_time, profile.node.cpu_millis)
        self._containers: dict[tuple[str, str], _Counter] = {}

    async def summary(self) -> Summary:
        now = _whole_ms(self.clock.now())
        pods, node_total, node_cpu_ns = self._measure(now)
        node = NodeStats(self.node_name, self.start_time, *_stats(now, node_cpu_ns, node_total))
        return Summary(node, pods)

    def usage_changed(self) -> None:
        """A pod's told usage changed: every counter runs at the rate it had up to now and at
        the one told from now on."""
        self._measure(_whole_ms(self.clock.now()))

    def _measure(self, now: datetime.datetime) -> tuple[list[PodStats], Usage, int]:
        """Every counter advanced to ``now``: the running pods' stats, and the node's usage
        and cumulative CPU."""
        node_total = self.profile.node
        pods, seen = [], set()
        for pod in self.pods():
            status = pod.status
            if status is None or status.phase != "Running" or pod.metadata.deletion_timestamp:
                continue
            uid = pod.metadata.uid or ""
            started = status.start_time or self.start_time
            containers = []
            pod_usage, pod_cpu_ns = Usage(), 0
            for name, usage in container_usage(pod, self.profile).items():
                counter = self._containers.get((uid, name))
                if counter is None:
                    since = min(_whole_ms(started), now)
                    counter = self._containers[(uid, name)] = _Counter(since, usage.cpu_millis)
                seen.add((uid, name))
                cpu_ns = counter.advance(now, usage.cpu_millis)
                containers.append(ContainerStats(name, started, *_stats(now, cpu_ns, usage)))
                pod_usage, pod_cpu_ns = pod_usage + usage, pod_cpu_ns + cpu_ns
            node_total = node_total + pod_usage
            pods.append(
                PodStats(
                    pod.metadata.namespace or "",
                    pod.metadata.name or "",
                    uid,
                    started,
                    containers,
                    *_stats(now, pod_cpu_ns, pod_usage),
                )
            )
        for gone in self._containers.keys() - seen:
            del self._containers[gone]
        return pods, node_total, self._node.advance(now, node_total.cpu_millis)


def _stats(at: datetime.datetime, cpu_ns: int, usage: Usage) -> tuple[CPUStats, MemoryStats]:
    return CPUStats(at, cpu_ns, usage.cpu_millis * 1_000_000), MemoryStats(
        at, usage.memory, usage.memory
    )


def _whole_ms(moment: datetime.datetime) -> datetime.datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)
