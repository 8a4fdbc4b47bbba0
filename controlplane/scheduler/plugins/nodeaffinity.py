"""NodeAffinity: a pod fits a node only if the node's labels satisfy its ``nodeSelector`` and
its required node affinity, and nodes matching its preferred terms score higher (upstream
``nodeaffinity``).

Required terms are ORed, the requirements inside a term ANDed.  PreFilter parses them once per
pod and, when every term pins ``metadata.name`` with ``In``, tells the framework the only
candidate nodes, so Filter does not even run elsewhere.  The plugin's ``addedAffinity`` arg is
affinity the scheduler imposes on every pod (a profile for one set of nodes): its required part
filters, its preferred terms add to every pod's score.

Filter and Score run for every node, so the batch forms (``filter_nodes``, ``score_nodes``)
are the implementation and the one-node forms delegate to them: what the pod requires or
prefers is looked up once per batch, and the rejections are built once.  Pods that neither
require nor prefer anything never get here: PreFilter and PreScore skip them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

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
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins.helper import default_normalize_score
from kube.api.codec import from_builtins
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import NodeAffinity as NodeAffinitySpec
from kube.api.kinds.core_v1.pod import Pod
from kube.api.nodeaffinity import (
    OBJECT_NAME_FIELD,
    NodeSelectorError,
    NodeSelectorMatcher,
    PreferredTerms,
    RequiredNodeAffinity,
)

PRE_FILTER_STATE_KEY = "PreFilter" + names.NODE_AFFINITY
PRE_SCORE_STATE_KEY = "PreScore" + names.NODE_AFFINITY
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

_POD_MISMATCH = Status.unresolvable(ERR_REASON_POD)
_ENFORCED_MISMATCH = Status.unresolvable(ERR_REASON_ENFORCED)
_NODE_NOT_FOUND = Status.failed("node not found")


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    required: RequiredNodeAffinity


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    preferred: PreferredTerms | None


def _node_affinity(pod: Pod) -> NodeAffinitySpec | None:
    spec = pod.spec
    return spec.affinity.node_affinity if spec and spec.affinity else None


def _preferred_terms(pod: Pod) -> PreferredTerms | None:
    """The pod's preferred terms; raises NodeSelectorError if one does not parse."""
    affinity = _node_affinity(pod)
    terms = affinity.preferred_during_scheduling_ignored_during_execution if affinity else None
    return PreferredTerms.of(terms) if terms is not None else None


def _node_names(pod: Pod) -> frozenset[str] | None:
    """The only nodes the required terms allow by name, or None when a term does not pin
    names (terms are ORed, so one such term lets every node through)."""
    affinity = _node_affinity(pod)
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    terms = required.node_selector_terms if required else None
    if not terms:
        return None
    allowed: set[str] = set()
    for term in terms:
        pinned: set[str] | None = None
        for requirement in term.match_fields or ():
            if requirement.key == OBJECT_NAME_FIELD and requirement.operator == "In":
                values = set(requirement.values or ())
                pinned = values if pinned is None else pinned & values
        if pinned is None:
            return None
        allowed |= pinned
    return frozenset(allowed)


