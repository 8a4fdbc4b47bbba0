"""The CNI agent in-process, over a plugin with fake netlink and iptables: no root needed."""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import pytest

from node.cni.agent import CniAgent
from node.cni.network import Attached, Attachment, Link, NatRules
from node.cni.plugin import Plugin, Reply
from node.cni.shim import ask_agent, encode_request


class FakeNetwork:
    def attach(self, attachment: Attachment) -> Attached:
        return Attached(
            bridge=Link(attachment.bridge, "aa:00:00:00:00:01"),
            host=Link("veth0", "aa:00:00:00:00:02"),
            pod=Link(attachment.ifname, "aa:00:00:00:00:03", sandbox=attachment.netns),
        )

    def detach(self, container_id: str, ifname: str) -> None:
        pass

    def check(self, attachment: Attachment) -> None:
        pass


class NoIptables:
    backend = "nft"

    def save(self, table: str) -> str:
        return ""

    def restore(self, table: str, lines: Sequence[str]) -> None:
        pass


class SlowPlugin(Plugin):
    """Records when each call ran, per container id; fails on container id ``boom``."""

    def __init__(self) -> None:
        super().__init__(FakeNetwork(), NatRules(NoIptables()))
        self.spans: list[tuple[str, float, float]] = []
        self.lock = threading.Lock()

    def run(self, env: Mapping[str, str], stdin: bytes) -> Reply:
        if env["CNI_CONTAINERID"] == "boom":
            raise RuntimeError("unexpected")
        start = time.monotonic()
        time.sleep(0.2)
        with self.lock:
            self.spans.append((env["CNI_CONTAINERID"], start, time.monotonic()))
        return Reply(0, "{}")


def env(command: str = "ADD", container_id: str = "c1") -> dict[str, str]:
    return {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container_id,
        "CNI_NETNS": "/run/netns/pod",
        "CNI_IFNAME": "eth0",
        "PATH": "/usr/bin",
    }


def config(tmp_path: Path) -> bytes:
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "kubelab",
            "type": "kubelab-cni",
            "dataDir": str(tmp_path / "data"),
            "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.1.0/24"}]]},
        }
    ).encode()


@pytest.fixture
def plugin() -> Plugin:
    return Plugin(FakeNetwork(), NatRules(NoIptables()))


@pytest.fixture
async def agent(tmp_path: Path, plugin: Plugin) -> AsyncIterator[CniAgent]:
    agent = CniAgent(tmp_path / "run" / "agent.sock", plugin)
    await agent.start()
    yield agent
    await agent.stop()


async def raw_call(agent: CniAgent, request: bytes) -> tuple[int, dict[str, object]]:
    answer = await asyncio.to_thread(ask_agent, str(agent.socket_path), request)
    assert answer is not None
    return answer[0], json.loads(answer[1]) if answer[1] else {}


async def test_answers_as_the_plugin_does(agent: CniAgent, tmp_path: Path) -> None:
    request = encode_request(env(), config(tmp_path))
    answer = await asyncio.to_thread(ask_agent, str(agent.socket_path), request)
    assert answer is not None
    code, stdout = answer
    assert code == 0
    assert stdout.endswith(b"\n")
    assert json.loads(stdout)["ips"][0]["address"] == "10.244.1.2/24"
    # The same call again is the same result (ADD is idempotent); DEL frees the address.
    assert await asyncio.to_thread(ask_agent, str(agent.socket_path), request) == answer
    assert await raw_call(agent, encode_request(env("DEL"), config(tmp_path))) == (0, {})
    assert not list((tmp_path / "data" / "networks" / "kubelab").glob("10.*"))


async def test_socket_is_private_and_replaces_a_stale_one(tmp_path: Path, plugin: Plugin) -> None:
    path = tmp_path / "agent.sock"
    path.write_text("stale")
    agent = CniAgent(path, plugin)
    await agent.start()
    try:
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        await agent.stop()
    assert not path.exists()


@pytest.mark.parametrize(
    ("request_bytes", "code"),
    [
        pytest.param(b"", 6, id="empty"),
        pytest.param(b'{"CNI_COMMAND": "ADD"}', 6, id="no-newline"),
        pytest.param(b"{nope\n{}", 6, id="env-not-json"),
        pytest.param(b'["CNI_COMMAND"]\n{}', 4, id="env-not-a-map"),
        pytest.param(b'{"CNI_COMMAND": 1}\n{}', 4, id="env-value-not-a-string"),
        pytest.param(b'{"CNI_COMMAND": "ADD"}\n{}', 4, id="plugin-rejects-env"),
    ],
)
async def test_malformed_requests_get_error_replies(
    agent: CniAgent, tmp_path: Path, request_bytes: bytes, code: int
) -> None:
    exit_code, error = await raw_call(agent, request_bytes)
    assert exit_code == 1
    assert error["code"] == code
    assert error["msg"]
    # The agent still serves.
    version = encode_request(env("VERSION"), b"")
    assert (await raw_call(agent, version))[0] == 0


async def test_unexpected_plugin_failure_is_an_error_reply(tmp_path: Path) -> None:
    agent = CniAgent(tmp_path / "agent.sock", SlowPlugin())
    await agent.start()
    try:
        exit_code, error = await raw_call(agent, encode_request(env(container_id="boom"), b"{}"))
    finally:
        await agent.stop()
    assert exit_code == 1
    assert error["code"] == 100
    assert "RuntimeError: unexpected" in str(error["details"])


async def test_calls_are_serialised_per_container(tmp_path: Path) -> None:
    plugin = SlowPlugin()
    agent = CniAgent(tmp_path / "agent.sock", plugin)
    await agent.start()
    try:
        await asyncio.gather(
            *(
                raw_call(agent, encode_request(env(container_id=cid), b"{}"))
                for cid in ("a", "a", "b")
            )
        )
    finally:
        await agent.stop()
    spans = {cid: [(s, e) for c, s, e in plugin.spans if c == cid] for cid in ("a", "b")}
    (a1_start, a1_end), (a2_start, _) = sorted(spans["a"])
    assert a2_start >= a1_end  # same container: one after the other
    (b_start, b_end) = spans["b"][0]
    assert b_start < a1_end and a1_start < b_end  # another container: side by side
    assert agent._locks == {}


async def test_stop_lets_a_call_under_way_finish(tmp_path: Path) -> None:
    agent = CniAgent(tmp_path / "agent.sock", SlowPlugin())
    await agent.start()
    call = asyncio.create_task(raw_call(agent, encode_request(env(), b"{}")))
    await asyncio.sleep(0.05)
    await agent.stop()
    assert await call == (0, {})


def test_stop_on_signals_ignores_forked_children() -> None:
    """pyroute2's forked helpers get SIGTERM when done: they die of it, the agent goes on."""
    script = (
        "import os, signal, time\n"
        "from node.cni.agent import stop_on_signals\n"
        "stopped = []\n"
        "stop_on_signals(lambda: stopped.append(1))\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(10); os._exit(0)\n"
        "time.sleep(0.1); os.kill(pid, signal.SIGTERM)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, stopped)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "print(stopped)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert done.stdout.splitlines() == ["True []", "[1]"]
