"""The ``kubelab-cni`` shim: socket choice, wire format, agent and fallback, import cost."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from node.cni import plugin, shim

REPO = Path(__file__).resolve().parents[3]
VERSION_REPLY = {"cniVersion": "1.0.0", "supportedVersions": ["0.4.0", "1.0.0"]}


@pytest.mark.parametrize(
    ("config", "path"),
    [
        pytest.param(b'{"agentSocket": "/run/a.sock", "dataDir": "/d"}', "/run/a.sock", id="key"),
        pytest.param(b'{"dataDir": "/d"}', "/d/agent.sock", id="data-dir"),
        pytest.param(b"{}", "/var/lib/kubelab/cni/agent.sock", id="default"),
        pytest.param(
            b'{"agentSocket": 7, "dataDir": ""}', "/var/lib/kubelab/cni/agent.sock", id="bad-values"
        ),
        pytest.param(b"{nope", None, id="not-json"),
        pytest.param(b"[]", None, id="not-an-object"),
    ],
)
def test_agent_socket(config: bytes, path: str | None) -> None:
    assert shim.agent_socket(config) == path


def test_default_data_dir_is_the_plugins() -> None:
    assert shim.DEFAULT_DATA_DIR == plugin.DEFAULT_DATA_DIR


def test_request_carries_only_the_cni_environment() -> None:
    env = {"CNI_COMMAND": "DEL", "HOME": "/root", "CNI_ARGS": 'K8S_POD_NAME=a"\\b;x=\u00e9'}
    header, _, stdin = shim.encode_request(env, b'{"a": 1}').partition(b"\n")
    assert json.loads(header) == {"CNI_COMMAND": "DEL", "CNI_ARGS": env["CNI_ARGS"]}
    assert stdin == b'{"a": 1}'


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            '{"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "\\u00e9\\n"}}', id="mixed"
        ),
        pytest.param(' \n{"x": NaN, "y": -Infinity}\n', id="constants-and-whitespace"),
        pytest.param('"just a string"', id="string"),
    ],
)
def test_parse_json_is_json_loads(text: str) -> None:
    assert repr(shim.parse_json(text.encode())) == repr(json.loads(text))


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b'{"a": 1} x', id="extra-data"),
        pytest.param(b'{"a": }', id="bad-value"),
        pytest.param(b"\xff", id="not-utf8"),
    ],
)
def test_parse_json_rejects(data: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - any of json's errors
        shim.parse_json(data)


@pytest.mark.parametrize(
    ("data", "reply"),
    [
        pytest.param(b"0\n", (0, b""), id="empty-stdout"),
        pytest.param(b'1\n{"code": 7}\n', (1, b'{"code": 7}\n'), id="error"),
        pytest.param(b"", None, id="nothing"),
        pytest.param(b"0", None, id="no-newline"),
        pytest.param(b"x\n{}", None, id="bad-code"),
    ],
)
def test_decode_reply(data: bytes, reply: tuple[int, bytes] | None) -> None:
    assert shim.decode_reply(data) == reply


def test_unreachable_agent_is_none(tmp_path: Path) -> None:
    assert shim.ask_agent(str(tmp_path / "absent.sock"), b"{}\n") is None
    with socket.socket(socket.AF_UNIX) as bound_not_listening:
        bound_not_listening.bind(str(tmp_path / "refusing.sock"))
        assert shim.ask_agent(str(tmp_path / "refusing.sock"), b"{}\n") is None


def run_shim(agent_socket: Path) -> subprocess.CompletedProcess[bytes]:
    config = json.dumps({"cniVersion": "1.0.0", "agentSocket": str(agent_socket)})
    return subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path[:0] = [{str(REPO)!r}]\nfrom node.cni.shim import main; main()",
        ],
        input=config.encode(),
        env={"CNI_COMMAND": "VERSION"},
        capture_output=True,
        check=False,
        timeout=30,
    )


@pytest.fixture
def agent_process(tmp_path: Path) -> Iterator[Path]:
    """``python -m node.cni.agent`` in this netns (VERSION needs no netlink); its socket."""
    path = tmp_path / "agent.sock"
    process = subprocess.Popen([sys.executable, "-m", "node.cni.agent", str(path)], cwd=REPO)
    try:
        deadline = time.monotonic() + 20
        while not path.exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        yield path
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    assert not path.exists()


def test_shim_through_the_agent(agent_process: Path) -> None:
    done = run_shim(agent_process)
    assert (done.returncode, json.loads(done.stdout)) == (0, VERSION_REPLY)


def test_shim_falls_back_in_process(tmp_path: Path) -> None:
    done = run_shim(tmp_path / "absent.sock")
    assert (done.returncode, json.loads(done.stdout)) == (0, VERSION_REPLY)


def test_shim_imports_no_plugin_code() -> None:
    """The fast path stays cheap: none of the modules that made a call cost 40 ms."""
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path[:0] = [{str(REPO)!r}]; import node.cni.shim\n"
            "print(' '.join(sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    modules = set(done.stdout.split())
    assert "node.cni.shim" in modules
    heavy = ("json", "socket", "re", "enum", "typing", "pyroute2", "node.cni.plugin", "asyncio")
    assert not {m for m in modules if m.split(".")[0] in heavy or m in heavy}
