"""The ``scale`` subresource: any kind with replicas, seen as an ``autoscaling/v1 Scale``.

``kubectl scale`` PATCHes ``.../deployments/NAME/scale`` with ``{"spec":{"replicas":N}}`` and
reads the Scale back; autoscalers do the same.  The Scale is computed from the object (its
``spec.replicas``, ``status.replicas`` and selector as a string), and a write to it changes
only ``spec.replicas`` of the object, guarded by the Scale's resourceVersion when it has one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from controlplane.apiserver import errors
from controlplane.apiserver.crd import customresources
from controlplane.apiserver.endpoints import negotiation, patch
from kubelab.api import codec
from kubelab.api.errors import ROOT, ErrorList
from kubelab.api.kinds.autoscaling_v1 import Scale, ScaleSpec, ScaleStatus
from kubelab.api.labels import Selector
from kubelab.api.meta_v1 import LabelSelector, ObjectMeta, Resource

if TYPE_CHECKING:
    from controlplane.apiserver.endpoints.handlers import Request, ResourceHandler
    from controlplane.apiserver.registry.store import ResourceStore


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


async def handle(handler: ResourceHandler, req: Request, store: ResourceStore) -> web.Response:
    info = req.info
    if info.verb == "get":
        scale = to_scale(await store.get(info.namespace, info.name))
        return handler._respond(req, scale, 200, negotiation.Output(negotiation.JSON))
    if info.verb not in ("update", "patch"):
        raise errors.method_not_allowed(f"{info.verb} is not supported on scale")
    body = await handler._body(req)
    media = negotiation.body_type(req.http.headers.get("Content-Type"))

    def change(current: Resource) -> Resource:
        scale = _requested(current, body, media, info.verb)
        replicas = scale.spec.replicas if scale.spec is not None else None
        problems = ErrorList()
        path = ROOT.child("spec").child("replicas")
        if replicas is None:
            problems.required(path)
        elif replicas < 0:
            problems.invalid(path, replicas, "must be greater than or equal to 0")
        if problems:
            raise errors.invalid(store.info, info.name, problems)
        if not customresources.set_scale_replicas(current, replicas):
            spec: Any = getattr(current, "spec", None)
            spec.replicas = replicas
        current.metadata.resource_version = (
            scale.metadata.resource_version or current.metadata.resource_version
        )
        return current

    updated = await store.mutate(info.namespace, info.name, change, req.ctx, "scale")
    return handler._respond(req, to_scale(updated), 200, negotiation.Output(negotiation.JSON))


def _requested(current: Resource, body: bytes, media: str, verb: str) -> Scale:
    try:
        if verb == "update":
            return codec.decode_json(body, Scale).obj
        original = codec.to_builtins(to_scale(current))
        document = codec.load_yaml_documents(body)[0] if body.strip() else {}
        if media == negotiation.JSON_PATCH:
            patched = patch.apply_json_patch(original, document)
        elif media == negotiation.MERGE_PATCH:
            patched = patch.apply_merge_patch(original, document)
        elif media == negotiation.STRATEGIC_PATCH:
            patched = patch.apply_strategic_merge_patch(original, document, Scale)
        else:
            raise errors.unsupported_media_type(media)
        return codec.from_builtins(patched, Scale).obj
    except codec.DecodeError as error:
        raise errors.bad_request(f"error decoding Scale: {error}") from None
    except patch.PatchError as error:
        raise errors.ApiError(error.code, "BadRequest", str(error)) from None
