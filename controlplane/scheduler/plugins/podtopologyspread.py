"""PodTopologySpread: keep pods that match a selector evenly spread over topology domains.

A constraint names a topology key (a node label) and a selector; the *skew* of placing the pod
in a domain is the number of matching pods there, plus one if the pod matches itself, minus the
smallest number in any eligible domain (taken as 0 while there are fewer than ``minDomains``
domains).  ``DoNotSchedule`` constraints are Filter's: a node whose skew would exceed
``maxSkew`` is rejected, and one without the topology label can never pass.  ``ScheduleAnyway``
constraints are Score's: fewer matching pods in the node's domains scores higher.

A pod without constraints of its own gets the cluster defaults from the plugin args, with a
selector deduced from the Services, ReplicationControllers, ReplicaSets and StatefulSets that
select or own it; with ``defaultingType: System`` those are upstream's (hostname, maxSkew 3,
and zone, maxSkew 5, both ScheduleAnyway).

Which nodes are eligible domains follows the constraint's ``nodeAffinityPolicy`` (Honor: only
nodes matching the pod's nodeSelector and required node affinity) and ``nodeTaintsPolicy``
(Honor: only nodes whose NoSchedule/NoExecute taints the pod tolerates), and a node must carry
every constraint's topology key.

PreFilter hands Filter matching pods per domain (Filter then only looks counts up) and keeps
each constraint's minimum exact under preemption's one-pod-at-a-time ``add_pod``/``remove_pod``
with a histogram of how many domains hold each count.  Upstream recounts those per cycle over
every node; here, for the common case (constraints that count every node carrying their keys:
no node affinity or taints to honour), the counts, histograms and domains are kept across
cycles (``_DomainCounts``) and brought up to date from the nodes the snapshot changed since
(a binding, an assumed or deleted pod, a node added, relabelled or removed), so PreFilter
costs the same at 100 nodes and 5,000.  The cycle state shares them until preemption first
changes its copy.  Other pods get the walk over every node.  PreScore counts only domains of
candidate nodes; per-hostname counts are done in Score.  Each node's count for a selector is
remembered until the node changes (``_NodeCounts``), so a walk recounts only the pods of
changed nodes rather than every pod in the cluster.

Filter is a lookup per node and constraint; its cache key names the domains each constraint
rejects (while every constraint has at most ``FEW_DOMAINS``), so the framework reuses a node's
verdict, with the other keyed plugins' in one lookup, while the node and that key are
unchanged: with a zone constraint the rejected zones take a few turns as pods land.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import msgspec

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
from controlplane.scheduler.framework.types import NodeInfo, PodInfo, node_labels
from controlplane.scheduler.plugins.helper import do_not_schedule_taints
from kube.api.kinds.apps_v1 import ReplicaSet, StatefulSet
from kube.api.kinds.core_v1.node import LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE, Node
from kube.api.kinds.core_v1.pod import Pod, ReplicationController, TopologySpreadConstraint
from kube.api.kinds.core_v1.service import Service
from kube.api.labels import Operator, Requirement, Selector, SelectorError, selector_of
from kube.api.meta_v1 import LabelSelector
from kube.api.nodeaffinity import RequiredNodeAffinity
from kube.api.taints import find_untolerated_taint

NAME = names.POD_TOPOLOGY_SPREAD

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME


DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"

SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

SYSTEM_DEFAULT_CONSTRAINTS = (
    TopologySpreadConstraint(
        topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY, max_skew=3
    ),
    TopologySpreadConstraint(
        topology_key=LABEL_TOPOLOGY_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY, max_skew=5
    ),
)

_LABEL_MISSING = Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
_SKEW_EXCEEDED = Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)

FEW_DOMAINS = 16
"""Constraints with at most this many domains name the ones they reject as Filter's cache key."""

_DomainsKey = tuple[str, tuple[tuple[str, Selector], ...]]
"""A namespace and each DoNotSchedule constraint's topology key and selector."""

