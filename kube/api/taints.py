"""Taints and tolerations: whether a pod tolerates what a node is tainted with.

The rule is the API's own (upstream ``Toleration.ToleratesTaint`` in ``k8s.io/api``), and
the scheduler, the DaemonSet controller and taint eviction all apply it, so it lives with
the object model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kube.api.kinds.core_v1.node import Taint
from kube.api.kinds.core_v1.pod import Toleration


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether ``toleration`` tolerates ``taint`` (upstream ``Toleration.ToleratesTaint``).

    An empty effect or key matches any; operator ``Exists`` matches any value, ``Equal`` (or
    none) needs the same value.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    match toleration.operator:
        case None | "" | "Equal":
            return (toleration.value or "") == (taint.value or "")
        case "Exists":
            return True
    return False


def tolerations_tolerate_taint(tolerations: Iterable[Toleration] | None, taint: Taint) -> bool:
    """Whether any of ``tolerations`` tolerates ``taint``."""
    return any(tolerates(toleration, taint) for toleration in tolerations or ())


def find_untolerated_taint(
    taints: Iterable[Taint] | None,
    tolerations: Iterable[Toleration] | None,
    include: Callable[[Taint], bool] | None = None,
) -> Taint | None:
    """The first of ``taints`` that ``include`` selects (all if None) and no toleration
    tolerates, or None (upstream ``FindMatchingUntoleratedTaint``)."""
    tolerations = list(tolerations or ())
    for taint in taints or ():
        if include is not None and not include(taint):
            continue
        if not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None


def merge_tolerations(
    first: Iterable[Toleration] | None, second: Iterable[Toleration] | None
) -> list[Toleration]:
    """``first`` then ``second``, without the tolerations another one already covers (upstream
    ``MergeTolerations``): of equal ones the first is kept, and one whose every match a broader
    one (``_covers``) also tolerates is dropped, so merging twice changes nothing."""
    every = [*(first or ()), *(second or ())]
    merged: list[Toleration] = []
    for i, toleration in enumerate(every):
        if any(_covers(kept, toleration) for kept in merged):
            continue
        if any(other != toleration and _covers(other, toleration) for other in every[i + 1 :]):
            continue
        merged.append(toleration)
    return merged


def _covers(broad: Toleration, narrow: Toleration) -> bool:
    """Whether ``broad`` tolerates every taint ``narrow`` does, for at least as long."""
    if broad == narrow:
        return True
    if narrow.key != broad.key and (broad.key or broad.operator != "Exists"):
        return False
    if broad.effect and narrow.effect != broad.effect:
        return False
    limit = broad.toleration_seconds if broad.effect == "NoExecute" else None
    seconds = narrow.toleration_seconds
    if limit is not None and (seconds is None or seconds > limit):
        return False
    match broad.operator:
        case None | "" | "Equal":
            return narrow.operator == "Equal" and narrow.value == broad.value
        case "Exists":
            return True
    return False


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_taint(text: str) -> Taint:
    """``key[=value]:Effect``, as kubectl taint and the kubelet's --register-with-taints
    spell a taint; ValueError otherwise."""
    key_value, sep, effect = text.rpartition(":")
    key, _, value = key_value.partition("=")
    if not sep or not key or effect not in TAINT_EFFECTS:
        raise ValueError(f"expected key[=value]:Effect, got {text!r}")
    return Taint(key=key, value=value or None, effect=effect)
