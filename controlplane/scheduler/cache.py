"""The scheduler cache: every node with the pods on it, including pods the scheduler has
placed but the API server has not yet confirmed (upstream
``pkg/scheduler/backend/cache/cache.go`` and ``snapshot.go``).

The informers feed it nodes and assigned pods.  The scheduler feeds it *assumed* pods: when a
cycle picks a node, Reserve adds the pod to that node at once (``assume_pod``) so the next
cycle already sees the node's resources taken, long before the binding lands.  An assumed pod
then ends one of three ways:

* the informer delivers it bound (``add_pod``): it is *confirmed* and becomes an ordinary pod;
* binding fails (``forget_pod``): it is taken off the node again;
* binding finished (``finish_binding``) but no confirmation ever arrives: with a ``ttl`` above
  zero it *expires* after that long (``cleanup_expired_assumed_pods``).  Upstream's scheduler
  passes a TTL of 0, never expire, since 1.26: expiry raced with slow API servers and let the
  scheduler double-book nodes (kubernetes#106361); ours defaults to the same.

Scheduling cycles read a ``Snapshot``, not the cache, so that a cycle sees one consistent
state.  Copying 5,000 NodeInfos per cycle would dominate scheduling, so the snapshot is
updated incrementally: the cache keeps its NodeInfos in a list ordered by ``generation``,
most recently changed first, and ``update_snapshot`` clones only those newer than the
snapshot's generation.  The snapshot's NodeInfo objects keep their identity (a changed node is
overwritten in place), so its node list is rebuilt only when nodes come or go; a node that
starts or stops having pods with affinity joins or leaves the lists of those (in no
particular order).

The snapshot also remembers which nodes each update changed (``changed_since``), so state a
plugin keeps across cycles (PodTopologySpread's matching pods per topology domain) is brought
up to date by visiting those nodes only: binds and assumptions, deletions and node changes all
reach it this way, in step with the snapshot the cycle reads.

A pod can arrive before its node: it gets a placeholder NodeInfo without a node, which the
snapshot leaves out until the node shows up.

Everything runs on one event loop; no locks.  Time comes from the injected clock.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from controlplane.scheduler.framework.types import (
    ImageState,
    NodeInfo,
    PodInfo,
    next_generation,
)
from kube.api.kinds.core_v1.node import (
    LABEL_FAILURE_DOMAIN_BETA_REGION,
    LABEL_FAILURE_DOMAIN_BETA_ZONE,
    LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE,
    Node,
)
from kube.api.kinds.core_v1.pod import Pod
from kube.clock import Clock

MIN_CHANGES = 4096
"""The fewest node changes a snapshot remembers for ``changed_since``."""

CLEAN_ASSUMED_PERIOD = 1.0
"""How often ``run`` looks for expired assumed pods (upstream ``cleanAssumedPeriod``)."""


class CacheError(Exception):
    """An operation that contradicts the cache's state (e.g. forgetting an unassumed pod)."""


