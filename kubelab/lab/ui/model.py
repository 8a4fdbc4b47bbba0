"""What ``kubelab lab ui``'s page is fed: the lab's topology and Services as one JSON document.

The page draws whatever this returns and nothing else, so everything the picture shows is
decided here, where it can be tested without a browser or a lab:

- the lab's namespaces from the inventory (``kubelab.lab.topology.Lab``): the router (with the
  HA lab's balancer in it), the control planes, the workers and the client, each with its
  underlay address and, for a Kubernetes node, its Node's Ready condition and pod CIDR;
- per node, what its namespace holds (``NodeNetwork``, read by ``kubelab.lab.ui.facts``):
  the pods' bridge, the veth pairs (host end, and the pod it leads to where known) and its
  routes; the router's routes are the ones between nodes (a pod CIDR via a node's address);
- the pods, each on its node with its IP and phase (``Terminating`` once deleted);
- the Services: type, ClusterIP, ports with NodePorts, load-balancer addresses, and the
  endpoints of their EndpointSlices (address, ready, the pod and node behind each).

Element ids are the strings the page and a trace's hops share: ``node/NAME`` for a lab
namespace, ``pod/NS/NAME`` for a pod, ``svc/NS/NAME`` for a Service.

Pure: it reads the objects it is handed and never mutates them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube.api.kinds.core_v1.node import Node as NodeObject
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, EndpointSlice
from kubelab.lab.topology import API_PORT, CONTROLPLANE_IP, Lab, Node, Role


@dataclass(frozen=True)
class Veth:
    """The host end of a veth pair in a node's namespace."""

    name: str
    up: bool
    bridge: str = ""
    """The bridge it is a port of ("" when none)."""


@dataclass(frozen=True)
class Route:
    destination: str
    via: str = ""
    device: str = ""


@dataclass(frozen=True)
class NodeNetwork:
    """What one lab namespace holds, as ``ip -j`` reports it."""

    bridges: Mapping[str, str] = field(default_factory=dict)
    """Bridge name to its address (CIDR notation, "" when it has none)."""
    veths: Sequence[Veth] = ()
    routes: Sequence[Route] = ()
    error: str = ""
    """Why the namespace could not be read ("" when it was)."""


@dataclass(frozen=True)
class Cluster:
    """What the informers hold."""

    nodes: Sequence[NodeObject] = ()
    pods: Sequence[Pod] = ()
    services: Sequence[Service] = ()
    slices: Sequence[EndpointSlice] = ()


def node_id(name: str) -> str:
    return f"node/{name}"


def pod_id(namespace: str, name: str) -> str:
    return f"pod/{namespace}/{name}"


def topology(
    lab: Lab,
    cluster: Cluster,
    networks: Mapping[str, NodeNetwork],
    pod_veths: Mapping[str, str],
) -> dict[str, Any]:
    """The page's document.  ``networks`` by lab node name; ``pod_veths`` maps a pod's id to
    the host end of its veth."""
    objects = {n.metadata.name: n for n in cluster.nodes}
    nodes = [
        _node(node, objects.get(node.name), networks.get(node.name, NodeNetwork()), lab)
        for node in lab.nodes
    ]
    pods = sorted(
        (_pod(pod, pod_veths) for pod in cluster.pods),
        key=lambda p: (p["node"], p["namespace"], p["name"]),
    )
    return {
        "lab": lab.name,
        "nodes": nodes,
        "pods": pods,
        "balancer": _balancer(lab),
        "services": services(cluster.services, cluster.slices, cluster.pods),
    }


def _node(node: Node, obj: NodeObject | None, network: NodeNetwork, lab: Lab) -> dict[str, Any]:
    role = {
        Role.ROUTER: "router",
        Role.CONTROLPLANE: "control-plane",
        Role.WORKER: "worker",
        Role.CLIENT: "client",
    }[node.role]
    conditions = (obj.status.conditions if obj is not None and obj.status else None) or []
    ready = next((c.status == "True" for c in conditions if c.type == "Ready"), None)
    return {
        "id": node_id(node.name),
        "name": node.name,
        "role": role,
        "ip": node.ip,
        "uplink": node.uplink if node.role is not Role.ROUTER else "",
        "kubernetes": node.is_kubernetes_node,
        "ready": ready,
        "podCIDR": (obj.spec.pod_cidr if obj is not None and obj.spec else None) or "",
        "bridges": [
            {"name": name, "address": address} for name, address in network.bridges.items()
        ],
        "veths": [{"name": v.name, "up": v.up, "bridge": v.bridge} for v in network.veths],
        "routes": [_route(r, lab) for r in network.routes],
        "error": network.error,
    }