_NO_DOMAIN = 2**31 - 1
"""The minimum of a constraint no node is eligible for (never read: minDomains makes it 0)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Constraint:
    """A topology spread constraint with its selector parsed and its defaults applied."""

    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int
    honor_node_affinity: bool
    honor_node_taints: bool


class _NodeCounts:
    """How many pods on each node a selector matches in one namespace (upstream
    ``countPodsMatchSelector``: same namespace, not terminating; a selector without
    requirements counts nothing, as upstream's ``selector.Empty()`` check does).

    Counts are kept across cycles and trusted while the NodeInfo's ``generation`` is the one
    they were computed at: every pod added to or removed from a node (an update is both)
    bumps it.  Consecutive pods of one workload share a selector, so a cycle recounts only
    the nodes that changed since the last, instead of every pod in the cluster.
    """

    __slots__ = ("_by_node", "_namespace", "_selector")

    def __init__(self, namespace: str, selector: Selector) -> None:
        self._namespace = namespace
        self._selector = selector
        self._by_node: dict[str, tuple[int, int]] = {}

    def __call__(self, node: NodeInfo) -> int:
        if not node.pods or self._selector.empty:
            return 0
        cached = self._by_node.get(node.name)
        if cached is not None and cached[0] == node.generation:
            return cached[1]
        namespace, selector = self._namespace, self._selector
        count = 0
        for info in node.pods:
            metadata = info.pod.metadata
            if (
                metadata.namespace == namespace
                and metadata.deletion_timestamp is None
                and selector.matches(metadata.labels)
            ):
                count += 1
        self._by_node[node.name] = (node.generation, count)
        return count


_Part = tuple[tuple[str, ...], tuple[int, ...]]
"""A node's domain and matching pods, per constraint."""


class _DomainCounts(NodeParts[_Part]):
    """Matching pods per topology domain for a pod's DoNotSchedule constraints, kept across
    cycles (upstream recounts them over every node in each PreFilter).

    Per constraint: ``counts`` (domain -> matching pods, a domain present while some node
    carrying every constraint's key is in it), ``histogram`` (count -> how many domains hold
    it, so the minimum is the smallest key) and how many nodes each domain has.  A node's
    part is its domain and its matching pods per constraint; ``sync`` (``NodeParts``) takes
    out and puts back the parts of the nodes the snapshot changed, so a pod bound, assumed or
    deleted, and a node added, relabelled or removed, costs one node's recount, whatever the
    number of nodes.  Only for pods whose constraints count every node (no node affinity or
    taints to honour).
    """

    def __init__(self, keys: tuple[str, ...], counters: tuple[_NodeCounts, ...]) -> None:
        super().__init__()
        self._keys = keys
        self._required = frozenset(keys)
        self._counters = counters
        self.counts: list[dict[str, int]] = [{} for _ in keys]
        self.histogram: list[dict[int, int]] = [{} for _ in keys]
        self.nodes: list[dict[str, int]] = [{} for _ in keys]

    def part(self, info: NodeInfo) -> _Part | None:
        labels = info.labels
        if not labels or not labels.keys() >= self._required:
            return None
        return (
            tuple(labels[key] for key in self._keys),
            tuple(counter(info) for counter in self._counters),
        )

    def clear(self) -> None:
        for per_constraint in (self.counts, self.histogram, self.nodes):
            for table in per_constraint:
                table.clear()

    def apply(self, part: _Part, sign: int) -> None:
        for i, (value, count) in enumerate(zip(*part, strict=True)):
            self._move(i, value, sign, sign * count)

    def _move(self, i: int, value: str, nodes_delta: int, count_delta: int) -> None:
        nodes, counts, histogram = self.nodes[i], self.counts[i], self.histogram[i]
        before = counts.get(value)
        if before is not None:
            left = histogram[before] - 1
            if left:
                histogram[before] = left
            else:
                del histogram[before]
        members = nodes.get(value, 0) + nodes_delta
        if members == 0:
            del nodes[value], counts[value]
            return
        nodes[value] = members
        after = counts[value] = (before or 0) + count_delta
        histogram[after] = histogram.get(after, 0) + 1


class _Eligibility:
    """Whether a node is an eligible domain of each constraint under its inclusion policies.

    The node affinity and taint checks run once per node, and only when some constraint
    honours them and the pod has something to check.
    """

    def __init__(self, pod: Pod, constraints: Sequence[_Constraint]) -> None:
        spec = pod.spec
        affinity = RequiredNodeAffinity.of(pod)
        self._affinity = (
            affinity
            if any(c.honor_node_affinity for c in constraints)
            and (affinity.node_selector is not None or affinity.affinity is not None)
            else None
        )
        self._tolerations = spec.tolerations if spec else None
        self._check_taints = any(c.honor_node_taints for c in constraints)
        self._constraints = constraints
        self._all = [True] * len(constraints)
        self.always = self._all if self._affinity is None and not self._check_taints else None
        """``per_constraint``'s answer for every node when nothing depends on the node."""

    def per_constraint(self, node: Node) -> list[bool]:
        affinity_ok = self._affinity is None or self._affinity.matches(node)
        taints_ok = not self._check_taints or (
            find_untolerated_taint(
                node.spec.taints if node.spec else None,
                self._tolerations,
                do_not_schedule_taints,
            )
            is None
        )
        if affinity_ok and taints_ok:
            return self._all
        return [
            (affinity_ok or not c.honor_node_affinity) and (taints_ok or not c.honor_node_taints)
            for c in self._constraints
        ]


def _has_all_keys(labels: Mapping[str, str], constraints: Iterable[_Constraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


def _merge_match_labels(selector: Selector, match_labels: Mapping[str, str]) -> Selector:
    """``matchLabelKeys``: the pod's values for those keys join the selector (a selector that
    matches nothing stays so)."""
    if not match_labels or selector.matches_nothing:
        return selector
    extra = tuple(
        Requirement(key, Operator.EQUALS, (value,)) for key, value in sorted(match_labels.items())
    )
    return Selector(extra + selector.requirements)


def _convert(constraint: TopologySpreadConstraint | Mapping[str, Any]) -> TopologySpreadConstraint:
    if isinstance(constraint, TopologySpreadConstraint):
        return constraint
    return msgspec.convert(constraint, TopologySpreadConstraint)


@dataclasses.dataclass(slots=True)
class _PreFilterState:
    """Per DoNotSchedule constraint: matching pods per domain, and its exact minimum kept with
    a histogram (domains holding each count) under one-pod updates."""

    constraints: tuple[_Constraint, ...]
    self_match: tuple[bool, ...]
    match_counts: list[dict[str, int]]
    domains_at_count: list[dict[int, int]]
    min_match: list[int]
    shared: bool = False
    """The counts are ``_DomainCounts``' own: copied before the first update."""

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            self.constraints,
            self.self_match,
            [dict(counts) for counts in self.match_counts],
            [dict(histogram) for histogram in self.domains_at_count],
            list(self.min_match),
        )

    def min_match_num(self, i: int) -> int:
        """The global minimum, 0 while fewer domains than minDomains are eligible."""
        if len(self.match_counts[i]) < self.constraints[i].min_domains:
            return 0
        return self.min_match[i]

    def most(self, i: int) -> int:
        """The most matching pods a domain may hold for a node in it to pass constraint
        ``i``: skew = matching pods in the domain + self match - global minimum."""
        return self.constraints[i].max_skew - self.self_match[i] + self.min_match_num(i)

    def update(self, i: int, value: str, delta: int) -> None:
        if self.shared:
            self.match_counts = [dict(counts) for counts in self.match_counts]
            self.domains_at_count = [dict(histogram) for histogram in self.domains_at_count]
            self.shared = False
        counts, histogram = self.match_counts[i], self.domains_at_count[i]
        old = counts.get(value, 0)
        new = old + delta
        counts[value] = new
        remaining = histogram.get(old, 0) - 1
        if remaining > 0:
            histogram[old] = remaining
        else:
            histogram.pop(old, None)
        histogram[new] = histogram.get(new, 0) + 1
        if new < self.min_match[i] or (old == self.min_match[i] and old not in histogram):
            # Below the minimum, or the last domain at the minimum moved one up.
            self.min_match[i] = new


@dataclasses.dataclass(slots=True)
class _PreScoreState:
    constraints: tuple[_Constraint, ...]
    counters: list[_NodeCounts]
    ignored_nodes: set[str]
    """Candidate nodes lacking a topology key: they score 0."""
    pod_counts: list[dict[str, int]]
    """Per constraint, matching pods per domain of a candidate node (not for hostname)."""
    weights: list[float]

    def clone(self) -> _PreScoreState:
        return self  # read-only after PreScore


def _topology_normalizing_weight(size: int) -> float:
    """Domains of smaller topologies weigh less, so many-domain topologies (hostname) are not
    watered down by few-domain ones (zone)."""
    return math.log(size + 2)


class PodTopologySpread:
    NAME: ClassVar[str] = names.POD_TOPOLOGY_SPREAD

    def __init__(
        self,
        handle: Handle,
        default_constraints: Sequence[TopologySpreadConstraint],
        system_defaulted: bool,
    ) -> None:
        self._handle = handle
        self._default_constraints = tuple(default_constraints)
        self._system_defaulted = system_defaulted
        self._counts: Recent[tuple[str, Selector], _NodeCounts] = Recent(
            lambda key: _NodeCounts(*key), capacity=64
        )
        self._domains: Recent[_DomainsKey, _DomainCounts] = Recent(
            self._new_domain_counts, capacity=16
        )

    # Constraints.

    def _constraints(self, pod: Pod, action: str) -> tuple[_Constraint, ...]:
        """The pod's constraints for ``action``, or the defaults if it has none of any kind.

        Raises SelectorError for a label selector that does not parse.
        """
        spec = pod.spec
        if spec is not None and spec.topology_spread_constraints:
            return self._filter(spec.topology_spread_constraints, pod.metadata.labels, action)
        constraints = self._filter(self._default_constraints, pod.metadata.labels, action)
        if not constraints:
            return ()
        selector = self._default_selector(pod)
        if selector.empty:
            return ()
        return tuple(dataclasses.replace(c, selector=selector) for c in constraints)

    @staticmethod
    def _filter(
        constraints: Iterable[TopologySpreadConstraint],
        pod_labels: Mapping[str, str] | None,
        action: str,
    ) -> tuple[_Constraint, ...]:
        labels = pod_labels or {}
        result = []
        for c in constraints:
            if c.when_unsatisfiable != action:
                continue
            selector = _merge_match_labels(
                selector_of(c.label_selector),
                {key: labels[key] for key in c.match_label_keys or () if key in labels},
            )
            result.append(
                _Constraint(
                    max_skew=c.max_skew or 0,
                    topology_key=c.topology_key or "",
                    selector=selector,
                    min_domains=c.min_domains if c.min_domains is not None else 1,
                    honor_node_affinity=(c.node_affinity_policy or HONOR) == HONOR,
                    honor_node_taints=(c.node_taints_policy or IGNORE) == HONOR,
                )
            )
        return tuple(result)

    def _default_selector(self, pod: Pod) -> Selector:
        """The selector of the Services, ReplicationController, ReplicaSet or StatefulSet that
        select or control the pod (upstream ``helper.DefaultSelector``)."""
        namespace = pod.metadata.namespace or ""
        pod_labels = pod.metadata.labels or {}
        label_set: dict[str, str] = {}
        for service in self._handle.lister(Service).list(namespace):
            selector = service.spec.selector if service.spec else None
            if selector is not None and all(pod_labels.get(k) == v for k, v in selector.items()):
                label_set.update(selector)
        owner = next((o for o in pod.metadata.owner_references or () if o.controller), None)
        if owner is not None:
            key = f"{namespace}/{owner.name}"
            match owner.api_version, owner.kind:
                case "v1", "ReplicationController":
                    controller = self._handle.lister(ReplicationController).get(key)
                    if controller is not None and controller.spec is not None:
                        label_set.update(controller.spec.selector or {})
                case "apps/v1", "ReplicaSet":
                    replica_set = self._handle.lister(ReplicaSet).get(key)
                    if replica_set is not None and replica_set.spec is not None:
                        return _with_requirements(label_set, replica_set.spec.selector)
                case "apps/v1", "StatefulSet":
                    stateful_set = self._handle.lister(StatefulSet).get(key)
                    if stateful_set is not None and stateful_set.spec is not None:
                        return _with_requirements(label_set, stateful_set.spec.selector)
        return _with_requirements(label_set, None)

    # PreFilter and its extensions.

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        try:
            constraints = self._constraints(pod.pod, DO_NOT_SCHEDULE)
        except SelectorError as error:
            return None, Status.failed(f"get constraints from pod: {error}")
        if not constraints:
            return None, SKIP
        namespace = pod.pod.metadata.namespace or ""
        eligibility = _Eligibility(pod.pod, constraints)
        if eligibility.always is not None:
            # Every node carrying the keys counts: the counts kept across cycles apply.
            domains = self._domains.get(
                (namespace, tuple((c.topology_key, c.selector) for c in constraints))
            )
            domains.sync(self._handle.snapshot)
            match_counts, histograms, shared = domains.counts, domains.histogram, True
        else:
            match_counts, histograms = self._count_eligible(
                namespace, constraints, eligibility, nodes
            )
            shared = False
        pod_labels = pod.pod.metadata.labels
        state.write(
            PRE_FILTER_STATE_KEY,
            _PreFilterState(
                constraints,
                tuple(c.selector.matches(pod_labels) for c in constraints),
                match_counts,
                histograms,
                [min(h, default=_NO_DOMAIN) for h in histograms],
                shared,
            ),
        )
        return None, SUCCESS

    def _new_domain_counts(self, key: _DomainsKey) -> _DomainCounts:
        namespace, constraints = key
        return _DomainCounts(
            tuple(topology_key for topology_key, _ in constraints),
            tuple(self._counts.get((namespace, selector)) for _, selector in constraints),
        )

    def _count_eligible(
        self,
        namespace: str,
        constraints: tuple[_Constraint, ...],
        eligibility: _Eligibility,
        nodes: list[NodeInfo],
    ) -> tuple[list[dict[str, int]], list[dict[int, int]]]:
        """Matching pods per domain over the nodes eligible under the pod's inclusion
        policies, and the histograms of those counts: a walk over every node."""
        match_counts: list[dict[str, int]] = [{} for _ in constraints]
        counters = [self._counts.get((namespace, c.selector)) for c in constraints]
        # Per node, only lookups (and a count of its pods when it has any and changed since
        # it was last counted).
        per_constraint = tuple(
            zip((c.topology_key for c in constraints), counters, match_counts, strict=True)
        )
        keys = frozenset(c.topology_key for c in constraints)
        for node_info in nodes:
            node = node_info.node
            if node is None:
                continue
            labels = node.metadata.labels
            if not labels or not labels.keys() >= keys:
                continue
            included = tuple(
                entry
                for entry, eligible in zip(
                    per_constraint, eligibility.per_constraint(node), strict=True
                )
                if eligible
            )
            pods = node_info.pods
            for key, counter, counts in included:
                value = labels[key]
                counts[value] = counts.get(value, 0) + (counter(node_info) if pods else 0)
        histograms: list[dict[int, int]] = []
        for counts in match_counts:
            histogram: dict[int, int] = {}
            for count in counts.values():
                histogram[count] = histogram.get(count, 0) + 1
            histograms.append(histogram)
        return match_counts, histograms

    def pre_filter_extensions(self) -> PodTopologySpread:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        return self._update(state, pod, to_add, node, 1)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        return self._update(state, pod, to_remove, node, -1)

    def _update(
        self, state: CycleState, pod: PodInfo, changed: PodInfo, node_info: NodeInfo, delta: int
    ) -> Status:
        try:
            s = state.read(PRE_FILTER_STATE_KEY, _PreFilterState)
        except (KeyError, TypeError) as error:
            return Status.failed(f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: {error}")
        node = node_info.node
        labels = node_labels(node)
        if (
            node is None
            or changed.pod.metadata.namespace != pod.pod.metadata.namespace
            or not _has_all_keys(labels, s.constraints)
        ):
            return SUCCESS
        changed_labels = changed.pod.metadata.labels
        eligible = _Eligibility(pod.pod, s.constraints).per_constraint(node)
        for i, c in enumerate(s.constraints):
            if eligible[i] and c.selector.matches(changed_labels):
                s.update(i, labels[c.topology_key], delta)
        return SUCCESS

    # Filter.

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.filter_nodes(state, pod, (node,))[0]

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]:
        try:
            s = state.read(PRE_FILTER_STATE_KEY, _PreFilterState)
        except (KeyError, TypeError) as error:
            failed = Status.failed(f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: {error}")
            return [failed] * len(nodes)
        checks = [
            (c.topology_key, s.match_counts[i], s.most(i)) for i, c in enumerate(s.constraints)
        ]
        labels_by_node = [info.labels for info in nodes]
        # Constraint by constraint; a node keeps the first rejection.
        statuses: list[Status] = [SUCCESS] * len(nodes)
        for key, counts, most in checks:
            statuses = [
                status
                if status is not SUCCESS
                else _LABEL_MISSING
                if (value := labels.get(key)) is None
                else _SKEW_EXCEEDED
                if counts.get(value, 0) > most
                else SUCCESS
                for status, labels in zip(statuses, labels_by_node, strict=True)
            ]
        return statuses

    def filter_cache_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """Each constraint's topology key and the domains it rejects: with those, a node's
        verdict depends only on its labels.  None (nothing reused) while some constraint has
        more than ``FEW_DOMAINS`` domains: listing them would cost more than judging nodes."""
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState) or any(
            len(counts) > FEW_DOMAINS for counts in s.match_counts
        ):
            return None
        return tuple(
            (c.topology_key, frozenset(v for v, n in s.match_counts[i].items() if n > s.most(i)))
            for i, c in enumerate(s.constraints)
        )

    # PreScore, Score and NormalizeScore.

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        all_nodes = self._handle.snapshot.list()
        if not all_nodes:
            return SKIP
        try:
            constraints = self._constraints(pod.pod, SCHEDULE_ANYWAY)
        except SelectorError as error:
            return Status.failed(f"calculating preScoreState: {error}")
        if not constraints:
            return SKIP
        spec = pod.pod.spec
        # Only the system defaults let nodes without a zone label still spread by hostname.
        require_all = bool(spec and spec.topology_spread_constraints) or not self._system_defaulted
        namespace = pod.pod.metadata.namespace or ""
        s = _PreScoreState(
            constraints,
            [self._counts.get((namespace, c.selector)) for c in constraints],
            set(),
            [{} for _ in constraints],
            [],
        )
        for node_info in nodes:
            labels = node_info.labels
            if require_all and not _has_all_keys(labels, constraints):
                s.ignored_nodes.add(node_info.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key != LABEL_HOSTNAME:
                    s.pod_counts[i].setdefault(labels.get(c.topology_key, ""), 0)
        candidates = len(nodes) - len(s.ignored_nodes)
        s.weights = [
            _topology_normalizing_weight(
                candidates if c.topology_key == LABEL_HOSTNAME else len(s.pod_counts[i])
            )
            for i, c in enumerate(constraints)
        ]
        eligibility = _Eligibility(pod.pod, constraints)
        for node_info in all_nodes:
            node = node_info.node
            labels = node_labels(node)
            if node is None or not node_info.pods:
                continue
            if require_all and not _has_all_keys(labels, constraints):
                continue
            for i, eligible in enumerate(eligibility.per_constraint(node)):
                counts = s.pod_counts[i]
                value = labels.get(constraints[i].topology_key, "")
                if eligible and value in counts:
                    counts[value] += s.counters[i](node_info)
        state.write(PRE_SCORE_STATE_KEY, s)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        scores, status = self.score_nodes(state, pod, (node,))
        return (scores[0] if status.is_success else 0), status

    def score_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[list[int], Status]:
        """The weighted matching pods in each node's domains (lower is better, so normalizing
        reverses it)."""
        try:
            s = state.read(PRE_SCORE_STATE_KEY, _PreScoreState)
        except (KeyError, TypeError) as error:
            return [], Status.failed(f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: {error}")
        ignored = s.ignored_nodes
        # Hostname domains are single nodes: their counts come from the node itself.
        # maxSkew - 1 waters down differences between domains: tolerance to skew.
        terms = [
            (
                c.topology_key,
                s.counters[i] if c.topology_key == LABEL_HOSTNAME else None,
                s.pod_counts[i],
                s.weights[i],
                c.max_skew - 1,
            )
            for i, c in enumerate(s.constraints)
        ]
        floor = math.floor
        scores: list[int] = []
        append = scores.append
        for node_info in nodes:
            if node_info.name in ignored:
                append(0)
                continue
            labels = node_info.labels
            total = 0.0
            for key, counter, domain_counts, weight, tolerance in terms:
                value = labels.get(key)
                if value is None:
                    continue
                count = counter(node_info) if counter is not None else domain_counts.get(value, 0)
                total += count * weight + tolerance
            append(floor(total + 0.5))
        return scores, SUCCESS

    def score_extensions(self) -> PodTopologySpread:
        return self

    def normalize_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[str], scores: list[int]
    ) -> Status:
        """Reverse and scale: the fewest matching pods gets MAX_NODE_SCORE; ignored nodes 0."""
        try:
            s = state.read(PRE_SCORE_STATE_KEY, _PreScoreState)
        except (KeyError, TypeError) as error:
            return Status.failed(f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: {error}")
        ignored = s.ignored_nodes
        counted = [score for name, score in zip(nodes, scores, strict=True) if name not in ignored]
        lowest, highest = min(counted, default=0), max(counted, default=0)
        if highest == 0:
            scores[:] = [0 if name in ignored else MAX_NODE_SCORE for name in nodes]
        else:
            scores[:] = [
                0 if name in ignored else MAX_NODE_SCORE * (highest + lowest - score) // highest
                for name, score in zip(nodes, scores, strict=True)
            ]
        return SUCCESS

    # Requeueing.

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # An assigned pod that appears, changes labels or goes away changes the counts; the
            # rejected pod gaining a toleration may make tainted nodes eligible domains.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.POD,
                    ActionType.ADD
                    | ActionType.UPDATE_POD_LABEL
                    | ActionType.UPDATE_POD_TOLERATION
                    | ActionType.DELETE,
                ),
                self._is_schedulable_after_pod_change,
            ),
            # Nodes bring, take away or move domains.
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD
                    | ActionType.DELETE
                    | ActionType.UPDATE_NODE_LABEL
                    | ActionType.UPDATE_NODE_TAINT,
                ),
                self._is_schedulable_after_node_change,
            ),
        ]

    def _is_schedulable_after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        original: Pod | None = old
        modified: Pod | None = new
        if any(p is not None and not _involved(p, pod) for p in (original, modified)):
            return QueueingHint.SKIP
        try:
            constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError:
            return QueueingHint.QUEUE
        if original is not None and modified is not None:
            if (
                pod.metadata.uid == modified.metadata.uid
                and _tolerations(original) != _tolerations(modified)
                and any(c.honor_node_taints for c in constraints)
            ):
                return QueueingHint.QUEUE
            before, after = original.metadata.labels, modified.metadata.labels
            if (before or {}) == (after or {}):
                return QueueingHint.SKIP
            changed = any(
                c.selector.matches(before) != c.selector.matches(after) for c in constraints
            )
            return QueueingHint.QUEUE if changed else QueueingHint.SKIP
        subject = modified if modified is not None else original
        if subject is not None and any(
            c.selector.matches(subject.metadata.labels) for c in constraints
        ):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def _is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        original: Node | None = old
        modified: Node | None = new
        try:
            constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError:
            return QueueingHint.QUEUE
        original_matching = original is not None and _has_all_keys(
            node_labels(original), constraints
        )
        modified_matching = modified is not None and _has_all_keys(
            node_labels(modified), constraints
        )
        if original is not None and modified is not None:
            if original_matching != modified_matching:
                return QueueingHint.QUEUE
            before, after = node_labels(original), node_labels(modified)
            moved = any(
                before.get(c.topology_key) != after.get(c.topology_key) for c in constraints
            )
            if modified_matching and (moved or _taints(original) != _taints(modified)):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        matching = modified_matching if modified is not None else original_matching
        return QueueingHint.QUEUE if matching else QueueingHint.SKIP


