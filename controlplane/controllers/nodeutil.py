"""What the node controllers (node-ipam, node-lifecycle, taint-eviction, pod-garbage-collector)
share: the well-known node taints, reading node conditions, the node status-change event, and
marking a pod before deleting it.

Upstream keeps these in ``pkg/controller/util/node`` and ``pkg/util/pod``; they live here so
each rule is written once.
"""

from __future__ import annotations

from typing import Any

from kube.api import codec
from kube.api.kinds.core_v1.node import Node, NodeCondition, Taint
from kube.api.kinds.core_v1.pod import Pod, PodCondition
from kube.client.events import EventRecorder
from kube.client.interface import ApiClient

NO_EXECUTE = "NoExecute"
NO_SCHEDULE = "NoSchedule"

TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_PID_PRESSURE = "node.kubernetes.io/pid-pressure"
TAINT_NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"
TAINT_OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"

DISRUPTION_TARGET = "DisruptionTarget"
TERMINAL_PHASES = ("Succeeded", "Failed")


def node_condition(node: Node, condition_type: str) -> NodeCondition | None:
    """The node's condition of that type, if its status has one."""
    for condition in (node.status.conditions if node.status else None) or ():
        if condition.type == condition_type:
            return condition
    return None


def is_ready(node: Node) -> bool:
    condition = node_condition(node, "Ready")
    return condition is not None and condition.status == "True"


def node_taints(node: Node) -> list[Taint]:
    return list((node.spec.taints if node.spec else None) or ())


def no_execute_taints(node: Node | None) -> list[Taint]:
    return [t for t in node_taints(node) if t.effect == NO_EXECUTE] if node else []


def record_node_status_change(recorder: EventRecorder, node: Node, status: str) -> None:
    """The event upstream's node controllers record when they change how a node stands
    (``RecordNodeStatusChange``): reason ``status``, "Node <name> status is now: <status>"."""
    name = node.metadata.name or ""
    recorder.event(node, "Normal", status, f"Node {name} status is now: {status}")


def has_condition(pod: Pod, condition: PodCondition) -> bool:
    """Whether the pod already carries ``condition`` (same type, status, reason, message)."""
    return any(
        (c.type, c.status, c.reason, c.message)
        == (condition.type, condition.status, condition.reason, condition.message)
        for c in (pod.status.conditions if pod.status else None) or ()
    )


async def patch_pod_status(
    client: ApiClient, pod: Pod, *, phase: str | None = None, condition: PodCondition | None = None
) -> None:
    """Set the phase and/or one condition with a strategic merge patch of ``pods/status``
    that names the pod's uid, so it cannot land on a pod recreated under the same name
    (upstream ``PatchPodStatus``)."""
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if condition is not None:
        status["conditions"] = [codec.to_builtins(condition)]
    body = {"metadata": {"uid": pod.metadata.uid}, "status": status}
    await client.patch(
        Pod,
        pod.metadata.name or "",
        pod.metadata.namespace,
        body,
        patch_type="strategic",
        subresource="status",
    )
