"""Write-only subresources: ``pods/binding``, ``pods/eviction``, ``namespaces/finalize`` and
``certificatesigningrequests/approval``.

Each is a narrow door into an object that a whole-object update would not allow: the
scheduler binds a pod to a node (once; spec is otherwise immutable), an eviction deletes a pod
only while no PodDisruptionBudget forbids it, the namespace controller removes a namespace's
``kubernetes`` finalizer, an approver adds conditions to a CSR.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from controlplane.apiserver import errors
from controlplane.apiserver.endpoints import negotiation
from kubelab.api import codec
from kubelab.api.kinds.core_v1.cluster import Namespace, NamespaceSpec
from kubelab.api.kinds.core_v1.pod import Binding, Pod, PodCondition
from kubelab.api.kinds.policy_v1 import Eviction, PodDisruptionBudget
from kubelab.api.labels import Selector
from kubelab.api.meta_v1 import DeleteOptions, Resource, Status

if TYPE_CHECKING:
    from controlplane.apiserver.endpoints.handlers import Request, ResourceHandler
    from controlplane.apiserver.registry.store import ResourceStore


async def handle(handler: ResourceHandler, req: Request, store: ResourceStore) -> web.Response:
    sub = req.info.subresource
    if sub == "binding" and req.info.verb == "create":
        return await _bind(handler, req, store)
    if sub == "eviction" and req.info.verb == "create":
        return await _evict(handler, req, store)
    if sub == "finalize" and req.info.verb == "update":
        return await _finalize(handler, req, store)
    if sub == "approval" and req.info.verb in ("update", "patch", "get"):
        return await _approval(handler, req, store)
    raise errors.method_not_allowed(f"{req.info.verb} is not supported on {sub}")


async def _body_as(handler: ResourceHandler, req: Request, cls: type[Resource]) -> Resource:
    body = await handler._body(req)
    try:
        decoded = codec.decode_json(body, cls)
    except codec.DecodeError as error:
        raise errors.bad_request(f"error decoding {cls.__name__}: {error}") from None
    return decoded.obj


async def bind(store: ResourceStore, namespace: str, binding: Binding, req: Request) -> None:
    """Assign a pod to the node a Binding names (used by ``pods/binding`` and ``bindings``)."""
    name = binding.metadata.name or ""
    target = binding.target
    if target is None or not target.name:
        raise errors.bad_request("binding target: a node name is required")

    def assign(pod: Resource) -> Resource:
        assert isinstance(pod, Pod)
        if pod.metadata.deletion_timestamp is not None:
            raise errors.conflict(
                store.info, name, "pod is being deleted, cannot be assigned to a host"
            )
        if pod.spec is None:
            raise errors.bad_request("pod has no spec")
        if pod.spec.node_name:
            raise errors.conflict(
                store.info, name, f'pod {name} is already assigned to node "{pod.spec.node_name}"'
            )
        pod.spec.node_name = target.name
        status = pod.status
        if status is not None:
            conditions = [c for c in status.conditions or () if c.type != "PodScheduled"]
            conditions.append(
                PodCondition(
                    type="PodScheduled",
                    status="True",
                    last_transition_time=store.clock.now().replace(microsecond=0),
                )
            )
            status.conditions = conditions
        return pod

    await store.mutate(namespace, name, assign, req.ctx, "binding")


async def _bind(handler: ResourceHandler, req: Request, store: ResourceStore) -> web.Response:
    binding = await _body_as(handler, req, Binding)
    assert isinstance(binding, Binding)
    if binding.metadata.name and binding.metadata.name != req.info.name:
        raise errors.bad_request("the binding's name does not match the pod's")
    binding.metadata.name = req.info.name
    await bind(store, req.info.namespace, binding, req)
    return handler._respond(
        req, Status(status="Success", code=201), 201, negotiation.Output(negotiation.JSON)
    )


def _pdb_info(handler: ResourceHandler) -> ResourceStore | None:
    return handler.lookup("policy", "v1", "poddisruptionbudgets")


async def _evict(handler: ResourceHandler, req: Request, store: ResourceStore) -> web.Response:
    eviction = await _body_as(handler, req, Eviction)
    assert isinstance(eviction, Eviction)
    pod = await store.get(req.info.namespace, req.info.name)
    assert isinstance(pod, Pod)
    budgets = _pdb_info(handler)
    if (
        budgets is not None
        and pod.status is not None
        and pod.status.phase
        not in (
            "Succeeded",
            "Failed",
        )
    ):
        listed = await budgets.list(req.info.namespace)
        for pdb in listed.items:
            assert isinstance(pdb, PodDisruptionBudget)
            if _blocks(pdb, pod):
                raise errors.ApiError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                )
    options = eviction.delete_options or DeleteOptions()
    await store.delete(req.info.namespace, req.info.name, options, req.ctx)
    return handler._respond(
        req, Status(status="Success", code=201), 201, negotiation.Output(negotiation.JSON)
    )


def _blocks(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    spec, status = pdb.spec, pdb.status
    if spec is None or spec.selector is None:
        return False
    selector = Selector.from_label_selector(
        spec.selector.match_labels, spec.selector.match_expressions
    )
    if selector.empty or not selector.matches(pod.metadata.labels or {}):
        return False
    return status is None or (status.disruptions_allowed or 0) < 1


async def _finalize(handler: ResourceHandler, req: Request, store: ResourceStore) -> web.Response:
    requested = await _body_as(handler, req, Namespace)
    assert isinstance(requested, Namespace)

    def set_finalizers(current: Resource) -> Resource:
        assert isinstance(current, Namespace)
        if current.spec is not None or requested.spec is not None:
            current.spec = current.spec or NamespaceSpec()
            current.spec.finalizers = requested.spec.finalizers if requested.spec else None
        return current

    updated = await store.mutate("", req.info.name, set_finalizers, req.ctx, "finalize")
    return handler._render(req, store, updated)


async def _approval(handler: ResourceHandler, req: Request, store: ResourceStore) -> web.Response:
    if req.info.verb == "get":
        return handler._render(req, store, await store.get("", req.info.name))
    if req.info.verb == "patch":
        return await handler._patch(req, store, "status")
    obj = await handler._read_object(req, store)
    updated, _ = await store.update("", req.info.name, obj, req.ctx, "status")
    return handler._render(req, store, updated)
