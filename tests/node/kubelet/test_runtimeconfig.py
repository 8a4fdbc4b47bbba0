"""The containerd config: valid TOML with every key a node's containerd needs."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from node.kubelet.runtimeconfig import (
    CRI_PLUGIN,
    OPT_PLUGIN,
    ContainerdLayout,
    LayoutError,
    containerd_config,
    hosts_toml,
    to_toml,
    write_containerd_config,
)

STATE = Path("/run/kubelab/n1")


def layout(state_dir: Path = STATE) -> ContainerdLayout:
    return ContainerdLayout(
        state_dir=state_dir,
        sandbox_image="registry.k8s.io/pause:3.9",
        cni_bin_dir=Path("/opt/cni/bin"),
        cni_conf_dir=Path("/etc/cni/net.d"),
    )


def parsed() -> dict[str, Any]:
    return tomllib.loads(containerd_config(layout()))


def test_own_root_state_and_sockets() -> None:
    config = parsed()
    assert config["version"] == 2
    assert config["root"] == "/run/kubelab/n1/root"
    assert config["state"] == "/run/kubelab/n1/state"
    assert config["grpc"]["address"] == "/run/kubelab/n1/containerd.sock"
    assert config["ttrpc"]["address"] == "/run/kubelab/n1/containerd.sock.ttrpc"
    assert config["plugins"][OPT_PLUGIN]["path"] == "/run/kubelab/n1/opt"
    assert layout().endpoint == "unix:///run/kubelab/n1/containerd.sock"


def test_cri_plugin_keys() -> None:
    cri = parsed()["plugins"][CRI_PLUGIN]
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.9"
    assert cri["netns_mounts_under_state_dir"] is True
    assert cri["restrict_oom_score_adj"] is True
    assert cri["disable_apparmor"] is True
    assert cri["stream_server_address"] == "127.0.0.1"
    assert cri["stream_server_port"] == "0"
    assert cri["containerd"]["snapshotter"] == "overlayfs"
    assert cri["containerd"]["default_runtime_name"] == "runc"
    runtimes = cri["containerd"]["runtimes"]
    assert runtimes == {
        handler: {
            "runtime_type": "io.containerd.runc.v2",
            "options": {"SystemdCgroup": False, "Root": f"/run/kubelab/n1/{handler}"},
        }
        for handler in ("runc", "kubelab-runc")
    }
    assert cri["cni"] == {
        "bin_dir": "/opt/cni/bin",
        "conf_dir": "/etc/cni/net.d",
        "max_conf_num": 1,
    }


def test_toml_quotes_keys_and_strings() -> None:
    text = to_toml({"a.b": {"x": 'say "hi"\n', "ok": [r"c:\d"], "n": 0}, "top": True})
    assert tomllib.loads(text) == {"a.b": {"x": 'say "hi"\n', "ok": [r"c:\d"], "n": 0}, "top": True}


def test_long_state_dir_is_refused() -> None:
    with pytest.raises(LayoutError, match="exceeds 107 bytes"):
        layout(Path("/" + "x" * 100))


def test_write_creates_directories(tmp_path: Path) -> None:
    node = layout(tmp_path / "n")
    path = write_containerd_config(node)
    assert tomllib.loads(path.read_text())["root"] == str(node.root)
    assert all(d.is_dir() for d in (node.root, node.state, node.opt, *node.runc_roots.values()))


def test_hosts_toml_pulls_from_the_mirror_only() -> None:
    """The mirror is the one host and the server too: no fallback to the real registry."""
    url = "http://10.240.0.1:5000/v2/docker.io"
    parsed = tomllib.loads(hosts_toml(url, override_path=True))
    assert parsed == {
        "server": url,
        "capabilities": ["pull", "resolve"],
        "override_path": True,
        "host": {url: {"capabilities": ["pull", "resolve"], "override_path": True}},
    }
    plain = tomllib.loads(hosts_toml("http://10.240.0.1:5001"))
    assert "override_path" not in plain and "override_path" not in plain["host"][plain["server"]]
