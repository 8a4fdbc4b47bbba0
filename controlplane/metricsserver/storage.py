"""The metrics-server's memory: the last two points of every node and container.

As upstream's ``pkg/storage``: each scrape brings a ``Batch`` of points (cumulative CPU
nanoseconds and memory working set at a timestamp).  A new point newer than the stored last
one pushes that one back to ``prev``; an older or equal one keeps ``prev`` only if that is
still older than it; nodes and pods absent from a batch are forgotten.  Usage needs both
points: CPU is the cumulative difference over the window between their timestamps (nanocores),
memory is the last working set.  A pair whose start time or cumulative CPU went backwards (a
restarted container) gives nothing until the next scrape, as upstream's.

A pod is reported only when every one of its containers has usage, with the window of its
first container (all come from one scrape of one kubelet).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field

PodKey = tuple[str, str]
"""(namespace, name)."""


@dataclass(frozen=True)
class Point:
    """One measurement: cumulative CPU nanoseconds and memory working set bytes at ``timestamp``;
    ``start_time`` is when the container started (None for a node, or when not reported)."""

    timestamp: datetime.datetime
    cpu_ns: int
    memory: int
    start_time: datetime.datetime | None = None


@dataclass
class Batch:
    """What one round of scraping brought."""

    nodes: dict[str, Point] = field(default_factory=dict)
    pods: dict[PodKey, dict[str, Point]] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """A rate over ``window`` ending at ``timestamp``: CPU in nanocores, memory in bytes."""

    timestamp: datetime.datetime
    window: datetime.timedelta
    cpu_nanocores: int
    memory: int


def usage(last: Point, prev: Point) -> Usage | None:
    """The usage between two points of one thing; None when they do not make a rate."""
    restarted = (
        last.start_time is not None
        and prev.start_time is not None
        and last.start_time < prev.start_time
    )
    if restarted or last.cpu_ns < prev.cpu_ns:
        return None
    window = last.timestamp - prev.timestamp
    if window <= datetime.timedelta(0):
        return None
    cpu = int((last.cpu_ns - prev.cpu_ns) / window.total_seconds())
    return Usage(last.timestamp, window, cpu, last.memory)


def _shift(new: Point, last: Point | None, prev: Point | None) -> Point | None:
    """The point to keep as ``prev`` when ``new`` arrives."""
    if last is not None and new.timestamp > last.timestamp:
        return last
    if prev is not None and prev.timestamp < new.timestamp:
        return prev
    return None


class Storage:
    """Points of nodes and containers; see the module docstring.  Not thread-safe: one event
    loop writes (the scraper) and reads (the API)."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[Point, Point | None]] = {}
        self._pods: dict[PodKey, dict[str, tuple[Point, Point | None]]] = {}

    def store(self, batch: Batch) -> None:
        nodes = {}
        for name, point in batch.nodes.items():
            last, prev = self._nodes.get(name, (None, None))
            nodes[name] = (point, _shift(point, last, prev))
        pods: dict[PodKey, dict[str, tuple[Point, Point | None]]] = {}
        for key, containers in batch.pods.items():
            known = self._pods.get(key, {})
            kept = pods[key] = {}
            for container, point in containers.items():
                last, prev = known.get(container, (None, None))
                kept[container] = (point, _shift(point, last, prev))
        self._nodes, self._pods = nodes, pods

    def ready(self) -> bool:
        """Whether any usage can be told yet (two points of something), as upstream's
        ``metric-storage-ready`` check."""
        return any(prev is not None for _, prev in self._nodes.values()) or any(
            prev is not None
            for containers in self._pods.values()
            for _, prev in containers.values()
        )

    def node(self, name: str) -> Usage | None:
        last, prev = self._nodes.get(name, (None, None))
        return usage(last, prev) if last is not None and prev is not None else None

    def pod(self, namespace: str, name: str) -> Mapping[str, Usage] | None:
        """Each container's usage, in the order the kubelet listed them; None unless all
        have one."""
        containers = self._pods.get((namespace, name))
        if not containers:
            return None
        usages = {}
        for container, (last, prev) in containers.items():
            found = usage(last, prev) if prev is not None else None
            if found is None:
                return None
            usages[container] = found
        return usages
