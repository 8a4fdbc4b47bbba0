"""``kubelab vagrant`` without a VM: over a fake ``Host`` that plays the namespace, the daemons
and libvirt, ``up`` makes the namespace and starts the daemons in it before Vagrant, ``down``
removes everything in order (and is idempotent), and a libvirtd not ours is refused."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path

import pytest

from kubelab.lab.vagranthost import (
    LIBVIRT_URI,
    Result,
    VagrantHost,
    VagrantHostError,
)

NETNS = "kubelab-vm-test"
IN_NS = ["ip", "netns", "exec", NETNS]
VIRSH = [*IN_NS, "virsh", "--quiet", "--connect", LIBVIRT_URI]


class FakeHost:
    """A machine with ``ip netns``, daemons that write their PID files, and a libvirt holding
    ``domains``, ``networks`` and ``volumes`` (pool → names); every command is recorded."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []
        self.shown: list[list[str]] = []
        self.namespaces: set[str] = set()
        self.processes: dict[int, str] = {}
        self.netns_pids: list[int] = []
        self.foreign_libvirtd = False
        self.domains = ["lab_controlplane"]
        self.networks = ["vagrant-libvirt", "lab0"]
        self.volumes = {"default": ["lab_controlplane.img", "box_0.img"]}
        self.signals: list[tuple[int, int]] = []

    def run(self, argv: Sequence[str], *, show: bool = False, cwd: Path | None = None) -> Result:
        argv = list(argv)
        (self.shown if show else self.commands).append(argv)
        match argv:
            case ["ip", "netns", "list"]:
                return Result(0, "".join(f"{n} (id: 0)\n" for n in sorted(self.namespaces)))
            case ["ip", "netns", "add", name]:
                self.namespaces.add(name)
            case ["ip", "netns", "delete", name]:
                self.namespaces.discard(name)
            case ["ip", "netns", "pids", _]:
                return Result(0, "".join(f"{p}\n" for p in self.netns_pids))
            case ["virsh", *_]:
                return Result(0 if self.foreign_libvirtd else 1)
            case [*_, daemon, "--daemon", "--pid-file", pid_file]:
                pid = 100 + len(self.processes)
                self.processes[pid] = daemon
                Path(pid_file).write_text(f"{pid}\n")
            case ["ip", "netns", "exec", _, "virsh", "--quiet", "--connect", _, *command]:
                return self._virsh(command)
        return Result(0)

    def _virsh(self, command: list[str]) -> Result:
        if "libvirtd" not in self.processes.values():
            return Result(1, "failed to connect")
        lines: list[str] = []
        match command:
            case ["list", "--all", "--name"]:
                lines = self.domains
            case ["undefine", domain]:
                self.domains.remove(domain)
            case ["net-list", "--name"]:
                lines = self.networks
            case ["net-destroy", network]:
                self.networks.remove(network)
            case ["pool-list", "--name"]:
                lines = list(self.volumes)
            case ["vol-list", "--pool", pool]:
                lines = [f"{v}   /var/lib/libvirt/images/{v}" for v in self.volumes[pool]]
            case ["vol-delete", "--pool", pool, volume]:
                self.volumes[pool].remove(volume)
        return Result(0, "".join(f"{line}\n" for line in lines))

    def alive(self, pid: int, name: str) -> bool:
        return self.processes.get(pid) == name

    def kill(self, pid: int, sig: int) -> None:
        self.signals.append((pid, sig))
        self.processes.pop(pid, None)


QUERIES = (
    ["ip", "netns", "list"],
    *([*VIRSH, q] for q in ("list", "net-list", "pool-list", "vol-list")),
)


def changes(host: FakeHost) -> list[list[str]]:
    """The commands ``host`` ran but for those that only ask (listings)."""
    return [c for c in host.commands if not any(c[: len(q)] == q for q in QUERIES)]


@pytest.fixture
def host() -> FakeHost:
    return FakeHost()


@pytest.fixture
def vm_host(host: FakeHost, tmp_path: Path) -> VagrantHost:
    return VagrantHost(
        host, netns=NETNS, state_dir=tmp_path / "state", root=tmp_path, sleep=lambda _: None
    )


