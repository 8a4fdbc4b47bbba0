"""Liveness, readiness and startup probes: one asyncio task per container and probe type.

Shaped like upstream's ``pkg/kubelet/prober``.  A ``ProbeManager`` owns the workers of every
pod; ``add_pod`` starts one per probe a container declares (regular containers and sidecar
init containers) and is idempotent, ``remove_pod`` stops them.  Each worker loops: read the
pod's latest status (the injected ``statuses`` callable, the kubelet's status cache), probe,
sleep ``periodSeconds`` on the injected ``Clock``.  ``poke`` wakes a pod's workers early, so a
container that just started is probed at once rather than a period later.

What a worker does on each tick (upstream ``worker.doProbe``):

- a pod in a terminal phase ends the worker; a container not created yet is waited for;
- a new container ID resets the result to the probe type's initial value (readiness
  Failure, liveness Success, startup Unknown) and lifts a hold;
- a container that is not running fails readiness, and the worker ends if it will never
  run again (terminated under restartPolicy Never);
- once the pod is being deleted, liveness and startup report Success and stop;
- nothing runs before ``initialDelaySeconds`` after the container started; startup probes
  only until the container has started, the others only after;
- a probe that does not answer within ``timeoutSeconds`` failed; one that raised is thrown
  away; ``failureThreshold`` (``successThreshold``) consecutive results are needed before the
  verdict changes;
- a liveness or startup Failure puts the worker on hold until the container is replaced.

Verdicts live in three ``Results`` stores keyed by bare container ID.  Every change calls
back: ``on_restart`` when a liveness or startup verdict becomes Failure (the pod worker kills
and restarts that container), ``on_status`` when a readiness or startup verdict changes (the
pod worker recomputes the status; ``verdicts`` gives what ``status.Observation`` needs).

``NetworkProber`` is the real prober: exec through a callable (CRI ExecSync), httpGet with
aiohttp to the pod IP, tcpSocket with ``asyncio.open_connection``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import NamedTuple, Protocol

import aiohttp

from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec, PodStatus, Probe
from kube.clock import Clock

LOG = logging.getLogger("kubelab.kubelet.probes")
USER_AGENT = "kube-probe/1.36"


class ProbeType(enum.StrEnum):
    LIVENESS = "liveness"
    READINESS = "readiness"
    STARTUP = "startup"


class Result(enum.Enum):
    SUCCESS = "Success"
    FAILURE = "Failure"
    UNKNOWN = "Unknown"


INITIAL = {
    ProbeType.LIVENESS: Result.SUCCESS,
    ProbeType.READINESS: Result.FAILURE,
    ProbeType.STARTUP: Result.UNKNOWN,
}


class Outcome(NamedTuple):
    """What one probe said, and its output (for events and logs)."""

    result: Result
    output: str = ""


@dataclasses.dataclass(frozen=True)
class ProbeTarget:
    """What a probe runs against."""

    pod: Pod
    container: Container
    container_id: str
    pod_ip: str


class Prober(Protocol):
    async def probe(self, probe: Probe, target: ProbeTarget) -> Outcome:
        """Run ``probe`` once.  Raising means "no answer": the result is thrown away."""
        ...


class ProbeUpdate(NamedTuple):
    """A verdict that changed."""

    kind: ProbeType
    pod_uid: str
    container: str
    container_id: str
    result: Result


Callback = Callable[[ProbeUpdate], None]


class Results:
    """The current verdict per container ID for one probe type."""

    def __init__(self, kind: ProbeType, on_change: Callback) -> None:
        self.kind = kind
        self._on_change = on_change
        self._results: dict[str, Result] = {}

    def get(self, container_id: str) -> Result | None:
        return self._results.get(container_id)

    def set(self, pod_uid: str, container: str, container_id: str, result: Result) -> None:
        """Record a verdict; a change (or a first verdict) is reported."""
        if self._results.get(container_id) == result:
            return
        self._results[container_id] = result
        self._on_change(ProbeUpdate(self.kind, pod_uid, container, container_id, result))

    def remove(self, container_id: str) -> None:
        self._results.pop(container_id, None)

    def verdicts(self) -> dict[str, bool]:
        """Success or Failure per container ID (Unknown left out)."""
        return {cid: r is Result.SUCCESS for cid, r in self._results.items() if r != Result.UNKNOWN}


def _probe_of(container: Container, kind: ProbeType) -> Probe | None:
    return {
        ProbeType.LIVENESS: container.liveness_probe,
        ProbeType.READINESS: container.readiness_probe,
        ProbeType.STARTUP: container.startup_probe,
    }[kind]


class ProbeManager:
    """Every probe worker of the node."""

    def __init__(
        self,
        prober: Prober,
        clock: Clock,
        statuses: Callable[[str], PodStatus | None],
        *,
        on_restart: Callback,
        on_status: Callback,
    ) -> None:
        self.prober = prober
        self.clock = clock
        self.statuses = statuses
        self._on_restart = on_restart
        self._on_status = on_status
        self.results = {kind: Results(kind, self._changed) for kind in ProbeType}
        self._workers: dict[tuple[str, str, ProbeType], _Worker] = {}

    def _changed(self, update: ProbeUpdate) -> None:
        if update.kind != ProbeType.LIVENESS:
            self._on_status(update)
        if update.kind != ProbeType.READINESS and update.result is Result.FAILURE:
            self._on_restart(update)

    def verdicts(self, kind: ProbeType) -> dict[str, bool]:
        """Readiness or startup verdicts, as ``status.Observation`` takes them."""
        return self.results[kind].verdicts()

    def add_pod(self, pod: Pod) -> None:
        """Start the workers ``pod`` needs that are not running; hand every worker of the pod
        the latest version of it (a deletion timestamp changes what they do)."""
        uid = pod.metadata.uid or ""
        spec = pod.spec or PodSpec()
        sidecars = [c for c in spec.init_containers or () if c.is_sidecar()]
        probed = [*sidecars, *(spec.containers or ())]
        for container in probed:
            for kind in ProbeType:
                probe = _probe_of(container, kind)
                key = (uid, container.name or "", kind)
                worker = self._workers.get(key)
                if worker is not None:
                    worker.pod = pod
                elif probe is not None:
                    worker = _Worker(self, pod, container, kind, probe)
                    self._workers[key] = worker
                    worker.task = asyncio.create_task(worker.run(), name=f"probe {key}")

    def poke(self, pod_uid: str) -> None:
        """Probe the pod's containers now rather than at the end of their period."""
        for (uid, _, _), worker in self._workers.items():
            if uid == pod_uid:
                worker.wake()

    async def remove_pod(self, pod_uid: str) -> None:
        """Stop the pod's workers and forget their verdicts."""
        await self._stop([w for (uid, _, _), w in self._workers.items() if uid == pod_uid])

    async def close(self) -> None:
        """Stop every worker."""
        await self._stop(list(self._workers.values()))

    async def _stop(self, workers: list[_Worker]) -> None:
        tasks = [w.task for w in workers if w.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _finished(self, worker: _Worker) -> None:
        key = (worker.pod.metadata.uid or "", worker.container.name or "", worker.kind)
        if self._workers.get(key) is worker:
            del self._workers[key]

    @property
    def workers(self) -> int:
        return len(self._workers)


class _Worker:
    """One probe of one container."""

    def __init__(
        self, manager: ProbeManager, pod: Pod, container: Container, kind: ProbeType, probe: Probe
    ) -> None:
        self.manager = manager
        self.pod = pod
        self.container = container
        self.kind = kind
        self.probe = probe
        self.task: asyncio.Task[None] | None = None
        self.container_id = ""
        self.on_hold = False
        self.last: Result | None = None
        self.run_length = 0
        self._nap: asyncio.Future[None] | None = None
        self._results = manager.results[kind]

    def wake(self) -> None:
        if self._nap is not None:
            self._nap.cancel()

    async def run(self) -> None:
        try:
            while await self.tick():
                self._nap = asyncio.ensure_future(self.manager.clock.sleep(self.period))
                try:
                    await asyncio.wait({self._nap})
                finally:
                    self._nap.cancel()
                    self._nap = None
        finally:
            if self.container_id:
                self._results.remove(self.container_id)
            self.manager._finished(self)

    @property
    def period(self) -> float:
        return self.probe.period_seconds or 10

    def _set(self, result: Result) -> None:
        uid = self.pod.metadata.uid or ""
        self._results.set(uid, self.container.name or "", self.container_id, result)

    async def tick(self) -> bool:
        """One probe round; False ends the worker."""
        status = self.manager.statuses(self.pod.metadata.uid or "")
        if status is None:
            return True
        if status.phase in ("Succeeded", "Failed"):
            return False
        name = self.container.name
        every = (*(status.container_statuses or ()), *(status.init_container_statuses or ()))
        current = next((s for s in every if s.name == name), None)
        full_id = current.container_id if current is not None else None
        if current is None or not full_id:
            return True
        container_id = full_id.partition("://")[2] or full_id
        if container_id != self.container_id:
            if self.container_id:
                self._results.remove(self.container_id)
            self.container_id = container_id
            self._set(INITIAL[self.kind])
            self.on_hold = False
        if self.on_hold:
            return True
        state = current.state
        running = state.running if state is not None else None
        if running is None:
            self._set(Result.FAILURE)
            terminated = state is not None and state.terminated is not None
            return not terminated or (self.pod.spec or PodSpec()).restart_policy != "Never"
        if self.pod.metadata.deletion_timestamp is not None and self.kind != ProbeType.READINESS:
            self._set(Result.SUCCESS)
            return False
        started_at = running.started_at
        if started_at is not None:
            age = (self.manager.clock.now() - started_at).total_seconds()
            if age < (self.probe.initial_delay_seconds or 0):
                return True
        if bool(current.started) != (self.kind != ProbeType.STARTUP):
            return True
        target = ProbeTarget(self.pod, self.container, container_id, status.first_pod_ip())
        outcome = await self._probe(target)
        if outcome is None:
            return True
        self._record(outcome.result)
        return True

    async def _probe(self, target: ProbeTarget) -> Outcome | None:
        """The probe's outcome within its timeout; None when the prober raised."""
        clock = self.manager.clock
        attempt = asyncio.ensure_future(self.manager.prober.probe(self.probe, target))
        deadline = asyncio.ensure_future(clock.sleep(self.probe.timeout_seconds or 1))
        try:
            await asyncio.wait({attempt, deadline}, return_when=asyncio.FIRST_COMPLETED)
            answered = attempt.done()
        finally:
            for future in (attempt, deadline):
                future.cancel()
        if not answered:
            timeout = self.probe.timeout_seconds or 1
            return Outcome(Result.FAILURE, f"probe timed out after {timeout}s")
        error = attempt.exception()
        if error is not None:
            LOG.warning("%s probe of %s errored: %s", self.kind, target.container_id, error)
            return None
        return attempt.result()

    def _record(self, result: Result) -> None:
        if result == self.last:
            self.run_length += 1
        else:
            self.last, self.run_length = result, 1
        threshold = (
            self.probe.failure_threshold or 3
            if result is Result.FAILURE
            else self.probe.success_threshold or 1
        )
        if self.run_length < threshold:
            return
        self._set(result)
        if result is Result.FAILURE and self.kind != ProbeType.READINESS:
            self.on_hold = True
            self.run_length = 0


ExecSync = Callable[[str, list[str], float], Awaitable[int]]
"""Run a command in a container (container ID, argv, timeout) and return its exit code."""


class NetworkProber:
    """The real prober.  HTTP answers 200-399 succeed; TCP succeeds when a connection opens;
    exec succeeds on exit code 0.  gRPC probes are not supported: they fail."""

    def __init__(self, exec_sync: ExecSync) -> None:
        self.exec_sync = exec_sync

    async def probe(self, probe: Probe, target: ProbeTarget) -> Outcome:
        timeout = float(probe.timeout_seconds or 1)
        if probe.exec is not None:
            code = await self.exec_sync(target.container_id, probe.exec.command or [], timeout)
            return Outcome(Result.SUCCESS if code == 0 else Result.FAILURE, f"exit code {code}")
        if probe.http_get is not None:
            action = probe.http_get
            port = resolve_port(action.port, target.container)
            url = (
                f"{(action.scheme or 'HTTP').lower()}://{_host(action.host or target.pod_ip)}"
                f":{port}{action.path or '/'}"
            )
            headers = {"User-Agent": USER_AGENT, "Accept": "*/*"}
            headers.update({h.name or "": h.value or "" for h in action.http_headers or ()})
            return await _http_get(url, headers, timeout)
        if probe.tcp_socket is not None:
            port = resolve_port(probe.tcp_socket.port, target.container)
            host = probe.tcp_socket.host or target.pod_ip
            try:
                _, writer = await asyncio.open_connection(host, port)
            except OSError as error:
                return Outcome(Result.FAILURE, str(error))
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return Outcome(Result.SUCCESS)
        return Outcome(Result.FAILURE, "unsupported probe handler")


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def _http_get(url: str, headers: dict[str, str], seconds: float) -> Outcome:
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as session,
            session.get(url, headers=headers, ssl=False) as response,
        ):
            body = (await response.content.read(10 * 1024)).decode(errors="replace")
    except (aiohttp.ClientError, OSError) as error:
        return Outcome(Result.FAILURE, str(error) or type(error).__name__)
    ok = 200 <= response.status < 400
    return Outcome(Result.SUCCESS if ok else Result.FAILURE, f"HTTP {response.status}: {body}")


def resolve_port(port: int | str | None, container: Container) -> int:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int):
        return port
    for declared in container.ports or ():
        if declared.name == port and declared.container_port is not None:
            return declared.container_port
    if port is not None and port.isdigit():
        return int(port)
    raise ValueError(f"port {port!r} is not a number nor a port of container {container.name}")
