"""The lab on VMs: ``vagrant/inventory.yaml`` read into the same inventory as the netns lab,
and each VM's component configuration rendered from ``kubelab.lab.components``.

The ``Vagrantfile`` defines the VMs from the inventory file (the worker count overridable with
``KUBELAB_VAGRANT_WORKERS``, handed to provisioning, so every command here takes ``--workers``);
``vagrant/provision.sh`` then runs on each VM:

- ``kubelab lab vagrant render --inventory F --node N --out /etc/kubelab``: for every component
  the node runs (``components.node_components``, the very list ``kubelab lab up`` starts), the
  flags as ``/etc/kubelab/<component>.env`` for its unit ``vagrant/units/kubelab-<component>
  .service`` (whose ``ExecStart=PROGRAM $ARGS`` must be what the component runs: rendering
  refuses a unit that disagrees), the config files it needs and its directories; the control
  plane also the lab cloud's inventory (``components.cloud_config``: no namespaces, the VM
  itself routes); a worker ``pod-routes.env`` (the control-plane VM is its router); every VM
  ``paths.env`` (the admin kubeconfig provision.sh waits for), and the sysctls and kernel
  modules the netns lab sets in its nodes' namespaces (``network.NODE_SYSCTLS``: forwarding,
  ``route_localnet``, ``bridge-nf-call-iptables``, whose module is loaded first), plus no ICMP
  redirects accepted: the netns lab's router sends none, but the control-plane VM's interface
  has no name to turn them off by ahead of time, and a forwarding node ignores them once
  ``all`` says so;
- ``kubelab lab vagrant bundles`` on the control plane, once the API server made the cluster
  CA: one tar per Kubernetes node (``cluster.node_credentials``, what ``kubelab lab up``
  writes for a node: CA and kubeconfigs), at the paths its flags
  name; workers fetch theirs over SSH, the control plane unpacks its own;
- ``kubelab lab vagrant address --node N``: a node's address, for the scripts;
- ``kubelab lab vagrant registry-credentials --secrets D`` on the control plane: the lab
  registry runs there (``Lab.registry_node``; every worker's containerd mirrors the public
  registries to it, as in the netns lab), and its private instance's htpasswd is written
  before its unit starts, with the password the ``Vagrantfile`` made on the host
  (``D/registry/password``, synced with the source).

And one command runs on the host, not on a VM: ``kubelab lab vagrant seed --secrets D``
pushes every image the lab builds, from the host's image cache (built there where missing,
as for ``kubelab lab up``), into the control plane's registries over the private network.
The VMs have no internet to build images from Debian packages, and the host builds and
compresses them many times faster than an emulated VM would; the host knows the private
registry's password because it made it.

VMs keep state under ``/var/lib/kubelab`` and logs under ``/var/log/kubelab`` (systemd's
journal has them too), run the installed ``/opt/kubelab/venv/bin/kubelab``, and have no
network namespaces.  The addresses are the netns lab's (``kubelab.lab.topology``): the
inventory states them for the ``Vagrantfile`` and is checked against them here.
"""

from __future__ import annotations

import argparse
import io
import ipaddress
import shlex
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from kubelab.lab import registry
from kubelab.lab.components import Component, cloud_config, node_components
from kubelab.lab.network import NODE_SYSCTLS
from kubelab.lab.topology import (
    CLUSTER_CIDR,
    IMAGE_CACHE,
    STORES,
    UNDERLAY_CIDR,
    Lab,
    LabSpec,
    Node,
    Role,
    SpecError,
)

