"""The host side of the Vagrant lab: libvirt in a network namespace of its own, and Vagrant
run there, so that the VMs' networks never touch the host's.

vagrant-libvirt makes bridges (its management network 192.168.121.0/24 and the lab's private
network 10.240.0.0/24), a dnsmasq per network and iptables rules for them in whatever network
namespace libvirtd runs in.  On a machine that is not a dedicated VM host (this project's
development machine runs the netns labs' tests beside it), none of that may land on the host's
own network, so ``kubelab vagrant`` gives libvirt a namespace (``NETNS``) and runs everything
that talks to the VMs in it:

- ``up [VAGRANT ARGS]``: the namespace (loopback up, nothing else: the VMs need no way out),
  virtlogd and libvirtd started in it as daemons with their PID files under ``STATE_DIR``,
  then ``vagrant up --provider=libvirt`` in it, from the repository (the caller's environment
  passes through: ``KUBELAB_VAGRANT_*``).  Idempotent: what runs already is kept.
- ``run CMD...``: any command in the namespace (``vagrant ssh``, ``virsh``, ``curl`` to a
  NodePort).
- ``down``: ``vagrant destroy -f``; whatever domain is left destroyed and undefined; every
  active network destroyed (its dnsmasq ends with it); every volume of every storage pool
  deleted (the VMs' disks and the box image vagrant-libvirt uploads into the pool: the
  namespace's libvirt holds nothing else); libvirtd and virtlogd ended by their recorded PIDs;
  any process still in the namespace ended; the namespace deleted.  Each step skips what is
  not there, so ``down`` after a failed ``up``, or twice, is fine.
- ``status``: the namespace, the daemons, the domains and the volumes.

libvirtd is reached through files (``/run/libvirt``), which the namespace does not separate:
``up`` refuses when a libvirtd not started here answers there (a workstation's own, whose
bridges are on the host anyway: use plain ``vagrant up`` with it).  Commands are run through
``ip netns exec``, which also mounts the namespace's own /sys: libvirtd must see the bridges it
makes there.  Every command, signal and process check goes through ``Host`` (the real one, or
a fake in tests).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

NETNS: Final = "kubelab-vm"
STATE_DIR: Final = Path("/run/kubelab-vm")
ROOT: Final = Path(__file__).resolve().parents[2]
"""The repository, where the ``Vagrantfile`` is (kubelab is installed editable from it)."""
DAEMONS: Final = ("virtlogd", "libvirtd")
"""Started in this order, ended in the reverse one."""
LIBVIRT_URI: Final = "qemu:///system"
DAEMON_WAIT: Final = 30.0
STOP_WAIT: Final = 15.0
POLL: Final = 0.5


class VagrantHostError(Exception):
    """The namespace's libvirt cannot be set up; the message says why."""


@dataclass(frozen=True)
class Result:
    """A finished command: its exit status and, unless it was shown as it ran, its output."""

    code: int
    output: str = ""


class Host(Protocol):
    """What ``VagrantHost`` does to the machine."""

    def run(self, argv: Sequence[str], *, show: bool = False, cwd: Path | None = None) -> Result:
        """Run ``argv`` to completion; ``show``: its output goes to the terminal as it runs
        (Vagrant's progress), else it is captured (stdout and stderr together)."""
        ...

    def alive(self, pid: int, name: str) -> bool:
        """Whether process ``pid`` exists and is ``name`` (its ``comm``)."""
        ...

    def kill(self, pid: int, sig: int) -> None: ...


