"""Services, pods and nodes for the endpoints and endpointslice controller tests."""

from __future__ import annotations

import datetime

from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import (
    Container,
    ContainerPort,
    Pod,
    PodCondition,
    PodIP,
    PodSpec,
    PodStatus,
)
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.meta_v1 import ObjectMeta
from tests.controlplane.controllers.fakes import stamp

NAMESPACE = "shop"
CREATED = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
READY_AT = datetime.datetime(2026, 1, 1, 0, 5, 0, 250000, tzinfo=datetime.UTC)


def service(
    name: str = "web",
    *,
    selector: dict[str, str] | None = None,
    ports: list[ServicePort] | None = None,
    cluster_ip: str = "10.96.0.10",
    families: list[str] | None = None,
    publish: bool = False,
    labels: dict[str, str] | None = None,
    kind: str = "ClusterIP",
    namespace: str = NAMESPACE,
    no_selector: bool = False,
) -> Service:
    if ports is None:
        ports = [ServicePort(name="http", protocol="TCP", port=80, target_port=8080)]
    return stamp(
        Service(
            metadata=ObjectMeta(name=name, namespace=namespace, labels=labels),
            spec=ServiceSpec(
                selector=None if no_selector else (selector or {"app": "web"}),
                ports=ports,
                cluster_ip=cluster_ip,
                cluster_ips=[cluster_ip],
                ip_families=families if families is not None else ["IPv4"],
                type=kind,
                publish_not_ready_addresses=publish or None,
            ),
        ),
        created=CREATED,
    )


def pod(
    name: str,
    ips: tuple[str, ...] = ("10.244.0.1",),
    *,
    ready: bool = True,
    labels: dict[str, str] | None = None,
    node: str = "node-a",
    terminating: bool = False,
    phase: str = "Running",
    ports: list[ContainerPort] | None = None,
    hostname: str | None = None,
    subdomain: str | None = None,
    namespace: str = NAMESPACE,
) -> Pod:
    obj = stamp(
        Pod(
            metadata=ObjectMeta(
                name=name, namespace=namespace, labels=labels or {"app": "web"}, uid=f"uid-{name}"
            ),
            spec=PodSpec(
                containers=[Container(name="main", ports=ports)],
                node_name=node,
                hostname=hostname,
                subdomain=subdomain,
            ),
            status=PodStatus(
                phase=phase,
                pod_ip=ips[0] if ips else None,
                pod_ips=[PodIP(ip=ip) for ip in ips] or None,
                conditions=[
                    PodCondition(
                        type="Ready",
                        status="True" if ready else "False",
                        last_transition_time=READY_AT,
                    )
                ],
            ),
        )
    )
    if terminating:
        obj.metadata.deletion_timestamp = CREATED
    return obj


def node(name: str = "node-a", zone: str | None = "zone-1") -> Node:
    labels = {"topology.kubernetes.io/zone": zone} if zone else None
    return stamp(Node(metadata=ObjectMeta(name=name, labels=labels)))