def _route(route: Route, lab: Lab) -> dict[str, str]:
    """A route, with the lab node its gateway is (``toward``), if any."""
    toward = next((n.name for n in lab.nodes if route.via and n.ip == route.via), "")
    return {
        "destination": route.destination,
        "via": route.via,
        "device": route.device,
        "toward": node_id(toward) if toward else "",
    }


def _pod(pod: Pod, pod_veths: Mapping[str, str]) -> dict[str, Any]:
    namespace, name = pod.metadata.namespace or "", pod.metadata.name or ""
    status, spec = pod.status, pod.spec
    phase = (status.phase if status else None) or "Pending"
    if pod.metadata.deletion_timestamp:
        phase = "Terminating"
    ident = pod_id(namespace, name)
    return {
        "id": ident,
        "namespace": namespace,
        "name": name,
        "node": (spec.node_name if spec else None) or "",
        "ip": status.first_pod_ip() if status else "",
        "phase": phase,
        "hostNetwork": bool(spec and spec.host_network),
        "veth": pod_veths.get(ident, ""),
    }


def _balancer(lab: Lab) -> dict[str, Any] | None:
    """The HA lab's API load balancer, in the router; None for a single control plane."""
    if not lab.ha:
        return None
    return {
        "address": f"{CONTROLPLANE_IP}:{API_PORT}",
        "backends": [node_id(n.name) for n in lab.controlplanes],
    }


def services(
    items: Sequence[Service], slices: Sequence[EndpointSlice], pods: Sequence[Pod]
) -> list[dict[str, Any]]:
    """Each Service with its ports and the endpoints of its EndpointSlices, by namespace and
    name."""
    pod_nodes = {
        pod_id(p.metadata.namespace or "", p.metadata.name or ""): (p.spec.node_name or "")
        for p in pods
        if p.spec is not None
    }
    by_service: dict[tuple[str, str], list[EndpointSlice]] = {}
    for slice_ in slices:
        owner = (slice_.metadata.labels or {}).get(SERVICE_NAME_LABEL)
        if owner:
            by_service.setdefault((slice_.metadata.namespace or "", owner), []).append(slice_)
    listed = []
    for service in items:
        namespace, name = service.metadata.namespace or "", service.metadata.name or ""
        spec, status = service.spec, service.status
        ingress = (status.load_balancer.ingress if status and status.load_balancer else None) or []
        listed.append(
            {
                "id": f"svc/{namespace}/{name}",
                "namespace": namespace,
                "name": name,
                "type": (spec.type if spec else None) or "ClusterIP",
                "clusterIP": (spec.cluster_ip if spec else None) or "",
                "ports": [
                    {
                        "name": p.name or "",
                        "port": p.port,
                        "protocol": p.protocol or "TCP",
                        "targetPort": str(p.target_port) if p.target_port is not None else "",
                        "nodePort": p.node_port or 0,
                    }
                    for p in (spec.ports if spec else None) or []
                ],
                "loadBalancerIPs": [i.ip for i in ingress if i.ip],
                "endpoints": _endpoints(by_service.get((namespace, name), []), pod_nodes),
            }
        )
    return sorted(listed, key=lambda s: (s["namespace"], s["name"]))


def _endpoints(slices: Sequence[EndpointSlice], pod_nodes: Mapping[str, str]) -> list[Any]:
    found = []
    for slice_ in slices:
        ports = [f"{p.port}/{p.protocol or 'TCP'}" for p in slice_.ports or [] if p.port]
        for endpoint in slice_.endpoints or []:
            ref = endpoint.target_ref
            pod = (
                pod_id(ref.namespace or "", ref.name or "")
                if ref is not None and ref.kind == "Pod"
                else ""
            )
            conditions = endpoint.conditions
            for address in endpoint.addresses or []:
                found.append(
                    {
                        "address": address,
                        "ports": ports,
                        "ready": conditions is None or conditions.ready is not False,
                        "pod": pod,
                        "node": endpoint.node_name or pod_nodes.get(pod, ""),
                    }
                )
    return sorted(found, key=lambda e: (e["address"], e["pod"]))
