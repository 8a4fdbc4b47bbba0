"""The labels and annotations the kubelet puts on CRI sandboxes and containers.

As upstream's ``kuberuntime/labels.go``: labels carry identity (pod name, namespace, UID and,
for containers, the container name), so the kubelet can find its own objects by label
filter after a restart; annotations carry what the kubelet needs to manage a container it
did not create in this process (the spec hash, the restart count, termination message
settings, grace periods and the preStop hook), so ``container_info`` can rebuild them from
what the runtime reports without the pod at hand (a pod deleted while the kubelet was down).

Sandboxes also carry the pod's own labels and annotations, as upstream does, so runtime
tools show them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

import msgspec

from kube.api.kinds.core_v1.pod import Container, Pod

POD_NAME_LABEL = "io.kubernetes.pod.name"
POD_NAMESPACE_LABEL = "io.kubernetes.pod.namespace"
POD_UID_LABEL = "io.kubernetes.pod.uid"
CONTAINER_NAME_LABEL = "io.kubernetes.container.name"

POD_DELETION_GRACE_ANNOTATION = "io.kubernetes.pod.deletionGracePeriod"
POD_TERMINATION_GRACE_ANNOTATION = "io.kubernetes.pod.terminationGracePeriod"
CONTAINER_HASH_ANNOTATION = "io.kubernetes.container.hash"
CONTAINER_RESTART_COUNT_ANNOTATION = "io.kubernetes.container.restartCount"
TERMINATION_MESSAGE_PATH_ANNOTATION = "io.kubernetes.container.terminationMessagePath"
TERMINATION_MESSAGE_POLICY_ANNOTATION = "io.kubernetes.container.terminationMessagePolicy"
PRE_STOP_ANNOTATION = "io.kubernetes.container.preStopHandler"
CONTAINER_PORTS_ANNOTATION = "io.kubernetes.container.ports"

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def _identity(pod: Pod) -> dict[str, str]:
    meta = pod.metadata
    return {
        POD_NAME_LABEL: meta.name or "",
        POD_NAMESPACE_LABEL: meta.namespace or "",
        POD_UID_LABEL: meta.uid or "",
    }


def sandbox_labels(pod: Pod) -> dict[str, str]:
    """The pod's labels plus its identity (identity wins on a clash)."""
    return {**(pod.metadata.labels or {}), **_identity(pod)}


def sandbox_annotations(pod: Pod) -> dict[str, str]:
    """The pod's annotations, unchanged."""
    return dict(pod.metadata.annotations or {})


def container_labels(pod: Pod, container: Container) -> dict[str, str]:
    """The pod's identity and the container's name; never the pod's own labels."""
    return {**_identity(pod), CONTAINER_NAME_LABEL: container.name or ""}


def container_annotations(pod: Pod, container: Container, restart_count: int) -> dict[str, str]:
    """What ``container_info`` reads back: hash, restart count, termination settings, grace
    periods, the preStop handler and the ports (JSON, in API field names)."""
    annotations = {
        CONTAINER_HASH_ANNOTATION: container_hash(container),
        CONTAINER_RESTART_COUNT_ANNOTATION: str(restart_count),
        TERMINATION_MESSAGE_PATH_ANNOTATION: container.termination_message_path or "",
        TERMINATION_MESSAGE_POLICY_ANNOTATION: container.termination_message_policy or "",
    }
    deletion_grace = pod.metadata.deletion_grace_period_seconds
    if deletion_grace is not None:
        annotations[POD_DELETION_GRACE_ANNOTATION] = str(deletion_grace)
    termination_grace = pod.spec.termination_grace_period_seconds if pod.spec else None
    if termination_grace is not None:
        annotations[POD_TERMINATION_GRACE_ANNOTATION] = str(termination_grace)
    if container.lifecycle is not None and container.lifecycle.pre_stop is not None:
        annotations[PRE_STOP_ANNOTATION] = msgspec.json.encode(
            container.lifecycle.pre_stop
        ).decode()
    if container.ports:
        annotations[CONTAINER_PORTS_ANNOTATION] = msgspec.json.encode(container.ports).decode()
    return annotations


def container_hash(container: Container) -> str:
    """A stable hash of what, when changed, needs the container restarted.

    As upstream since 1.31 (``HashContainer``): a pod's containers may only change their
    image in an update (resources are resized in place), so the hash covers name and image
    alone, FNV-1a 32 over their JSON, in hex.
    """
    data = json.dumps({"image": container.image or "", "name": container.name or ""})
    value = _FNV32_OFFSET
    for byte in data.encode():
        value = ((value ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return format(value, "x")


@dataclasses.dataclass(frozen=True)
class ContainerInfo:
    """What the kubelet knows of a runtime container from its labels and annotations.

    ``termination_grace_seconds`` is the pod's deletion grace period when it was being
    deleted, else its spec's termination grace period (upstream's choice when killing a
    container whose pod is gone); ``pre_stop`` the handler's JSON or "".
    """

    pod_uid: str
    pod_name: str
    pod_namespace: str
    container_name: str
    hash: str
    restart_count: int
    termination_message_path: str
    termination_message_policy: str
    termination_grace_seconds: int | None
    pre_stop: str


def _int_or_none(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def container_info(
    labels: Mapping[str, str], annotations: Mapping[str, str]
) -> ContainerInfo | None:
    """The container's identity and settings, or None when it lacks the kubelet's labels
    (a container some other client made).  Malformed annotations read as their zero value."""
    try:
        uid, name = labels[POD_UID_LABEL], labels[POD_NAME_LABEL]
        namespace, container = labels[POD_NAMESPACE_LABEL], labels[CONTAINER_NAME_LABEL]
    except KeyError:
        return None
    grace = _int_or_none(annotations.get(POD_DELETION_GRACE_ANNOTATION))
    if grace is None:
        grace = _int_or_none(annotations.get(POD_TERMINATION_GRACE_ANNOTATION))
    return ContainerInfo(
        pod_uid=uid,
        pod_name=name,
        pod_namespace=namespace,
        container_name=container,
        hash=annotations.get(CONTAINER_HASH_ANNOTATION, ""),
        restart_count=_int_or_none(annotations.get(CONTAINER_RESTART_COUNT_ANNOTATION)) or 0,
        termination_message_path=annotations.get(TERMINATION_MESSAGE_PATH_ANNOTATION, ""),
        termination_message_policy=annotations.get(TERMINATION_MESSAGE_POLICY_ANNOTATION, ""),
        termination_grace_seconds=grace,
        pre_stop=annotations.get(PRE_STOP_ANNOTATION, ""),
    )
