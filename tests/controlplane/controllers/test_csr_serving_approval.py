"""csrapproving's kubelet-serving approval (``--approve-kubelet-serving-certificates``): which
requests ``serving_problem`` accepts against the Node's addresses, and the controller approving,
leaving pending, and looking again when the Node's addresses change."""

from __future__ import annotations

import pytest

from controlplane.controllers import certificates, csrapproving
from controlplane.controllers.context import ControllerOptions
from kube.api.kinds.certificates_v1 import (
    APPROVED,
    CertificateSigningRequest,
    CertificateSigningRequestSpec,
)
from kube.api.kinds.core_v1.node import Node, NodeAddress, NodeStatus
from kube.api.meta_v1 import ObjectMeta
from kube.pki import certificate_request, generate_key
from tests.controlplane.controllers.fakes import harness, stamp

NODE = "system:node:n1"
USAGES = ["digital signature", "server auth"]


def node(*addresses: tuple[str, str], rv: str = "1") -> Node:
    return stamp(
        Node(
            metadata=ObjectMeta(name="n1"),
            status=NodeStatus(addresses=[NodeAddress(type=t, address=a) for t, a in addresses]),
        ),
        rv=rv,
    )


N1 = node(("InternalIP", "10.240.0.11"), ("Hostname", "n1"), ("ExternalDNS", "n1.example.com"))


def serving(
    *,
    dns: list[str] | None = None,
    ips: list[str] | None = None,
    subject: tuple[str, list[str]] = (NODE, ["system:nodes"]),
    usages: list[str] | None = None,
    username: str = NODE,
    groups: list[str] | None = None,
) -> CertificateSigningRequest:
    pem = certificate_request(
        generate_key(),
        *subject,
        dns_names=["n1"] if dns is None else dns,
        ip_addresses=["10.240.0.11"] if ips is None else ips,
    )
    return stamp(
        CertificateSigningRequest(
            metadata=ObjectMeta(name="csr-serving"),
            spec=CertificateSigningRequestSpec(
                request=pem,
                signer_name=certificates.KUBELET_SERVING,
                usages=USAGES if usages is None else usages,
                username=username,
                groups=["system:nodes", "system:authenticated"] if groups is None else groups,
            ),
        )
    )


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        pytest.param(serving(), None, id="hostname-and-internal-ip"),
        pytest.param(serving(dns=["n1", "n1.example.com"], ips=[]), None, id="dns-names-only"),
        pytest.param(
            serving(usages=["key encipherment", "digital signature", "server auth"]),
            None,
            id="rsa-style-usages",
        ),
        pytest.param(
            serving(dns=["n2"]), 'DNS name "n2" is not an address of node "n1"', id="foreign-dns"
        ),
        pytest.param(
            serving(ips=["10.240.0.12"]),
            'IP address "10.240.0.12" is not an address of node "n1"',
            id="foreign-ip",
        ),
        pytest.param(
            serving(dns=["10.240.0.11"], ips=[]),
            'DNS name "10.240.0.11" is not an address of node "n1"',
            id="ip-as-dns-name",
        ),
        pytest.param(
            serving(username="system:node:n2"),
            'requested by "system:node:n2", not by the node "system:node:n1" itself',
            id="another-node-asks",
        ),
        pytest.param(
            serving(groups=["system:authenticated"]),
            'requested by "system:node:n1", not by the node "system:node:n1" itself',
            id="not-in-system-nodes",
        ),
        pytest.param(
            serving(usages=["digital signature", "server auth", "client auth"]),
            "usages must be digital signature, server auth (and optionally key encipherment)",
            id="client-usage-too",
        ),
        pytest.param(
            serving(subject=(NODE, ["system:masters"])),
            'subject organization must be exactly "system:nodes"',
            id="wrong-organization",
        ),
        pytest.param(
            serving(dns=[], ips=[]),
            "at least one DNS name or IP address is required",
            id="no-names",
        ),
    ],
)
def test_serving_problem(request_: CertificateSigningRequest, problem: str | None) -> None:
    assert csrapproving.serving_problem(request_, N1) == problem


def test_a_request_for_a_node_not_yet_known_is_not_approved() -> None:
    assert csrapproving.serving_problem(serving(), None) == 'node "n1" not found'


async def test_the_node_asking_for_its_own_addresses_is_approved() -> None:
    h = harness(ControllerOptions(approve_kubelet_serving=True))
    request = serving()
    h.store(request, N1)
    await csrapproving.new(h.ctx).sync("csr-serving")
    (write,) = h.client.writes("update", "CertificateSigningRequest")
    assert write.subresource == "approval"
    condition = write.obj.status.conditions[-1]
    assert (condition.type, condition.reason, condition.message) == (
        APPROVED,
        "AutoApproved",
        csrapproving.SERVING,
    )


async def test_without_the_flag_serving_requests_are_left_to_an_admin() -> None:
    h = harness()
    h.store(serving(), N1)
    await csrapproving.new(h.ctx).sync("csr-serving")
    assert h.client.writes("update", "CertificateSigningRequest") == []


ADDED = (("InternalIP", "10.240.0.11"), ("Hostname", "n1"), ("ExternalIP", "192.0.2.7"))


async def test_pending_until_the_node_reports_the_address_then_approved() -> None:
    h = harness(ControllerOptions(approve_kubelet_serving=True))
    h.store(serving(ips=["10.240.0.11", "192.0.2.7"]))
    controller = csrapproving.new(h.ctx)
    await controller.sync("csr-serving")  # no Node yet
    before = node(*ADDED[:2])
    h.cache(before)
    await controller.sync("csr-serving")  # 192.0.2.7 is not the node's
    assert h.client.writes("update", "CertificateSigningRequest") == []
    while len(controller.queue):
        key = await controller.queue.get()
        controller.queue.done(key)
    after = node(*ADDED, rv="2")
    h.cache(after)
    controller._node_updated(before, after)
    assert len(controller.queue) == 1
    heartbeat = node(*ADDED, rv="3")
    controller._node_updated(after, heartbeat)
    assert len(controller.queue) == 1  # a heartbeat without an address change: nothing
    await controller.sync(await controller.queue.get())
    (write,) = h.client.writes("update", "CertificateSigningRequest")
    assert write.obj.status.conditions[-1].type == APPROVED