VM_STATE_ROOT: Final = Path("/var/lib/kubelab")
VM_LOG_ROOT: Final = Path("/var/log/kubelab")
VM_KUBELAB: Final = ("/opt/kubelab/venv/bin/kubelab",)
UNITS_DIR: Final = Path(__file__).resolve().parents[2] / "vagrant" / "units"
ARGS: Final = "$ARGS"
VM_RESOLV_CONF: Final = Path("/etc/resolv.conf")
SEED_WAIT: Final = 60.0
VM_SYSCTLS: Final = (*NODE_SYSCTLS, "net.ipv4.conf.all.accept_redirects=0")
SYSCTL_FILE: Final = Path("/etc/sysctl.d/90-kubelab.conf")
VM_MODULES: Final = ("br_netfilter", "overlay")
"""Loaded before the sysctls (``bridge-nf-call-iptables`` exists once br_netfilter is)."""
MODULES_FILE: Final = Path("/etc/modules-load.d/kubelab.conf")


class InventoryError(ValueError):
    """An inventory the Vagrant lab cannot build, or a unit that disagrees with it."""


@dataclass(frozen=True)
class Machine:
    """One VM: its name, role, address and size."""

    name: str
    role: Role
    ip: str
    cpus: int
    memory: int


@dataclass(frozen=True)
class Inventory:
    """``vagrant/inventory.yaml``, checked: what the ``Vagrantfile`` defines."""

    name: str
    box: str
    store: str
    machines: tuple[Machine, ...]

    @classmethod
    def load(cls, path: Path, workers: int | None = None) -> Inventory:
        """The inventory at ``path``, with ``workers`` workers if given (the ``Vagrantfile``'s
        ``KUBELAB_VAGRANT_WORKERS``) instead of its own count."""
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as error:
            raise InventoryError(f"{path}: {error}") from error
        try:
            return cls.parse(data, workers)
        except (KeyError, TypeError, ValueError) as error:
            raise InventoryError(f"{path}: {error}") from error

    @classmethod
    def parse(cls, data: Any, workers_count: int | None = None) -> Inventory:
        if not isinstance(data, dict):
            raise InventoryError("expected a mapping at the top")
        if data.get("network", UNDERLAY_CIDR) != UNDERLAY_CIDR:
            raise InventoryError(f"network: the lab's underlay is {UNDERLAY_CIDR}")
        store = data.get("store", "sqlite")
        if store not in STORES:
            raise InventoryError(f"store {store!r}: one of {', '.join(STORES)}")
        cp, workers = data["controlplane"], data["workers"]
        count = int(workers["count"]) if workers_count is None else workers_count
        first = ipaddress.IPv4Address(workers["first_ip"])
        spec = LabSpec(name=str(data["name"]), workers=count, store=store)
        try:
            lab = Lab(spec)
        except SpecError as error:
            raise InventoryError(str(error)) from error
        machines = (
            Machine("controlplane", Role.CONTROLPLANE, str(cp["ip"]), cp["cpus"], cp["memory"]),
            *(
                Machine(w.name, Role.WORKER, str(first + i), workers["cpus"], workers["memory"])
                for i, w in enumerate(lab.workers)
            ),
        )
        for machine in machines:
            expected = lab.node(machine.name).ip
            if machine.ip != expected:
                raise InventoryError(
                    f"{machine.name} at {machine.ip}: the lab's address plan puts it at "
                    f"{expected} (kubelab.lab.topology)"
                )
            if not (isinstance(machine.cpus, int) and isinstance(machine.memory, int)):
                raise InventoryError(f"{machine.name}: cpus and memory are whole numbers")
        return cls(spec.name, str(data["box"]), store, machines)

    def lab(self) -> Lab:
        """The inventory as the netns lab's ``Lab``, with the VMs' state and log roots."""
        spec = LabSpec(name=self.name, workers=len(self.machines) - 1, store=self.store)
        return Lab(
            spec,
            run_root=VM_STATE_ROOT,
            log_root=VM_LOG_ROOT,
            resolv_conf=VM_RESOLV_CONF,
            vms=True,
        )

    def machine(self, name: str) -> Machine:
        for machine in self.machines:
            if machine.name == name:
                return machine
        known = ", ".join(m.name for m in self.machines)
        raise InventoryError(f"no VM {name!r} in the inventory (VMs: {known})")


