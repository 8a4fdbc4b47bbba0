"""Builders shared by the cloud controllers' tests: Nodes and Services as the API server
would hold them, and a harness wired to a :class:`FakeCloud`."""

from __future__ import annotations

from controlplane.cloud.context import TAINT_UNINITIALIZED, CloudContext, CloudOptions
from controlplane.cloud.fake import FakeCloud
from kube.api.kinds.core_v1.node import (
    Node,
    NodeAddress,
    NodeCondition,
    NodeSpec,
    NodeStatus,
    Taint,
)
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.meta_v1 import ObjectMeta
from tests.controlplane.controllers.fakes import Harness, harness, stamp


def node(
    name: str,
    *,
    ready: bool = True,
    uninitialized: bool = False,
    ip: str | None = None,
    pod_cidr: str | None = None,
    provider_id: str | None = None,
    labels: dict[str, str] | None = None,
    rv: str = "1",
) -> Node:
    taints = [Taint(key=TAINT_UNINITIALIZED, value="true", effect="NoSchedule")]
    return stamp(
        Node(
            metadata=ObjectMeta(name=name, labels=labels),
            spec=NodeSpec(
                taints=taints if uninitialized else None,
                pod_cidr=pod_cidr,
                pod_cidrs=[pod_cidr] if pod_cidr else None,
                provider_id=provider_id,
            ),
            status=NodeStatus(
                conditions=[NodeCondition(type="Ready", status="True" if ready else "False")],
                addresses=[NodeAddress(type="InternalIP", address=ip)] if ip else None,
            ),
        ),
        rv=rv,
    )


def lb_service(
    name: str = "web", *, namespace: str = "default", node_port: int = 30080, **spec: object
) -> Service:
    return stamp(
        Service(
            metadata=ObjectMeta(name=name, namespace=namespace),
            spec=ServiceSpec(
                type="LoadBalancer",
                ports=[ServicePort(protocol="TCP", port=80, node_port=node_port)],
                **spec,  # type: ignore[arg-type]
            ),
        )
    )


def cloud_harness(
    cloud: FakeCloud | None = None, **options: object
) -> tuple[Harness, FakeCloud, CloudContext]:
    fake = cloud or FakeCloud()
    return harness(), fake, CloudContext(fake, CloudOptions(**options))  # type: ignore[arg-type]
