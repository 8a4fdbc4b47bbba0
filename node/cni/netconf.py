"""The node's CNI network config and plugin binaries, as containerd's CRI plugin reads them.

The kubelet renders one ``.conflist`` (spec 1.0.0) from the node's podCIDR and installs the
executables it names into containerd's ``cni.bin_dir``.  Two interchangeable networks:

``plugin="kubelab"``: our plugin alone (``type`` is the executable's name, ``kubelab-cni``):
bridge, veth, host-local style IPAM under ``dataDir``, masquerade of traffic leaving
``clusterCIDR`` (pods keep their IPs towards other nodes' pods) and hostPort DNAT through the
``portMappings`` capability; ``agentSocket`` points the executable at the node's
:mod:`node.cni.agent`.

``plugin="reference"``: the containernetworking plugins from /usr/lib/cni, ``bridge`` with
``host-local`` IPAM (state under ``dataDir/host-local``, a default route via the gateway) and
``portmap`` for hostPorts.  The bridge's ``ipMasq`` is off: it masquerades everything that
leaves the pod's own subnet, other nodes' pod CIDRs included, and it has no way to exempt the
cluster CIDR, while pods must see each other's real IPs.  Masquerade of traffic leaving the
cluster is then the node's job (one ``-s podCIDR ! -d clusterCIDR -j MASQUERADE`` rule, as
kubenet's kubelet did).  ``portmap`` runs with ``snat``, which masquerades hairpin traffic (a
pod reaching itself through its hostPort), which the bridge's ``hairpinMode`` alone cannot make
work: the pod would drop a packet whose source is its own address.

Both write their IPAM state under ``data_dir``, so one directory says which addresses are
taken.  Files are replaced atomically (temporary file, ``fsync``, ``rename``): containerd
watches the config directory and may read at any moment, and a plugin binary may be running
while it is replaced.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import node

CNI_VERSION = "1.0.0"
NETWORK_NAME = "kubelab"
KUBELAB_PLUGIN = "kubelab-cni"
REFERENCE_PLUGIN_DIR = Path("/usr/lib/cni")
REFERENCE_PLUGINS = ("loopback", "bridge", "host-local", "portmap")
HOST_LOCAL_DIR = "host-local"
AGENT_SOCKET = "agent.sock"
CONF_PRIORITY = "10"


def render_netconf(
    pod_cidr: str,
    *,
    plugin: Literal["kubelab", "reference"],
    cluster_cidr: str,
    data_dir: Path,
    bridge: str = "cni0",
    mtu: int = 1500,
    agent_socket: Path | None = None,
) -> dict[str, Any]:
    """The node's ``.conflist`` for ``pod_cidr``; ``agent_socket`` defaults to data_dir's."""
    ranges = [[{"subnet": pod_cidr}]]
    ports = {"portMappings": True}
    plugins: list[dict[str, Any]]
    if plugin == "kubelab":
        socket = agent_socket if agent_socket is not None else data_dir / AGENT_SOCKET
        plugins = [
            {
                "type": KUBELAB_PLUGIN,
                "bridge": bridge,
                "mtu": mtu,
                "hairpinMode": True,
                "dataDir": str(data_dir),
                "clusterCIDR": cluster_cidr,
                "agentSocket": str(socket),
                "ipam": {"type": "host-local", "ranges": ranges},
                "capabilities": ports,
            }
        ]
    elif plugin == "reference":
        plugins = [
            {
                "type": "bridge",
                "bridge": bridge,
                "mtu": mtu,
                "isGateway": True,
                "hairpinMode": True,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": ranges,
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(data_dir / HOST_LOCAL_DIR),
                },
            },
            {"type": "portmap", "snat": True, "capabilities": ports},
        ]
    else:
        raise ValueError(f"unknown CNI plugin {plugin!r}: use 'kubelab' or 'reference'")
    return {"cniVersion": CNI_VERSION, "name": NETWORK_NAME, "plugins": plugins}


def write_netconf(conf_dir: Path, conflist: Mapping[str, Any]) -> Path:
    """Write ``conflist`` as ``10-<name>.conflist`` in conf_dir, atomically; its path."""
    name = conflist.get("name")
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"conflist needs a plain string name, not {name!r}")
    path = conf_dir / f"{CONF_PRIORITY}-{name}.conflist"
    _replace(path, 0o644, (json.dumps(conflist, indent=2) + "\n").encode())
    return path


def install_plugins(bin_dir: Path, source: Path = REFERENCE_PLUGIN_DIR) -> None:
    """Put ``kubelab-cni`` and the reference plugins the configs name into bin_dir."""
    for name in REFERENCE_PLUGINS:
        _replace(bin_dir / name, 0o755, (source / name).read_bytes())
    _replace(bin_dir / KUBELAB_PLUGIN, 0o755, kubelab_cni_script().encode())


def kubelab_cni_script() -> str:
    """The ``kubelab-cni`` executable: this interpreter with ``-I -S``, then the shim.

    ``-I -S`` skips site processing, two thirds of a bare start here (34 ms against 12: the
    ``.pth`` hooks of an editable install import pathlib and importlib machinery); the path is
    set by hand instead: the directory holding the ``node`` package, and the site directory the
    in-process fallback imports pyroute2 from.
    """
    paths = [str(Path(next(iter(node.__path__))).parent), sysconfig.get_paths()["purelib"]]
    return (
        f"#!{sys.executable} -IS\n"
        "import sys\n"
        f"sys.path[:0] = {paths!r}\n"
        "from node.cni.shim import main\n"
        "main()\n"
    )


def _replace(path: Path, mode: int, content: bytes) -> None:
    """Write ``content`` to ``path`` through a temporary file in its directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
