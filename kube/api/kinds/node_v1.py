"""node.k8s.io/v1: RuntimeClass, the container runtime configurations pods choose by name.

A pod naming ``spec.runtimeClassName`` asks every node it lands on to run its sandbox with the
class's ``handler``: the kubelet hands it to CRI as ``RunPodSandboxRequest.runtime_handler``, and
containerd picks the runtime configured under that name (runc, a VM runtime, gVisor...).  The
handler is a DNS-1123 label and immutable, since pods already running were started with it.  A
class may also carry the fixed resources its runtime costs each pod (``overhead.podFixed``) and
the nodes that can run it (``scheduling``: a node selector and tolerations); the RuntimeClass
admission plugin (``controlplane.apiserver.auth.admission.runtimeclass``) copies both into the
pods that name the class, so the scheduler and the kubelet see them without looking the class up.

Field names, order and protobuf numbers are k8s.io/api release-1.36's; validation follows
pkg/apis/node/validation with upstream's paths (tolerations are checked as a pod's, then for
duplicates).  One difference: an empty handler is reported as ``Required value`` (the declared
``required``), where upstream reports the DNS-label message for "".
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from kube.api import names
from kube.api.errors import ErrorList, Path
from kube.api.kinds.core_v1.pod import ResourceList, Toleration, validate_resource_lists
from kube.api.meta_v1 import Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import DNS1123_LABEL, Struct, atomic, meta


class Overhead(Struct):
    """The resources a runtime class costs each pod, beyond its containers'."""

    pod_fixed: Annotated[
        ResourceList | None,
        meta(doc="The fixed resource overhead of a pod running with this class.", proto=1),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        # Upstream checks them as a container's limits, so the paths read overhead.limits[...].
        validate_resource_lists(self.pod_fixed, None, path, errors)


class Scheduling(Struct):
    """The nodes that support a runtime class: pods of the class get these constraints."""

    node_selector: Annotated[
        dict[str, str] | None,
        meta(
            map_type="atomic",
            doc="Labels a node must carry to run pods of this class; merged into each pod's "
            "nodeSelector (a conflicting pod is refused).",
            proto=1,
        ),
    ] = None
    tolerations: Annotated[
        list[Toleration] | None,
        atomic(
            doc="Tolerations appended (when not already present) to the pods of this class.",
            proto=2,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        names.validate_labels(self.node_selector, path.child("nodeSelector"), errors)
        seen: set[tuple[str | None, str | None, str | None, str | None]] = set()
        for i, toleration in enumerate(self.tolerations or ()):
            key = (toleration.key, toleration.operator, toleration.value, toleration.effect)
            if key in seen:
                errors.duplicate(
                    path.child("tolerations").index(i), msgspec.to_builtins(toleration)
                )
            seen.add(key)


@kind(
    group="node.k8s.io",
    version="v1",
    plural="runtimeclasses",
    namespaced=False,
    columns=(
        NAME_COLUMN,
        Column(
            "Handler",
            lambda o, now: o.handler or "",
            description="Handler is the name of the underlying runtime and configuration",
        ),
        AGE_COLUMN,
    ),
)
class RuntimeClass(Resource):
    """A container runtime configuration pods select by ``runtimeClassName``."""

    handler: Annotated[
        str | None,
        meta(
            required=True,
            format=DNS1123_LABEL,
            immutable=True,
            doc="The CRI handler (the runtime's configuration name) that runs pods of this "
            "class; a DNS-1123 label, immutable.",
            proto=2,
        ),
    ] = None
    overhead: Annotated[
        Overhead | None,
        meta(doc="The resources pods of this class cost beyond their containers'.", proto=3),
    ] = None
    scheduling: Annotated[
        Scheduling | None,
        meta(doc="The nodes that support this class; absent: every node.", proto=4),
    ] = None
