"""InterPodAffinity: pods that must (or would rather) run near, or away from, other pods.

A pod affinity term names pods by label and namespace and a topology key (a node label such as
``kubernetes.io/hostname`` or ``topology.kubernetes.io/zone``); the pods it names "are in" the
topology domain of the node they run on.  Checking a term against every pod for every node
would cost nodes x pods per candidate, so, as upstream does, PreFilter walks the pods once and
counts matches per topology pair (key, value):

- existing pods' required anti-affinity terms that match the incoming pod (only nodes hosting
  such pods are visited: the snapshot keeps that list);
- existing pods that match all of the incoming pod's required affinity terms;
- existing pods that match any of the incoming pod's required anti-affinity terms.

Filter then only looks a node's labels up in those counts.  Each node's part of the first two
walks is remembered across cycles until the node changes (``_PerNode``).  The counts live in
the cycle state and are cloned with it, so preemption can add and remove pods
(``add_pod``/``remove_pod``) on its copy.  PreScore does the same walk for preferred terms
(the incoming pod's, and existing pods' preferred terms plus their required affinity terms at
``hardPodAffinityWeight``), remembered per node the same way, and Score sums the weights of
the node's topology pairs.  For an incoming pod with preferred terms of its own, which visits
every node with pods, the sums per topology pair are also kept across cycles
(``_PreferredScores``): a cycle walks again only the nodes the snapshot changed since the last
pod of the same shape, so PreScore does not grow with the number of nodes.  Filter and Score
judge a whole batch of nodes in one loop (``filter_nodes``/``score_nodes``); the one-node forms
delegate to them.

Terms select namespaces by name or by a namespace label selector.  The incoming pod's selectors
are resolved into names once per cycle against the namespace cache; existing pods' selectors are
matched against the labels of the incoming pod's namespace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EventResource,
    Handle,
    PreFilterResult,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.parts import NodeParts, Recent
from controlplane.scheduler.framework.types import (
    AffinityTerm,
    NodeInfo,
    PodInfo,
    WeightedAffinityTerm,
    node_labels,
)
from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Pod

NAME = names.INTER_POD_AFFINITY

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

_AFFINITY_NOT_MATCH = Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH)
_ANTI_AFFINITY_NOT_MATCH = Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
_EXISTING_ANTI_AFFINITY_NOT_MATCH = Status.unschedulable(
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH
)
_NO_COUNTS: Mapping[str, int] = {}

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1

TopologyCounts = dict[str, dict[str, int]]
"""topology key -> topology value -> count (or summed weight); zero counts are dropped."""


def _add(counts: TopologyCounts, labels: Mapping[str, str], key: str, value: int) -> None:
    """Add ``value`` to the node's pair for ``key`` (nothing if the node lacks the label)."""
    topology_value = labels.get(key)
    if topology_value is None:
        return
    values = counts.setdefault(key, {})
    total = values.get(topology_value, 0) + value
    if total:
        values[topology_value] = total
    else:
        del values[topology_value]
        if not values:
            del counts[key]


def _matches_all(terms: Iterable[AffinityTerm], pod: Pod) -> bool:
    """Whether ``pod`` matches every term (and there is at least one).

    Only used with the incoming pod's terms, whose namespace selectors are resolved, so no
    namespace labels are needed.
    """
    matched = False
    for term in terms:
        if not term.matches(pod):
            return False
        matched = True
    return matched


def _count_affinity(
    counts: TopologyCounts,
    terms: tuple[AffinityTerm, ...],
    pod: Pod,
    labels: Mapping[str, str],
    value: int,
) -> None:
    """Affinity terms count a pod only if it matches all of them (upstream semantics)."""
    if _matches_all(terms, pod):
        for term in terms:
            _add(counts, labels, term.topology_key, value)


def _count_anti_affinity(
    counts: TopologyCounts,
    terms: Iterable[AffinityTerm],
    pod: Pod,
    namespace_labels: Mapping[str, str] | None,
    labels: Mapping[str, str],
    value: int,
) -> None:
    """Anti-affinity terms count a pod for each term it matches."""
    for term in terms:
        if term.matches(pod, namespace_labels):
            _add(counts, labels, term.topology_key, value)


