"""RuntimeClass: a pod naming ``spec.runtimeClassName`` takes on its class's costs and nodes.

As upstream's plugin (plugin/pkg/admission/runtimeclass), on pod creation only:

- the class must exist (the watch cache, then the store, as upstream's live lookup when its
  lister lags), or the pod is refused ``pod rejected: RuntimeClass "x" not found``;
- **admit** (mutating): the class's ``overhead.podFixed`` becomes the pod's ``spec.overhead``
  (a pod that brings a different overhead of its own is refused); its
  ``scheduling.nodeSelector`` is merged into the pod's (a key the pod sets to another value is
  refused, naming both values), and its tolerations are merged into the pod's
  (``taints.merge_tolerations``: none twice, none another covers);
- **validate**, after every mutating webhook: a pod's overhead must still be its class's, and a
  pod whose class has none (or that names no class) may not carry one.

So the scheduler counts the runtime's overhead and places the pod only where the runtime is,
without either looking the class up; the kubelet does look it up, for its handler.
"""

from __future__ import annotations

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import Admission, RequestContext
from controlplane.apiserver.storage.watchcache import WatchCache
from kube.api.kinds.core_v1.pod import Pod, PodSpec, ResourceList
from kube.api.kinds.core_v1.volume import parse_quantity
from kube.api.kinds.node_v1 import RuntimeClass
from kube.api.meta_v1 import Resource
from kube.api.scheme import KindInfo
from kube.api.taints import merge_tolerations

OVERHEAD_MISMATCH = "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
OVERHEAD_WITHOUT_CLASS = (
    "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
)


def runtime_class(classes: WatchCache) -> tuple[Admission, Admission]:
    """Its ``Admit`` (overhead and scheduling from the class) and its ``Validate`` (the pod's
    overhead is still its class's)."""

    async def prepare(
        operation: str, info: KindInfo, obj: Resource, ctx: RequestContext
    ) -> tuple[PodSpec, RuntimeClass | None] | None:
        """The pod's spec and its class (None when it names none); None for requests not
        checked."""
        if operation != "CREATE" or ctx.subresource or not isinstance(obj, Pod):
            return None
        spec = obj.spec = obj.spec or PodSpec()
        wanted = spec.runtime_class_name
        if wanted is None:
            return spec, None
        found = await classes.lookup("", wanted)
        if not isinstance(found, RuntimeClass):
            raise _refuse(info, obj, f'pod rejected: RuntimeClass "{wanted}" not found')
        return spec, found

    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        prepared = await prepare(operation, info, obj, ctx)
        if prepared is None:
            return
        spec, runtime = prepared
        if runtime is None:
            return
        if runtime.overhead is not None:
            fixed = runtime.overhead.pod_fixed
            if spec.overhead and not _same_resources(fixed, spec.overhead):
                raise _refuse(info, obj, OVERHEAD_MISMATCH)
            spec.overhead = dict(fixed) if fixed is not None else None
        if runtime.scheduling is not None:
            wanted, selector = runtime.scheduling.node_selector, spec.node_selector
            if selector is None:
                selector = dict(wanted) if wanted is not None else None
            else:
                selector = dict(selector)
                for key, value in sorted((wanted or {}).items()):
                    if selector.get(key, value) != value:
                        raise _refuse(
                            info,
                            obj,
                            f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                            f"pod.spec.nodeSelector[{key}] = {selector[key]}",
                        )
                    selector[key] = value
            spec.node_selector = selector
            tolerations = merge_tolerations(spec.tolerations, runtime.scheduling.tolerations)
            spec.tolerations = tolerations or None

    async def validate(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        prepared = await prepare(operation, info, obj, ctx)
        if prepared is None:
            return
        spec, runtime = prepared
        if not spec.overhead:
            return
        if runtime is None or runtime.overhead is None:
            raise _refuse(info, obj, OVERHEAD_WITHOUT_CLASS)
        if not _same_resources(runtime.overhead.pod_fixed, spec.overhead):
            raise _refuse(info, obj, OVERHEAD_MISMATCH)

    return admit, validate


def _same_resources(a: ResourceList | None, b: ResourceList | None) -> bool:
    """Whether two resource lists name the same amounts (``1000m`` is ``1``), as upstream's
    semantic equality compares quantities."""
    a, b = a or {}, b or {}
    return a.keys() == b.keys() and all(parse_quantity(a[k]) == parse_quantity(b[k]) for k in a)


def _refuse(info: KindInfo, pod: Resource, message: str) -> errors.ApiError:
    name = pod.metadata.name or ""
    return errors.forbidden(info, name, f'pods "{name}" is forbidden: {message}')
