"""An object with replicas seen as an ``autoscaling/v1 Scale``: what its ``scale``
subresource serves.

The Scale is a view computed from the object (its ``spec.replicas``, ``status.replicas`` and
the selector of its pods as a string), so it lives here, beside the kinds: the API server
serves it, and the autoscaler computes the same view from the workloads the
controller-manager already caches instead of asking for it on every sync.
"""

from __future__ import annotations

from typing import Any

from kube.api.kinds.apps_v1 import Deployment, ReplicaSet, StatefulSet
from kube.api.kinds.autoscaling_v1 import Scale, ScaleSpec, ScaleStatus
from kube.api.kinds.core_v1.pod import ReplicationController
from kube.api.labels import Selector
from kube.api.meta_v1 import LabelSelector, ObjectMeta, Resource

WORKLOADS: tuple[type[Resource], ...] = (Deployment, ReplicaSet, StatefulSet, ReplicationController)
"""The built-in kinds with a ``scale`` subresource."""


def selector_text(selector: LabelSelector | dict[str, str] | None) -> str | None:
    """A LabelSelector, or a ReplicationController's map, in label selector syntax."""
    if selector is None:
        return None
    if isinstance(selector, LabelSelector):
        return str(Selector.from_label_selector(selector.match_labels, selector.match_expressions))
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def scale_of(obj: Resource, replicas: int | None, current: int, selector: str | None) -> Scale:
    """The Scale of ``obj`` with these counts: its identity and resourceVersion are the
    object's, so a write of the Scale is guarded by the object's version."""
    meta = obj.metadata
    return Scale(
        metadata=ObjectMeta(
            name=meta.name,
            namespace=meta.namespace,
            uid=meta.uid,
            resource_version=meta.resource_version,
            creation_timestamp=meta.creation_timestamp,
        ),
        spec=ScaleSpec(replicas=replicas),
        status=ScaleStatus(replicas=current, selector=selector),
    ).typed()


def workload_scale(obj: Resource) -> Scale:
    """The Scale of one of the ``WORKLOADS``."""
    spec: Any = getattr(obj, "spec", None)
    status: Any = getattr(obj, "status", None)
    return scale_of(
        obj,
        spec.replicas if spec is not None else None,
        (status.replicas or 0) if status is not None else 0,
        selector_text(spec.selector if spec is not None else None),
    )
