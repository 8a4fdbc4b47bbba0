"""The lab's component command lines, computed from the inventory without touching anything."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from kube.client import kubeconfig
from kube.pki import CertificateAuthority, identity
from kubelab.lab import components
from kubelab.lab.cluster import join_credentials, node_credentials, write_credentials
from kubelab.lab.components import CONTROL_PLANE_TAINT
from kubelab.lab.topology import Lab, LabSpec


def flag(command: tuple[str, ...], name: str) -> str:
    """The value after ``name`` on a command line."""
    return command[command.index(name) + 1]


def test_every_kubernetes_node_runs_containerd_a_kubelet_a_proxy_and_a_policy_agent() -> None:
    lab = Lab(LabSpec(name="demo", workers=2))
    keys = [c.key for c in components.lab_components(lab)]
    assert keys == [
        "router/registry",
        "router/private-registry",
        "controlplane/server",
        "controlplane/containerd",
        "controlplane/kubelet",
        "controlplane/proxy",
        "controlplane/network-policy",
        "node1/containerd",
        "node1/kubelet",
        "node1/proxy",
        "node1/network-policy",
        "node2/containerd",
        "node2/kubelet",
        "node2/proxy",
        "node2/network-policy",
        "controlplane/forwarder",
    ]


def test_only_the_control_plane_kubelet_registers_with_the_no_schedule_taint() -> None:
    lab = Lab(LabSpec(name="demo"))
    control = components.kubelet(lab, lab.controlplane).command
    worker = components.kubelet(lab, lab.node("node1")).command
    assert flag(control, "--register-with-taints") == CONTROL_PLANE_TAINT
    assert "--register-with-taints" not in worker
    assert flag(worker, "--node-name") == "node1"
    assert flag(worker, "--node-ip") == "10.240.0.11"
    assert flag(worker, "--cgroup-root") == "/kubelab/demo/node1"
    assert flag(worker, "--container-runtime-endpoint") == (
        "unix:///run/kubelab/demo/node1/containerd/containerd.sock"
    )


def test_with_store_etcd_the_control_plane_runs_etcd_and_the_server_uses_it() -> None:
    lab = Lab(LabSpec(name="demo", store="etcd"))
    names = [c.name for c in components.node_components(lab, lab.controlplane)]
    assert names[:2] == ["etcd", "server"]
    etcd = components.etcd(lab, lab.controlplane)
    assert flag(etcd.command, "--listen-client-urls") == "http://127.0.0.1:2379"
    assert flag(etcd.command, "--data-dir") == "/run/kubelab/demo/controlplane/etcd"
    assert etcd.netns == Path("/run/netns/demo-controlplane")
    assert (
        flag(components.server(lab, lab.controlplane).command, "--store") == "etcd://127.0.0.1:2379"
    )
    sqlite = Lab(LabSpec(name="demo"))
    assert flag(components.server(sqlite, sqlite.controlplane).command, "--store") == "sqlite"
    assert "etcd" not in [c.name for c in components.lab_components(sqlite)]


@pytest.mark.parametrize("mode", ["userspace", "nftables"])
def test_the_proxy_gets_the_spec_modes_and_a_health_endpoint(mode: str) -> None:
    lab = Lab(LabSpec(name="demo", proxy_mode=mode, iptables_backend="libiptc"))
    proxy = components.proxy(lab, lab.node("node2"))
    assert flag(proxy.command, "--proxy-mode") == mode
    assert flag(proxy.command, "--iptables-backend") == "libiptc"
    assert flag(proxy.command, "--hostname-override") == "node2"
    assert proxy.health is not None
    assert proxy.health.url == "http://127.0.0.1:10256/healthz"
    assert proxy.health.netns == Path("/run/netns/demo-node2")


def test_roots_and_program_are_parameters_so_vms_can_use_them() -> None:
    lab = Lab(LabSpec(name="demo"), run_root=Path("/var/lib/kubelab"), log_root=Path("/var/log/k"))
    kubelet = components.kubelet(lab, lab.node("node1"), program=("/usr/local/bin/kubelab",))
    assert kubelet.command[:2] == ("/usr/local/bin/kubelab", "kubelet")
    assert flag(kubelet.command, "--root-dir") == "/var/lib/kubelab/demo/node1/kubelet"
    assert flag(kubelet.command, "--kubeconfig") == (
        "/var/lib/kubelab/demo/node1/kubelet.kubeconfig"
    )
    assert kubelet.log == Path("/var/log/k/demo/node1/kubelet.log")
    containerd = components.containerd(lab, lab.node("node1"))
    config, *hosts = containerd.files
    assert config == Path("/var/lib/kubelab/demo/node1/containerd/config.toml")
    assert all(p.is_relative_to("/var/lib/kubelab/demo/node1/containerd/certs.d") for p in hosts)
    assert (
        'address = "/var/lib/kubelab/demo/node1/containerd/containerd.sock"'
        in (containerd.files[config])
    )


def test_the_forwarder_listens_on_the_host_port_and_leads_into_the_control_plane() -> None:
    lab = Lab(LabSpec(name="demo", host_api_port=16443))
    forwarder = components.forwarder(lab)
    assert forwarder.netns is None  # it runs on the host
    assert flag(forwarder.command, "--listen") == "127.0.0.1:16443"
    assert flag(forwarder.command, "--target") == "10.240.0.10:6443"
    assert flag(forwarder.command, "--netns") == "/run/netns/demo-controlplane"


def test_the_server_authorizes_by_node_and_rbac_and_runs_the_lab_cloud() -> None:
    lab = Lab(LabSpec(name="demo"))
    server = components.server(lab, lab.controlplane).command
    assert flag(server, "--authorization-mode") == "Node,RBAC"
    assert flag(server, "--cloud-provider") == "lab"
    assert flag(server, "--cloud-config") == "/run/kubelab/demo/cloud.yaml"
    assert flag(server, "--cluster-name") == "demo"
    assert flag(server, "--node-monitor-grace-period") == "20s"
    for node in lab.kubernetes_nodes:
        assert flag(components.kubelet(lab, node).command, "--cloud-provider") == "external"


def test_the_cloud_config_lists_every_kubernetes_node_with_zones_alternating() -> None:
    lab = Lab(LabSpec(name="demo", workers=2))
    config = json.loads(components.cloud_config(lab))
    assert config["lab"] == "demo"
    assert config["routerNetns"] == "/run/netns/demo-router"
    assert config["loadBalancerPool"] == "10.240.0.200-10.240.0.250"
    assert [(n["name"], n["internalIP"], n["zone"]) for n in config["nodes"]] == [
        ("controlplane", "10.240.0.10", "lab-a"),
        ("node1", "10.240.0.11", "lab-b"),
        ("node2", "10.240.0.12", "lab-a"),
    ]
    assert config["nodes"][1]["netns"] == "/run/netns/demo-node1"
    # A node's zone does not move when another node leaves.
    shrunk = Lab(LabSpec(name="demo").with_workers(("node2",)))
    assert json.loads(components.cloud_config(shrunk))["nodes"][1]["zone"] == "lab-a"


def test_pods_resolve_through_a_resolv_conf_without_the_cluster_dns() -> None:
    """The cluster DNS pod resolves (and forwards) through the kubelet's --resolv-conf: in
    the netns lab one without nameservers (no upstream there), on VMs the machine's own."""
    lab = Lab(LabSpec(name="demo"))
    kubelet = components.kubelet(lab, lab.node("node1"))
    path = Path(flag(kubelet.command, "--resolv-conf"))
    assert path == Path("/run/kubelab/demo/node1/resolv.conf")
    assert "nameserver" not in "".join(
        line for line in kubelet.files[path].splitlines() if not line.startswith("#")
    )
    assert flag(kubelet.command, "--cluster-dns") == "10.96.0.10"
    vm = Lab(LabSpec(name="demo"), resolv_conf=Path("/etc/resolv.conf"))
    on_vm = components.kubelet(vm, vm.node("node1"))
    assert flag(on_vm.command, "--resolv-conf") == "/etc/resolv.conf"
    assert on_vm.files == {}  # the machine's file is never written
    assert vm.with_spec(vm.spec.with_workers(("node1", "node2"))).resolv_conf == vm.resolv_conf


