"""The configuration of a node's own containerd: everything it owns lives under one directory.

Several kubelab nodes run on one machine, each with a containerd started inside its node's
network namespace, so no two may share a socket, a metadata root, a runc root or a CNI
directory.  ``ContainerdLayout`` names those places (all derived from ``state_dir`` unless
given) and ``containerd_config`` renders the config version 2 TOML that points containerd at
them.  Every key below was found necessary on the machines this project runs on:

- ``restrict_oom_score_adj``: the VM lacks CAP_SYS_RESOURCE, so a negative oom_score_adj is
  refused and runc fails with nothing but "can't get final child's PID from pipe: EOF";
- ``netns_mounts_under_state_dir``: pod network namespaces are mounted under this node's state,
  not the shared /var/run/netns, so teardown finds and removes exactly its own;
- ``disable_apparmor``, ``SystemdCgroup = false``: cgroupfs paths the kubelet removes itself;
- two runc handlers (``RUNTIME_HANDLERS``), ``runc`` the default and ``kubelab-runc``, each
  with a runc state directory of its own: a pod's RuntimeClass names the handler, and where
  its containers' state lives shows which one CRI used;
- a stream server on 127.0.0.1 with port "0" (any free port) so nodes do not collide;
- ``max_conf_num = 1``: the first conflist of ``cni_conf_dir`` is the node's network;
- images are imported into the ``k8s.io`` namespace beforehand (kubelab.lab.images), and the
  sandbox image is the locally built pause image; pulls go where ``registry_hosts_dir``'s
  ``hosts.toml`` files say (``registry.config_path``; ``hosts_toml`` renders one: the lab
  mirrors public registries to its own, kubelab.lab.registry).

The TOML is rendered from a plain dict by a serializer of the few value types used here, so
the structure of the config reads as data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

CRI_PLUGIN: Final = "io.containerd.grpc.v1.cri"
RUNTIME_HANDLERS: Final = ("runc", "kubelab-runc")
"""The CRI runtime handlers (RuntimeClass ``handler``) a node's containerd has, the default
first."""
OPT_PLUGIN: Final = "io.containerd.internal.v1.opt"
# sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH: Final = 107
# Snapshotters that cannot work here (no btrfs/zfs pools, no devmapper thin pool, no aufs
# module) and only log errors at every start.
DISABLED_PLUGINS: Final = (
    "io.containerd.snapshotter.v1.aufs",
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.zfs",
)

TomlValue = str | bool | int | list[str]
TomlTable = Mapping[str, "TomlValue | TomlTable"]


class LayoutError(ValueError):
    """A layout containerd cannot use (a socket path too long for a unix socket)."""


@dataclass(frozen=True)
class ContainerdLayout:
    """Where one node's containerd keeps its state and finds its images and CNI plugins.

    ``state_dir`` holds ``root/`` (content, snapshots, metadata), ``state/`` (runtime state and
    the pods' netns mounts), ``opt/``, ``runc/`` (runc's root), the gRPC socket
    ``containerd.sock`` and its ttrpc twin.  Keep ``state_dir`` short: the socket path must fit
    in 107 bytes.
    """

    state_dir: Path
    sandbox_image: str
    cni_bin_dir: Path
    cni_conf_dir: Path
    log_level: str = "info"
    registry_hosts_dir: Path | None = None

    def __post_init__(self) -> None:
        if len(str(self.ttrpc_socket)) > MAX_SOCKET_PATH:
            raise LayoutError(
                f"containerd state dir {self.state_dir} is too long: the socket path "
                f"{self.ttrpc_socket} exceeds {MAX_SOCKET_PATH} bytes"
            )

    @property
    def socket(self) -> Path:
        """The gRPC socket (CRI and containerd's own API)."""
        return self.state_dir / "containerd.sock"

    @property
    def endpoint(self) -> str:
        """The CRI endpoint a kubelet is given: ``unix:///.../containerd.sock``."""
        return f"unix://{self.socket}"

    @property
    def ttrpc_socket(self) -> Path:
        return self.state_dir / "containerd.sock.ttrpc"

    @property
    def root(self) -> Path:
        return self.state_dir / "root"

    @property
    def state(self) -> Path:
        return self.state_dir / "state"

    @property
    def opt(self) -> Path:
        return self.state_dir / "opt"

    @property
    def runc_roots(self) -> dict[str, Path]:
        """Each runtime handler's runc state directory."""
        return {handler: self.state_dir / handler for handler in RUNTIME_HANDLERS}

    @property
    def config_file(self) -> Path:
        return self.state_dir / "config.toml"


def containerd_config(layout: ContainerdLayout) -> str:
    """The config version 2 TOML for ``layout``'s containerd."""
    config: dict[str, TomlValue | TomlTable] = {
        "version": 2,
        "root": str(layout.root),
        "state": str(layout.state),
        "disabled_plugins": list(DISABLED_PLUGINS),
        "grpc": {"address": str(layout.socket)},
        "ttrpc": {"address": str(layout.ttrpc_socket)},
        "debug": {"level": layout.log_level},
        "plugins": {
            OPT_PLUGIN: {"path": str(layout.opt)},
            CRI_PLUGIN: {
                "sandbox_image": layout.sandbox_image,
                "netns_mounts_under_state_dir": True,
                "restrict_oom_score_adj": True,
                "disable_apparmor": True,
                "enable_selinux": False,
                "stream_server_address": "127.0.0.1",
                "stream_server_port": "0",
                "containerd": {
                    "snapshotter": "overlayfs",
                    "default_runtime_name": RUNTIME_HANDLERS[0],
                    "runtimes": {
                        handler: {
                            "runtime_type": "io.containerd.runc.v2",
                            "options": {"SystemdCgroup": False, "Root": str(root)},
                        }
                        for handler, root in layout.runc_roots.items()
                    },
                },
                "cni": {
                    "bin_dir": str(layout.cni_bin_dir),
                    "conf_dir": str(layout.cni_conf_dir),
                    "max_conf_num": 1,
                },
                **(
                    {"registry": {"config_path": str(layout.registry_hosts_dir)}}
                    if layout.registry_hosts_dir is not None
                    else {}
                ),
            },
        },
    }
    return to_toml(config)


def hosts_toml(url: str, override_path: bool = False) -> str:
    """A registry's ``hosts.toml``: pull from ``url`` only.  The URL is both the one host and
    the ``server`` (containerd falls back to the server after the hosts; with the real
    registry there, an image the mirror lacks would go on to ask the internet).
    ``override_path``: ``url``'s path is the API root itself, not a prefix before ``/v2``."""
    host: dict[str, TomlValue] = {"capabilities": ["pull", "resolve"]}
    if override_path:
        host["override_path"] = True
    table: dict[str, TomlValue | TomlTable] = {"server": url, **host, "host": {url: host}}
    return to_toml(table)


def write_containerd_config(layout: ContainerdLayout) -> Path:
    """Create the layout's directories and write its config; returns the config file."""
    for directory in (
        layout.state_dir,
        layout.root,
        layout.state,
        layout.opt,
        *layout.runc_roots.values(),
    ):
        directory.mkdir(parents=True, exist_ok=True)
    path = layout.config_file
    path.write_text(containerd_config(layout))
    return path


def to_toml(table: TomlTable) -> str:
    """TOML for a table of strings, booleans, integers, string lists and nested tables."""
    lines: list[str] = []
    _emit(table, (), lines)
    return "\n".join(lines) + "\n"


def _emit(table: TomlTable, path: tuple[str, ...], lines: list[str]) -> None:
    values = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
    tables = {k: v for k, v in table.items() if isinstance(v, Mapping)}
    if path and (values or not tables):
        lines.append(f"\n[{'.'.join(_key(k) for k in path)}]")
    for key, value in values.items():
        lines.append(f"{_key(key)} = {_value(value)}")
    for key, sub in tables.items():
        _emit(sub, (*path, key), lines)


def _key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else json.dumps(key)


def _value(value: TomlValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    # JSON strings and string arrays are TOML too (both escape with \\, \" and \\uXXXX).
    return json.dumps(value)
