"""Test objects built in one place: a pod with what tests vary (owner, node, phase, readiness,
containers, any other spec field), so that a module's own builder only says its defaults.

The objects are what a client would send: no uid, resourceVersion or creation time unless
given (``tests.fakeapi.stamp`` adds what the API server would).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from kube.api.kinds.core_v1.pod import Container, Pod, PodCondition, PodSpec, PodStatus
from kube.api.meta_v1 import ObjectMeta, Resource
from kube.api.owners import controller_ref


def ready_condition(ready: bool = True, since: datetime.datetime | None = None) -> PodCondition:
    return PodCondition(
        type="Ready", status="True" if ready else "False", last_transition_time=since
    )


def pod(
    name: str = "web",
    namespace: str = "default",
    *,
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: Resource | None = None,
    finalizers: Sequence[str] | None = None,
    node_name: str | None = None,
    containers: Sequence[Container] | None = None,
    phase: str | None = None,
    ready: bool | None = None,
    ready_since: datetime.datetime | None = None,
    **spec: Any,
) -> Pod:
    """A pod ``namespace/name``.

    ``owner`` becomes its controller reference; ``ready`` (or ``ready_since``, which implies
    ready) its Ready condition; ``spec`` holds any other PodSpec field by its Python name
    (``tolerations=``, ``volumes=``...).  Without ``phase`` or a readiness it has no status.
    """
    conditions = None
    if ready is not None or ready_since is not None:
        conditions = [ready_condition(ready is not False, ready_since)]
    status = PodStatus(phase=phase, conditions=conditions) if phase or conditions else None
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            uid=uid,
            labels=dict(labels) if labels is not None else None,
            annotations=dict(annotations) if annotations is not None else None,
            owner_references=[controller_ref(owner)] if owner is not None else None,
            finalizers=list(finalizers) if finalizers is not None else None,
        ),
        spec=PodSpec(
            node_name=node_name, containers=list(containers) if containers else None, **spec
        ),
        status=status,
    )


__all__ = ["pod", "ready_condition"]