class NodeAffinity:
    NAME: ClassVar[str] = names.NODE_AFFINITY

    def __init__(
        self,
        added_selector: NodeSelectorMatcher | None = None,
        added_preferred: PreferredTerms | None = None,
    ) -> None:
        self._added_selector = added_selector
        self._added_preferred = added_preferred

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        affinity = _node_affinity(pod.pod)
        has_required = (
            affinity is not None
            and affinity.required_during_scheduling_ignored_during_execution is not None
        )
        node_selector = pod.pod.spec.node_selector if pod.pod.spec else None
        if not has_required and self._added_selector is None and node_selector is None:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(RequiredNodeAffinity.of(pod.pod)))
        allowed = _node_names(pod.pod)
        if allowed is None:
            return None, SUCCESS
        if not allowed:
            return None, Status.unresolvable(ERR_REASON_CONFLICT)
        return PreFilterResult(allowed), SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.filter_nodes(state, pod, (node,))[0]

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]:
        prepared = state.get(PRE_FILTER_STATE_KEY)
        # Without PreFilter (disabled in the profile), parse here.
        required = (
            prepared.required
            if isinstance(prepared, _PreFilterState)
            else RequiredNodeAffinity.of(pod.pod)
        )
        matches_pod = required.matches
        added = self._added_selector
        matches_added = added.matches if added is not None else None
        statuses: list[Status] = []
        append = statuses.append
        for info in nodes:
            node = info.node
            if node is None:
                append(_NODE_NOT_FOUND)
            elif matches_added is not None and not matches_added(node):
                append(_ENFORCED_MISMATCH)
            elif not matches_pod(node):
                append(_POD_MISMATCH)
            else:
                append(SUCCESS)
        return statuses

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        try:
            preferred = _preferred_terms(pod.pod)
        except NodeSelectorError as error:
            return Status.failed(error)
        if preferred is None and self._added_preferred is None:
            return SKIP
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(preferred))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        scores, status = self.score_nodes(state, pod, (node,))
        return (scores[0] if scores else 0), status

    def score_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[list[int], Status]:
        prepared = state.get(PRE_SCORE_STATE_KEY)
        if isinstance(prepared, _PreScoreState):
            preferred = prepared.preferred
        else:
            # Without PreScore (disabled in the profile), parse here.
            try:
                preferred = _preferred_terms(pod.pod)
            except NodeSelectorError as error:
                return [], Status.failed(error)
        added = self._added_preferred
        score_added = added.score if added is not None else None
        score_pod = preferred.score if preferred is not None else None
        scores: list[int] = []
        append = scores.append
        for info in nodes:
            node = info.node
            if node is None:
                return [], _NODE_NOT_FOUND
            total = score_added(node) if score_added is not None else 0
            if score_pod is not None:
                total += score_pod(node)
            append(total)
        return scores, SUCCESS

    def score_extensions(self) -> NodeAffinity:
        return self

    def normalize_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[str], scores: list[int]
    ) -> Status:
        return default_normalize_score(MAX_NODE_SCORE, False, scores)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                self._is_schedulable_after_node_change,
            )
        ]

    def _is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A node was added that matches, or an update made a node match."""
        if not isinstance(new, Node):
            return QueueingHint.QUEUE
        if self._added_selector is not None and not self._added_selector.matches(new):
            return QueueingHint.SKIP
        required = RequiredNodeAffinity.of(pod)
        matched, parse_error = required.match(new)
        if parse_error:
            return QueueingHint.QUEUE
        if not matched:
            return QueueingHint.SKIP
        if not isinstance(old, Node):
            return QueueingHint.QUEUE
        was_matched, parse_error = required.match(old)
        return QueueingHint.QUEUE if parse_error or not was_matched else QueueingHint.SKIP


def _added_affinity(args: Mapping[str, Any] | None) -> NodeAffinitySpec | None:
    raw = (args or {}).get("addedAffinity")
    if raw is None or isinstance(raw, NodeAffinitySpec):
        return raw
    return from_builtins(raw, NodeAffinitySpec).obj


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeAffinity:
    """The plugin with its ``addedAffinity`` arg parsed strictly; ValueError if it does not
    parse."""
    added = _added_affinity(args)
    if added is None:
        return NodeAffinity()
    selector = preferred = None
    required = added.required_during_scheduling_ignored_during_execution
    if required is not None:
        try:
            selector = NodeSelectorMatcher.strict(required.node_selector_terms)
        except NodeSelectorError as error:
            raise ValueError(
                f"parsing addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: {error}"
            ) from None
    terms = added.preferred_during_scheduling_ignored_during_execution
    if terms:
        try:
            preferred = PreferredTerms.of(terms)
        except NodeSelectorError as error:
            raise ValueError(
                f"parsing addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: {error}"
            ) from None
    return NodeAffinity(selector, preferred)
