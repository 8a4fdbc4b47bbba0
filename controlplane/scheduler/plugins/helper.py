"""Helpers several plugins share: score normalisation (upstream ``helper``
``DefaultNormalizeScore``) and the taint effects Filter checks.

Node selector terms and tolerations are the object model's (``kube.api.nodeaffinity``,
``kube.api.taints``): controllers apply them too.
"""

from __future__ import annotations

from controlplane.scheduler.framework.interface import SUCCESS, Status
from kube.api.kinds.core_v1.node import Taint

TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"


# Score normalisation.


def default_normalize_score(max_priority: int, reverse: bool, scores: list[int]) -> Status:
    """Scale ``scores`` in place so the highest becomes ``max_priority`` (upstream
    ``helper.DefaultNormalizeScore``).

    ``reverse`` turns a count of bad things into a score: the node with the most gets 0.  When
    every score is 0 they stay 0, or all become ``max_priority`` when reversed.  Scores are
    non-negative, so integer division truncates as Go's does.
    """
    highest = max(scores, default=0)
    if highest == 0:
        if reverse:
            scores[:] = [max_priority] * len(scores)
    elif reverse:
        scores[:] = [max_priority - max_priority * score // highest for score in scores]
    else:
        scores[:] = [max_priority * score // highest for score in scores]
    return SUCCESS


# Taints and tolerations.


def do_not_schedule_taints(taint: Taint) -> bool:
    """The taints Filter checks: NoSchedule and NoExecute (upstream
    ``DoNotScheduleTaintsFilterFunc``)."""
    return taint.effect in (NO_SCHEDULE, NO_EXECUTE)
