"""The Vagrant lab, as far as it runs without VMs: the Vagrantfile (evaluated by Ruby against a
recording stand-in for Vagrant) defines the machines the inventory describes, with the sizes,
box, worker count and libvirt driver its environment variables ask for; each VM's rendered
configuration matches what the netns lab runs; the units and scripts pass systemd-analyze and
shellcheck; and a credentials bundle unpacks to the paths the flags name.  (The namespace
helper, ``kubelab vagrant``, is tested in test_vagranthost.py.)"""

from __future__ import annotations

import argparse
import io
import json
import os
import shlex
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane import command as server_command
from kubelab.lab import components
from kubelab.lab.network import NODE_SYSCTLS
from kubelab.lab.vagrant import (
    UNITS_DIR,
    VM_KUBELAB,
    VM_STATE_ROOT,
    Inventory,
    InventoryError,
    bundle,
    render,
    secrets_registry,
    unit_args,
    unit_program,
)

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "vagrant" / "inventory.yaml"
RECORDER = Path(__file__).with_name("record_vagrantfile.rb")
SIZE = {"cpus": 2, "memory": 2048}


def inventory_data() -> dict[str, Any]:
    data = yaml.safe_load(INVENTORY.read_text())
    assert isinstance(data, dict)
    return data


def record(
    env: dict[str, str] | None = None, detect: tuple[Path, Path] | None = None
) -> dict[str, Any]:
    """The Vagrantfile as the recording stand-in sees it, with only ``env``'s
    ``KUBELAB_VAGRANT_*`` variables set (and ``detect``: the driver it detects there)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KUBELAB_VAGRANT_")}
    extra = [str(p) for p in detect] if detect else []
    result = subprocess.run(
        ["ruby", RECORDER, ROOT / "Vagrantfile", *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**clean, **(env or {})},
    )
    if result.returncode != 0:
        raise VagrantfileError(result.stderr.strip())
    recorded = json.loads(result.stdout)
    assert isinstance(recorded, dict)
    return recorded


class VagrantfileError(Exception):
    """The Vagrantfile refused its environment (the message is its stderr)."""


def test_the_vagrantfile_defines_the_inventorys_machines() -> None:
    secrets = ROOT / "vagrant" / ".secrets"
    had_secrets = secrets.exists()
    recorded = record({"KUBELAB_VAGRANT_DRIVER": "kvm"})
    inventory = Inventory.load(INVENTORY)
    assert recorded["box"] == inventory.box
    machines = {m["name"]: m for m in recorded["machines"]}
    assert list(machines) == [m.name for m in inventory.machines]
    workers = str(len(inventory.machines) - 1)
    for machine in inventory.machines:
        vm = machines[machine.name]
        assert vm["ip"] == machine.ip
        assert vm["hostname"] == machine.name
        assert vm["primary"] == (machine.name == "controlplane")
        role = "controlplane" if machine.name == "controlplane" else "worker"
        assert vm["provision"] == {
            "path": "vagrant/provision.sh",
            "args": [role, machine.name, workers],
        }
        for provider in ("libvirt", "virtualbox"):
            assert vm["providers"][provider]["cpus"] == machine.cpus
            assert vm["providers"][provider]["memory"] == machine.memory
        assert vm["providers"]["libvirt"]["driver"] == "kvm"
        assert "cpu_mode" not in vm["providers"]["libvirt"]  # KVM: vagrant-libvirt's default
    assert secrets.exists() == had_secrets  # the join key is made by `vagrant up`, not on reading


def test_the_secrets_are_made_once_however_many_machines_come_up_at_once(
    tmp_path: Path,
) -> None:
    """``vagrant up`` runs each machine's trigger at once, in threads: one key and one
    password, however the triggers interleave (before the lock, two ssh-keygens raced)."""
    for attempt in range(3):
        secrets = tmp_path / f"secrets-{attempt}"
        script = (
            f"require_relative {str(ROOT / 'vagrant' / 'secrets')!r}\n"
            f"3.times.map {{ Thread.new {{ make_secrets({str(secrets)!r}) }} }}.each(&:join)\n"
        )
        result = subprocess.run(
            ["ruby", "-e", script], capture_output=True, text=True, stdin=subprocess.DEVNULL
        )
        assert result.returncode == 0, result.stderr
        assert (secrets / "join_ed25519").exists() and (secrets / "join_ed25519.pub").exists()
        assert len((secrets / "registry" / "password").read_text().strip()) == 24
        assert oct(secrets.stat().st_mode & 0o777) == "0o700"


def test_the_environment_sets_box_workers_sizes_and_driver_without_editing_files() -> None:
    recorded = record(
        {
            "KUBELAB_VAGRANT_BOX": "debian/bookworm64",
            "KUBELAB_VAGRANT_WORKERS": "3",
            "KUBELAB_VAGRANT_CPUS": "2",
            "KUBELAB_VAGRANT_MEMORY": "1536",
            "KUBELAB_VAGRANT_DRIVER": "qemu",
        }
    )
    assert recorded["box"] == "debian/bookworm64"
    inventory = Inventory.load(INVENTORY, workers=3)
    machines = recorded["machines"]
    assert [(m["name"], m["ip"]) for m in machines] == [(m.name, m.ip) for m in inventory.machines]
    for vm in machines:
        assert vm["provision"]["args"][2] == "3"
        libvirt = vm["providers"]["libvirt"]
        assert libvirt == {
            "driver": "qemu",
            "memory": 1536,
            "cpus": 2,
            "cpu_mode": "custom",
            "cpu_model": "qemu64",
        }
        assert vm["providers"]["virtualbox"]["cpus"] == 2
        assert vm["providers"]["virtualbox"]["memory"] == 1536


def test_under_tcg_a_vm_has_one_vcpu_unless_asked() -> None:
    inventory = Inventory.load(INVENTORY)
    for vm, machine in zip(
        record({"KUBELAB_VAGRANT_DRIVER": "qemu"})["machines"], inventory.machines, strict=True
    ):
        assert vm["providers"]["libvirt"]["cpus"] == 1
        assert vm["providers"]["virtualbox"]["cpus"] == machine.cpus  # not a libvirt matter


@pytest.mark.parametrize(
    ("flags", "kvm", "driver"),
    [
        pytest.param("fpu vme vmx sse2", True, "kvm", id="vt-x"),
        pytest.param("fpu svm sse2", True, "kvm", id="amd-v"),
        pytest.param("fpu sse2 hypervisor", True, "qemu", id="kvm-without-vt-x (kvm_pvm)"),
        pytest.param("fpu vmx sse2", False, "qemu", id="vt-x-without-dev-kvm"),
    ],
)
def test_the_libvirt_driver_is_kvm_only_where_the_cpu_virtualises(
    tmp_path: Path, flags: str, kvm: bool, driver: str
) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\n")
    dev_kvm = tmp_path / "kvm"
    if kvm:
        dev_kvm.touch()
    assert record(detect=(cpuinfo, dev_kvm))["detected_driver"] == driver


def test_without_a_driver_variable_the_detected_one_is_used() -> None:
    detected = record(detect=(Path("/proc/cpuinfo"), Path("/dev/kvm")))["detected_driver"]
    for vm in record()["machines"]:
        assert vm["providers"]["libvirt"]["driver"] == detected


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        pytest.param("KUBELAB_VAGRANT_WORKERS", "two", "not a whole number", id="workers"),
        pytest.param("KUBELAB_VAGRANT_MEMORY", "2G", "not a whole number", id="memory"),
        pytest.param("KUBELAB_VAGRANT_DRIVER", "xen", "one of kvm, qemu", id="driver"),
    ],
)
def test_a_bad_variable_is_refused_clearly(variable: str, value: str, message: str) -> None:
    with pytest.raises(VagrantfileError, match=f"{variable}.*{message}"):
        record({variable: value})


def test_the_control_plane_is_seeded_from_the_host_after_it_is_up() -> None:
    recorded = record()
    assert [t["actions"] for t in recorded["triggers"]] == [["up"]]  # the secrets, before
    machines = {m["name"]: m for m in recorded["machines"]}
    (seed,) = machines["controlplane"]["triggers"]
    assert (seed["moment"], seed["actions"]) == ("after", ["up"])
    command = shlex.split(seed["settings"]["run"]["inline"])
    assert command[0].endswith("/kubelab")
    assert command[1:] == [
        *("lab", "vagrant", "seed", "--secrets", str(ROOT / "vagrant" / ".secrets")),
        *("--inventory", str(INVENTORY)),
    ]
    assert all(m["triggers"] == [] for name, m in machines.items() if name != "controlplane")


def test_the_host_and_the_control_plane_share_the_registry_password(tmp_path: Path) -> None:
    lab = Inventory.load(INVENTORY).lab()
    where = secrets_registry(lab, tmp_path)
    assert where.address == lab.controlplane.ip and where.netns is None
    assert where.password_file == tmp_path / "registry" / "password"


def test_the_inventory_reads_into_the_netns_labs_address_plan() -> None:
    inventory = Inventory.load(INVENTORY)
    lab = inventory.lab()
    assert [m.name for m in inventory.machines] == [n.name for n in lab.kubernetes_nodes]
    assert {m.name: m.ip for m in inventory.machines} == {
        n.name: n.ip for n in lab.kubernetes_nodes
    }
    assert lab.state_dir == VM_STATE_ROOT / inventory.name


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"network": "10.9.0.0/24"}, "underlay", id="other-network"),
        pytest.param({"store": "mysql"}, "store", id="unknown-store"),
        pytest.param({"name": "Bad Name"}, "lab name", id="bad-name"),
        pytest.param(
            {"controlplane": {**SIZE, "ip": "10.240.0.50"}}, "address plan", id="moved-controlplane"
        ),
        pytest.param(
            {"workers": {**SIZE, "count": 2, "first_ip": "10.240.0.21"}},
            "address plan",
            id="moved-workers",
        ),
        pytest.param(
            {"workers": {**SIZE, "count": 0, "first_ip": "10.240.0.11"}}, "workers", id="no-workers"
        ),
    ],
)
def test_a_bad_inventory_is_refused_clearly(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({**inventory_data(), **change}))
    with pytest.raises(InventoryError, match=message):
        Inventory.load(path)


def test_an_unreadable_inventory_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(InventoryError, match=str(path)):
        Inventory.load(path)
    with pytest.raises(InventoryError, match="no VM 'node9'"):
        Inventory.load(INVENTORY).machine("node9")


@pytest.mark.parametrize("node", ["controlplane", "node1", "node2", "node3"])
def test_each_vm_runs_what_the_netns_lab_runs_with_the_same_flags(
    node: str, tmp_path: Path
) -> None:
    inventory = Inventory.load(INVENTORY, workers=3)
    lab = inventory.lab()
    rendered = render(inventory, node, tmp_path)
    expected = components.node_components(lab, lab.node(node), VM_KUBELAB)
    for component in expected:
        args = env_values(rendered.files[tmp_path / f"{component.name}.env"])["ARGS"].split()
        program = unit_program(component.name)
        assert (*component.command[: len(program)], *args) == component.command
        for path, content in component.files.items():
            assert rendered.files[path] == content
    names = [c.name for c in expected]
    routes = [] if node == "controlplane" else ["pod-routes"]
    assert list(rendered.components) == [*routes, *names]
    paths = env_values(rendered.files[tmp_path / "paths.env"])
    assert paths == {
        "ADMIN_KUBECONFIG": str(lab.server_dir / "admin.kubeconfig"),
        "MODULES_FILE": "/etc/modules-load.d/kubelab.conf",
        "SYSCTL_FILE": "/etc/sysctl.d/90-kubelab.conf",
    }
    system = {Path(paths["SYSCTL_FILE"]), Path(paths["MODULES_FILE"])}
    sysctls = rendered.files[Path(paths["SYSCTL_FILE"])].splitlines()
    assert set(NODE_SYSCTLS) <= set(sysctls)  # what the netns lab sets in its nodes
    assert "br_netfilter" in rendered.files[Path(paths["MODULES_FILE"])].split()
    if node == "controlplane":
        cloud = json.loads(rendered.files[lab.cloud_config])
        assert "routerNetns" not in cloud  # the control-plane VM routes
        assert all("netns" not in n for n in cloud["nodes"])  # a listed VM exists
    else:
        assert env_values(rendered.files[tmp_path / "pod-routes.env"]) == {
            "CLUSTER_CIDR": "10.244.0.0/16",
            "ROUTER": lab.controlplane.ip,
        }
    assert all(
        p.is_relative_to(VM_STATE_ROOT) or p.is_relative_to(tmp_path) or p in system
        for p in rendered.files
    )


def test_the_registry_runs_on_the_control_plane_vm_and_every_vm_mirrors_to_it(
    tmp_path: Path,
) -> None:
    inventory = Inventory.load(INVENTORY)
    lab = inventory.lab()
    control = render(inventory, "controlplane", tmp_path / "cp")
    worker = render(inventory, "node1", tmp_path / "node1")
    assert "registry" in control.components and "private-registry" in control.components
    assert "registry" not in worker.components
    registry_args = env_values(control.files[tmp_path / "cp" / "registry.env"])["ARGS"]
    assert registry_args == str(lab.registry_dir / "public.json")  # after `serve`
    public = json.loads(control.files[lab.registry_dir / "public.json"])
    assert public["http"]["addr"] == "10.240.0.10:5000"
    node = lab.node("node1")
    docker = worker.files[node.containerd_dir / "certs.d" / "docker.io" / "hosts.toml"]
    assert docker.startswith('server = "http://10.240.0.10:5000/v2/docker.io"')


def env_values(text: str) -> dict[str, str]:
    """A systemd environment file's values, as systemd reads them."""
    values = {}
    for line in text.splitlines():
        key, _, raw = line.partition("=")
        (values[key],) = shlex.split(raw)
    return values


