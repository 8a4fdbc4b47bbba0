"""ServiceCIDRs and IPAddresses on ``kubelab server --service-cluster-ip-range 10.96.0.0/28``
(the API server's allocator and repair loop, the controller-manager's service-cidr-controller),
through the pinned kubectl and the official Python client: the kubernetes.io task "Extend
Service IP Ranges" as written (the /28 filled, a second ServiceCIDR, new Services from it, the
range kept Terminating while in use and gone once its Services are)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import kubernetes
import pytest

from tests.servers import Kubectl, ServerProcess, serve_all_in_one

NEWCIDR1 = """\
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata:
  name: newcidr1
spec:
  cidrs:
  - 10.96.0.0/24
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from serve_all_in_one(tmp_path_factory, "--service-cluster-ip-range", "10.96.0.0/28")


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def _eventually(check: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def _ready(kubectl: Kubectl, name: str) -> str:
    cidr = kubectl.json("get", "servicecidr", name)
    conditions = cidr.get("status", {}).get("conditions", [])
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "")


def test_extend_service_ip_ranges(kubectl: Kubectl, server: ServerProcess) -> None:
    # The cluster of the task has the DNS Service at .10.
    kubectl.run(
        "create", "service", "clusterip", "kube-dns", "-n", "kube-system", "--tcp=53:53",
        "--clusterip=10.96.0.10", namespaced=False,
    )  # fmt: skip
    rows = _rows(kubectl.run("get", "servicecidr").stdout)
    assert [r[:2] for r in rows] == [["NAME", "CIDRS"], ["kubernetes", "10.96.0.0/28"]]
    assert _ready(kubectl, "kubernetes") == "True"  # set by the API server itself
    _eventually(
        lambda: (
            kubectl.json("get", "servicecidr", "kubernetes")["metadata"].get("finalizers")
            == ["networking.k8s.io/service-cidr-finalizer"]
        ),
        "the controller-manager never protected kubernetes",
    )
    rows = _rows(kubectl.run("get", "servicecidr,ipaddress").stdout)
    assert [r[:2] for r in rows] == [
        ["NAME", "CIDRS"],
        ["servicecidr.networking.k8s.io/kubernetes", "10.96.0.0/28"],
        [],
        ["NAME", "PARENTREF"],
        ["ipaddress.networking.k8s.io/10.96.0.1", "services/default/kubernetes"],
        ["ipaddress.networking.k8s.io/10.96.0.10", "services/kube-system/kube-dns"],
    ]

    ips = []
    for i in range(1, 13):
        created = kubectl.json("create", "service", "clusterip", f"test-{i}", "--tcp", "80")
        ips.append(created["spec"]["clusterIP"])
    assert len(set(ips)) == 12 and not {"10.96.0.1", "10.96.0.10"} & set(ips)
    full = kubectl.run("create", "service", "clusterip", "test-13", "--tcp", "80", check=False)
    assert full.returncode == 1
    assert full.stderr.strip() == (
        "error: failed to create ClusterIP service: Internal error occurred: failed to "
        "allocate a serviceIP: range is full"
    )

    kubectl.run("apply", "-f", "-", input=NEWCIDR1)
    rows = _rows(kubectl.run("get", "servicecidr").stdout)
    assert [r[:2] for r in rows[1:]] == [
        ["kubernetes", "10.96.0.0/28"],
        ["newcidr1", "10.96.0.0/24"],
    ]
    _eventually(lambda: _ready(kubectl, "newcidr1") == "True", "newcidr1 never Ready")
    extended = []
    for i in range(13, 17):
        created = kubectl.json("create", "service", "clusterip", f"test-{i}", "--tcp", "80")
        extended.append(created["spec"]["clusterIP"])
        address = kubectl.json("get", "ipaddress", extended[-1])
        assert address["spec"]["parentRef"] == {
            "resource": "services",
            "namespace": "default",
            "name": f"test-{i}",
        }
        assert address["metadata"]["labels"] == {
            "ipaddress.kubernetes.io/ip-family": "IPv4",
            "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io",
        }
    assert all(int(ip.rsplit(".", 1)[1]) > 15 for ip in extended), extended

    deleted = kubectl.run("delete", "servicecidr", "newcidr1", "--wait=false", namespaced=False)
    assert deleted.stdout.strip() == 'servicecidr.networking.k8s.io "newcidr1" deleted'
    _eventually(lambda: _ready(kubectl, "newcidr1") == "False", "newcidr1 never Terminating")
    held = kubectl.json("get", "servicecidr", "newcidr1")
    assert held["metadata"]["finalizers"] == ["networking.k8s.io/service-cidr-finalizer"]
    assert held["metadata"]["deletionTimestamp"]
    (condition,) = held["status"]["conditions"]
    assert condition["reason"] == "Terminating"
    assert condition["message"] == (
        "There are still IPAddresses referencing the ServiceCIDR, please remove them or create "
        "a new ServiceCIDR"
    )
    # New Services no longer come from a range being deleted.
    assert (
        "range is full"
        in kubectl.run(
            "create", "service", "clusterip", "test-17", "--tcp", "80", check=False
        ).stderr
    )

    for i in range(13, 17):
        kubectl.run("delete", "service", f"test-{i}")
    _eventually(
        lambda: kubectl.run("get", "servicecidr", "newcidr1", check=False).returncode == 1,
        "newcidr1 was never deleted",
    )
    gone = kubectl.run("get", "servicecidr", "newcidr1", check=False)
    assert gone.stderr.strip() == (
        'Error from server (NotFound): servicecidrs.networking.k8s.io "newcidr1" not found'
    )
    assert kubectl.run("get", "ipaddress", *extended, check=False).returncode == 1
    kubectl.run("delete", "service", *(f"test-{i}" for i in range(1, 13)))
    assert set(ips).isdisjoint(kubectl.run("get", "ipaddresses", "-o", "name").stdout.split())


