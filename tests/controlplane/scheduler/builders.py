"""Builders for scheduler tests: pods, nodes, NodeInfos and a fake framework ``Handle``.

Plugin tests describe a case as "this pod, these nodes", so the builders take keyword
arguments for exactly the fields scheduling reads and leave everything else unset.  They build
the API structs directly (no defaulting, no validation), as the informer cache would hand them
to the scheduler.

``FakeHandle`` is deliberately small: a snapshot over a list of ``NodeInfo``s, listers over a
list of objects, and the framework runners (filters with nominated pods, PreFilter extensions)
driven by plugin lists a test sets.  Tests of plugins that need more extend it.
"""

from __future__ import annotations

import builtins
import datetime
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

from controlplane.scheduler.cache import Snapshot
from controlplane.scheduler.framework.interface import (
    SUCCESS,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    Status,
    WaitingPod,
)
from controlplane.scheduler.framework.types import HostPort, ImageState, NodeInfo, PodInfo
from kube.api.kinds.core_v1.node import (
    ContainerImage,
    Node,
    NodeSpec,
    NodeStatus,
    Taint,
)
from kube.api.kinds.core_v1.pod import (
    Affinity,
    Container,
    ContainerPort,
    Pod,
    PodSchedulingGate,
    ResourceRequirements,
    Toleration,
    TopologySpreadConstraint,
)
from kube.api.kinds.core_v1.volume import Volume
from kube.api.meta_v1 import ObjectMeta, Resource
from kube.clock import FakeClock
from tests import builders
from tests.fakeapi import FakeApi

T = TypeVar("T")
R = TypeVar("R", bound=Resource)

DEFAULT_ALLOCATABLE = {"cpu": "4", "memory": "8Gi", "pods": "110"}


def _container_port(port: int | HostPort) -> ContainerPort:
    if isinstance(port, int):
        return ContainerPort(container_port=port, host_port=port, protocol="TCP")
    return ContainerPort(
        container_port=port.port,
        host_port=port.port,
        protocol=port.protocol,
        host_ip=port.ip or None,
    )


def make_pod(
    name: str = "p",
    namespace: str = "default",
    *,
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    node_name: str | None = None,
    priority: int | None = None,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    host_ports: Iterable[int | HostPort] = (),
    tolerations: Iterable[Toleration] = (),
    node_selector: Mapping[str, str] | None = None,
    affinity: Affinity | None = None,
    topology_spread: Iterable[TopologySpreadConstraint] = (),
    volumes: Iterable[Volume] = (),
    images: Iterable[str] = ("img",),
    scheduling_gates: Iterable[str] = (),
    scheduler_name: str | None = None,
    init_containers: list[Container] | None = None,
    overhead: Mapping[str, str] | None = None,
    creation_timestamp: datetime.datetime | None = None,
) -> Pod:
    """A pod with one container per image (``c0``, ``c1``, ...).

    ``requests``, ``limits`` and ``host_ports`` go on the first container; a host port given
    as an int is TCP on every address.  ``uid`` defaults to one derived from namespace/name.
    """
    ports = [_container_port(port) for port in host_ports]
    containers = [Container(name=f"c{i}", image=image) for i, image in enumerate(images)]
    if not containers:
        containers = [Container(name="c0", image="img")]
    first = containers[0]
    if requests is not None or limits is not None:
        first.resources = ResourceRequirements(
            requests=dict(requests) if requests is not None else None,
            limits=dict(limits) if limits is not None else None,
        )
    first.ports = ports or None
    pod = builders.pod(
        name,
        namespace,
        uid=uid or f"uid-{namespace}-{name}",
        labels=labels,
        node_name=node_name,
        containers=containers,
        init_containers=init_containers,
        priority=priority,
        tolerations=list(tolerations) or None,
        node_selector=dict(node_selector) if node_selector is not None else None,
        affinity=affinity,
        topology_spread_constraints=list(topology_spread) or None,
        volumes=list(volumes) or None,
        scheduling_gates=[PodSchedulingGate(name=gate) for gate in scheduling_gates] or None,
        scheduler_name=scheduler_name,
        overhead=dict(overhead) if overhead is not None else None,
    )
    pod.metadata.creation_timestamp = creation_timestamp
    return pod


def make_node(
    name: str = "n",
    *,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
    allocatable: Mapping[str, str] | None = None,
    unschedulable: bool = False,
    images: Mapping[str, int] | None = None,
) -> Node:
    """A node; ``images`` maps an image name (as the kubelet reports it) to its size."""
    resources: dict[str, str | int | float] = dict(
        allocatable if allocatable is not None else DEFAULT_ALLOCATABLE
    )
    return Node(
        metadata=ObjectMeta(name=name, uid=f"uid-{name}", labels=dict(labels or {})),
        spec=NodeSpec(taints=list(taints) or None, unschedulable=unschedulable or None),
        status=NodeStatus(
            capacity=dict(resources),
            allocatable=resources,
            images=[
                ContainerImage(names=[image], size_bytes=size)
                for image, size in (images or {}).items()
            ]
            or None,
        ),
    )