# -- rendering --------------------------------------------------------------------------------


def unit_program(component: str, units: Path = UNITS_DIR) -> tuple[str, ...]:
    """What the component's unit runs before ``$ARGS`` (its ``ExecStart``)."""
    unit = units / f"kubelab-{component}.service"
    try:
        lines = unit.read_text().splitlines()
    except OSError as error:
        raise InventoryError(f"component {component}: no unit {unit}") from error
    for line in lines:
        if line.startswith("ExecStart="):
            words = shlex.split(line.removeprefix("ExecStart="))
            if words[-1:] != [ARGS]:
                raise InventoryError(f"{unit}: ExecStart must end with {ARGS}")
            return tuple(words[:-1])
    raise InventoryError(f"{unit}: no ExecStart")


def unit_args(component: Component, units: Path = UNITS_DIR) -> list[str]:
    """The component's flags for its unit, checked against the unit's ``ExecStart``: the
    same program (by name) and subcommand, then whatever follows."""
    program = unit_program(component.name, units)
    head = component.command[: len(program)]
    if (
        len(head) != len(program)
        or Path(head[0]).name != Path(program[0]).name
        or head[1:] != program[1:]
    ):
        raise InventoryError(
            f"kubelab-{component.name}.service runs {' '.join(program)!r} but the component "
            f"runs {' '.join(component.command[: len(program)])!r}"
        )
    args = list(component.command[len(program) :])
    spaced = [a for a in args if not a or any(c.isspace() for c in a)]
    if spaced:
        raise InventoryError(f"{component.key}: $ARGS cannot carry {spaced} (whitespace)")
    return args


def env_file(values: dict[str, str]) -> str:
    """A systemd ``EnvironmentFile``: one ``KEY="value"`` per line."""
    for key, value in values.items():
        if any(c in value for c in '"\\\n$`'):
            raise InventoryError(f"{key}: cannot write {value!r} to an environment file")
    return "".join(f'{key}="{value}"\n' for key, value in values.items())


@dataclass(frozen=True)
class Rendered:
    """Everything ``render`` writes for one VM: file path → content, and directories."""

    files: dict[Path, str]
    dirs: tuple[Path, ...]
    components: tuple[str, ...]


def render(inventory: Inventory, name: str, out: Path, units: Path = UNITS_DIR) -> Rendered:
    """The VM's configuration (see the module docstring); pure: ``write`` puts it on disk."""
    inventory.machine(name)
    lab = inventory.lab()
    node = lab.node(name)
    components = node_components(lab, node, VM_KUBELAB)
    files: dict[Path, str] = {}
    dirs: list[Path] = [out, node.state_dir, node.log_dir]
    for component in components:
        files[out / f"{component.name}.env"] = env_file(
            {"ARGS": " ".join(unit_args(component, units))}
        )
        files.update(component.files)
        dirs.extend(component.dirs)
    names = [c.name for c in components]
    if node.role is Role.CONTROLPLANE:
        files[lab.cloud_config] = cloud_config(lab)
    if node.role is Role.WORKER:
        files[out / "pod-routes.env"] = env_file(
            {"CLUSTER_CIDR": CLUSTER_CIDR, "ROUTER": lab.controlplane.ip}
        )
        names.insert(0, "pod-routes")
    files[out / "paths.env"] = env_file(
        {
            "ADMIN_KUBECONFIG": str(lab.server_dir / "admin.kubeconfig"),
            "MODULES_FILE": str(MODULES_FILE),
            "SYSCTL_FILE": str(SYSCTL_FILE),
        }
    )
    files[MODULES_FILE] = "".join(f"{module}\n" for module in VM_MODULES)
    files[SYSCTL_FILE] = "".join(f"{setting}\n" for setting in VM_SYSCTLS)
    return Rendered(files, tuple(dict.fromkeys(dirs)), tuple(names))


