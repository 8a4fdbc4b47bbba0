"""Node selector terms, as pods' node affinity, persistent volumes' node affinity and
topology spread use them (upstream ``component-helpers/scheduling/corev1/nodeaffinity``).

The scheduler and the DaemonSet controller both decide with these whether a pod may run on a
node, so they live with the object model.  Terms are parsed once into matchers, because
Filter and Score match them against every node.  Parsing follows upstream's two flavours:
*lazy* selectors keep a term that does not parse and let it match nothing (what pods'
required affinity gets, for backwards compatibility), *strict* ones reject it (the
scheduler's own configured affinity, and a pod's preferred terms, whose error fails the
Score).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kube.api import names
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Pod, PreferredSchedulingTerm
from kube.api.kinds.core_v1.volume import NodeSelectorRequirement, NodeSelectorTerm
from kube.api.labels import Operator, Requirement, Selector

OBJECT_NAME_FIELD = "metadata.name"
"""The one node field a ``matchFields`` requirement can select on."""


class NodeSelectorError(ValueError):
    """A node selector term that does not parse (a strict selector's error)."""


_LABEL_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
    "Gt": Operator.GREATER_THAN,
    "Lt": Operator.LESS_THAN,
}


def _int64(text: str) -> bool:
    body = text[1:] if text[:1] in ("+", "-") else text
    return body.isascii() and body.isdigit() and -(2**63) <= int(text) < 2**63


def _label_requirement(requirement: NodeSelectorRequirement, path: str) -> Requirement:
    """Upstream ``labels.NewRequirement`` for a ``matchExpressions`` entry."""
    operator = _LABEL_OPERATORS.get(requirement.operator or "")
    if operator is None:
        raise NodeSelectorError(
            f'{path}.operator: Unsupported value: "{requirement.operator or ""}"'
        )
    key, values = requirement.key or "", tuple(requirement.values or ())
    problems = [f"{path}.key: Invalid value: {key!r}: {p}" for p in names.is_qualified_name(key)]
    if operator in (Operator.IN, Operator.NOT_IN) and not values:
        problems.append(f"{path}.values: for 'in', 'notin' operators, values set can't be empty")
    elif operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        problems.append(f"{path}.values: values set must be empty for exists and does not exist")
    elif operator in (Operator.GREATER_THAN, Operator.LESS_THAN):
        if len(values) != 1:
            problems.append(
                f"{path}.values: for 'Gt', 'Lt' operators, exactly one value is required"
            )
        elif not _int64(values[0]):
            problems.append(
                f"{path}.values[0]: for 'Gt', 'Lt' operators, the value must be an integer"
            )
    for i, value in enumerate(values):
        problems.extend(
            f"{path}.values[{i}]: Invalid value: {value!r}: {p}"
            for p in names.is_valid_label_value(value)
        )
    if problems:
        raise NodeSelectorError("; ".join(problems))
    return Requirement(key, operator, values)


def _field_requirement(requirement: NodeSelectorRequirement, path: str) -> Requirement:
    """A ``matchFields`` entry: In or NotIn with exactly one value."""
    if requirement.operator not in ("In", "NotIn"):
        raise NodeSelectorError(
            f'{path}.operator: Unsupported value: "{requirement.operator or ""}": '
            'supported values: "In", "NotIn"'
        )
    values = tuple(requirement.values or ())
    if len(values) != 1:
        raise NodeSelectorError(
            f"{path}.values: Invalid value: {list(values)}: must have one element"
        )
    operator = Operator.IN if requirement.operator == "In" else Operator.NOT_IN
    return Requirement(requirement.key or "", operator, values)


def _is_empty(term: NodeSelectorTerm) -> bool:
    return not term.match_expressions and not term.match_fields


def _node_fields(node: Node) -> dict[str, str]:
    name = node.metadata.name
    return {OBJECT_NAME_FIELD: name} if name else {}


def _field_matches(requirement: Requirement, fields: Mapping[str, str]) -> bool:
    """Upstream's one-term field selectors: a missing field reads as the empty string."""
    equal = fields.get(requirement.key, "") == requirement.values[0]
    return equal if requirement.operator is Operator.IN else not equal


