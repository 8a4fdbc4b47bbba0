"""Per-kind write rules: what the generic registry does differently for each kind.

Upstream keeps a strategy object per resource (``pkg/registry/<group>/<resource>/strategy.go``).
Most kinds share one behaviour, derived from their declaration: a kind with a ``status``
subresource keeps spec and status apart (writes to the object leave status alone, writes to
``/status`` leave spec and most metadata alone); a kind with a ``spec`` has a generation.  The
few that differ (pods' graceful deletion, kinds created by update, kinds that keep status on
create) say so in a subclass, registered in ``STRATEGIES``.
"""

from __future__ import annotations

import base64

import msgspec

from kube.api import walk
from kube.api.errors import ROOT, ErrorList
from kube.api.kinds.batch_v1 import Job
from kube.api.kinds.core_v1.cluster import (
    KUBERNETES_FINALIZER,
    Namespace,
    NamespaceSpec,
    NamespaceStatus,
    Secret,
)
from kube.api.kinds.core_v1.pod import Pod, PodSpec, PodStatus, qos_class
from kube.api.meta_v1 import (
    DeleteOptions,
    LabelSelector,
    ObjectMeta,
    Resource,
    validate_object_meta_update,
)
from kube.api.scheme import KindInfo

CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
EPHEMERAL_CONTAINERS = "ephemeralcontainers"

_STATUS_METADATA = (
    "deletion_timestamp",
    "generation",
    "self_link",
    "labels",
    "annotations",
    "finalizers",
    "owner_references",
)


class Strategy:
    """The default behaviour of a kind, derived from its registration and declaration."""

    allow_create_on_update = False
    keep_status_on_create = False
    default_propagation = "Background"

    def __init__(self, info: KindInfo) -> None:
        self.info = info
        fields = info.cls.__struct_fields__
        self.has_status = "status" in info.subresources and "status" in fields
        self.has_spec = "spec" in fields

    def prepare_for_create(self, obj: Resource) -> None:
        """Clear what a client may not set on create (status, when it has a subresource)."""
        if self.has_status and not self.keep_status_on_create:
            setattr(obj, "status", None)  # noqa: B010

    def prepare_for_update(self, new: Resource, old: Resource) -> None:
        """Writes to the object itself leave its status as it was."""
        if self.has_status:
            setattr(new, "status", getattr(old, "status"))  # noqa: B009, B010

    def prepare_for_status_update(self, new: Resource, old: Resource) -> None:
        """Writes to ``/status`` change status only (and managedFields)."""
        if self.has_spec:
            setattr(new, "spec", getattr(old, "spec"))  # noqa: B009, B010
        for attr in _STATUS_METADATA:
            setattr(new.metadata, attr, getattr(old.metadata, attr))

    def prepare_for_subresource_update(
        self, subresource: str, new: Resource, old: Resource
    ) -> None:
        """What a write through ``subresource`` ("" for the object itself) may change."""
        if subresource in ("status", "approval"):
            self.prepare_for_status_update(new, old)
        elif subresource in ("", "scale"):
            self.prepare_for_update(new, old)

    def validate_create(self, obj: Resource) -> ErrorList:
        """Every problem with a new object."""
        return walk.validate_create(obj)

    def validate_update(self, new: Resource, old: Resource, subresource: str) -> ErrorList:
        """Every problem with the write; a binding is its own narrow rule, checked by its
        handler, not an update of the object."""
        if subresource == "binding":
            return ErrorList()
        return walk.validate_update(new, old)

    def grace_period(self, obj: Resource, options: DeleteOptions) -> int | None:
        """Seconds the object lives on, marked, after a delete (None or 0: none)."""
        return None

    def finalizers_pending(self, obj: Resource) -> bool:
        """Whether something must still finish before the object may go."""
        return bool(obj.metadata.finalizers)

    def mark_deleting(self, obj: Resource) -> None:
        """Record on the object that its deletion has begun."""


class PodStrategy(Strategy):
    """Pods bound to a node are deleted gracefully: the kubelet confirms the deletion.  A
    write to ``/ephemeralcontainers`` changes ``spec.ephemeralContainers`` only, and may
    only add to them; a write to the pod itself may not change them."""

    def prepare_for_create(self, obj: Resource) -> None:
        assert isinstance(obj, Pod)
        obj.status = PodStatus(phase="Pending", qos_class=qos_class(obj.spec) if obj.spec else None)

    def prepare_for_subresource_update(
        self, subresource: str, new: Resource, old: Resource
    ) -> None:
        if subresource != EPHEMERAL_CONTAINERS:
            super().prepare_for_subresource_update(subresource, new, old)
            return
        assert isinstance(new, Pod) and isinstance(old, Pod)
        added = new.spec.ephemeral_containers if new.spec is not None else None
        self.prepare_for_status_update(new, old)
        new.status = old.status
        new.spec = msgspec.structs.replace(old.spec or PodSpec(), ephemeral_containers=added)

    def validate_update(self, new: Resource, old: Resource, subresource: str) -> ErrorList:
        if subresource != EPHEMERAL_CONTAINERS:
            return super().validate_update(new, old, subresource)
        assert isinstance(new, Pod) and isinstance(old, Pod)
        errors = walk.validate(new)
        validate_object_meta_update(new.metadata, old.metadata, ROOT.child("metadata"), errors)
        new.validate_ephemeral_containers_update(old, errors)
        return errors

    def grace_period(self, obj: Resource, options: DeleteOptions) -> int | None:
        assert isinstance(obj, Pod)
        spec, status = obj.spec, obj.status
        if spec is None or not spec.node_name:
            return 0
        if status is not None and status.phase in ("Succeeded", "Failed"):
            return 0
        grace = options.grace_period_seconds
        if grace is None:
            grace = spec.termination_grace_period_seconds
            if grace is None:
                grace = 30
        if grace < 0:
            grace = 1
        if obj.metadata.deletion_grace_period_seconds is not None:
            grace = min(grace, obj.metadata.deletion_grace_period_seconds)
        return grace


