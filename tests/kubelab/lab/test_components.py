"""The lab's component command lines, computed from the inventory without touching anything."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509

from kubelab.lab import components
from kubelab.lab.cluster import node_credentials, write_credentials
from kubelab.lab.components import CONTROL_PLANE_TAINT
from kubelab.lab.topology import Lab, LabSpec
from kubelab.pki import CertificateAuthority


def flag(command: tuple[str, ...], name: str) -> str:
    """The value after ``name`` on a command line."""
    return command[command.index(name) + 1]


def test_every_kubernetes_node_runs_containerd_a_kubelet_and_a_proxy() -> None:
    lab = Lab(LabSpec(name="demo", workers=2))
    keys = [c.key for c in components.lab_components(lab)]
    assert keys == [
        "controlplane/server",
        "controlplane/containerd",
        "controlplane/kubelet",
        "controlplane/proxy",
        "node1/containerd",
        "node1/kubelet",
        "node1/proxy",
        "node2/containerd",
        "node2/kubelet",
        "node2/proxy",
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
    etcd = components.etcd(lab)
    assert flag(etcd.command, "--listen-client-urls") == "http://127.0.0.1:2379"
    assert flag(etcd.command, "--data-dir") == "/run/kubelab/demo/controlplane/etcd"
    assert etcd.netns == Path("/run/netns/demo-controlplane")
    assert flag(components.server(lab).command, "--store") == "etcd://127.0.0.1:2379"
    sqlite = Lab(LabSpec(name="demo"))
    assert flag(components.server(sqlite).command, "--store") == "sqlite"
    assert "etcd" not in [c.name for c in components.lab_components(sqlite)]


def test_the_proxy_gets_the_spec_modes_and_a_health_endpoint() -> None:
    lab = Lab(LabSpec(name="demo", proxy_mode="userspace", iptables_backend="libiptc"))
    proxy = components.proxy(lab, lab.node("node2"))
    assert flag(proxy.command, "--proxy-mode") == "userspace"
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
    assert flag(kubelet.command, "--kubeconfig") == "/var/lib/kubelab/demo/node.kubeconfig"
    assert kubelet.log == Path("/var/log/k/demo/node1/kubelet.log")
    containerd = components.containerd(lab.node("node1"))
    (config,) = containerd.files
    assert config == Path("/var/lib/kubelab/demo/node1/containerd/config.toml")
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


def test_node_credentials_are_written_where_the_node_flags_name_them(tmp_path: Path) -> None:
    lab = Lab(LabSpec(name="demo"), run_root=tmp_path)
    ca = CertificateAuthority.load_or_create(lab.pki_dir)
    ca.issue("admin", organizations=["system:masters"], client=True).write(lab.pki_dir, "admin")
    node = lab.node("node1")
    kubelet = components.kubelet(lab, node).command
    credentials = node_credentials(lab, node)
    assert set(credentials) == {
        Path(flag(kubelet, "--client-ca-file")),
        Path(flag(kubelet, "--kubeconfig")),
        Path(flag(kubelet, "--tls-cert-file")),
        Path(flag(kubelet, "--tls-private-key-file")),
    }
    assert Path(flag(components.proxy(lab, node).command, "--kubeconfig")) in credentials
    serving = x509.load_pem_x509_certificate(credentials[node.state_dir / "kubelet.crt"])
    assert serving.subject.rfc4514_string() == "CN=system:node:node1"
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["10.240.0.11"]
    assert b"https://10.240.0.10:6443" in credentials[lab.node_kubeconfig]
    write_credentials(credentials)
    assert (node.state_dir / "kubelet.key").stat().st_mode & 0o777 == 0o600
    assert (node.state_dir / "kubelet.crt").read_bytes() == credentials[
        node.state_dir / "kubelet.crt"
    ]