def write(rendered: Rendered) -> None:
    for directory in rendered.dirs:
        directory.mkdir(parents=True, exist_ok=True)
    for path, content in rendered.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def bundle(lab: Lab, node: Node, credentials: Callable[[Lab, Node], dict[Path, bytes]]) -> bytes:
    """One node's credentials as a tar of absolute paths (extracted with ``-C /``)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, content in credentials(lab, node).items():
            info = tarfile.TarInfo(str(path.relative_to("/")))
            info.size = len(content)
            info.mode = 0o644 if path.suffix == ".crt" else 0o600
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


# -- the command ------------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    commands = parser.add_subparsers(dest="vagrant_command", metavar="COMMAND", required=True)
    for name, text in (
        ("render", "write this VM's component configuration"),
        ("bundles", "on the control plane: one credentials tar per node"),
        ("address", "print a node's address"),
        ("registry-credentials", "on the control plane: the private registry's htpasswd"),
        ("seed", "on the host: the lab's images pushed into the control plane's lab registry"),
    ):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--inventory", type=Path, required=True)
        sub.add_argument("--workers", type=int, help="default: the inventory's count")
        if name in ("render", "address"):
            sub.add_argument("--node", required=True)
        if name in ("render", "bundles"):
            sub.add_argument("--out", type=Path, required=True)
        if name in ("registry-credentials", "seed"):
            sub.add_argument(
                "--secrets", type=Path, required=True, help="the Vagrantfile's vagrant/.secrets"
            )

    def run(args: argparse.Namespace) -> int:
        try:
            inventory = Inventory.load(args.inventory, args.workers)
            if args.vagrant_command == "address":
                print(inventory.machine(args.node).ip)
            elif args.vagrant_command == "render":
                rendered = render(inventory, args.node, args.out)
                write(rendered)
                print(" ".join(rendered.components))
            elif args.vagrant_command == "bundles":
                _write_bundles(inventory.lab(), args.out)
            elif args.vagrant_command == "registry-credentials":
                _write_registry_credentials(inventory.lab(), args.secrets)
            else:
                _seed(inventory.lab(), args.secrets)
        except InventoryError as error:
            print(f"kubelab lab vagrant: {error}", file=sys.stderr)
            return 2
        except registry.RegistryError as error:
            print(f"kubelab lab vagrant: {error}", file=sys.stderr)
            return 1
        return 0

    return run


def secrets_registry(lab: Lab, secrets: Path) -> registry.LabRegistry:
    """The control plane's lab registry as the host sees it: its address, and the password
    the ``Vagrantfile`` made (``secrets/registry/password``, the ``password_file``)."""
    return registry.LabRegistry(secrets / "registry", lab.registry_node.ip, None)


def _write_registry_credentials(lab: Lab, secrets: Path) -> None:
    """On the control plane: the host's password for the private registry, and its htpasswd."""
    where = registry.LabRegistry.of(lab)
    where.directory.mkdir(parents=True, exist_ok=True)
    where.password_file.touch(mode=0o600)
    where.password_file.write_text(registry.password(secrets_registry(lab, secrets)) + "\n")
    registry.write_credentials(where)


def _seed(lab: Lab, secrets: Path) -> None:
    """On the host: wait for the control plane's registries, then push every image (built
    into the host's image cache first where missing, from Debian packages)."""
    where = secrets_registry(lab, secrets)
    registry.wait_serving(where, SEED_WAIT)
    registry.seed(where, IMAGE_CACHE)
    print(f"images pushed into {where.url()} and {where.url(private=True)}")


def _write_bundles(lab: Lab, out: Path) -> None:
    from kubelab.lab.cluster import node_credentials

    out.mkdir(parents=True, exist_ok=True)
    for node in lab.kubernetes_nodes:
        (out / f"{node.name}.tar").write_bytes(bundle(lab, node, node_credentials))
