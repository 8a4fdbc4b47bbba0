"""Rendering and writing the node's conflist, installing the plugin executables."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from node.cni.netconf import install_plugins, render_netconf, write_netconf

DATA = Path("/var/lib/kubelab/node-1/cni")


def test_kubelab_conflist() -> None:
    assert render_netconf(
        "10.244.1.0/24", plugin="kubelab", cluster_cidr="10.244.0.0/16", data_dir=DATA, mtu=1400
    ) == {
        "cniVersion": "1.0.0",
        "name": "kubelab",
        "plugins": [
            {
                "type": "kubelab-cni",
                "bridge": "cni0",
                "mtu": 1400,
                "hairpinMode": True,
                "dataDir": str(DATA),
                "clusterCIDR": "10.244.0.0/16",
                "agentSocket": str(DATA / "agent.sock"),
                "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.1.0/24"}]]},
                "capabilities": {"portMappings": True},
            }
        ],
    }


def test_kubelab_agent_socket_given() -> None:
    conflist = render_netconf(
        "10.244.1.0/24",
        plugin="kubelab",
        cluster_cidr="10.244.0.0/16",
        data_dir=DATA,
        agent_socket=Path("/run/kubelab/cni.sock"),
    )
    assert conflist["plugins"][0]["agentSocket"] == "/run/kubelab/cni.sock"


def test_reference_conflist() -> None:
    assert render_netconf(
        "10.244.1.0/24",
        plugin="reference",
        cluster_cidr="10.244.0.0/16",
        data_dir=DATA,
        bridge="br0",
    ) == {
        "cniVersion": "1.0.0",
        "name": "kubelab",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "br0",
                "mtu": 1500,
                "isGateway": True,
                "hairpinMode": True,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": "10.244.1.0/24"}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(DATA / "host-local"),
                },
            },
            {"type": "portmap", "snat": True, "capabilities": {"portMappings": True}},
        ],
    }


def test_unknown_plugin() -> None:
    with pytest.raises(ValueError, match="unknown CNI plugin 'flannel'"):
        render_netconf(
            "10.0.0.0/24",
            plugin="flannel",  # type: ignore[arg-type]
            cluster_cidr="10.0.0.0/16",
            data_dir=DATA,
        )


def test_write_netconf_replaces_atomically(tmp_path: Path) -> None:
    conflist = render_netconf(
        "10.244.1.0/24", plugin="kubelab", cluster_cidr="10.244.0.0/16", data_dir=DATA
    )
    conf_dir = tmp_path / "net.d"
    path = write_netconf(conf_dir, {**conflist, "plugins": []})
    assert write_netconf(conf_dir, conflist) == path == conf_dir / "10-kubelab.conflist"
    assert json.loads(path.read_text()) == conflist
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in conf_dir.iterdir()] == [path.name]


@pytest.mark.parametrize(
    "conflist",
    [
        pytest.param({}, id="no-name"),
        pytest.param({"name": ""}, id="empty-name"),
        pytest.param({"name": "../x"}, id="path-in-name"),
    ],
)
def test_write_netconf_needs_a_plain_name(tmp_path: Path, conflist: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="plain string name"):
        write_netconf(tmp_path, conflist)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def reference_dir(tmp_path: Path) -> Path:
    source = tmp_path / "usr-lib-cni"
    source.mkdir()
    for name in ("loopback", "bridge", "host-local", "portmap", "dhcp"):
        (source / name).write_bytes(f"binary {name}".encode())
    return source


def test_install_plugins(tmp_path: Path, reference_dir: Path) -> None:
    bin_dir = tmp_path / "bin"
    install_plugins(bin_dir, reference_dir)
    install_plugins(bin_dir, reference_dir)  # again, over the installed files
    names = sorted(p.name for p in bin_dir.iterdir())
    assert names == ["bridge", "host-local", "kubelab-cni", "loopback", "portmap"]
    for name in names:
        assert stat.S_IMODE((bin_dir / name).stat().st_mode) == 0o755
    assert (bin_dir / "bridge").read_bytes() == b"binary bridge"
    assert (bin_dir / "kubelab-cni").read_text().splitlines()[0].endswith(" -IS")


def test_installed_kubelab_cni_answers(tmp_path: Path, reference_dir: Path) -> None:
    """The executable as containerd runs it: here with no agent, so the plugin in-process."""
    install_plugins(tmp_path, reference_dir)
    done = subprocess.run(
        [str(tmp_path / "kubelab-cni")],
        input=json.dumps({"cniVersion": "0.4.0", "agentSocket": str(tmp_path / "none.sock")}),
        env={"CNI_COMMAND": "VERSION"},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "cniVersion": "0.4.0",
        "supportedVersions": ["0.4.0", "1.0.0"],
    }


def test_install_plugins_missing_source(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="loopback"):
        install_plugins(tmp_path / "bin", tmp_path / "nowhere")