class Snapshot:
    """The nodes one scheduling cycle sees; it does not change during the cycle.

    Implements ``NodeInfoLister``.  ``list()`` interleaves zones (as upstream's node tree),
    so that scoring a fraction of the nodes still spreads over zones.
    """

    def __init__(self) -> None:
        self.node_info_map: dict[str, NodeInfo] = {}
        self.node_info_list: builtins.list[NodeInfo] = []
        self.with_affinity: builtins.list[NodeInfo] = []
        self.with_required_anti_affinity: builtins.list[NodeInfo] = []
        self.generation = 0
        self.tree_version = -1
        self._changes: builtins.list[str] = []
        self._first_mark = 1
        """The mark of ``_changes[0]``; marks below it were forgotten."""

    def list(self) -> builtins.list[NodeInfo]:
        return builtins.list(self.node_info_list)

    def get(self, node_name: str) -> NodeInfo:
        return self.node_info_map[node_name]

    def have_pods_with_affinity(self) -> builtins.list[NodeInfo]:
        return builtins.list(self.with_affinity)

    def have_pods_with_required_anti_affinity(self) -> builtins.list[NodeInfo]:
        return builtins.list(self.with_required_anti_affinity)

    @property
    def num_nodes(self) -> int:
        return len(self.node_info_list)

    def changed_since(self, mark: int) -> tuple[builtins.list[str] | None, int]:
        end = self._first_mark + len(self._changes)
        if mark < self._first_mark:
            return None, end
        return self._changes[mark - self._first_mark :], end

    def record_changes(self, names: Iterable[str]) -> None:
        """Remember that these nodes changed (``update_snapshot`` calls this).  The oldest
        half is forgotten once more changes are remembered than twice the nodes (at least
        ``MIN_CHANGES``): a reader that far behind recounts everything, which costs no more
        than replaying that many changes."""
        self._changes.extend(names)
        if len(self._changes) > max(MIN_CHANGES, 2 * len(self.node_info_map)):
            half = len(self._changes) // 2
            del self._changes[:half]
            self._first_mark += half


class _Item:
    """A NodeInfo in the cache's generation-ordered doubly linked list."""

    __slots__ = ("info", "next", "prev")

    def __init__(self, info: NodeInfo) -> None:
        self.info = info
        self.next: _Item | None = None
        self.prev: _Item | None = None


@dataclass(slots=True)
class _PodState:
    info: PodInfo
    node_name: str
    assumed: bool = False
    binding_finished: bool = False
    deadline: float | None = None


@dataclass(slots=True)
class _Image:
    size: int
    nodes: set[str] = field(default_factory=set)


def zone_key(node: Node) -> str:
    """The node's region and zone as one key ("" when it has neither)."""
    labels = node.metadata.labels or {}
    region = labels.get(LABEL_TOPOLOGY_REGION) or labels.get(LABEL_FAILURE_DOMAIN_BETA_REGION, "")
    zone = labels.get(LABEL_TOPOLOGY_ZONE) or labels.get(LABEL_FAILURE_DOMAIN_BETA_ZONE, "")
    return f"{region}:\x00:{zone}" if region or zone else ""


class _NodeTree:
    """Node names grouped by zone, listed round-robin across zones."""

    def __init__(self) -> None:
        self._zones: dict[str, builtins.list[str]] = {}
        self._zone_of: dict[str, str] = {}
        self.version = 0
        """Bumped whenever the listing changes, so snapshots know to rebuild theirs."""

    def __len__(self) -> int:
        return len(self._zone_of)

    def add(self, node: Node) -> None:
        name = node.metadata.name or ""
        zone = zone_key(node)
        if self._zone_of.get(name) == zone:
            return
        self.remove(name)
        self._zone_of[name] = zone
        self._zones.setdefault(zone, []).append(name)
        self.version += 1

    def remove(self, name: str) -> None:
        zone = self._zone_of.pop(name, None)
        if zone is None:
            return
        names = self._zones[zone]
        names.remove(name)
        if not names:
            del self._zones[zone]
        self.version += 1

    def list(self) -> builtins.list[str]:
        zones = builtins.list(self._zones.values())
        result: builtins.list[str] = []
        for i in range(max((len(names) for names in zones), default=0)):
            result.extend(names[i] for names in zones if i < len(names))
        return result


@dataclass(frozen=True, slots=True)
class CacheDump:
    """A copy of the cache's state for debugging (upstream ``Dump``)."""

    nodes: dict[str, NodeInfo]
    assumed_pods: frozenset[str]

    def __str__(self) -> str:
        lines = [f"assumed pods: {sorted(self.assumed_pods)}"]
        for name, info in sorted(self.nodes.items()):
            pods = ", ".join(sorted(pod.key for pod in info.pods))
            lines.append(
                f"node {name or '<placeholder>'}: generation {info.generation}, "
                f"requested cpu {info.requested.milli_cpu}m memory {info.requested.memory}, "
                f"pods [{pods}]"
            )
        return "\n".join(lines)


