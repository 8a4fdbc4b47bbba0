"""State a plugin keeps across scheduling cycles, summed from one part per node and kept in
step with the snapshot without walking every node.

Upstream's PodTopologySpread and InterPodAffinity precompute, in each PreFilter and PreScore,
counts per topology domain from a walk over every node (in parallel Go).  In one Python
thread that walk is the cost of a cycle at thousands of nodes, and between two cycles only a
node or two change (the pod the last cycle assumed, the binding the informer confirmed).  So
such a sum is kept: ``NodeParts`` remembers each node's part, and ``sync`` asks the snapshot
which nodes changed since the last sync (``NodeInfoLister.changed_since``), takes each one's
old part out and puts its new part in.  A snapshot that no longer remembers that far back,
another snapshot, or a first sync, means one walk over every node.

A subclass says what a node's part is (``part``: hashable and comparable, None for a node
that adds nothing) and how a part goes in or out (``apply`` with +1 or -1), and ``clear``s its
sums.  Parts must depend only on the node and its pods, which is what the snapshot's change
list covers.
"""

from __future__ import annotations

import abc
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from controlplane.scheduler.framework.interface import NodeInfoLister
from controlplane.scheduler.framework.types import NodeInfo

P = TypeVar("P")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(Generic[K, V]):
    """The values of the keys used most recently (a small LRU), each made by ``make`` on
    first use: what a plugin keeps across cycles, per shape of pod (consecutive pods of one
    workload share it)."""

    def __init__(self, make: Callable[[K], V], capacity: int) -> None:
        self._make = make
        self._capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V:
        found = self._entries.get(key)
        if found is None:
            found = self._entries[key] = self._make(key)
            if len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        return found


class NodeParts(abc.ABC, Generic[P]):
    """Sums of per-node parts, brought up to date by ``sync`` (see the module docstring)."""

    def __init__(self) -> None:
        self._snapshot: NodeInfoLister | None = None
        self._mark = 0
        self._parts: dict[str, P] = {}

    @abc.abstractmethod
    def part(self, info: NodeInfo) -> P | None:
        """What the node adds (its Node object is present), or None."""

    @abc.abstractmethod
    def apply(self, part: P, sign: int) -> None:
        """Add (``sign`` 1) or take out (-1) one node's part."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Forget every sum (a full recount follows)."""

    def sync(self, snapshot: NodeInfoLister) -> None:
        if snapshot is not self._snapshot:
            # Marks are one snapshot's own.
            self._snapshot, self._mark = snapshot, 0
        names, self._mark = snapshot.changed_since(self._mark)
        if names is None:
            self._parts.clear()
            self.clear()
            for node_info in snapshot.list():
                self._set(node_info.name, node_info)
            return
        for name in dict.fromkeys(names):
            try:
                info: NodeInfo | None = snapshot.get(name)
            except KeyError:
                info = None
            self._set(name, info)

    def _set(self, name: str, info: NodeInfo | None) -> None:
        """Replace the node's part with what it adds now."""
        new = self.part(info) if info is not None and info.node is not None else None
        old = self._parts.pop(name, None)
        if new is not None:
            self._parts[name] = new
        if old == new:
            return
        if old is not None:
            self.apply(old, -1)
        if new is not None:
            self.apply(new, 1)
