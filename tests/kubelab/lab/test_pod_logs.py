"""Logs of a container's earlier run and of a command that ends before kubectl attaches, as a
user reads them with the pinned kubectl in the shared lab: ``kubectl logs --previous`` of a
crash-looping pod (and ``describe``'s Last State), and ``kubectl run --rm -i``.  Images are
named as users name them (``--image=busybox``, pulled with ``Always`` from the lab's
registry).
"""

from __future__ import annotations

import calendar
import json
import time
from typing import Any

import pytest

from tests.kubelab.lab.labs import UP_TIMEOUT
from tests.servers import Kubectl

pytestmark = [
    pytest.mark.lab,
    pytest.mark.privileged,
    pytest.mark.containerd,
    pytest.mark.timeout(UP_TIMEOUT + 120),
]

IMAGE = ("--image=busybox",)


def _wait_for(kubectl: Kubectl, pod: str, ready: Any, timeout: float = 60.0) -> dict[str, Any]:
    """The pod's ``.status.containerStatuses[0]`` once ``ready`` says so."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        out = kubectl.run("get", "pod", pod, "-o", "json")
        status = (json.loads(out.stdout)["status"].get("containerStatuses") or [{}])[0]
        if ready(status):
            return status
        time.sleep(0.5)
    raise AssertionError(f"pod {pod} never got there: {status}")


def _crash_looping(status: dict[str, Any]) -> bool:
    waiting = status.get("state", {}).get("waiting", {})
    return bool(waiting.get("reason") == "CrashLoopBackOff" and status.get("restartCount", 0) >= 1)


def test_logs_previous_of_a_crash_looping_pod(lab_kubectl: Kubectl) -> None:
    kubectl = lab_kubectl
    script = 'echo "ran at $(date +%s)"; exit 3'
    kubectl.run("run", "crasher", *IMAGE, "--", "sh", "-c", script)
    status = _wait_for(kubectl, "crasher", _crash_looping)
    last = status["lastState"]["terminated"]
    assert last["exitCode"] == 3 and last["containerID"].startswith("containerd://")

    # The run lastState describes: the one the kubelet kept, whatever -c or -p spelling.
    previous = kubectl.run("logs", "crasher", "--previous").stdout
    (line,) = previous.splitlines()
    ran_at = int(line.removeprefix("ran at "))
    assert _epoch(last["startedAt"]) <= ran_at <= _epoch(last["finishedAt"]) + 1, (line, last)
    assert kubectl.run("logs", "crasher", "-p", "-c", "crasher").stdout == previous
    # Waiting to restart, the current log is that same run's.
    assert kubectl.run("logs", "crasher").stdout == previous

    described = kubectl.run("describe", "pod", "crasher").stdout
    assert "Last State:     Terminated" in described
    assert "Exit Code:    3" in described
    assert f"Restart Count:  {status['restartCount']}" in described


def _epoch(stamp: str) -> int:
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def test_logs_previous_without_a_previous_run(lab_kubectl: Kubectl) -> None:
    lab_kubectl.run("run", "sleeper", *IMAGE, "--", "sleep", "3600")
    _wait_for(lab_kubectl, "sleeper", lambda s: s.get("state", {}).get("running"))
    out = lab_kubectl.run("logs", "sleeper", "--previous", check=False)
    assert out.returncode == 1
    assert out.stderr == (
        'Error from server (BadRequest): previous terminated container "sleeper" in pod '
        '"sleeper" not found\n'
    )


def test_run_rm_i_prints_what_the_command_printed(lab_kubectl: Kubectl) -> None:
    """``echo`` is done before kubectl attaches: the kubelet refuses the attach as upstream's
    does, kubectl falls back to the logs, then deletes the pod."""
    namespace = lab_kubectl.namespace
    out = lab_kubectl.run(
        "run", "tmp", "--rm", "-i", "--restart=Never", *IMAGE, "--", "echo", "hi", input=""
    )
    *printed, deleted = out.stdout.splitlines()
    # kubectl 1.36 prints the logs it read before attaching and again when falling back
    # (kubernetes/kubectl#1848): "hi" once or twice, nothing else.
    assert printed and set(printed) == {"hi"}, out.stdout
    assert deleted == f'pod "tmp" deleted from {namespace} namespace'
    # Refused by the kubelet (the runtime says the container exited), or by containerd's
    # stream (the runtime had not noticed yet: upstream's kubelet meets the same race), or
    # never tried (the pod had already succeeded when kubectl looked).
    fallback = "warning: couldn't attach to pod/tmp, falling back to streaming logs: "
    refused = f"unable to upgrade connection: container tmp not found in pod tmp_{namespace}"
    raced = "Internal error occurred: error attaching to container: "
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [] or (
        len(warnings) == 1
        and warnings[0].startswith(fallback)
        and (warnings[0] == fallback + refused or warnings[0].startswith(fallback + raced))
    ), out.stderr
    gone = lab_kubectl.run("get", "pod", "tmp", check=False)
    assert gone.returncode == 1 and "NotFound" in gone.stderr
