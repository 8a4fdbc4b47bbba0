"""The arithmetic of Deployments, as pure functions (upstream ``pkg/controller/deployment/util``).

Nothing here talks to the API or reads a clock: the deployment controller passes ``now`` in,
so every rule is testable on its own.

* Identity: a ReplicaSet is a Deployment's *new* one when its template equals the
  Deployment's apart from the ``pod-template-hash`` label (the oldest such one wins); every
  other ReplicaSet it controls is *old*.  A new ReplicaSet is named
  ``<deployment>-<compute_hash(template, collisionCount)>``: FNV-32a of the template, the
  collision count mixed in as upstream does, the decimal sum rendered in the
  ``SafeEncodeString`` alphabet (no vowels, no confusable digits).  Upstream hashes Go's
  ``spew`` dump of the struct, which Python cannot reproduce; this hashes the template's
  canonical JSON, so the value is deterministic and stable but not upstream's string.
* Revisions: ``deployment.kubernetes.io/revision`` on each ReplicaSet; the new one gets the
  largest old revision plus one, and one brought back by a rollback keeps its earlier numbers
  in ``revision-history``.  ``desired-replicas`` and ``max-replicas`` record the Deployment's
  size (and size plus surge) when the ReplicaSet was last scaled, which is what proportional
  scaling and scaling-event detection read.
* Fenceposts: ``maxSurge`` rounds percents up and ``maxUnavailable`` rounds them down; if both
  come to zero, one pod may be unavailable (upstream ``ResolveFenceposts``).
* Status and conditions: ``calculate_status`` is upstream's ``calculateStatus``; a condition
  keeps its ``lastTransitionTime`` while its status stays, and is not rewritten at all while
  its status and reason stay.
"""

from __future__ import annotations

import copy
import datetime
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from kube.api import codec
from kube.api.kinds.apps_v1 import (
    Deployment,
    DeploymentCondition,
    DeploymentStatus,
    ReplicaSet,
    ReplicaSetCondition,
)
from kube.api.kinds.core_v1.pod import PodTemplateSpec
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from kube.api.struct import IntOrString

POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
REVISION_HISTORY_ANNOTATION = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
ROLLBACK_TO_ANNOTATION = "deprecated.deployment.rollback.to"
MAX_REVISION_HISTORY_CHARS = 2000

_NOT_COPIED = frozenset(
    {
        LAST_APPLIED_ANNOTATION,
        REVISION_ANNOTATION,
        REVISION_HISTORY_ANNOTATION,
        DESIRED_REPLICAS_ANNOTATION,
        MAX_REPLICAS_ANNOTATION,
        ROLLBACK_TO_ANNOTATION,
    }
)
"""Deployment annotations that are the controller's own and are not copied to ReplicaSets."""

# Condition types and upstream's reasons.
AVAILABLE = "Available"
PROGRESSING = "Progressing"
REPLICA_FAILURE = "ReplicaFailure"
NEW_RS_REASON = "NewReplicaSetCreated"
FOUND_NEW_RS_REASON = "FoundNewReplicaSet"
RS_UPDATED_REASON = "ReplicaSetUpdated"
NEW_RS_AVAILABLE_REASON = "NewReplicaSetAvailable"
TIMED_OUT_REASON = "ProgressDeadlineExceeded"
FAILED_RS_CREATE_REASON = "ReplicaSetCreateError"
PAUSED_REASON = "DeploymentPaused"
RESUMED_REASON = "DeploymentResumed"
MINIMUM_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"

_INT32_MAX = 2**31 - 1
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_FNV32_OFFSET, _FNV32_PRIME = 0x811C9DC5, 0x01000193


# Hashing.


