"""The HA lab's inventory and command lines: control planes, etcd members, servers, the load
balancer, computed without touching anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelab.lab import components
from kubelab.lab.cluster import seed_pki, up_actions
from kubelab.lab.topology import Lab, LabSpec, SpecError, running_spec


def flag(command: tuple[str, ...], name: str) -> str:
    return command[command.index(name) + 1]


def ha(tmp_path: Path | None = None) -> Lab:
    spec = LabSpec(name="demo", workers=1, store="etcd", control_planes=3)
    return Lab(spec) if tmp_path is None else Lab(spec, run_root=tmp_path, log_root=tmp_path)


def test_three_control_planes_get_their_own_addresses_below_the_api_address() -> None:
    lab = ha()
    assert [(n.name, n.ip) for n in lab.controlplanes] == [
        ("controlplane1", "10.240.0.2"),
        ("controlplane2", "10.240.0.3"),
        ("controlplane3", "10.240.0.4"),
    ]
    assert lab.ha and lab.controlplane.name == "controlplane1"
    assert lab.api_url == "https://10.240.0.10:6443"
    assert [n.name for n in lab.kubernetes_nodes] == [
        "controlplane1",
        "controlplane2",
        "controlplane3",
        "node1",
    ]


def test_one_control_plane_stays_as_it_was() -> None:
    lab = Lab(LabSpec(name="demo", store="etcd"))
    assert not lab.ha
    assert [(n.name, n.ip) for n in lab.controlplanes] == [("controlplane", "10.240.0.10")]
    assert lab.etcd_dir == Path("/run/kubelab/demo/controlplane/etcd")


@pytest.mark.parametrize(
    ("control_planes", "store", "message"),
    [
        (2, "etcd", "1, 3 or 5"),
        (7, "etcd", "1, 3 or 5"),
        (0, "etcd", "1, 3 or 5"),
        (3, "sqlite", "need --store etcd"),
    ],
)
def test_control_planes_must_be_odd_and_on_etcd(
    control_planes: int, store: str, message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        LabSpec(control_planes=control_planes, store=store).validate()


def test_the_spec_saves_control_planes_and_old_spec_files_still_load(tmp_path: Path) -> None:
    spec = LabSpec(name="demo", store="etcd", control_planes=3)
    spec.save(tmp_path / "spec.json")
    assert LabSpec.load(tmp_path / "spec.json") == spec
    (tmp_path / "old.json").write_text('{"name": "old", "workers": 2, "store": "sqlite"}')
    assert LabSpec.load(tmp_path / "old.json").control_planes == 1


def test_after_a_crash_down_finds_the_control_planes_by_their_namespaces() -> None:
    spec = running_spec("gone", {"gone-router", "gone-controlplane1", "gone-controlplane3"})
    assert (spec.control_planes, spec.store) == (3, "etcd")


def test_each_control_plane_runs_an_etcd_member_with_peer_tls_and_a_server() -> None:
    lab = ha()
    for cp in lab.controlplanes:
        names = [c.name for c in components.node_components(lab, cp)]
        assert names == ["etcd", "server", "containerd", "kubelet", "proxy", "network-policy"]
    etcd = components.etcd(lab, lab.node("controlplane2")).command
    assert "--name=controlplane2" in etcd
    assert "--listen-peer-urls=https://10.240.0.3:2380" in etcd
    assert "--peer-client-cert-auth" in etcd
    assert (
        "--initial-cluster=controlplane1=https://10.240.0.2:2380,"
        "controlplane2=https://10.240.0.3:2380,controlplane3=https://10.240.0.4:2380"
    ) in etcd


def test_each_server_stores_through_its_own_member_first_and_names_the_api_address() -> None:
    lab = ha()
    server = components.server(lab, lab.node("controlplane2"))
    command = server.command
    assert command[:7] == (
        "unshare",
        "--uts",
        "--",
        "sh",
        "-c",
        'hostname "$0" && exec "$@"',
        "controlplane2",
    )
    assert flag(command, "--store") == "etcd://10.240.0.3:2379,10.240.0.2:2379,10.240.0.4:2379"
    assert flag(command, "--bind-address") == "10.240.0.3"
    assert flag(command, "--advertise-address") == "10.240.0.3"
    assert flag(command, "--tls-san") == "10.240.0.10"
    assert flag(command, "--data-dir") == "/run/kubelab/demo/controlplane2/server"
    assert server.health is not None and server.health.url == "https://10.240.0.3:6443/readyz"


def test_the_router_balances_the_api_servers_and_the_host_forwarder_leads_to_it() -> None:
    lab = ha()
    assert [c.key for c in components.node_components(lab, lab.router)] == [
        "router/loadbalancer",
        "router/registry",
        "router/private-registry",
    ]
    lb = components.loadbalancer(lab)
    assert lb.netns == Path("/run/netns/demo-router")
    assert flag(lb.command, "--listen") == "10.240.0.10:6443"
    targets = [lb.command[i + 1] for i, word in enumerate(lb.command) if word == "--target"]
    assert targets == ["10.240.0.2:6443", "10.240.0.3:6443", "10.240.0.4:6443"]
    assert flag(lb.command, "--health-check") == "/readyz"
    assert flag(lb.command, "--ca") == str(lab.ca_file)
    forwarder = components.forwarder(lab)
    assert forwarder.key == "router/forwarder"
    assert flag(forwarder.command, "--netns") == "/run/netns/demo-router"
    assert flag(forwarder.command, "--target") == "10.240.0.10:6443"


def test_up_seeds_the_pki_starts_etcd_before_servers_and_the_balancer_after() -> None:
    names = [a.name for a in up_actions(ha())]
    seed = names.index("PKI: one cluster CA and service-account key for every server; etcd's")
    etcd_up = names.index("controlplane3/etcd healthy")
    servers = [names.index(f"controlplane{i}: server") for i in (1, 2, 3)]
    balancer = next(i for i, n in enumerate(names) if n.startswith("router: load balancer"))
    assert seed < etcd_up < min(servers) and max(servers) < balancer


def test_every_server_gets_the_same_cas_and_service_account_key(tmp_path: Path) -> None:
    lab = ha(tmp_path)
    seed_pki(lab)
    first = lab.pki_dir
    for cp in lab.controlplanes[1:]:
        copy = lab.server_dir_of(cp) / "pki"
        for name in ("ca.crt", "ca.key", "sa.key", "front-proxy-ca.crt", "front-proxy-client.crt"):
            assert (copy / name).read_bytes() == (first / name).read_bytes()
    assert (lab.etcd_dir / "pki" / "controlplane3.crt").exists()
    assert (lab.etcd_dir / "pki" / "ca.crt").read_bytes() == (first / "ca.crt").read_bytes()


def test_components_are_found_by_key() -> None:
    lab = ha()
    assert components.by_key(lab, "controlplane3/etcd").node == "controlplane3"
    with pytest.raises(KeyError, match="no component 'controlplane/etcd'"):
        components.by_key(lab, "controlplane/etcd")