class SystemHost:
    """The real machine: subprocess, /proc and signals."""

    def run(self, argv: Sequence[str], *, show: bool = False, cwd: Path | None = None) -> Result:
        try:
            if show:
                return Result(subprocess.run(argv, cwd=cwd, check=False).returncode)
            done = subprocess.run(
                argv,
                cwd=cwd,
                check=False,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        except FileNotFoundError as error:
            return Result(127, str(error))
        return Result(done.returncode, done.stdout)

    def alive(self, pid: int, name: str) -> bool:
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip() == name
        except OSError:
            return False

    def kill(self, pid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


class VagrantHost:
    """The namespace, its libvirt daemons and Vagrant in it (see the module docstring)."""

    def __init__(
        self,
        host: Host,
        *,
        netns: str = NETNS,
        state_dir: Path = STATE_DIR,
        root: Path = ROOT,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host = host
        self.netns = netns
        self.state_dir = state_dir
        self.root = root
        self.sleep = sleep
        self.clock = clock

    def inside(self, *argv: str) -> list[str]:
        """``argv`` run in the namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def virsh(self, *argv: str) -> list[str]:
        return self.inside("virsh", "--quiet", "--connect", LIBVIRT_URI, *argv)

    def pid_file(self, daemon: str) -> Path:
        return self.state_dir / f"{daemon}.pid"

    def daemon_pid(self, daemon: str) -> int | None:
        """The PID of this namespace's ``daemon`` if it runs."""
        try:
            pid = int(self.pid_file(daemon).read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if self.host.alive(pid, daemon) else None

    def netns_exists(self) -> bool:
        listed = self.host.run(["ip", "netns", "list"]).output.splitlines()
        return any(line.split()[:1] == [self.netns] for line in listed)

    def _lines(self, argv: Sequence[str]) -> list[str]:
        result = self.host.run(argv)
        if result.code != 0:
            return []
        return [line.strip() for line in result.output.splitlines() if line.strip()]

    def _check(self, argv: Sequence[str]) -> None:
        result = self.host.run(argv)
        if result.code != 0:
            raise VagrantHostError(f"{' '.join(argv)}: exit {result.code}: {result.output.strip()}")

    # -- up ---------------------------------------------------------------------------------

    def up(self, vagrant_args: Sequence[str] = ()) -> int:
        """The namespace and its daemons (kept if there), then ``vagrant up`` in it."""
        self.start()
        argv = self.inside("vagrant", "up", "--provider=libvirt", *vagrant_args)
        return self.host.run(argv, show=True, cwd=self.root).code

    def start(self) -> None:
        """The namespace and libvirt's daemons in it, waiting until libvirtd answers."""
        if self.daemon_pid("libvirtd") is None and self.host.run(self._host_virsh).code == 0:
            raise VagrantHostError(
                "a libvirtd not started by `kubelab vagrant` answers at "
                f"{LIBVIRT_URI}; with the host's own libvirt, run vagrant directly"
            )
        if not self.netns_exists():
            self._check(["ip", "netns", "add", self.netns])
            self._check(["ip", "-n", self.netns, "link", "set", "lo", "up"])
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for daemon in DAEMONS:
            if self.daemon_pid(daemon) is None:
                pid_file = str(self.pid_file(daemon))
                self._check(self.inside(daemon, "--daemon", "--pid-file", pid_file))
        deadline = self.clock() + DAEMON_WAIT
        while self.host.run(self.virsh("uri")).code != 0:
            if self.clock() > deadline:
                raise VagrantHostError(
                    f"libvirtd in {self.netns} did not answer in {DAEMON_WAIT:.0f}s"
                )
            self.sleep(POLL)

    @property
    def _host_virsh(self) -> list[str]:
        """Whether any libvirtd answers, asked from the host's namespace."""
        return ["virsh", "--quiet", "--connect", LIBVIRT_URI, "uri"]

    # -- run, status ------------------------------------------------------------------------

    def run(self, argv: Sequence[str]) -> int:
        if not self.netns_exists():
            raise VagrantHostError(f"no namespace {self.netns}: `kubelab vagrant up` first")
        return self.host.run(self.inside(*argv), show=True, cwd=self.root).code

    def status(self) -> list[str]:
        if not self.netns_exists():
            return [f"namespace {self.netns}: none"]
        lines = [f"namespace {self.netns}: present"]
        for daemon in DAEMONS:
            pid = self.daemon_pid(daemon)
            lines.append(f"{daemon}: " + (f"pid {pid}" if pid else "not running"))
        if self.daemon_pid("libvirtd") is not None:
            lines += [f"domain {d}" for d in self._lines(self.virsh("list", "--all", "--name"))]
            lines += [f"volume {pool}/{v}" for pool, v in self._volumes()]
        return lines

    def _volumes(self) -> list[tuple[str, str]]:
        return [
            (pool, volume.split()[0])
            for pool in self._lines(self.virsh("pool-list", "--name"))
            for volume in self._lines(self.virsh("vol-list", "--pool", pool))
        ]

    # -- down -------------------------------------------------------------------------------

    def down(self) -> list[str]:
        """Everything ``up`` made, gone (see the module docstring); returns what it did.  A
        step that fails does not stop the later ones; ``VagrantHostError`` then says which."""
        done: list[str] = []
        failed: list[str] = []
        if self.netns_exists() and self.daemon_pid("libvirtd") is not None:
            argv = self.inside("vagrant", "destroy", "--force")
            if self.host.run(argv, show=True, cwd=self.root).code != 0:
                done.append("vagrant destroy failed; removing its domains through virsh")
            for domain in self._lines(self.virsh("list", "--all", "--name")):
                self.host.run(self.virsh("destroy", domain))
                self.host.run(self.virsh("undefine", domain))
                done.append(f"domain {domain} removed")
            for network in self._lines(self.virsh("net-list", "--name")):
                self.host.run(self.virsh("net-destroy", network))
                done.append(f"network {network} stopped")
            for pool, volume in self._volumes():
                result = self.host.run(self.virsh("vol-delete", "--pool", pool, volume))
                if result.code == 0:
                    done.append(f"volume {pool}/{volume} deleted")
                else:
                    failed.append(f"volume {pool}/{volume}: {result.output.strip()}")
        for daemon in reversed(DAEMONS):
            pid = self.daemon_pid(daemon)
            if pid is not None:
                self._stop(pid, daemon)
                done.append(f"{daemon} (pid {pid}) stopped")
            self.pid_file(daemon).unlink(missing_ok=True)
        if self.netns_exists():
            for pid in (int(p) for p in self._lines(["ip", "netns", "pids", self.netns])):
                self.host.kill(pid, signal.SIGKILL)
                done.append(f"pid {pid}, left in {self.netns}, killed")
            self._check(["ip", "netns", "delete", self.netns])
            done.append(f"namespace {self.netns} deleted")
        if self.state_dir.is_dir():
            self.state_dir.rmdir()
        if failed:
            raise VagrantHostError("; ".join([*done, *(f"NOT removed: {f}" for f in failed)]))
        return done

    def _stop(self, pid: int, name: str) -> None:
        self.host.kill(pid, signal.SIGTERM)
        deadline = self.clock() + STOP_WAIT
        while self.host.alive(pid, name):
            if self.clock() > deadline:
                self.host.kill(pid, signal.SIGKILL)
                return
            self.sleep(POLL)


# -- the command ------------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    commands = parser.add_subparsers(dest="vagrant_command", metavar="COMMAND", required=True)
    up = commands.add_parser("up", help="the namespace, libvirtd in it, then `vagrant up` there")
    up.add_argument("vagrant_args", nargs=argparse.REMAINDER, help="more for `vagrant up`")
    run_parser = commands.add_parser("run", help="a command in the namespace (vagrant, virsh...)")
    run_parser.add_argument("command", nargs=argparse.REMAINDER)
    commands.add_parser("down", help="destroy the VMs, stop libvirt, delete the namespace")
    commands.add_parser("status", help="the namespace, its daemons, domains and volumes")

    def run(args: argparse.Namespace) -> int:
        vm_host = VagrantHost(SystemHost())
        try:
            if args.vagrant_command == "up":
                return vm_host.up(_without_separator(args.vagrant_args))
            if args.vagrant_command == "run":
                command = _without_separator(args.command)
                if not command:
                    parser.error("run: a command to run in the namespace")
                return vm_host.run(command)
            lines = vm_host.down() if args.vagrant_command == "down" else vm_host.status()
        except VagrantHostError as error:
            print(f"kubelab vagrant: {error}", file=sys.stderr)
            return 1
        for line in lines:
            print(line)
        return 0

    return run


def _without_separator(argv: Sequence[str]) -> list[str]:
    return list(argv[1:]) if argv[:1] == ["--"] else list(argv)