def _fnv32a(data: bytes, state: int = _FNV32_OFFSET) -> int:
    for byte in data:
        state = ((state ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return state


def safe_encode_string(text: str) -> str:
    """Upstream ``rand.SafeEncodeString``: each byte mapped into a vowel-free alphabet."""
    return "".join(_SAFE_ALPHABET[b % len(_SAFE_ALPHABET)] for b in text.encode())


def compute_hash(template: PodTemplateSpec | None, collision_count: int | None) -> str:
    """The ``pod-template-hash`` of a template: stable for equal templates, and different for
    each collision count (written after the template as eight bytes, little-endian)."""
    canonical = json.dumps(codec.to_builtins(template), sort_keys=True, separators=(",", ":"))
    state = _fnv32a(canonical.encode())
    if collision_count is not None:
        state = _fnv32a((collision_count & 0xFFFFFFFF).to_bytes(4, "little") + bytes(4), state)
    return safe_encode_string(str(state))


def _normalized(template: PodTemplateSpec | None) -> Any:
    """A template as plain values without the hash label, and with empty maps and lists
    dropped (upstream's semantic equality treats them like absent ones)."""
    raw = codec.to_builtins(template) or {}
    labels = raw.get("metadata", {}).get("labels")
    if labels:
        labels.pop(POD_TEMPLATE_HASH_LABEL, None)
    return _drop_empty(raw)


def _drop_empty(value: Any) -> Any:
    if isinstance(value, dict):
        pruned = {k: _drop_empty(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [_drop_empty(v) for v in value]
    return value


def equal_ignore_hash(a: PodTemplateSpec | None, b: PodTemplateSpec | None) -> bool:
    """Whether two templates are the same apart from the ``pod-template-hash`` label."""
    return bool(_normalized(a) == _normalized(b))


def template_with_hash(template: PodTemplateSpec | None, hash_value: str) -> PodTemplateSpec:
    """A copy of ``template`` whose labels include the hash label."""
    new = copy.deepcopy(template) if template is not None else PodTemplateSpec()
    if new.metadata is None:
        new.metadata = ObjectMeta()
    new.metadata.labels = {**(new.metadata.labels or {}), POD_TEMPLATE_HASH_LABEL: hash_value}
    return new


def selector_with_hash(selector: LabelSelector | None, hash_value: str) -> LabelSelector:
    """A copy of ``selector`` that also requires the hash label."""
    new = copy.deepcopy(selector) if selector is not None else LabelSelector()
    new.match_labels = {**(new.match_labels or {}), POD_TEMPLATE_HASH_LABEL: hash_value}
    return new


# Counting.


def replicas_of(obj: Deployment | ReplicaSet) -> int:
    """``spec.replicas`` (1 when unset, as the API server defaults it)."""
    spec = obj.spec
    return 1 if spec is None or spec.replicas is None else spec.replicas


def _status(rs: ReplicaSet, attr: str) -> int:
    return (getattr(rs.status, attr) or 0) if rs.status is not None else 0


def total_spec_replicas(rss: Iterable[ReplicaSet | None]) -> int:
    """Upstream ``GetReplicaCountForReplicaSets``: the pods the ReplicaSets are asked for."""
    return sum(replicas_of(rs) for rs in rss if rs is not None)


def total_status(rss: Iterable[ReplicaSet | None], attr: str) -> int:
    """The sum of one status counter (``replicas``, ``ready_replicas``, ...)."""
    return sum(_status(rs, attr) for rs in rss if rs is not None)


def total_terminating(rss: Iterable[ReplicaSet | None]) -> int | None:
    """Terminating pods of the ReplicaSets; None when none of them reports the count."""
    counts = [rs.status.terminating_replicas for rs in rss if rs is not None and rs.status]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def active(rss: Iterable[ReplicaSet | None]) -> list[ReplicaSet]:
    """The ReplicaSets asked for at least one pod (upstream ``FilterActiveReplicaSets``)."""
    return [rs for rs in rss if rs is not None and replicas_of(rs) > 0]


# Ordering.


def _created(rs: ReplicaSet) -> tuple[datetime.datetime, str]:
    created = rs.metadata.creation_timestamp or datetime.datetime.min.replace(tzinfo=datetime.UTC)
    return created, rs.metadata.name or ""


def by_creation(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """Oldest first, ties by name (upstream ``ReplicaSetsByCreationTimestamp``)."""
    return sorted(rss, key=_created)


def by_size_older(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """Largest first, ties oldest first: the order replicas are removed in."""
    return sorted(by_creation(rss), key=lambda rs: -replicas_of(rs))


def by_size_newer(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """Largest first, ties newest first: the order replicas are added in."""
    return sorted(reversed(by_creation(rss)), key=lambda rs: -replicas_of(rs))


def revision_of(rs: ReplicaSet) -> int | None:
    """The revision annotation: 0 when absent, None when it is not a number."""
    value = (rs.metadata.annotations or {}).get(REVISION_ANNOTATION)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        return None


def by_revision(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """Lowest revision first, ties oldest first (upstream ``ReplicaSetsByRevision``)."""
    return sorted(by_creation(rss), key=lambda rs: revision_of(rs) or 0)


def max_revision(rss: Iterable[ReplicaSet]) -> int:
    return max((revision_of(rs) or 0 for rs in rss), default=0)


# New and old ReplicaSets.


def find_new_replica_set(d: Deployment, rss: Sequence[ReplicaSet]) -> ReplicaSet | None:
    """The oldest ReplicaSet whose template is the Deployment's (ignoring the hash label)."""
    template = d.spec.template if d.spec else None
    for rs in by_creation(rss):
        if equal_ignore_hash(rs.spec.template if rs.spec else None, template):
            return rs
    return None


def find_old_replica_sets(d: Deployment, rss: Sequence[ReplicaSet]) -> list[ReplicaSet]:
    """Every ReplicaSet but the new one, in the given order."""
    new = find_new_replica_set(d, rss)
    return [rs for rs in rss if new is None or rs.metadata.uid != new.metadata.uid]


def find_active_or_latest(new: ReplicaSet | None, old: Sequence[ReplicaSet]) -> ReplicaSet | None:
    """The only active ReplicaSet, or the newest one when none is active; None when several
    are active (then scaling is proportional)."""
    if new is None and not old:
        return None
    newest_first = list(reversed(by_creation(old)))
    running = active([*newest_first, new])
    if not running:
        return new if new is not None else newest_first[0]
    return running[0] if len(running) == 1 else None


# Annotations.


def _annotation_int(rs: ReplicaSet, key: str) -> int | None:
    value = (rs.metadata.annotations or {}).get(key)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def desired_replicas_annotation(rs: ReplicaSet) -> int | None:
    return _annotation_int(rs, DESIRED_REPLICAS_ANNOTATION)


def replicas_annotations_need_update(rs: ReplicaSet, desired: int, maximum: int) -> bool:
    annotations = rs.metadata.annotations or {}
    return annotations.get(DESIRED_REPLICAS_ANNOTATION) != str(desired) or annotations.get(
        MAX_REPLICAS_ANNOTATION
    ) != str(maximum)


def set_replicas_annotations(rs: ReplicaSet, desired: int, maximum: int) -> bool:
    """Record the Deployment's size and maximum size on ``rs``; whether anything changed."""
    changed = replicas_annotations_need_update(rs, desired, maximum)
    annotations = rs.metadata.annotations = rs.metadata.annotations or {}
    annotations[DESIRED_REPLICAS_ANNOTATION] = str(desired)
    annotations[MAX_REPLICAS_ANNOTATION] = str(maximum)
    return changed


def _copy_deployment_annotations(d: Deployment, rs: ReplicaSet) -> bool:
    annotations = rs.metadata.annotations = rs.metadata.annotations or {}
    changed = False
    for key, value in (d.metadata.annotations or {}).items():
        if key in _NOT_COPIED or annotations.get(key) == value:
            continue
        annotations[key] = value
        changed = True
    return changed


def set_new_replica_set_annotations(
    d: Deployment, rs: ReplicaSet, new_revision: int, exists: bool
) -> bool:
    """Upstream ``SetNewReplicaSetAnnotations``: copy the Deployment's own annotations, raise
    the revision to ``new_revision`` (never lower it), keep the revisions a rolled-back
    ReplicaSet had in ``revision-history`` (at most 2000 characters, oldest dropped first),
    and give a ReplicaSet about to be created its replicas annotations.  Whether anything
    changed."""
    changed = _copy_deployment_annotations(d, rs)
    annotations = rs.metadata.annotations = rs.metadata.annotations or {}
    old_text = annotations.get(REVISION_ANNOTATION)
    old_revision = revision_of(rs)
    if old_revision is None:
        return False
    if old_revision < new_revision:
        annotations[REVISION_ANNOTATION] = str(new_revision)
        changed = True
        if old_text is not None:
            _append_revision_history(annotations, old_text)
    if not exists and set_replicas_annotations(rs, replicas_of(d), replicas_of(d) + max_surge(d)):
        changed = True
    return changed


def _append_revision_history(annotations: dict[str, str], old_revision: str) -> None:
    history = annotations.get(REVISION_HISTORY_ANNOTATION, "")
    if not history:
        annotations[REVISION_HISTORY_ANNOTATION] = old_revision
        return
    revisions = history.split(",")
    total, start = len(history) + len(old_revision) + 1, 0
    while total > MAX_REVISION_HISTORY_CHARS and start < len(revisions):
        total -= len(revisions[start]) + 1
        start += 1
    if total <= MAX_REVISION_HISTORY_CHARS:
        annotations[REVISION_HISTORY_ANNOTATION] = ",".join([*revisions[start:], old_revision])


def set_deployment_revision(d: Deployment, revision: str) -> bool:
    annotations = d.metadata.annotations = d.metadata.annotations or {}
    if annotations.get(REVISION_ANNOTATION) == revision:
        return False
    annotations[REVISION_ANNOTATION] = revision
    return True


# Rolling-update fenceposts and sizes.


def scaled_value(value: IntOrString | None, total: int, round_up: bool) -> int:
    """An int, or a percent of ``total`` rounded up or down (upstream
    ``GetScaledValueFromIntOrPercent``); raises ``ValueError`` for other strings."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ValueError(f"invalid value for IntOrString: invalid value {value!r}")
    percent = int(value[:-1])
    return math.ceil(percent * total / 100) if round_up else math.floor(percent * total / 100)


def is_rolling_update(d: Deployment) -> bool:
    strategy = d.spec.strategy if d.spec else None
    return strategy is not None and strategy.type == "RollingUpdate"


def _rolling(d: Deployment) -> tuple[IntOrString | None, IntOrString | None]:
    strategy = d.spec.strategy if d.spec else None
    rolling = strategy.rolling_update if strategy else None
    return (rolling.max_surge, rolling.max_unavailable) if rolling else (None, None)


def resolve_fenceposts(
    surge: IntOrString | None, unavailable: IntOrString | None, desired: int
) -> tuple[int, int]:
    """(max surge, max unavailable) in pods; never both zero."""
    max_surge_pods = scaled_value(surge, desired, round_up=True)
    max_unavailable_pods = scaled_value(unavailable, desired, round_up=False)
    if max_surge_pods == 0 and max_unavailable_pods == 0:
        max_unavailable_pods = 1
    return max_surge_pods, max_unavailable_pods


def max_surge(d: Deployment) -> int:
    if not is_rolling_update(d):
        return 0
    return resolve_fenceposts(*_rolling(d), replicas_of(d))[0]


def max_unavailable(d: Deployment) -> int:
    """Pods that may be unavailable during a rolling update, at most the replica count."""
    desired = replicas_of(d)
    if not is_rolling_update(d) or desired == 0:
        return 0
    return min(resolve_fenceposts(*_rolling(d), desired)[1], desired)


def new_rs_new_replicas(d: Deployment, all_rss: Sequence[ReplicaSet], new: ReplicaSet) -> int:
    """The size the new ReplicaSet may grow to now (upstream ``NewRSNewReplicas``): under
    RollingUpdate, as far as ``replicas + maxSurge`` pods in all allows, never past
    ``replicas``; under Recreate, ``replicas``."""
    desired = replicas_of(d)
    if not is_rolling_update(d):
        return desired
    surge = scaled_value(_rolling(d)[0], desired, round_up=True)
    current = total_spec_replicas(all_rss)
    if current >= desired + surge:
        return replicas_of(new)
    return replicas_of(new) + min(desired + surge - current, desired - replicas_of(new))


def is_saturated(d: Deployment, rs: ReplicaSet | None) -> bool:
    """The ReplicaSet has all the Deployment's replicas, asked for and available."""
    if rs is None:
        return False
    desired = replicas_of(d)
    return (
        replicas_of(rs) == desired
        and desired_replicas_annotation(rs) == desired
        and _status(rs, "available_replicas") == desired
    )


def _round_half_up(value: float) -> int:
    return int(value + 0.5) if value >= 0 else int(value - 0.5)


def _fraction(rs: ReplicaSet, d: Deployment) -> int:
    """How much ``rs`` grows (or shrinks) when the Deployment's maximum size goes from the one
    annotated on it to the current one."""
    if replicas_of(d) == 0:
        return -replicas_of(rs)
    maximum = replicas_of(d) + max_surge(d)
    before = _annotation_int(rs, MAX_REPLICAS_ANNOTATION)
    if not before:
        # The annotation was removed by hand: fall back to the current size.
        before = d.status.replicas if d.status is not None and d.status.replicas else 0
        if before == 0:
            return 0
    return _round_half_up(replicas_of(rs) * maximum / before) - replicas_of(rs)


def replica_set_proportion(d: Deployment, rs: ReplicaSet, to_add: int, added: int) -> int:
    """The share of ``to_add`` (of which ``added`` is handed out) that ``rs`` gets."""
    if replicas_of(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction, allowed = _fraction(rs, d), to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


# Conditions.


def new_condition(
    kind: str, status: str, reason: str, message: str, now: datetime.datetime
) -> DeploymentCondition:
    moment = now.replace(microsecond=0)
    return DeploymentCondition(
        type=kind,
        status=status,
        last_update_time=moment,
        last_transition_time=moment,
        reason=reason,
        message=message,
    )


def get_condition(status: DeploymentStatus | None, kind: str) -> DeploymentCondition | None:
    for condition in (status.conditions if status is not None else None) or ():
        if condition.type == kind:
            return condition
    return None


def set_condition(status: DeploymentStatus, condition: DeploymentCondition) -> None:
    """Add or replace the condition of its type; unchanged if status and reason are the same,
    and keeping the transition time if only the reason changed."""
    current = get_condition(status, condition.type or "")
    if current is not None and current.status == condition.status:
        if current.reason == condition.reason:
            return
        condition.last_transition_time = current.last_transition_time
    remove_condition(status, condition.type or "")
    status.conditions = [*(status.conditions or []), condition]


def remove_condition(status: DeploymentStatus, kind: str) -> None:
    kept = [c for c in status.conditions or () if c.type != kind]
    status.conditions = kept or None


def replica_set_to_deployment_condition(condition: ReplicaSetCondition) -> DeploymentCondition:
    return DeploymentCondition(
        type=condition.type,
        status=condition.status,
        last_transition_time=condition.last_transition_time,
        last_update_time=condition.last_transition_time,
        reason=condition.reason,
        message=condition.message,
    )


def has_progress_deadline(d: Deployment) -> bool:
    deadline = d.spec.progress_deadline_seconds if d.spec else None
    return deadline is not None and deadline != _INT32_MAX


def has_revision_history_limit(d: Deployment) -> bool:
    limit = d.spec.revision_history_limit if d.spec else None
    return limit is not None and limit != _INT32_MAX


def calculate_status(
    all_rss: Sequence[ReplicaSet | None],
    new: ReplicaSet | None,
    d: Deployment,
    now: datetime.datetime,
) -> DeploymentStatus:
    """The status the ReplicaSets show (upstream ``calculateStatus``): counts summed over
    them (``updatedReplicas`` from the new one alone), the generation observed, and
    ``Available`` true while at least ``replicas - maxUnavailable`` pods are available.
    Other conditions are carried over."""
    old = d.status or DeploymentStatus()
    available = total_status(all_rss, "available_replicas")
    status = DeploymentStatus(
        observed_generation=d.metadata.generation,
        replicas=total_status(all_rss, "replicas"),
        updated_replicas=total_status([new], "replicas"),
        ready_replicas=total_status(all_rss, "ready_replicas"),
        available_replicas=available,
        unavailable_replicas=max(total_spec_replicas(all_rss) - available, 0),
        terminating_replicas=total_terminating(all_rss),
        conditions=copy.deepcopy(old.conditions),
        collision_count=old.collision_count,
    )
    if available >= replicas_of(d) - max_unavailable(d):
        condition = new_condition(
            AVAILABLE,
            "True",
            MINIMUM_REPLICAS_AVAILABLE,
            "Deployment has minimum availability.",
            now,
        )
    else:
        condition = new_condition(
            AVAILABLE,
            "False",
            MINIMUM_REPLICAS_UNAVAILABLE,
            "Deployment does not have minimum availability.",
            now,
        )
    set_condition(status, condition)
    return status


def deployment_complete(d: Deployment, status: DeploymentStatus | None) -> bool:
    """Every replica updated and available, and the latest generation observed: the moment
    ``kubectl rollout status`` reports success."""
    s = status or DeploymentStatus()
    desired = replicas_of(d)
    return (
        (s.updated_replicas or 0) == desired
        and (s.replicas or 0) == desired
        and (s.available_replicas or 0) == desired
        and (s.observed_generation or 0) >= (d.metadata.generation or 0)
    )


def deployment_progressing(d: Deployment, new: DeploymentStatus) -> bool:
    """Something moved since the last status: more updated, ready or available pods, or
    fewer old ones."""
    old = d.status or DeploymentStatus()
    old_old = (old.replicas or 0) - (old.updated_replicas or 0)
    new_old = (new.replicas or 0) - (new.updated_replicas or 0)
    return (
        (new.updated_replicas or 0) > (old.updated_replicas or 0)
        or new_old < old_old
        or (new.ready_replicas or 0) > (old.ready_replicas or 0)
        or (new.available_replicas or 0) > (old.available_replicas or 0)
    )


def deployment_timed_out(d: Deployment, status: DeploymentStatus, now: datetime.datetime) -> bool:
    """No progress reported for ``progressDeadlineSeconds`` (a finished rollout never times
    out; one already timed out stays so)."""
    if not has_progress_deadline(d):
        return False
    condition = get_condition(status, PROGRESSING)
    if condition is None or condition.reason == NEW_RS_AVAILABLE_REASON:
        return False
    if condition.reason == TIMED_OUT_REASON:
        return True
    since = condition.last_update_time
    return since is not None and since + _progress_deadline(d) < now


def _progress_deadline(d: Deployment) -> datetime.timedelta:
    return datetime.timedelta(seconds=(d.spec.progress_deadline_seconds if d.spec else None) or 0)


def progress_check_after(
    d: Deployment, status: DeploymentStatus, now: datetime.datetime
) -> float | None:
    """Seconds until a rollout that shows no progress must be checked for its deadline
    (upstream ``requeueStuckDeployment``); None when there is nothing to check: no deadline,
    no Progressing condition yet, the rollout complete or already timed out."""
    current = get_condition(d.status, PROGRESSING)
    if not has_progress_deadline(d) or current is None or current.last_update_time is None:
        return None
    if deployment_complete(d, status) or current.reason == TIMED_OUT_REASON:
        return None
    return (current.last_update_time + _progress_deadline(d) - now).total_seconds()