class SchedulerCache:
    """NodeInfos of all nodes, kept current by the informers and the scheduler's assumptions.

    Pods are keyed by uid.  ``ttl`` is how long after ``finish_binding`` an unconfirmed
    assumed pod is kept; 0 keeps it until the informer or ``forget_pod`` settles it.
    """

    def __init__(self, clock: Clock, ttl: float = 0.0) -> None:
        self._clock = clock
        self.ttl = ttl
        self._nodes: dict[str, _Item] = {}
        self._head: _Item | None = None
        self._tree = _NodeTree()
        self._pods: dict[str, _PodState] = {}
        self._images: dict[str, _Image] = {}
        self._image_changed: dict[str, int] = {}
        """The generation at which each image last appeared on or left a node."""

    # --- nodes ---------------------------------------------------------------------------

    def add_node(self, node: Node) -> None:
        name = node.metadata.name or ""
        item = self._nodes.get(name)
        if item is None:
            item = self._insert(name, NodeInfo())
        self._remove_images(name, item.info.node)
        self._add_images(name, node)
        self._tree.add(node)
        item.info.set_node(node)
        self._move_to_head(item)

    def update_node(self, old: Node, new: Node) -> None:
        """Same as ``add_node`` of ``new``: the zone and images may have changed."""
        self.add_node(new)

    def remove_node(self, node: Node) -> None:
        """Drop the node; its NodeInfo stays as a placeholder while pods remain on it."""
        name = node.metadata.name or ""
        item = self._nodes.get(name)
        if item is None:
            raise CacheError(f"node {name} is not found")
        info = item.info
        self._remove_images(name, info.node)
        info.clear_node()
        if info.pods:
            self._move_to_head(item)
        else:
            self._unlink(item)
            del self._nodes[name]
        self._tree.remove(name)

    def _add_images(self, node_name: str, node: Node) -> None:
        for image_name, size in _images(node):
            image = self._images.setdefault(image_name, _Image(size))
            if node_name not in image.nodes:
                image.nodes.add(node_name)
                self._image_changed[image_name] = next_generation()

    def _remove_images(self, node_name: str, node: Node | None) -> None:
        for image_name, _ in _images(node):
            image = self._images.get(image_name)
            if image is None or node_name not in image.nodes:
                continue
            image.nodes.discard(node_name)
            self._image_changed[image_name] = next_generation()
            if not image.nodes:
                del self._images[image_name]
                del self._image_changed[image_name]

    def _image_states(self, info: NodeInfo) -> dict[str, ImageState]:
        """The node's images, each with on how many nodes it is now (ImageLocality)."""
        return {
            image_name: ImageState(image.size, len(image.nodes))
            for image_name, _ in _images(info.node)
            if (image := self._images.get(image_name)) is not None
        }

    # --- pods ----------------------------------------------------------------------------

    def assume_pod(self, info: PodInfo, node_name: str) -> None:
        """Place the pod on the node now, before the binding is confirmed."""
        if info.uid in self._pods:
            raise CacheError(f"pod {info.key} is in the cache, so can't be assumed")
        self._add(info, node_name, assumed=True)

    def finish_binding(self, pod: Pod) -> None:
        """The binding call returned: start the assumed pod's expiry clock."""
        state = self._pods.get(pod.metadata.uid or "")
        if state is not None and state.assumed:
            state.binding_finished = True
            state.deadline = self._clock.monotonic() + self.ttl

    def forget_pod(self, pod: Pod) -> None:
        """Undo ``assume_pod`` (the binding failed)."""
        state = self._pods.get(pod.metadata.uid or "")
        if state is None or not state.assumed:
            raise CacheError(
                f"pod {pod.metadata.namespace}/{pod.metadata.name} wasn't assumed "
                "so cannot be forgotten"
            )
        self._remove(state)

    def add_pod(self, pod: Pod) -> None:
        """The informer saw an assigned pod: confirm it if assumed, otherwise add it."""
        state = self._pods.get(pod.metadata.uid or "")
        if state is not None and not state.assumed:
            raise CacheError(f"pod {pod.metadata.namespace}/{pod.metadata.name} already added")
        if state is not None:
            self._remove(state)
        self._add(PodInfo.of(pod), _node_name(pod), assumed=False)

    def update_pod(self, old: Pod, new: Pod) -> None:
        state = self._pods.get(old.metadata.uid or "")
        if state is None or state.assumed:
            raise CacheError(
                f"pod {old.metadata.namespace}/{old.metadata.name} is not added to the cache, "
                "so can't be updated"
            )
        self._remove(state)
        self._add(PodInfo.of(new), _node_name(new), assumed=False)

    def remove_pod(self, pod: Pod) -> None:
        state = self._pods.get(pod.metadata.uid or "")
        if state is None:
            raise CacheError(
                f"pod {pod.metadata.namespace}/{pod.metadata.name} is not found in the cache"
            )
        self._remove(state)

    def is_assumed(self, pod: Pod) -> bool:
        state = self._pods.get(pod.metadata.uid or "")
        return state is not None and state.assumed

    def get_pod(self, pod: Pod) -> Pod | None:
        state = self._pods.get(pod.metadata.uid or "")
        return state.info.pod if state else None

    def cleanup_expired_assumed_pods(self) -> list[Pod]:
        """Drop assumed pods whose binding finished ``ttl`` ago unconfirmed; returns them."""
        if self.ttl <= 0:
            return []
        now = self._clock.monotonic()
        expired = [
            state
            for state in self._pods.values()
            if state.assumed
            and state.binding_finished
            and state.deadline is not None
            and now > state.deadline
        ]
        for state in expired:
            self._remove(state)
        return [state.info.pod for state in expired]

    async def run(self) -> None:
        """Expire assumed pods every second, until cancelled."""
        while True:
            self.cleanup_expired_assumed_pods()
            await self._clock.sleep(CLEAN_ASSUMED_PERIOD)

    def _add(self, info: PodInfo, node_name: str, *, assumed: bool) -> None:
        item = self._nodes.get(node_name) or self._insert(node_name, NodeInfo())
        item.info.add_pod(info)
        self._move_to_head(item)
        self._pods[info.uid] = _PodState(info, node_name, assumed=assumed)

    def _remove(self, state: _PodState) -> None:
        del self._pods[state.info.uid]
        item = self._nodes.get(state.node_name)
        if item is None:
            return
        item.info.remove_pod(state.info.pod)
        if not item.info.pods and item.info.node is None:
            self._unlink(item)
            del self._nodes[state.node_name]
        else:
            self._move_to_head(item)

    # --- the generation-ordered list -----------------------------------------------------

    def _insert(self, name: str, info: NodeInfo) -> _Item:
        item = _Item(info)
        self._nodes[name] = item
        self._move_to_head(item)
        return item

    def _unlink(self, item: _Item) -> None:
        if item.prev is not None:
            item.prev.next = item.next
        if item.next is not None:
            item.next.prev = item.prev
        if self._head is item:
            self._head = item.next
        item.prev = item.next = None

    def _move_to_head(self, item: _Item) -> None:
        if self._head is item:
            return
        self._unlink(item)
        item.next = self._head
        if self._head is not None:
            self._head.prev = item
        self._head = item

    # --- snapshots -----------------------------------------------------------------------

    def update_snapshot(self, snapshot: Snapshot) -> None:
        """Bring ``snapshot`` up to date, copying only the NodeInfos changed since its last
        update."""
        rebuild_all = False
        # Nodes that started or stopped having pods with (required anti-)affinity.
        affinity: builtins.list[tuple[NodeInfo, bool]] = []
        anti_affinity: builtins.list[tuple[NodeInfo, bool]] = []
        changed: builtins.list[str] = []
        item = self._head
        while item is not None and item.info.generation > snapshot.generation:
            info = item.info
            if info.node is not None:
                name = info.name
                changed.append(name)
                existing = snapshot.node_info_map.get(name)
                if existing is None:
                    rebuild_all = True
                    existing = snapshot.node_info_map[name] = NodeInfo()
                if bool(existing.pods_with_affinity) != bool(info.pods_with_affinity):
                    affinity.append((existing, bool(info.pods_with_affinity)))
                had_anti = bool(existing.pods_with_required_anti_affinity)
                if had_anti != bool(info.pods_with_required_anti_affinity):
                    anti_affinity.append((existing, not had_anti))
                _overwrite(existing, info.clone())
                existing.image_states = self._image_states(info)
            item = item.next
        self._refresh_image_counts(snapshot)
        if self._head is not None:
            snapshot.generation = max(snapshot.generation, self._head.info.generation)
        if len(snapshot.node_info_map) > len(self._tree):
            changed.extend(self._remove_deleted_nodes(snapshot))
            rebuild_all = True
        snapshot.record_changes(changed)
        if snapshot.tree_version != self._tree.version:
            snapshot.tree_version = self._tree.version
            rebuild_all = True
        if rebuild_all:
            snapshot.node_info_list = [snapshot.node_info_map[name] for name in self._tree.list()]
            snapshot.with_affinity = [
                info for info in snapshot.node_info_list if info.pods_with_affinity
            ]
            snapshot.with_required_anti_affinity = [
                info for info in snapshot.node_info_list if info.pods_with_required_anti_affinity
            ]
            return
        # A node that starts having such pods joins its list, one that stops leaves it: no
        # walk over every node when, say, each pod of a spread workload lands on a new node.
        for nodes, changes in (
            (snapshot.with_affinity, affinity),
            (snapshot.with_required_anti_affinity, anti_affinity),
        ):
            for node_info, has in changes:
                if has:
                    nodes.append(node_info)
                else:
                    nodes.remove(node_info)

    def _refresh_image_counts(self, snapshot: Snapshot) -> None:
        """Recount images that came to or left other nodes on the unchanged nodes that have
        them (upstream leaves those counts stale until the node itself changes)."""
        changed = {
            image_name: ImageState(
                self._images[image_name].size, len(self._images[image_name].nodes)
            )
            for image_name, generation in self._image_changed.items()
            if generation > snapshot.generation
        }
        if not changed:
            return
        for info in snapshot.node_info_map.values():
            for image_name in changed.keys() & info.image_states.keys():
                info.image_states[image_name] = changed[image_name]
        snapshot.generation = max(snapshot.generation, *self._image_changed.values())

    def _remove_deleted_nodes(self, snapshot: Snapshot) -> builtins.list[str]:
        removed = []
        for name in builtins.list(snapshot.node_info_map):
            item = self._nodes.get(name)
            if item is None or item.info.node is None:
                del snapshot.node_info_map[name]
                removed.append(name)
        return removed

    # --- inspection ----------------------------------------------------------------------

    @property
    def node_count(self) -> int:
        return len(self._tree)

    @property
    def pod_count(self) -> int:
        return len(self._pods)

    def dump(self) -> CacheDump:
        return CacheDump(
            {name: item.info.clone() for name, item in self._nodes.items()},
            frozenset(uid for uid, state in self._pods.items() if state.assumed),
        )


def _images(node: Node | None) -> Iterator[tuple[str, int]]:
    for image in (node.status.images if node and node.status else None) or ():
        for image_name in image.names or ():
            yield image_name, image.size_bytes or 0


def _node_name(pod: Pod) -> str:
    return (pod.spec.node_name if pod.spec else None) or ""


def _overwrite(target: NodeInfo, source: NodeInfo) -> None:
    """Make ``target`` a copy of ``source`` without changing its identity (snapshot lists
    hold it)."""
    for slot in NodeInfo.__slots__:
        setattr(target, slot, getattr(source, slot))