def _with_requirements(label_set: Mapping[str, str], selector: LabelSelector | None) -> Selector:
    """The selector of ``label_set`` plus the requirements of a workload's label selector
    (one that does not parse, or selects nothing, adds none)."""
    requirements = [
        Requirement(key, Operator.EQUALS, (value,)) for key, value in sorted(label_set.items())
    ]
    if selector is not None:
        try:
            parsed = selector_of(selector)
        except SelectorError:
            parsed = Selector.nothing()
        if not parsed.matches_nothing:
            requirements.extend(parsed.requirements)
    return Selector(tuple(requirements))


def _involved(changed: Pod, pod: Pod) -> bool:
    """Whether ``changed`` can affect ``pod``'s spreading: it is the pod itself, or a
    scheduled pod in its namespace."""
    return changed.metadata.uid == pod.metadata.uid or bool(
        changed.spec
        and changed.spec.node_name
        and changed.metadata.namespace == pod.metadata.namespace
    )


def _tolerations(pod: Pod) -> list[Any]:
    return list(pod.spec.tolerations or ()) if pod.spec else []


def _taints(node: Node) -> list[Any]:
    return list(node.spec.taints or ()) if node.spec else []


def new(args: Mapping[str, Any] | None, handle: Handle) -> PodTopologySpread:
    """``defaultingType`` (System, the default, or List) and ``defaultConstraints`` (only with
    List; no label selectors, they are deduced per pod), as in PodTopologySpreadArgs."""
    args = args or {}
    defaulting = args.get("defaultingType") or SYSTEM_DEFAULTING
    constraints = [_convert(c) for c in args.get("defaultConstraints") or ()]
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        raise ValueError(
            f'defaultingType: Unsupported value: "{defaulting}": '
            f'supported values: "{LIST_DEFAULTING}", "{SYSTEM_DEFAULTING}"'
        )
    if defaulting == SYSTEM_DEFAULTING and constraints:
        raise ValueError(
            'defaultingType: Invalid value: "System": when .defaultConstraints are not empty'
        )
    _validate_default_constraints(constraints)
    if defaulting == SYSTEM_DEFAULTING:
        return PodTopologySpread(handle, SYSTEM_DEFAULT_CONSTRAINTS, system_defaulted=True)
    return PodTopologySpread(handle, constraints, system_defaulted=False)


def _validate_default_constraints(constraints: Sequence[TopologySpreadConstraint]) -> None:
    seen: set[tuple[str | None, str | None]] = set()
    for i, c in enumerate(constraints):
        path = f"defaultConstraints[{i}]"
        if not c.max_skew or c.max_skew <= 0:
            raise ValueError(
                f"{path}.maxSkew: Invalid value: {c.max_skew}: must be greater than zero"
            )
        if not c.topology_key:
            raise ValueError(f"{path}.topologyKey: Required value: can not be empty")
        if c.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ValueError(
                f'{path}.whenUnsatisfiable: Unsupported value: "{c.when_unsatisfiable or ""}": '
                f'supported values: "{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'
            )
        if c.label_selector is not None:
            raise ValueError(
                f"{path}.labelSelector: Forbidden: constraint must not define a selector, "
                "as they deduced for each pod"
            )
        pair = (c.topology_key, c.when_unsatisfiable)
        if pair in seen:
            raise ValueError(
                f"{path}: Duplicate value: {{{c.topology_key}, {c.when_unsatisfiable}}}"
            )
        seen.add(pair)