def test_outside_every_range_is_refused(kubectl: Kubectl) -> None:
    refused = kubectl.run(
        "create", "service", "clusterip", "outside", "--tcp", "80", "--clusterip=10.97.0.5",
        check=False,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "failed to allocate IP 10.97.0.5: the provided network does not match the current " \
        "range" in refused.stderr  # fmt: skip


def test_the_python_client_sees_the_allocations(server: ServerProcess) -> None:
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(server.kubeconfig), client_configuration=config)
    with kubernetes.client.ApiClient(config) as client:
        core = kubernetes.client.CoreV1Api(client)
        networking = kubernetes.client.NetworkingV1Api(client)
        body = kubernetes.client.V1Service(
            metadata=kubernetes.client.V1ObjectMeta(name="from-python"),
            spec=kubernetes.client.V1ServiceSpec(ports=[kubernetes.client.V1ServicePort(port=80)]),
        )
        created = core.create_namespaced_service("default", body)
        try:
            ip = created.spec.cluster_ip
            address = networking.read_ip_address(ip)
            assert address.spec.parent_ref.name == "from-python"
            assert address.spec.parent_ref.resource == "services"
            names = [a.metadata.name for a in networking.list_ip_address().items]
            assert ip in names and "10.96.0.1" in names
            cidrs = networking.list_service_cidr(field_selector="metadata.name=kubernetes")
            (default,) = cidrs.items
            assert default.spec.cidrs == ["10.96.0.0/28"]
        finally:
            core.delete_namespaced_service("from-python", "default")
        _eventually(
            lambda: ip not in [a.metadata.name for a in networking.list_ip_address().items],
            "the Service's IPAddress outlived it",
        )


def test_a_deleted_ipaddress_is_repaired(kubectl: Kubectl) -> None:
    ip = kubectl.json("create", "service", "clusterip", "repaired", "--tcp", "80")["spec"][
        "clusterIP"
    ]
    kubectl.run("delete", "ipaddress", ip, namespaced=False)
    _eventually(
        lambda: kubectl.run("get", "ipaddress", ip, check=False).returncode == 0,
        "the API server's repair loop never gave the Service its IPAddress back",
    )
    rows = _rows(kubectl.run("get", "ipaddress", ip).stdout)
    assert rows[1][:2] == [ip, "services/default/repaired"]
    kubectl.run("delete", "service", "repaired")