def _clone(counts: TopologyCounts) -> TopologyCounts:
    return {key: dict(values) for key, values in counts.items()}


V = TypeVar("V")

_IncomingKey = tuple[str, frozenset[tuple[str, str]], frozenset[tuple[str, str]] | None]
"""What existing pods' terms can see of the incoming pod: namespace, labels, namespace labels."""
_TermsKey = tuple[tuple[AffinityTerm, ...], tuple[AffinityTerm, ...]]
_PreferredKey = tuple[
    tuple[WeightedAffinityTerm, ...], tuple[WeightedAffinityTerm, ...], _IncomingKey
]


def _incoming_key(pod: Pod, namespace_labels: Mapping[str, str] | None) -> _IncomingKey:
    return (
        pod.metadata.namespace or "",
        frozenset((pod.metadata.labels or {}).items()),
        frozenset(namespace_labels.items()) if namespace_labels is not None else None,
    )


class _PerNode(Generic[V]):
    """Per-node results of a walk over a node's pods, for one key (the plugin keeps them for
    the most recently used keys).

    A result is trusted while the NodeInfo's ``generation`` is the one it was computed at:
    adding or removing a pod (an update is both) bumps it.  A cycle then walks only the pods
    of nodes that changed since a cycle with the same key, where upstream (in parallel Go)
    walks every pod every cycle; the counts are the same.
    """

    __slots__ = ("_by_node",)

    def __init__(self) -> None:
        self._by_node: dict[str, tuple[int, V]] = {}

    def get(self, node: NodeInfo, compute: Callable[[NodeInfo], V]) -> V:
        cached = self._by_node.get(node.name)
        if cached is None or cached[0] != node.generation:
            cached = self._by_node[node.name] = (node.generation, compute(node))
        return cached[1]