def make_node_info(node: Node, *pods: Pod) -> NodeInfo:
    """A NodeInfo of ``node`` running ``pods``.

    Its image states count only this node (``num_nodes`` 1); ``FakeHandle`` recounts them
    across its snapshot as the scheduler cache does.
    """
    info = NodeInfo(node)
    for pod in pods:
        info.add_pod(PodInfo.of(pod))
    for image in (node.status.images if node.status else None) or ():
        for image_name in image.names or ():
            info.image_states[image_name] = ImageState(size=image.size_bytes or 0, num_nodes=1)
    return info


class FakeSnapshot:
    """A ``NodeInfoLister`` over a fixed list of NodeInfos."""

    def __init__(self, nodes: Iterable[NodeInfo]) -> None:
        self._nodes = list(nodes)

    def list(self) -> builtins.list[NodeInfo]:
        return builtins.list(self._nodes)

    def get(self, node_name: str) -> NodeInfo:
        for info in self._nodes:
            if info.name == node_name:
                return info
        raise KeyError(node_name)

    def have_pods_with_affinity(self) -> builtins.list[NodeInfo]:
        return [info for info in self._nodes if info.pods_with_affinity]

    def have_pods_with_required_anti_affinity(self) -> builtins.list[NodeInfo]:
        return [info for info in self._nodes if info.pods_with_required_anti_affinity]

    def changed_since(self, mark: int) -> tuple[builtins.list[str] | None, int]:
        """No history: the nodes may have been replaced since any earlier call."""
        return None, 0


class FakeLister(Generic[R]):
    """A ``Lister`` over the objects of one kind; keys are ``namespace/name`` or ``name``."""

    def __init__(self, objects: Iterable[R]) -> None:
        self._objects = list(objects)

    def list(self, namespace: str | None = None) -> builtins.list[R]:
        return [
            obj for obj in self._objects if namespace is None or obj.metadata.namespace == namespace
        ]

    def get(self, key: str) -> R | None:
        namespace, _, name = key.rpartition("/")
        for obj in self._objects:
            if obj.metadata.name == name and (obj.metadata.namespace or "") == namespace:
                return obj
        return None


class FakeHandle:
    """A framework ``Handle`` for plugin tests.

    ``nodes`` (settable) is the snapshot; ``objects`` feeds ``lister(cls)``, filtered by
    type.  ``filter_plugins`` and ``pre_filter_plugins`` drive the framework runners that
    preemption uses; ``nominated`` maps node names to nominated pods and ``waiting`` holds
    pods waiting at Permit by uid.
    """

    def __init__(self, nodes: Iterable[NodeInfo] = (), objects: Iterable[Resource] = ()) -> None:
        self.objects: list[Resource] = list(objects)
        self.clock = FakeClock()
        self.client = FakeApi(self.clock)
        self.recorder: Any = None
        self.filter_plugins: list[FilterPlugin] = []
        self.pre_filter_plugins: list[PreFilterPlugin] = []
        self.nominated: dict[str, list[PodInfo]] = {}
        self.waiting: dict[str, WaitingPod] = {}
        self._nodes: list[NodeInfo] = []
        self.nodes = list(nodes)

    @property
    def nodes(self) -> list[NodeInfo]:
        return self._nodes

    @nodes.setter
    def nodes(self, nodes: Iterable[NodeInfo]) -> None:
        """Replace the snapshot, counting on how many nodes each image is (ImageLocality)."""
        self._nodes = list(nodes)
        counts: dict[str, int] = {}
        for info in self._nodes:
            for image_name in info.image_states:
                counts[image_name] = counts.get(image_name, 0) + 1
        for info in self._nodes:
            info.image_states = {
                image_name: ImageState(state.size, counts[image_name])
                for image_name, state in info.image_states.items()
            }

    @property
    def snapshot(self) -> FakeSnapshot:
        return FakeSnapshot(self._nodes)

    def lister(self, cls: type[T]) -> FakeLister[Any]:
        return FakeLister([obj for obj in self.objects if isinstance(obj, cls)])

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self.nominated.get(node_name, ()))

    def nominated_nodes(self) -> set[str]:
        return {name for name, pods in self.nominated.items() if pods}

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> Status:
        for plugin in self.filter_plugins:
            status = plugin.filter(state, pod, node)
            if not status.is_success:
                return status.with_plugin(plugin.NAME)
        return SUCCESS

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo
    ) -> Status:
        for plugin in self.pre_filter_plugins:
            extensions = plugin.pre_filter_extensions()
            if extensions is not None:
                status = extensions.add_pod(state, pod, to_add, node)
                if not status.is_success:
                    return status.with_plugin(plugin.NAME)
        return SUCCESS

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        for plugin in self.pre_filter_plugins:
            extensions = plugin.pre_filter_extensions()
            if extensions is not None:
                status = extensions.remove_pod(state, pod, to_remove, node)
                if not status.is_success:
                    return status.with_plugin(plugin.NAME)
        return SUCCESS

    def waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting.get(uid)

    def iterate_over_waiting_pods(self) -> list[WaitingPod]:
        return list(self.waiting.values())


class SnapshotHandle(FakeHandle):
    """A handle whose snapshot is the scheduler's real one (``cache.Snapshot``)."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self._real = snapshot

    @property
    def snapshot(self) -> Snapshot:  # type: ignore[override]
        return self._real