@dataclass(frozen=True, slots=True)
class ParsedTerm:
    """One node selector term, parsed: its requirements all hold (AND) or it does not match.

    ``error`` is set when the term did not parse; such a term matches no node.
    """

    labels: Selector | None
    fields: tuple[Requirement, ...]
    error: str | None = None

    @classmethod
    def of(cls, term: NodeSelectorTerm, path: str = "nodeSelectorTerms[0]") -> ParsedTerm:
        errors: list[str] = []
        labels: list[Requirement] = []
        fields: list[Requirement] = []
        for i, expression in enumerate(term.match_expressions or ()):
            try:
                labels.append(_label_requirement(expression, f"{path}.matchExpressions[{i}]"))
            except NodeSelectorError as error:
                errors.append(str(error))
        for i, requirement in enumerate(term.match_fields or ()):
            try:
                fields.append(_field_requirement(requirement, f"{path}.matchFields[{i}]"))
            except NodeSelectorError as error:
                errors.append(str(error))
        return cls(
            Selector(tuple(labels)) if term.match_expressions else None,
            tuple(fields),
            "; ".join(errors) or None,
        )

    def matches(self, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
        if self.error is not None:
            return False
        if self.labels is not None and not self.labels.matches(labels):
            return False
        return all(_field_matches(requirement, fields) for requirement in self.fields)


def _parse_terms(terms: Iterable[NodeSelectorTerm] | None) -> tuple[ParsedTerm, ...]:
    """The non-empty terms, parsed (an empty term selects no node, so it is dropped)."""
    return tuple(
        ParsedTerm.of(term, f"nodeSelectorTerms[{i}]")
        for i, term in enumerate(terms or ())
        if not _is_empty(term)
    )


@dataclass(frozen=True, slots=True)
class NodeSelectorMatcher:
    """Node selector terms, of which at least one must match (OR).

    ``lazy`` (upstream ``NewLazyErrorNodeSelector``) keeps terms that do not parse, matching
    nothing; ``strict`` (upstream ``NewNodeSelector``) raises ``NodeSelectorError`` instead.
    No terms at all select no node.
    """

    terms: tuple[ParsedTerm, ...]

    @classmethod
    def lazy(cls, terms: Iterable[NodeSelectorTerm] | None) -> NodeSelectorMatcher:
        return cls(_parse_terms(terms))

    @classmethod
    def strict(cls, terms: Iterable[NodeSelectorTerm] | None) -> NodeSelectorMatcher:
        matcher = cls.lazy(terms)
        errors = [term.error for term in matcher.terms if term.error is not None]
        if errors:
            raise NodeSelectorError("; ".join(errors))
        return matcher

    @property
    def has_errors(self) -> bool:
        """Whether a term did not parse: a failed match may then be the parse's fault."""
        return any(term.error is not None for term in self.terms)

    def matches(self, node: Node) -> bool:
        labels, fields = node.metadata.labels or {}, _node_fields(node)
        return any(term.matches(labels, fields) for term in self.terms)


def node_matches_selector_terms(node: Node, terms: Sequence[NodeSelectorTerm] | None) -> bool:
    """Whether ``node`` matches any of ``terms`` (upstream ``MatchNodeSelectorTerms``; terms
    that do not parse match nothing).  Parses each call: keep a ``NodeSelectorMatcher`` when
    matching many nodes."""
    return NodeSelectorMatcher.lazy(terms).matches(node)


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """A pod's ``nodeSelector`` and required node affinity, which must both hold (upstream
    ``nodeaffinity.GetRequiredNodeAffinity``)."""

    node_selector: Selector | None
    affinity: NodeSelectorMatcher | None

    @classmethod
    def of(cls, pod: Pod) -> RequiredNodeAffinity:
        spec = pod.spec
        node_selector = spec.node_selector if spec else None
        node_affinity = spec.affinity.node_affinity if spec and spec.affinity else None
        required = (
            node_affinity.required_during_scheduling_ignored_during_execution
            if node_affinity
            else None
        )
        return cls(
            Selector(
                tuple(
                    Requirement(key, Operator.EQUALS, (value,))
                    for key, value in node_selector.items()
                )
            )
            if node_selector
            else None,
            NodeSelectorMatcher.lazy(required.node_selector_terms) if required else None,
        )

    def match(self, node: Node) -> tuple[bool, bool]:
        """(whether ``node`` matches, whether a required term that did not parse may be why
        not): upstream's ``Match`` reports that second part as an error."""
        if self.node_selector is not None and not self.node_selector.matches(node.metadata.labels):
            return False, False
        if self.affinity is None:
            return True, False
        matched = self.affinity.matches(node)
        return matched, not matched and self.affinity.has_errors

    def matches(self, node: Node) -> bool:
        return self.match(node)[0]


def pod_matches_node_affinity(pod: Pod, node: Node) -> bool:
    """Whether ``node`` satisfies the pod's ``nodeSelector`` and required node affinity."""
    return RequiredNodeAffinity.of(pod).matches(node)


@dataclass(frozen=True, slots=True)
class PreferredTerms:
    """Weighted preferred terms (upstream ``PreferredSchedulingTerms``); parsed strictly, terms
    with weight 0 or no requirements are dropped."""

    terms: tuple[tuple[ParsedTerm, int], ...]

    @classmethod
    def of(cls, terms: Iterable[PreferredSchedulingTerm]) -> PreferredTerms:
        parsed: list[tuple[ParsedTerm, int]] = []
        errors: list[str] = []
        for i, term in enumerate(terms):
            preference = term.preference
            if not term.weight or preference is None or _is_empty(preference):
                continue
            matcher = ParsedTerm.of(preference, f"[{i}].preference")
            if matcher.error is not None:
                errors.append(matcher.error)
            else:
                parsed.append((matcher, term.weight))
        if errors:
            raise NodeSelectorError("; ".join(errors))
        return cls(tuple(parsed))

    def score(self, node: Node) -> int:
        """The sum of the weights of the terms ``node`` matches."""
        labels, fields = node.metadata.labels or {}, _node_fields(node)
        return sum(weight for term, weight in self.terms if term.matches(labels, fields))