class NamespaceStrategy(Strategy):
    """A namespace stays Terminating until the namespace controller has emptied it and
    removed its ``kubernetes`` finalizer through ``/finalize``, the only way to change it.

    Every new namespace gets that finalizer, after any a client sent (``kubectl create
    namespace`` sends ``spec: {}``): without it a delete would remove the namespace at once
    and leave everything in it behind."""

    def prepare_for_create(self, obj: Resource) -> None:
        super().prepare_for_create(obj)
        assert isinstance(obj, Namespace)
        obj.spec = obj.spec or NamespaceSpec()
        finalizers = obj.spec.finalizers or []
        if KUBERNETES_FINALIZER not in finalizers:
            obj.spec.finalizers = [*finalizers, KUBERNETES_FINALIZER]

    def prepare_for_update(self, new: Resource, old: Resource) -> None:
        super().prepare_for_update(new, old)
        assert isinstance(new, Namespace) and isinstance(old, Namespace)
        new.spec = old.spec

    def finalizers_pending(self, obj: Resource) -> bool:
        assert isinstance(obj, Namespace)
        return super().finalizers_pending(obj) or bool(obj.spec and obj.spec.finalizers)

    def mark_deleting(self, obj: Resource) -> None:
        assert isinstance(obj, Namespace)
        obj.status = obj.status or NamespaceStatus()
        obj.status.phase = "Terminating"


class CustomResourceDefinitionStrategy(Strategy):
    """A CRD being deleted stays, Terminating, until the API server has deleted its custom
    resources and removed the finalizer the first delete adds (see
    controlplane.apiserver.crd.customresources)."""

    def finalizers_pending(self, obj: Resource) -> bool:
        return super().finalizers_pending(obj) or obj.metadata.deletion_timestamp is None

    def mark_deleting(self, obj: Resource) -> None:
        finalizers = obj.metadata.finalizers or []
        if CRD_CLEANUP_FINALIZER not in finalizers:
            obj.metadata.finalizers = [*finalizers, CRD_CLEANUP_FINALIZER]


class CreateOnUpdate(Strategy):
    """Kinds a PUT may create (upstream's AllowCreateOnUpdate)."""

    allow_create_on_update = True


class KeepStatusOnCreate(Strategy):
    """Kinds whose creator also reports their status (a kubelet registering its Node)."""

    keep_status_on_create = True


class LegacyOrphan(Strategy):
    """ReplicationControllers orphan their pods unless asked otherwise (core/v1 history)."""

    default_propagation = "Orphan"


class JobStrategy(Strategy):
    """Jobs get a generated selector, unless ``manualSelector`` says the user chose one: the
    pods' template carries the Job's uid and name, and the selector matches the uid, so a
    Job's pods are its own even if another Job has the same labels (upstream
    ``generateSelector``)."""

    def prepare_for_create(self, obj: Resource) -> None:
        super().prepare_for_create(obj)
        assert isinstance(obj, Job)
        spec = obj.spec
        if spec is None or spec.manual_selector or spec.template is None:
            return
        uid, name = obj.metadata.uid or "", obj.metadata.name or ""
        template_meta = spec.template.metadata = spec.template.metadata or ObjectMeta()
        labels = template_meta.labels = dict(template_meta.labels or {})
        for key, value in (
            ("job-name", name),
            ("batch.kubernetes.io/job-name", name),
            ("controller-uid", uid),
            ("batch.kubernetes.io/controller-uid", uid),
        ):
            labels.setdefault(key, value)
        selector = spec.selector = spec.selector or LabelSelector()
        match = selector.match_labels = dict(selector.match_labels or {})
        match.setdefault("batch.kubernetes.io/controller-uid", uid)


class SecretStrategy(Strategy):
    """``stringData`` is write-only: merged into ``data`` (base64) before storing, its keys
    winning, as upstream's conversion does, so readers only ever see ``data``."""

    def prepare_for_create(self, obj: Resource) -> None:
        super().prepare_for_create(obj)
        _merge_string_data(obj)

    def prepare_for_update(self, new: Resource, old: Resource) -> None:
        super().prepare_for_update(new, old)
        _merge_string_data(new)


def _merge_string_data(obj: Resource) -> None:
    assert isinstance(obj, Secret)
    if obj.string_data is None:
        return
    data = dict(obj.data or {})
    for key, value in obj.string_data.items():
        data[key] = base64.b64encode(value.encode()).decode()
    obj.data, obj.string_data = data, None


STRATEGIES: dict[tuple[str, str], type[Strategy]] = {
    ("", "Pod"): PodStrategy,
    ("batch", "Job"): JobStrategy,
    ("", "Namespace"): NamespaceStrategy,
    ("", "Secret"): SecretStrategy,
    ("", "Endpoints"): CreateOnUpdate,
    ("", "Event"): CreateOnUpdate,
    ("", "Node"): KeepStatusOnCreate,
    ("", "ReplicationController"): LegacyOrphan,
    ("coordination.k8s.io", "Lease"): CreateOnUpdate,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): CustomResourceDefinitionStrategy,
    ("discovery.k8s.io", "EndpointSlice"): CreateOnUpdate,
    ("events.k8s.io", "Event"): CreateOnUpdate,
}


def strategy_for(info: KindInfo) -> Strategy:
    return STRATEGIES.get((info.group, info.kind), Strategy)(info)
