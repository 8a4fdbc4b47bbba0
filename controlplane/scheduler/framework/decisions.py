"""What a scheduling cycle decided about each node, for ``kubelab scheduler explain`` and the
scheduler's own choice: every node's Filter verdict, and every score plugin's raw, normalized
and weighted score (kept as one list per plugin: scoring is the hot path, and the per-node
view is built only when someone asks why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from controlplane.scheduler.framework.interface import SUCCESS, Status
from controlplane.scheduler.framework.types import NodeInfo


class ScoreBreakdown(NamedTuple):
    raw: int
    normalized: int
    weighted: int


@dataclass(slots=True)
class NodeScores:
    """The scored nodes, in order, with their totals and each plugin's scores.

    Kept as one list per plugin (not an object per node per plugin): scoring is the hot
    path, and the per-node view is only built when someone asks why (``breakdown``).
    """

    names: list[str]
    totals: list[int]
    raw: dict[str, list[int]] = field(default_factory=dict)
    normalized: dict[str, list[int]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)

    def total(self) -> dict[str, int]:
        return dict(zip(self.names, self.totals, strict=True))

    def breakdown(self) -> dict[str, dict[str, ScoreBreakdown]]:
        """Node → plugin → its score before and after normalizing, and weighted."""
        return {
            node: {
                plugin: ScoreBreakdown(
                    self.raw[plugin][i],
                    normalized[i],
                    normalized[i] * self.weights[plugin],
                )
                for plugin, normalized in self.normalized.items()
            }
            for i, node in enumerate(self.names)
        }


@dataclass(slots=True)
class DecisionRecord:
    """Why a pod went where it went: what the framework decided about every node it examined.

    Pass one to the filter and score runners to fill it; without one they record nothing.
    """

    pre_filter: Status = SUCCESS
    filter_verdicts: dict[str, Status] = field(default_factory=dict)
    """Node → its Filter status (SUCCESS: feasible)."""
    scores: NodeScores | None = None


@dataclass(slots=True)
class FeasibleNodes:
    """The outcome of filtering: the nodes that fit and why the others do not."""

    nodes: list[NodeInfo]
    statuses: dict[str, Status]
    """Rejected nodes → why."""
    error: Status | None = None
    """A plugin failed; the search stopped there."""

    @property
    def processed(self) -> int:
        """How many nodes were examined (where the next cycle's search starts)."""
        return len(self.nodes) + len(self.statuses)
