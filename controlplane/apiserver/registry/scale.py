"""The ``scale`` subresource: any kind with replicas, seen as an ``autoscaling/v1 Scale``.

``kubectl scale`` PATCHes ``.../deployments/NAME/scale`` with ``{"spec":{"replicas":N}}`` and
reads the Scale back; autoscalers do the same.  The Scale is computed from the object (its
``spec.replicas``, ``status.replicas`` and selector as a string), and a write to it changes
only ``spec.replicas`` of the object, guarded by the Scale's resourceVersion when it has one.
"""

from __future__ import annotations

from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.crd import customresources
from controlplane.apiserver.registry.rest import Change
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api.errors import ROOT, ErrorList
from kube.api.kinds.autoscaling_v1 import Scale, ScaleSpec, ScaleStatus
from kube.api.labels import Selector
from kube.api.meta_v1 import LabelSelector, ObjectMeta, Resource


def _selector_text(selector: Any) -> str | None:
    if selector is None:
        return None
    if isinstance(selector, LabelSelector):
        return str(Selector.from_label_selector(selector.match_labels, selector.match_expressions))
    if isinstance(selector, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    return None


def to_scale(obj: Resource) -> Scale:
    custom = customresources.scale_fields(obj)
    if custom is not None:
        replicas, current, selector = custom
    else:
        spec: Any = getattr(obj, "spec", None)
        status: Any = getattr(obj, "status", None)
        replicas = spec.replicas if spec is not None else None
        current = (status.replicas or 0) if status is not None else 0
        selector = _selector_text(spec.selector if spec is not None else None)
    meta = obj.metadata
    scale = Scale(
        metadata=ObjectMeta(
            name=meta.name,
            namespace=meta.namespace,
            uid=meta.uid,
            resource_version=meta.resource_version,
            creation_timestamp=meta.creation_timestamp,
        ),
        spec=ScaleSpec(replicas=replicas),
        status=ScaleStatus(replicas=current, selector=selector),
    )
    return scale.typed()


class ScaleREST:
    """``<kind>/scale``: Getter, Updater and Patcher of the Scale computed from the object.
    Patches apply to the Scale (as upstream's); server-side apply is not served."""

    body = Scale.kind_info
    subresource = "scale"
    applies = False

    def __init__(self, store: ResourceStore) -> None:
        self.store = store

    async def get(self, namespace: str, name: str) -> Scale:
        return to_scale(await self.store.get(namespace, name))

    async def update(self, namespace: str, name: str, obj: Resource, ctx: RequestContext) -> Scale:
        return await self.patch(namespace, name, lambda _: obj, ctx)

    async def patch(self, namespace: str, name: str, change: Change, ctx: RequestContext) -> Scale:
        def write(current: Resource) -> Resource:
            scale = change(to_scale(current))
            assert isinstance(scale, Scale)
            replicas = scale.spec.replicas if scale.spec is not None else None
            problems = ErrorList()
            path = ROOT.child("spec").child("replicas")
            if replicas is None:
                problems.required(path)
            elif replicas < 0:
                problems.invalid(path, replicas, "must be greater than or equal to 0")
            if problems:
                raise errors.invalid(self.store.info, name, problems)
            if not customresources.set_scale_replicas(current, replicas):
                spec: Any = getattr(current, "spec", None)
                spec.replicas = replicas
            current.metadata.resource_version = (
                scale.metadata.resource_version or current.metadata.resource_version
            )
            return current

        return to_scale(await self.store.mutate(namespace, name, write, ctx, self.subresource))