def test_a_unit_that_disagrees_with_its_component_is_refused(tmp_path: Path) -> None:
    inventory = Inventory.load(INVENTORY)
    lab = inventory.lab()
    kubelet = components.kubelet(lab, lab.node("node1"), VM_KUBELAB)
    (tmp_path / "kubelab-kubelet.service").write_text(
        "[Service]\nExecStart=/opt/kubelab/venv/bin/kubelab proxy $ARGS\n"
    )
    with pytest.raises(InventoryError, match="runs"):
        unit_args(kubelet, tmp_path)
    (tmp_path / "kubelab-kubelet.service").write_text("[Service]\nExecStart=/bin/true\n")
    with pytest.raises(InventoryError, match=r"must end with \$ARGS"):
        unit_args(kubelet, tmp_path)
    with pytest.raises(InventoryError, match="no unit"):
        unit_program("nothing", tmp_path)


def test_a_bundle_unpacks_to_the_paths_the_flags_name() -> None:
    lab = Inventory.load(INVENTORY).lab()
    node = lab.node("node1")
    credentials = {
        lab.pki_dir / "ca.crt": b"ca",
        node.state_dir / "kubelet.key": b"key",
        node.kubelet_kubeconfig: b"config",
    }
    data = bundle(lab, node, lambda _lab, _node: credentials)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {f"/{m.name}": m for m in tar.getmembers()}
        assert set(members) == {str(p) for p in credentials}
        assert members[str(lab.pki_dir / "ca.crt")].mode == 0o644
        assert members[str(node.state_dir / "kubelet.key")].mode == 0o600
        assert members[str(node.kubelet_kubeconfig)].mode == 0o600
        extracted = tar.extractfile(members[str(node.kubelet_kubeconfig)])
        assert extracted is not None and extracted.read() == b"config"