@dataclasses.dataclass(slots=True)
class _PreFilterState:
    """The counts Filter reads; ``affinity``/``anti_affinity`` are the incoming pod's
    required terms with their namespace selectors resolved."""

    pod: Pod
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    namespace_labels: Mapping[str, str] | None
    existing_anti_affinity_counts: TopologyCounts = dataclasses.field(default_factory=dict)
    affinity_counts: TopologyCounts = dataclasses.field(default_factory=dict)
    anti_affinity_counts: TopologyCounts = dataclasses.field(default_factory=dict)

    def clone(self) -> _PreFilterState:
        return dataclasses.replace(
            self,
            existing_anti_affinity_counts=_clone(self.existing_anti_affinity_counts),
            affinity_counts=_clone(self.affinity_counts),
            anti_affinity_counts=_clone(self.anti_affinity_counts),
        )

    def update_with_pod(self, info: PodInfo, node: Node | None, value: int) -> None:
        labels = node_labels(node)
        _count_anti_affinity(
            self.existing_anti_affinity_counts,
            info.required_anti_affinity,
            self.pod,
            self.namespace_labels,
            labels,
            value,
        )
        _count_affinity(self.affinity_counts, self.affinity, info.pod, labels, value)
        _count_anti_affinity(
            self.anti_affinity_counts, self.anti_affinity, info.pod, None, labels, value
        )

    def existing_topology_keys(self, node: NodeInfo) -> tuple[str, ...]:
        """The topology key of every required anti-affinity term of a pod on ``node`` that
        matches the incoming pod (one entry per match)."""
        return tuple(
            term.topology_key
            for existing in node.pods_with_required_anti_affinity
            for term in existing.required_anti_affinity
            if term.matches(self.pod, self.namespace_labels)
        )

    def incoming_matches(self, node: NodeInfo) -> tuple[int, tuple[int, ...]]:
        """How many pods on ``node`` match all of the incoming pod's affinity terms, and how
        many match each of its anti-affinity terms."""
        pods = [info.pod for info in node.pods]
        return (
            sum(1 for p in pods if _matches_all(self.affinity, p)),
            tuple(sum(1 for p in pods if term.matches(p)) for term in self.anti_affinity),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _PreferredWalk:
    """What one node's pods add to the preferred scores: the incoming pod's preferred terms
    over the pods, and the pods' terms over the incoming pod (their required affinity at
    ``hard_weight``).  The incoming pod's terms have their namespace selectors resolved."""

    incoming: Pod
    namespace_labels: Mapping[str, str] | None
    preferred: tuple[WeightedAffinityTerm, ...]
    preferred_anti: tuple[WeightedAffinityTerm, ...]
    hard_weight: int

    def weights(self, node: NodeInfo) -> tuple[tuple[str, int], ...]:
        """Topology key -> summed weight of the terms that matched.  A key whose weights cancel
        out is kept, at zero: it still makes PreScore run Score."""
        sums: dict[str, int] = {}
        incoming, namespace_labels = self.incoming, self.namespace_labels
        # Without preferred terms of its own, only pods that have affinity terms can score.
        has_constraints = bool(self.preferred or self.preferred_anti)
        for existing in node.pods if has_constraints else node.pods_with_affinity:
            target = existing.pod
            for weighted in self.preferred:
                if weighted.term.matches(target):
                    _credit(sums, weighted.term.topology_key, weighted.weight)
            for weighted in self.preferred_anti:
                if weighted.term.matches(target):
                    _credit(sums, weighted.term.topology_key, -weighted.weight)
            if self.hard_weight > 0:
                for term in existing.required_affinity:
                    if term.matches(incoming, namespace_labels):
                        _credit(sums, term.topology_key, self.hard_weight)
            for weighted in existing.preferred_affinity:
                if weighted.term.matches(incoming, namespace_labels):
                    _credit(sums, weighted.term.topology_key, weighted.weight)
            for weighted in existing.preferred_anti_affinity:
                if weighted.term.matches(incoming, namespace_labels):
                    _credit(sums, weighted.term.topology_key, -weighted.weight)
        return tuple(sums.items())


def _credit(sums: dict[str, int], key: str, weight: int) -> None:
    sums[key] = sums.get(key, 0) + weight


@dataclasses.dataclass(slots=True)
class _PreScoreState:
    topology_score: TopologyCounts

    def clone(self) -> _PreScoreState:
        return self  # read-only after PreScore


def _memo() -> Recent[Any, _PerNode[Any]]:
    return Recent(lambda _: _PerNode(), capacity=64)


_ScorePart = tuple[tuple[str, str, int], ...]
"""A node's summed preferred weights: (topology key, the node's value for it, weight)."""


class _PreferredScores(NodeParts[_ScorePart]):
    """The preferred-term weights per topology pair for one shape of incoming pod, kept
    across cycles (``NodeParts``: only the nodes the snapshot changed are walked again) where
    upstream sums them over every node in each PreScore.  ``walk`` and ``memo`` are the
    current cycle's (the same shape, so the same answers); a pair stays while some node adds
    to it, at zero too, as the walk leaves it."""

    def __init__(self) -> None:
        super().__init__()
        self.walk: _PreferredWalk | None = None
        self.memo: _PerNode[tuple[tuple[str, int], ...]] = _PerNode()
        self.scores: TopologyCounts = {}
        self._nodes: dict[tuple[str, str], int] = {}

    def part(self, info: NodeInfo) -> _ScorePart | None:
        labels = info.labels
        if not info.pods or not labels or self.walk is None:
            return None
        return (
            tuple(
                (key, labels[key], weight)
                for key, weight in self.memo.get(info, self.walk.weights)
                if key in labels
            )
            or None
        )

    def apply(self, part: _ScorePart, sign: int) -> None:
        for key, value, weight in part:
            pair = (key, value)
            nodes = self._nodes.get(pair, 0) + sign
            values = self.scores.setdefault(key, {})
            if nodes:
                self._nodes[pair] = nodes
                values[value] = values.get(value, 0) + sign * weight
                continue
            del self._nodes[pair], values[value]
            if not values:
                del self.scores[key]

    def clear(self) -> None:
        self.scores.clear()
        self._nodes.clear()


class InterPodAffinity:
    NAME: ClassVar[str] = names.INTER_POD_AFFINITY

    def __init__(self, handle: Handle, hard_pod_affinity_weight: int, ignore_preferred: bool):
        self._handle = handle
        self._hard_pod_affinity_weight = hard_pod_affinity_weight
        self._ignore_preferred_terms_of_existing_pods = ignore_preferred
        self._existing_memo: Recent[_IncomingKey, _PerNode[tuple[str, ...]]] = _memo()
        self._incoming_memo: Recent[_TermsKey, _PerNode[tuple[int, tuple[int, ...]]]] = _memo()
        self._preferred_memo: Recent[_PreferredKey, _PerNode[tuple[tuple[str, int], ...]]] = _memo()
        self._preferred_scores: Recent[_PreferredKey, _PreferredScores] = Recent(
            lambda _: _PreferredScores(), capacity=16
        )

    # Namespaces.

    def _namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """A snapshot of the namespace's labels; None (no labels) if it is not cached."""
        found = self._handle.lister(Namespace).get(namespace)
        return dict(found.metadata.labels or {}) if found is not None else None

    def _resolve_namespaces(self, term: AffinityTerm) -> AffinityTerm:
        """Fold an incoming pod's non-empty namespace selector into namespace names, so the
        term can be matched without looking up each existing pod's namespace labels.  An
        empty selector (all namespaces) is kept as it is."""
        selector = term.namespace_selector
        if selector is None or selector.empty:
            return term
        matching = {
            namespace.metadata.name or ""
            for namespace in self._handle.lister(Namespace).list()
            if selector.matches(namespace.metadata.labels or {})
        }
        return dataclasses.replace(
            term, namespaces=term.namespaces | matching, namespace_selector=None
        )

    def _resolve_all(self, terms: Iterable[AffinityTerm]) -> tuple[AffinityTerm, ...]:
        return tuple(self._resolve_namespaces(term) for term in terms)

    def _resolve_weighted(
        self, terms: Iterable[WeightedAffinityTerm]
    ) -> tuple[WeightedAffinityTerm, ...]:
        return tuple(
            WeightedAffinityTerm(self._resolve_namespaces(term.term), term.weight) for term in terms
        )

    # PreFilter and its extensions.

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        namespace = pod.pod.metadata.namespace or ""
        s = _PreFilterState(
            pod=pod.pod,
            affinity=self._resolve_all(pod.required_affinity),
            anti_affinity=self._resolve_all(pod.required_anti_affinity),
            namespace_labels=self._namespace_labels(namespace),
        )
        # Consecutive pods of one workload look the same to these walks, so each node's part is
        # remembered until the node changes (see _PerNode).
        existing_memo = self._existing_memo.get(_incoming_key(pod.pod, s.namespace_labels))
        for node_info in self._handle.snapshot.have_pods_with_required_anti_affinity():
            labels = node_info.labels
            for key in existing_memo.get(node_info, s.existing_topology_keys):
                _add(s.existing_anti_affinity_counts, labels, key, 1)
        if s.affinity or s.anti_affinity:
            incoming_memo = self._incoming_memo.get((s.affinity, s.anti_affinity))
            for node_info in nodes:
                if not node_info.pods:
                    continue
                labels = node_info.labels
                matching_all, matching_each = incoming_memo.get(node_info, s.incoming_matches)
                if matching_all:
                    for term in s.affinity:
                        _add(s.affinity_counts, labels, term.topology_key, matching_all)
                for term, matching in zip(s.anti_affinity, matching_each, strict=True):
                    if matching:
                        _add(s.anti_affinity_counts, labels, term.topology_key, matching)
        elif not s.existing_anti_affinity_counts:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, s)
        return None, SUCCESS

    def pre_filter_extensions(self) -> InterPodAffinity:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        return self._update(state, to_add, node, 1)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        return self._update(state, to_remove, node, -1)

    def _update(self, state: CycleState, info: PodInfo, node: NodeInfo, value: int) -> Status:
        try:
            s = state.read(PRE_FILTER_STATE_KEY, _PreFilterState)
        except (KeyError, TypeError) as error:
            return Status.failed(f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: {error}")
        s.update_with_pod(info, node.node, value)
        return SUCCESS

    # Filter.

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.filter_nodes(state, pod, (node,))[0]

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]:
        """Per node, in upstream's order: the pod's affinity, its anti-affinity, then existing
        pods' anti-affinity; a node passes a check where the counts of its topology pairs
        allow."""
        try:
            s = state.read(PRE_FILTER_STATE_KEY, _PreFilterState)
        except (KeyError, TypeError) as error:
            failed = Status.failed(f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: {error}")
            return [failed] * len(nodes)
        # Affinity: every term's key must be on the node, and pods matching all terms must be
        # in every term's domain -- unless this is the first pod of a group with affinity to
        # itself: nothing matches anywhere yet, and the pod matches its own terms.
        affinity = [
            (term.topology_key, s.affinity_counts.get(term.topology_key, _NO_COUNTS))
            for term in s.affinity
        ]
        first_of_group = not s.affinity_counts and _matches_all(s.affinity, s.pod)
        # Anti-affinity: no matching pod in the domain of any term's key the node has.
        anti_affinity = (
            [
                (term.topology_key, s.anti_affinity_counts.get(term.topology_key, _NO_COUNTS))
                for term in s.anti_affinity
            ]
            if s.anti_affinity_counts
            else []
        )
        existing = list(s.existing_anti_affinity_counts.items())
        statuses: list[Status] = []
        append = statuses.append
        for node_info in nodes:
            labels = node_info.labels
            has_keys = pods_exist = True
            for key, counts in affinity:
                value = labels.get(key)
                if value is None:
                    has_keys = False
                    break
                if counts.get(value, 0) <= 0:
                    pods_exist = False
            if not has_keys or not (pods_exist or first_of_group):
                append(_AFFINITY_NOT_MATCH)
                continue
            status = SUCCESS
            for key, counts in anti_affinity:
                value = labels.get(key)
                if value is not None and counts.get(value, 0) > 0:
                    status = _ANTI_AFFINITY_NOT_MATCH
                    break
            else:
                for key, counts in existing:
                    value = labels.get(key)
                    if value is not None and counts.get(value, 0) > 0:
                        status = _EXISTING_ANTI_AFFINITY_NOT_MATCH
                        break
            append(status)
        return statuses

    # PreScore, Score and NormalizeScore.

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        if not nodes:
            return SKIP
        has_constraints = bool(pod.preferred_affinity or pod.preferred_anti_affinity)
        if self._ignore_preferred_terms_of_existing_pods and not has_constraints:
            return SKIP
        snapshot = self._handle.snapshot
        namespace_labels = self._namespace_labels(pod.pod.metadata.namespace or "")
        walk = _PreferredWalk(
            pod.pod,
            namespace_labels,
            self._resolve_weighted(pod.preferred_affinity),
            self._resolve_weighted(pod.preferred_anti_affinity),
            self._hard_pod_affinity_weight,
        )
        # Like the PreFilter walks, each node's part is remembered until the node changes.
        key = (walk.preferred, walk.preferred_anti, _incoming_key(pod.pod, namespace_labels))
        memo = self._preferred_memo.get(key)
        if has_constraints:
            # Every node with pods counts: the sums kept across cycles apply.
            kept = self._preferred_scores.get(key)
            kept.walk, kept.memo = walk, memo
            kept.sync(snapshot)
            scores = kept.scores
        else:
            scores = {}
            for node_info in snapshot.have_pods_with_affinity():
                labels = node_info.labels
                if not node_info.pods_with_affinity or not labels:
                    continue
                for topology_key, weight in memo.get(node_info, walk.weights):
                    topology_value = labels.get(topology_key)
                    if topology_value is not None:
                        values = scores.setdefault(topology_key, {})
                        values[topology_value] = values.get(topology_value, 0) + weight
        if not scores:
            return SKIP
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(scores))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        scores, status = self.score_nodes(state, pod, (node,))
        return (scores[0] if status.is_success else 0), status

    def score_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[list[int], Status]:
        """The summed weights of each node's topology pairs."""
        try:
            s = state.read(PRE_SCORE_STATE_KEY, _PreScoreState)
        except (KeyError, TypeError) as error:
            return [], Status.failed(f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: {error}")
        # One pass per topology key (usually one), each a lookup per node: a node without the
        # key looks up None, which no domain is.
        labels = [info.labels for info in nodes]
        scores = [0] * len(nodes)
        for key, values in s.topology_score.items():
            get = values.get
            scores = [
                total + get(of_node.get(key), 0)  # type: ignore[arg-type]
                for total, of_node in zip(scores, labels, strict=True)
            ]
        return scores, SUCCESS

    def score_extensions(self) -> InterPodAffinity:
        return self

    def normalize_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[str], scores: list[int]
    ) -> Status:
        """Scale linearly so the lowest score becomes 0 and the highest MAX_NODE_SCORE."""
        try:
            s = state.read(PRE_SCORE_STATE_KEY, _PreScoreState)
        except (KeyError, TypeError) as error:
            return Status.failed(f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: {error}")
        if not s.topology_score or not scores:
            return SUCCESS
        lowest = min(scores)
        spread = max(scores) - lowest
        if spread:
            # Divide before scaling, in floats, as upstream does: 29 of 100 truncates to 28.
            scores[:] = [int(MAX_NODE_SCORE * ((score - lowest) / spread)) for score in scores]
        else:
            scores[:] = [0] * len(scores)
        return SUCCESS

    # Requeueing.

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # An assigned pod that appears may satisfy affinity; one whose labels change or that
            # goes away may stop violating anti-affinity.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.ASSIGNED_POD,
                    ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
                ),
                self._is_schedulable_after_pod_change,
            ),
            # A node with a term's topology key opens a new domain.
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                self._is_schedulable_after_node_change,
            ),
        ]

    @staticmethod
    def _is_schedulable_after_pod_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        original: Pod | None = old
        modified: Pod | None = new
        if any(p is not None and not (p.spec and p.spec.node_name) for p in (original, modified)):
            return QueueingHint.SKIP  # unscheduled pods do not count
        info = PodInfo.of(pod)
        terms, anti_terms = info.required_affinity, info.required_anti_affinity
        if original is not None and modified is not None:
            if not _matches_all(terms, original) and _matches_all(terms, modified):
                return QueueingHint.QUEUE
            if _matches_all(anti_terms, original) and not _matches_all(anti_terms, modified):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if modified is not None:
            return QueueingHint.QUEUE if _matches_all(terms, modified) else QueueingHint.SKIP
        if original is not None and _matches_all(anti_terms, original):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    @staticmethod
    def _is_schedulable_after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        modified: Node | None = new
        labels = node_labels(modified)
        info = PodInfo.of(pod)
        for term in (*info.required_affinity, *info.required_anti_affinity):
            if term.topology_key in labels:
                return QueueingHint.QUEUE
        return QueueingHint.SKIP


def new(args: Mapping[str, Any] | None, handle: Handle) -> InterPodAffinity:
    """``hardPodAffinityWeight`` (0-100, default 1) and
    ``ignorePreferredTermsOfExistingPods`` (default false), as in InterPodAffinityArgs."""
    args = args or {}
    weight = args.get("hardPodAffinityWeight", DEFAULT_HARD_POD_AFFINITY_WEIGHT)
    if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= 100:
        raise ValueError(
            f"hardPodAffinityWeight: Invalid value: {weight}: not in valid range [0-100]"
        )
    return InterPodAffinity(
        handle, weight, bool(args.get("ignorePreferredTermsOfExistingPods", False))
    )
