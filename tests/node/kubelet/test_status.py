"""Pod status generation: runtime situations → phase, conditions and container statuses."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from kube.api.kinds.core_v1.pod import (
    Container,
    ContainerRestartRule,
    ContainerRestartRuleOnExitCodes,
    ContainerState,
    ContainerStateRunning,
    ContainerStatus,
    EphemeralContainer,
    ExecAction,
    Pod,
    PodCondition,
    PodReadinessGate,
    PodSpec,
    PodStatus,
    Probe,
    ResourceRequirements,
)
from kube.api.meta_v1 import ObjectMeta
from node.kubelet.status import (
    Observation,
    RuntimeContainer,
    StartFailure,
    generate_pod_status,
    status_changed,
)

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
NOW = T0 + datetime.timedelta(seconds=100, microseconds=250)
PROBE = Probe(exec=ExecAction(command=["true"]))
BACKOFF = StartFailure(
    "CrashLoopBackOff", "back-off 10s restarting failed container=app pod=web_default(uid-1)"
)


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def container(
    name: str = "app",
    *,
    readiness: bool = False,
    startup: bool = False,
    sidecar: bool = False,
    rules: list[ContainerRestartRule] | None = None,
) -> Container:
    return Container(
        name=name,
        image=f"{name}:1",
        readiness_probe=PROBE if readiness else None,
        startup_probe=PROBE if startup else None,
        restart_policy="Always" if sidecar else None,
        restart_policy_rules=rules,
    )


def pod(
    *containers: Container,
    init: tuple[Container, ...] = (),
    policy: str = "Always",
    gates: tuple[str, ...] = (),
    deleting: bool = False,
    deadline: int | None = None,
    status: PodStatus | None = None,
    host_network: bool = False,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name="web",
            namespace="default",
            uid="uid-1",
            generation=3,
            deletion_timestamp=at(90) if deleting else None,
        ),
        spec=PodSpec(
            containers=list(containers or (container(),)),
            init_containers=list(init) or None,
            restart_policy=policy,
            readiness_gates=[PodReadinessGate(condition_type=g) for g in gates] or None,
            active_deadline_seconds=deadline,
            host_network=host_network,
        ),
        status=status,
    )


def running(name: str = "app", attempt: int = 0) -> RuntimeContainer:
    return RuntimeContainer(
        id=f"{name}-{attempt}",
        name=name,
        image=f"{name}:1",
        image_ref=f"sha256:{name}",
        state="running",
        created_at=at(10 * attempt + 1),
        started_at=at(10 * attempt + 2),
        restart_count=attempt,
    )


def exited(name: str = "app", code: int = 0, attempt: int = 0) -> RuntimeContainer:
    return dataclasses.replace(
        running(name, attempt),
        state="exited",
        exit_code=code,
        reason="Completed" if code == 0 else "Error",
        finished_at=at(10 * attempt + 5),
    )


def seen(*containers: RuntimeContainer, **kwargs: Any) -> Observation:
    defaults: dict[str, Any] = {
        "now": NOW,
        "node_ips": ("10.0.0.2",),
        "sandbox_ready": True,
        "pod_ips": ("10.244.1.5",),
    }
    return Observation(containers=containers, **{**defaults, **kwargs})


def describe(state: ContainerState | None) -> str:
    """A container state in one word or three: running, waiting:Reason, terminated:code:Reason."""
    if state is None:
        return "none"
    if state.running is not None:
        return "running"
    if state.terminated is not None:
        return f"terminated:{state.terminated.exit_code}:{state.terminated.reason}"
    if state.waiting is not None:
        return f"waiting:{state.waiting.reason}"
    return "empty"


def containers_of(status: PodStatus) -> dict[str, str]:
    return {
        s.name or "": describe(s.state)
        for s in (*(status.init_container_statuses or ()), *(status.container_statuses or ()))
    }


def conditions_of(status: PodStatus) -> dict[str, str]:
    return {
        c.type or "": c.status + (f":{c.reason}" if c.reason else "")
        for c in status.conditions or ()
        if c.status is not None
    }


UP = {
    "PodReadyToStartContainers": "True",
    "Initialized": "True",
    "Ready": "True",
    "ContainersReady": "True",
    "PodScheduled": "True",
}
NOT_READY = {
    **UP,
    "Ready": "False:ContainersNotReady",
    "ContainersReady": "False:ContainersNotReady",
}
UNINITIALIZED = {**NOT_READY, "Initialized": "False:ContainersNotInitialized"}
DONE = {
    **UP,
    "Initialized": "True:PodCompleted",
    "Ready": "False:PodCompleted",
    "ContainersReady": "False:PodCompleted",
}
FAILED = {**UP, "Ready": "False:PodFailed", "ContainersReady": "False:PodFailed"}

CASES = [
    pytest.param(
        pod(),
        seen(sandbox_ready=False, pod_ips=()),
        "Pending",
        {**NOT_READY, "PodReadyToStartContainers": "False"},
        {"app": "waiting:ContainerCreating"},
        id="nothing-yet",
    ),
    pytest.param(pod(), seen(running()), "Running", UP, {"app": "running"}, id="running-no-probes"),
    pytest.param(
        pod(container(readiness=True)),
        seen(running()),
        "Running",
        NOT_READY,
        {"app": "running"},
        id="readiness-not-yet-probed",
    ),
    pytest.param(
        pod(container(readiness=True)),
        seen(running(), readiness={"app-0": True}),
        "Running",
        UP,
        {"app": "running"},
        id="readiness-succeeded",
    ),
    pytest.param(
        pod(container(readiness=True, startup=True)),
        seen(running(), readiness={"app-0": True}),
        "Running",
        NOT_READY,
        {"app": "running"},
        id="startup-gates-readiness",
    ),
    pytest.param(
        pod(container(startup=True)),
        seen(running(), startup={"app-0": True}),
        "Running",
        UP,
        {"app": "running"},
        id="startup-succeeded",
    ),
    pytest.param(
        pod(container("a"), container("b")),
        seen(running("a")),
        "Pending",
        NOT_READY,
        {"a": "running", "b": "waiting:ContainerCreating"},
        id="one-of-two-started",
    ),
    pytest.param(
        pod(init=(container("init"),)),
        seen(running("init")),
        "Pending",
        UNINITIALIZED,
        {"init": "running", "app": "waiting:PodInitializing"},
        id="init-running",
    ),
    pytest.param(
        pod(init=(container("init"),)),
        seen(exited("init"), running()),
        "Running",
        UP,
        {"init": "terminated:0:Completed", "app": "running"},
        id="init-done-app-running",
    ),
    pytest.param(
        pod(init=(container("init"),), policy="Never"),
        seen(exited("init", 1)),
        "Failed",
        {**FAILED, "Initialized": "False:ContainersNotInitialized"},
        {"init": "terminated:1:Error", "app": "waiting:PodInitializing"},
        id="init-failed-never",
    ),
    pytest.param(
        pod(init=(container("init"),)),
        seen(exited("init", 1), start_failures={"init": BACKOFF}),
        "Pending",
        UNINITIALIZED,
        {"init": "waiting:CrashLoopBackOff", "app": "waiting:PodInitializing"},
        id="init-crash-looping",
    ),
    pytest.param(
        pod(init=(container("init"),)),
        seen(running()),
        "Running",
        UP,
        {"init": "terminated:0:Completed", "app": "running"},
        id="init-removed-after-initialization",
    ),
    pytest.param(
        pod(policy="Never"),
        seen(exited(code=0)),
        "Succeeded",
        DONE,
        {"app": "terminated:0:Completed"},
        id="never-succeeded",
    ),
    pytest.param(
        pod(policy="Never"),
        seen(exited(code=1)),
        "Failed",
        FAILED,
        {"app": "terminated:1:Error"},
        id="never-failed",
    ),
    pytest.param(
        pod(policy="OnFailure"),
        seen(exited(code=0)),
        "Succeeded",
        DONE,
        {"app": "terminated:0:Completed"},
        id="on-failure-succeeded",
    ),
    pytest.param(
        pod(policy="OnFailure"),
        seen(exited(code=1), start_failures={"app": BACKOFF}),
        "Running",
        NOT_READY,
        {"app": "waiting:CrashLoopBackOff"},
        id="on-failure-crash-looping",
    ),
    pytest.param(
        pod(),
        seen(exited(code=0)),
        "Running",
        NOT_READY,
        {"app": "terminated:0:Completed"},
        id="always-restarting-after-success",
    ),
    pytest.param(
        pod(),
        seen(exited(code=137, attempt=0), running(attempt=1)),
        "Running",
        UP,
        {"app": "running"},
        id="restarted",
    ),
    pytest.param(
        pod(),
        seen(sandbox_ready=True, start_failures={"app": StartFailure("ErrImagePull", "nope")}),
        "Pending",
        NOT_READY,
        {"app": "waiting:ErrImagePull"},
        id="image-pull-error",
    ),
    pytest.param(
        pod(),
        seen(start_failures={"app": StartFailure("CreateContainerConfigError", "no cm")}),
        "Pending",
        NOT_READY,
        {"app": "waiting:CreateContainerConfigError"},
        id="config-error",
    ),
    pytest.param(
        pod(gates=("example.com/lb",)),
        seen(running()),
        "Running",
        {**UP, "Ready": "False:ReadinessGatesNotReady"},
        {"app": "running"},
        id="readiness-gate-missing",
    ),
    pytest.param(
        pod(
            gates=("example.com/lb",),
            status=PodStatus(conditions=[PodCondition(type="example.com/lb", status="True")]),
        ),
        seen(running()),
        "Running",
        {"example.com/lb": "True", **UP},
        {"app": "running"},
        id="readiness-gate-true",
    ),
    pytest.param(
        pod(init=(container("proxy", sidecar=True),)),
        seen(running("proxy"), running()),
        "Running",
        UP,
        {"proxy": "running", "app": "running"},
        id="sidecar-and-app",
    ),
    pytest.param(
        pod(init=(container("proxy", sidecar=True, startup=True),)),
        seen(running("proxy")),
        "Pending",
        UNINITIALIZED,
        {"proxy": "running", "app": "waiting:PodInitializing"},
        id="sidecar-not-started",
    ),
    pytest.param(
        pod(deleting=True),
        seen(exited(code=1), start_failures={"app": BACKOFF}, terminal=True),
        "Failed",
        FAILED,
        {"app": "terminated:1:Error"},
        id="terminal-after-deletion",
    ),
    pytest.param(
        pod(status=PodStatus(phase="Succeeded")),
        seen(running()),
        "Succeeded",
        DONE,
        {"app": "running"},
        id="terminal-phase-is-final",
    ),
    pytest.param(
        pod(deadline=50, status=PodStatus(start_time=T0)),
        seen(running()),
        "Failed",
        FAILED,
        {"app": "running"},
        id="active-deadline",
    ),
    pytest.param(
        pod(
            container(
                rules=[
                    ContainerRestartRule(
                        action="Restart",
                        exit_codes=ContainerRestartRuleOnExitCodes(operator="In", values=[42]),
                    )
                ]
            ),
            policy="Never",
        ),
        seen(exited(code=42)),
        "Running",
        NOT_READY,
        {"app": "terminated:42:Error"},
        id="restart-rule-overrides-never",
    ),
    pytest.param(
        pod(
            status=PodStatus(
                container_statuses=[
                    ContainerStatus(
                        name="app",
                        restart_count=2,
                        state=ContainerState(running=ContainerStateRunning(started_at=T0)),
                    )
                ]
            )
        ),
        seen(),
        "Running",
        NOT_READY,
        {"app": "waiting:ContainerCreating"},
        id="running-container-vanished",
    ),
]


@pytest.mark.parametrize(("the_pod", "observation", "phase", "conditions", "containers"), CASES)
def test_status(
    the_pod: Pod,
    observation: Observation,
    phase: str,
    conditions: dict[str, str],
    containers: dict[str, str],
) -> None:
    status = generate_pod_status(the_pod, observation)
    assert status.phase == phase
    assert conditions_of(status) == conditions
    assert containers_of(status) == containers


def test_running_container_details() -> None:
    status = generate_pod_status(pod(), seen(exited(code=137), running(attempt=1)))
    [app] = status.container_statuses or []
    assert app.container_id == "containerd://app-1"
    assert app.image_id == "sha256:app"
    assert app.restart_count == 1
    assert (app.ready, app.started) == (True, True)
    assert app.state and app.state.running and app.state.running.started_at == at(12)
    terminated = app.last_state.terminated if app.last_state else None
    assert terminated is not None
    assert terminated.container_id == "containerd://app-0"
    assert (terminated.exit_code, terminated.finished_at) == (137, at(5))


def test_crash_loop_keeps_last_termination() -> None:
    observation = seen(exited(code=1, attempt=3), start_failures={"app": BACKOFF})
    [app] = generate_pod_status(pod(), observation).container_statuses or []
    assert app.state and app.state.waiting
    assert app.state.waiting.message == BACKOFF.message
    assert describe(app.last_state) == "terminated:1:Error"
    assert app.restart_count == 3


def test_vanished_container_counts_a_restart() -> None:
    previous = PodStatus(
        container_statuses=[
            ContainerStatus(
                name="app",
                restart_count=2,
                state=ContainerState(running=ContainerStateRunning(started_at=T0)),
            )
        ]
    )
    [app] = generate_pod_status(pod(), seen(), previous).container_statuses or []
    assert app.restart_count == 3
    assert describe(app.last_state) == "terminated:137:ContainerStatusUnknown"


def test_condition_messages() -> None:
    the_pod = pod(container("a", readiness=True), container("b"), init=(container("i"),))
    status = generate_pod_status(the_pod, seen(exited("i"), running("a")))
    messages = {c.type: c.message for c in status.conditions or ()}
    assert messages["ContainersReady"] == "containers with unready status: [a b]"
    assert messages["Ready"] == messages["ContainersReady"]
    gated = generate_pod_status(pod(gates=("x/y",)), seen(running()))
    assert {c.type: c.message for c in gated.conditions or ()}["Ready"] == (
        'corresponding condition of pod readiness gate "x/y" does not exist.'
    )


def test_statuses_order() -> None:
    the_pod = pod(container("zeta"), container("alpha"), init=(container("z"), container("a")))
    status = generate_pod_status(the_pod, seen())
    assert [s.name for s in status.init_container_statuses or ()] == ["z", "a"]
    assert [s.name for s in status.container_statuses or ()] == ["alpha", "zeta"]


def test_transition_times_kept_while_unchanged() -> None:
    the_pod = pod(container(readiness=True))
    first = generate_pod_status(the_pod, seen(running()))
    later = dataclasses.replace(seen(running()), now=NOW + datetime.timedelta(seconds=30))
    second = generate_pod_status(the_pod, later, first)
    assert not status_changed(first, second)
    ready = dataclasses.replace(later, readiness={"app-0": True})
    third = generate_pod_status(the_pod, ready, second)
    assert status_changed(second, third)
    times = {c.type: c.last_transition_time for c in third.conditions or ()}
    assert times["PodScheduled"] == NOW.replace(microsecond=0)
    assert times["Ready"] == times["ContainersReady"] == (later.now.replace(microsecond=0))
    assert third.start_time == NOW.replace(microsecond=0)


def test_status_changed_ignores_foreign_and_times() -> None:
    status = generate_pod_status(pod(), seen(running()))
    assert status_changed(None, status)
    foreign = [*(status.conditions or ()), PodCondition(type="x/y", status="True")]
    assert not status_changed(status, PodStatus(**{**_fields(status), "conditions": foreign}))
    moved = [
        PodCondition(**{**_fields(c), "last_transition_time": T0}) for c in status.conditions or ()
    ]
    assert not status_changed(status, PodStatus(**{**_fields(status), "conditions": moved}))
    assert status_changed(status, PodStatus(**{**_fields(status), "pod_ip": "10.9.9.9"}))


def _fields(struct: Any) -> dict[str, Any]:
    return {name: getattr(struct, name) for name in struct.__struct_fields__}


@pytest.mark.parametrize(
    ("node_ips", "pod_ips", "host_network", "expected_pod", "expected_host"),
    [
        pytest.param(("10.0.0.2",), ("10.244.1.5",), False, ["10.244.1.5"], ["10.0.0.2"], id="v4"),
        pytest.param(
            ("fd00::2", "10.0.0.2"),
            ("10.244.1.5", "fd10::5", "fd10::6"),
            False,
            ["fd10::5", "10.244.1.5"],
            ["fd00::2", "10.0.0.2"],
            id="dual-stack-v6-first",
        ),
        pytest.param(("10.0.0.2",), (), True, ["10.0.0.2"], ["10.0.0.2"], id="host-network"),
    ],
)
def test_addresses(
    node_ips: tuple[str, ...],
    pod_ips: tuple[str, ...],
    host_network: bool,
    expected_pod: list[str],
    expected_host: list[str],
) -> None:
    status = generate_pod_status(
        pod(host_network=host_network), seen(running(), node_ips=node_ips, pod_ips=pod_ips)
    )
    assert [p.ip for p in status.pod_ips or ()] == expected_pod
    assert status.pod_ip == expected_pod[0]
    assert [h.ip for h in status.host_ips or ()] == expected_host
    assert status.host_ip == expected_host[0]


def test_qos_and_generation() -> None:
    limited = container()
    limited.resources = ResourceRequirements(
        requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"}
    )
    status = generate_pod_status(pod(limited), seen(running()))
    assert status.qos_class == "Guaranteed"
    assert status.observed_generation == 3
    assert {c.observed_generation for c in status.conditions or ()} == {3}
    assert generate_pod_status(pod(), seen()).qos_class == "BestEffort"


def test_ephemeral_container_statuses() -> None:
    debugged = pod()
    assert debugged.spec is not None
    debugged.spec.ephemeral_containers = [
        EphemeralContainer(name="debugger", image="debugger:1", target_container_name="app"),
        EphemeralContainer(name="later", image="later:1"),
    ]
    status = generate_pod_status(debugged, seen(running(), running("debugger")))
    by_name = {s.name: s for s in status.ephemeral_container_statuses or ()}
    assert describe(by_name["debugger"].state) == "running"
    assert by_name["debugger"].container_id == "containerd://debugger-0"
    assert describe(by_name["later"].state) == "waiting:ContainerCreating"
    assert not by_name["debugger"].ready and not by_name["later"].ready
    assert (status.phase, conditions_of(status)["Ready"]) == ("Running", "True")
    ended = generate_pod_status(debugged, seen(running(), exited("debugger", code=3)), status)
    (debugger, _) = ended.ephemeral_container_statuses or []
    assert describe(debugger.state) == "terminated:3:Error"
    assert ended.phase == "Running"