def _pki(lab: Lab) -> CertificateAuthority:
    """A server's PKI as ``kubelab server`` leaves it: the CA and the proxy's identity."""
    ca = CertificateAuthority.load_or_create(lab.pki_dir)
    ca.issue("system:kube-proxy", client=True).write(lab.pki_dir, "proxy")
    return ca


@pytest.fixture
def run_root() -> Iterator[Path]:
    """A lab's run root short enough for containerd's socket paths (107 bytes at most), which
    pytest's per-test (and per-worker) temporary directories are not."""
    with tempfile.TemporaryDirectory(prefix="kl-") as root:
        yield Path(root)


def test_node_credentials_are_written_where_the_node_flags_name_them(run_root: Path) -> None:
    lab = Lab(LabSpec(name="demo"), run_root=run_root)
    _pki(lab)
    node = lab.node("node1")
    kubelet = components.kubelet(lab, node).command
    proxy = components.proxy(lab, node).command
    agent = components.network_policy(lab, node).command
    credentials = node_credentials(lab, node)
    assert set(credentials) == {
        Path(flag(kubelet, "--client-ca-file")),
        Path(flag(kubelet, "--kubeconfig")),
        Path(flag(proxy, "--kubeconfig")),
        Path(flag(agent, "--kubeconfig")),
    }
    write_credentials(credentials)
    own = kubeconfig.load(node.kubelet_kubeconfig)
    assert own.server == "https://10.240.0.10:6443"
    assert own.cert_pem is not None
    user, groups = identity(x509.load_pem_x509_certificate(own.cert_pem))
    assert (user, groups) == ("system:node:node1", ["system:nodes"])
    proxy_config = kubeconfig.load(lab.proxy_kubeconfig)
    assert proxy_config.server == "https://10.240.0.10:6443"
    assert proxy_config.cert_pem is not None
    assert identity(x509.load_pem_x509_certificate(proxy_config.cert_pem))[0] == (
        "system:kube-proxy"
    )
    agent_config = kubeconfig.load(lab.network_policy_kubeconfig)
    assert agent_config.cert_pem is not None
    assert identity(x509.load_pem_x509_certificate(agent_config.cert_pem))[0] == (
        "system:kubelab-network-policy"
    )
    assert node.kubelet_kubeconfig.stat().st_mode & 0o777 == 0o600


def test_a_joining_node_gets_a_bootstrap_kubeconfig_and_no_client_certificate(
    run_root: Path,
) -> None:
    lab = Lab(LabSpec(name="demo"), run_root=run_root)
    _pki(lab)
    node = lab.node("node2")
    kubelet = components.kubelet(lab, node, bootstrap=True).command
    credentials = join_credentials(lab, node, "abcdef.0123456789abcdef")
    assert Path(flag(kubelet, "--bootstrap-kubeconfig")) in credentials
    assert Path(flag(kubelet, "--kubeconfig")) not in credentials  # the CSR's result
    write_credentials(credentials)
    bootstrap = kubeconfig.load(node.bootstrap_kubeconfig)
    assert bootstrap.token == "abcdef.0123456789abcdef"
    assert bootstrap.cert_pem is None