def test_up_makes_the_namespace_and_its_daemons_then_runs_vagrant_there(
    host: FakeHost, vm_host: VagrantHost, tmp_path: Path
) -> None:
    assert vm_host.up(["--no-parallel"]) == 0
    state = tmp_path / "state"
    assert changes(host) == [
        ["virsh", "--quiet", "--connect", LIBVIRT_URI, "uri"],  # no libvirtd of the host's
        ["ip", "netns", "add", NETNS],
        ["ip", "-n", NETNS, "link", "set", "lo", "up"],
        [*IN_NS, "virtlogd", "--daemon", "--pid-file", str(state / "virtlogd.pid")],
        [*IN_NS, "libvirtd", "--daemon", "--pid-file", str(state / "libvirtd.pid")],
        [*VIRSH, "uri"],
    ]
    assert host.shown == [[*IN_NS, "vagrant", "up", "--provider=libvirt", "--no-parallel"]]
    assert sorted(host.processes.values()) == ["libvirtd", "virtlogd"]


def test_up_again_keeps_what_runs(host: FakeHost, vm_host: VagrantHost) -> None:
    vm_host.up()
    processes = dict(host.processes)
    host.commands.clear()
    vm_host.up()
    assert host.processes == processes
    assert not any(c[2:3] == ["add"] or "--daemon" in c for c in host.commands)


def test_a_libvirtd_not_ours_is_refused(host: FakeHost, vm_host: VagrantHost) -> None:
    host.foreign_libvirtd = True
    with pytest.raises(VagrantHostError, match="not started by `kubelab vagrant`"):
        vm_host.up()
    assert host.namespaces == set() and host.shown == []


def test_down_removes_everything_up_made_in_order(
    host: FakeHost, vm_host: VagrantHost, tmp_path: Path
) -> None:
    vm_host.up()
    virtlogd, libvirtd = sorted(host.processes)
    host.netns_pids = [4242]  # say, a dnsmasq libvirt left behind
    host.commands.clear()
    host.shown.clear()
    done = vm_host.down()
    assert host.shown == [[*IN_NS, "vagrant", "destroy", "--force"]]
    assert changes(host) == [
        [*VIRSH, "destroy", "lab_controlplane"],
        [*VIRSH, "undefine", "lab_controlplane"],
        [*VIRSH, "net-destroy", "vagrant-libvirt"],
        [*VIRSH, "net-destroy", "lab0"],
        [*VIRSH, "vol-delete", "--pool", "default", "lab_controlplane.img"],
        [*VIRSH, "vol-delete", "--pool", "default", "box_0.img"],
        ["ip", "netns", "pids", NETNS],
        ["ip", "netns", "delete", NETNS],
    ]
    assert host.signals == [
        (libvirtd, signal.SIGTERM),
        (virtlogd, signal.SIGTERM),
        (4242, signal.SIGKILL),
    ]
    assert done[-1] == f"namespace {NETNS} deleted"
    assert host.namespaces == set() and host.processes == {} and host.volumes["default"] == []
    assert not (tmp_path / "state").exists()


def test_down_when_nothing_is_there_does_nothing(host: FakeHost, vm_host: VagrantHost) -> None:
    assert vm_host.down() == []
    assert host.shown == [] and host.signals == []
    assert all(c == ["ip", "netns", "list"] for c in host.commands)


def test_status_names_the_daemons_domains_and_volumes(vm_host: VagrantHost) -> None:
    assert vm_host.status() == [f"namespace {NETNS}: none"]
    vm_host.up()
    assert vm_host.status() == [
        f"namespace {NETNS}: present",
        "virtlogd: pid 100",
        "libvirtd: pid 101",
        "domain lab_controlplane",
        "volume default/lab_controlplane.img",
        "volume default/box_0.img",
    ]


def test_run_needs_the_namespace(host: FakeHost, vm_host: VagrantHost) -> None:
    with pytest.raises(VagrantHostError, match="kubelab vagrant up"):
        vm_host.run(["vagrant", "status"])
    vm_host.up()
    vm_host.run(["vagrant", "ssh", "controlplane"])
    assert host.shown[-1] == [*IN_NS, "vagrant", "ssh", "controlplane"]
