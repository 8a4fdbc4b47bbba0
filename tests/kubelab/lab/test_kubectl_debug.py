"""``kubectl debug`` in the shared lab, typed as a user types it: a shell in an ephemeral
container that sees the target container's processes (``-it`` on a terminal, ``-i`` on a
pipe), the container's status in the pod, a copy of the pod with a debugging container, and a
shell on a node with the host's namespaces and root file system.

Images are named as users name them (``--image=busybox``, pulled with ``Always`` from the
lab's registry).

An interactive session keeps its input open until the answer has arrived, as a user at the
keyboard does: containerd ends an attach when its stdin closes (the container's stdin stays
open, ``stdinOnce`` being false), so whatever the shell prints after that is only in its log.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.servers import Kubectl

pytestmark = [pytest.mark.lab, pytest.mark.privileged, pytest.mark.containerd]

IMAGE = ("--image=busybox",)
DEADLINE = 60.0


class Session:
    """kubectl running interactively: its output read as it comes, input sent as typed."""

    def __init__(self, argv: list[str], *, tty: bool) -> None:
        if tty:
            primary, secondary = pty.openpty()
            self.process = subprocess.Popen(
                argv, stdin=secondary, stdout=secondary, stderr=secondary, start_new_session=True
            )
            os.close(secondary)
            self._read, self._write = primary, primary
        else:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            assert self.process.stdin is not None and self.process.stdout is not None
            self._read, self._write = self.process.stdout.fileno(), self.process.stdin.fileno()
        self.output = ""

    def send(self, text: str) -> None:
        os.write(self._write, text.encode())

    def expect(self, text: str) -> None:
        """Read until ``text`` has been printed (or fail with everything printed so far)."""
        deadline = time.monotonic() + DEADLINE
        while text not in self.output:
            if not self._read_some(deadline - time.monotonic()):
                raise AssertionError(f"{text!r} never came; kubectl printed:\n{self.output}")

    def finish(self) -> int:
        """Read to the end and wait for kubectl; its exit code."""
        deadline = time.monotonic() + DEADLINE
        while self._read_some(deadline - time.monotonic()):
            pass
        return self.process.wait(timeout=max(deadline - time.monotonic(), 1.0))

    def _read_some(self, timeout: float) -> bool:
        if timeout <= 0 or not select.select([self._read], [], [], timeout)[0]:
            return False
        try:
            data = os.read(self._read, 65536)
        except OSError:  # EIO: the terminal's other side has gone
            return False
        self.output += data.decode(errors="replace")
        return bool(data)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        if self._read == self._write:
            os.close(self._read)


@contextmanager
def session(kubectl: Kubectl, *args: str, tty: bool) -> Iterator[Session]:
    running = Session(kubectl.argv(*args), tty=tty)
    try:
        yield running
    finally:
        running.close()


def jsonpath(kubectl: Kubectl, what: str, path: str) -> str:
    return kubectl.run("get", what, "-o", f"jsonpath={path}").stdout


def eventually(kubectl: Kubectl, what: str, path: str, expected: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while (got := jsonpath(kubectl, what, path)) != expected:
        assert time.monotonic() < deadline, f"{what} {path}: {got!r}, never {expected!r}"
        time.sleep(0.5)


@pytest.fixture
def web(lab_kubectl: Kubectl) -> str:
    """A running pod whose one container, ``web``, sleeps: the process to look for."""
    lab_kubectl.run("run", "web", *IMAGE, "--", "sleep", "3600")
    lab_kubectl.run("wait", "--for=condition=Ready", "pod/web", "--timeout=60s")
    return "web"


def test_debug_it_with_target_sees_the_targets_processes(lab_kubectl: Kubectl, web: str) -> None:
    args = ("debug", web, "-it", *IMAGE, "--target=web", "-c", "debugger", "--", "sh")
    with session(lab_kubectl, *args, tty=True) as shell:
        shell.expect("If you don't see a command prompt, try pressing enter.")
        shell.send("ps -o pid,args\n")
        shell.expect("sleep 3600")
        shell.send("exit\n")
        assert shell.finish() == 0
    assert 'Targeting container "web".' in shell.output
    assert "Session ended, the ephemeral container will not be restarted" in shell.output
    statuses = "{.status.ephemeralContainerStatuses[0]"
    assert jsonpath(lab_kubectl, "pod/web", f"{statuses}.name}}") == "debugger"
    eventually(lab_kubectl, "pod/web", f"{statuses}.state.terminated.reason}}", "Completed")
    assert jsonpath(lab_kubectl, "pod/web", f"{statuses}.restartCount}}") == "0"
    assert jsonpath(lab_kubectl, "pod/web", "{.status.phase}") == "Running"


def test_debug_i_runs_the_images_command_and_can_be_exec_ed(lab_kubectl: Kubectl, web: str) -> None:
    with session(lab_kubectl, "debug", web, "-i", *IMAGE, "-c", "shell", tty=False) as shell:
        shell.send("echo hello from $(hostname)\n")
        shell.expect("hello from web")
        running = "{.status.ephemeralContainerStatuses[0].state.running.startedAt}"
        assert jsonpath(lab_kubectl, "pod/web", running)
        exec_ = lab_kubectl.run("exec", web, "-c", "shell", "--", "ps", "-o", "args")
        assert "sleep 3600" not in exec_.stdout  # no target: a process namespace of its own
        shell.send("exit 3\n")
        assert shell.finish() == 0
    terminated = "{.status.ephemeralContainerStatuses[0].state.terminated.exitCode}"
    eventually(lab_kubectl, "pod/web", terminated, "3")


def test_debug_copy_to_shares_the_copys_processes(lab_kubectl: Kubectl, web: str) -> None:
    args = ("debug", web, "--copy-to=web-copy", *IMAGE, "-c", "debugger", "--", "sleep", "600")
    lab_kubectl.run(*args)
    lab_kubectl.run("wait", "--for=condition=Ready", "pod/web-copy", "--timeout=60s")
    names = jsonpath(lab_kubectl, "pod/web-copy", "{.spec.containers[*].name}")
    assert names == "web debugger"
    assert jsonpath(lab_kubectl, "pod/web-copy", "{.spec.shareProcessNamespace}") == "true"
    ps = lab_kubectl.run("exec", "web-copy", "-c", "debugger", "--", "ps", "-o", "args")
    assert "sleep 3600" in ps.stdout and "sleep 600" in ps.stdout


def test_debug_node_gets_the_hosts_namespaces_and_root(lab_kubectl: Kubectl) -> None:
    node = "node1"
    address = jsonpath(
        lab_kubectl, f"node/{node}", '{.status.addresses[?(@.type=="InternalIP")].address}'
    )
    with session(lab_kubectl, "debug", f"node/{node}", "-i", *IMAGE, tty=False) as shell:
        shell.expect(f"Creating debugging pod node-debugger-{node}-")
        shell.send("ip -o -4 addr show; echo pid1=$(cat /proc/1/comm); ls /host/proc/1/ns\n")
        shell.expect("pid_for_children")
        shell.send("exit\n")
        assert shell.finish() == 0
    assert f"inet {address}/" in shell.output  # the node's own network
    assert "pid1=sh" not in shell.output  # the host's processes, not the container's own
    pod = shell.output.split("Creating debugging pod ")[1].split()[0]
    spec = "{.spec.hostNetwork} {.spec.hostPID} {.spec.hostIPC} {.spec.nodeName}"
    assert jsonpath(lab_kubectl, f"pod/{pod}", spec) == f"true true true {node}"
    mount = "{.spec.containers[0].volumeMounts[0].mountPath} {.spec.volumes[0].hostPath.path}"
    assert jsonpath(lab_kubectl, f"pod/{pod}", mount) == "/host /"
    eventually(lab_kubectl, f"pod/{pod}", "{.status.phase}", "Succeeded")