BOX_DIR = ROOT / "vagrant" / "box"
UNITS = sorted([*UNITS_DIR.glob("*.service"), *BOX_DIR.glob("*.service")])


@pytest.mark.parametrize("unit", UNITS, ids=[p.name for p in UNITS])
def test_the_units_pass_systemd_analyze_verify(unit: Path) -> None:
    """Everything but the installed kubelab, which exists only on the VMs, must check out."""
    result = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True)
    problems = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if line.strip() and f"Command {VM_KUBELAB[0]} is not executable" not in line
    ]
    assert problems == []


def test_the_scripts_pass_shellcheck() -> None:
    scripts = sorted((ROOT / "vagrant").rglob("*.sh"))
    assert scripts
    result = subprocess.run(["shellcheck", *scripts], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_vm_control_plane_runs_without_leader_election_and_with_upstreams_grace(
    tmp_path: Path,
) -> None:
    """Under TCG a starting controller-manager misses leader election's 10 s renewal
    deadline and exits; the VM lab has one control plane, so it elects no one."""
    rendered = render(Inventory.load(INVENTORY), "controlplane", tmp_path)
    parser = argparse.ArgumentParser()
    server_command.add_flags(parser)
    args = parser.parse_args(env_values(rendered.files[tmp_path / "server.env"])["ARGS"].split())
    assert args.leader_elect is False
    assert args.node_monitor_grace_period == 40.0
