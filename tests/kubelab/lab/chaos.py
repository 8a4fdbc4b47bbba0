"""A workload to run while faults are injected, and the invariants checked after each fault.

The high-availability fault tests (``tests/kubelab/lab/test_ha_faults.py``) kill etcd
members, API servers and leaders, or partition a control-plane node, while this module keeps
the cluster busy and watches it; it knows nothing of how faults are made, so it also runs
against a plain ``kubelab server`` (``tests/kubelab/lab/test_chaos.py``).  The pieces:

- ``Writer``: one stream of writes, numbered, each through a client that never retries
  (``max_retries=0``) so that every answer is seen: an acknowledged write is recorded with
  the object's key and the resourceVersion the server returned, a failure with its HTTP
  status (None: no answer, connection refused or timed out).  After a failure the writer backs
  off (the reflector's ``Backoff``), as a client must when the server says it cannot cope.
  Each write stamps its number in the ``chaos.kubelab.io/seq`` annotation, so the objects
  read back at the end say which write they hold; a write still in flight when the writer is
  stopped counts as attempted (it may land).  Two operations: ``DeploymentScaler``
  (alternating replicas of one Deployment) and ``ConfigMapCreator`` (a new object per write).
- ``Watcher``: a ``Reflector`` (list, watch, resume from the last version, re-list on 410)
  whose store records every version it is handed, and whose lister-watcher records every
  failure, a 410 included, so a re-list after one is visible as such.  A Pod watcher also
  remembers each pod's node, to catch a pod bound twice.
- ``Prober``: a command run every interval (``curl`` of the Service from a lab node), its
  successes and failures recorded.
- the invariant checks (``lost_writes``, ``backward_versions``, ``unexpected_failures``,
  ``replica_mismatches``) each return a list of violations, worded for a test's assertion
  message; ``Workload.violations`` runs them all.

Resource versions are compared as integers: kubelab's are the store's revisions (etcd's
revision, SQLite's row counter), which clients may not assume upstream but which the fault
tests rely on to see time going backwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, TypeVar

from kube.api.kinds.apps_v1 import Deployment, ReplicaSet
from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import ObjectMeta, Resource
from kube.client.errors import ApiError, ClientError
from kube.client.reflector import Backoff, ListerWatcher, Reflector, client_lister_watcher
from kube.client.rest import Client, ListResult, WatchEvent
from kube.clock import Clock, RealClock

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Resource)

SEQ_ANNOTATION: Final = "chaos.kubelab.io/seq"
TOLERATED: Final = frozenset({429, 503, 504})
"""Failure statuses a client must expect during a fault (besides no answer at all)."""
WRITE_TIMEOUT: Final = 15.0
"""Seconds one write may take (etcd's own request timeout is about 7 s)."""
LIST: Final = "LIST"
GONE: Final = 410


def key_of(obj: Resource) -> str:
    """``Kind/name`` of an object (the workload works in one namespace)."""
    return f"{type(obj).kind_info.kind}/{obj.metadata.name}"


def version(obj: Resource) -> int:
    return int(obj.metadata.resource_version or 0)


def seq_of(obj: Resource) -> int | None:
    """The number of the workload's write the object holds (None: written by nobody of ours)."""
    value = (obj.metadata.annotations or {}).get(SEQ_ANNOTATION)
    return int(value) if value is not None and value.isdigit() else None


def status_of(error: Exception) -> int | None:
    """The HTTP status of a failed request; None when there was no answer."""
    return error.code if isinstance(error, ApiError) else None


# -- writes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """One write: acknowledged (``resource_version`` set) or failed (``status``, ``error``)."""

    seq: int
    key: str
    started: float
    ended: float
    resource_version: int | None = None
    status: int | None = None
    error: str = ""
    value: str = ""
    """What the write set (the replicas, the data), for messages."""

    @property
    def acknowledged(self) -> bool:
        return self.resource_version is not None

    @property
    def at(self) -> float:
        """When the answer (or the failure) came."""
        return self.ended


class Operation(Protocol):
    """One kind of write: ``key(seq)`` names the object write ``seq`` changes, ``write``
    performs it (stamping ``seq``) and returns the server's answer."""

    def key(self, seq: int) -> str: ...

    def value(self, seq: int) -> str: ...

    async def write(self, seq: int) -> Resource: ...


@dataclass(frozen=True)
class DeploymentScaler:
    """Sets the Deployment's replicas to ``replicas[seq % len]`` (a merge patch)."""

    client: Client
    namespace: str
    name: str
    replicas: tuple[int, ...] = (2, 3)

    def key(self, seq: int) -> str:
        return f"Deployment/{self.name}"

    def value(self, seq: int) -> str:
        return f"replicas={self.replicas[seq % len(self.replicas)]}"

    async def write(self, seq: int) -> Resource:
        patch = {
            "metadata": {"annotations": {SEQ_ANNOTATION: str(seq)}},
            "spec": {"replicas": self.replicas[seq % len(self.replicas)]},
        }
        return await self.client.patch(Deployment, self.name, self.namespace, patch)


@dataclass(frozen=True)
class ConfigMapCreator:
    """Creates ConfigMap ``<prefix>-<seq>``: every acknowledged one must exist at the end."""

    client: Client
    namespace: str
    prefix: str = "chaos"

    def key(self, seq: int) -> str:
        return f"ConfigMap/{self.prefix}-{seq}"

    def value(self, seq: int) -> str:
        return f"data.seq={seq}"

    async def write(self, seq: int) -> Resource:
        meta = ObjectMeta(
            name=f"{self.prefix}-{seq}",
            namespace=self.namespace,
            annotations={SEQ_ANNOTATION: str(seq)},
        )
        return await self.client.create(ConfigMap(metadata=meta, data={"seq": str(seq)}))


class Writer:
    """Performs ``operation`` every ``interval`` until cancelled, recording every attempt;
    after a failure it waits for its backoff instead of the interval."""

    def __init__(
        self,
        operation: Operation,
        *,
        interval: float = 1.0,
        timeout: float = WRITE_TIMEOUT,
        clock: Clock | None = None,
    ) -> None:
        self.operation = operation
        self.interval = interval
        self.timeout = timeout
        self.clock: Clock = clock or RealClock()
        self.backoff = Backoff(self.clock, initial=0.2, cap=5.0, jitter=0.5, reset_after=10.0)
        self.attempts: list[Attempt] = []
        self.seq = 0

    async def run(self) -> None:
        while True:
            attempt = await self.write_once()
            if attempt.acknowledged:
                await self.clock.sleep(self.interval)
            else:
                await self.backoff.wait()

    async def write_once(self) -> Attempt:
        self.seq += 1
        seq, op = self.seq, self.operation
        started = self.clock.monotonic()
        try:
            async with asyncio.timeout(self.timeout):
                answer = await op.write(seq)
        except (ApiError, ClientError, TimeoutError) as error:
            attempt = self._failed(seq, started, status_of(error), str(error) or repr(error))
        except asyncio.CancelledError:
            # Stopped with the write in flight: it may still land, so it counts as attempted.
            self.attempts.append(self._failed(seq, started, None, "cancelled in flight"))
            raise
        else:
            attempt = Attempt(
                seq,
                key_of(answer),
                started,
                self.clock.monotonic(),
                resource_version=version(answer),
                value=op.value(seq),
            )
        self.attempts.append(attempt)
        return attempt

    def _failed(self, seq: int, started: float, status: int | None, error: str) -> Attempt:
        op = self.operation
        return Attempt(
            seq,
            op.key(seq),
            started,
            self.clock.monotonic(),
            status=status,
            error=error,
            value=op.value(seq),
        )

    def acknowledged(self) -> list[Attempt]:
        return [a for a in self.attempts if a.acknowledged]

    def failures(self) -> list[Attempt]:
        return [a for a in self.attempts if not a.acknowledged]


# -- watches ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One thing a watcher was handed: a list (``LIST``, the list's version) or an event."""

    at: float
    what: str
    resource_version: int
    key: str = ""


@dataclass(frozen=True)
class Failure:
    """A request that failed: what was asked, the HTTP status (None: no answer), the error."""

    at: float
    request: str
    status: int | None
    error: str


class _RecordingListerWatcher(Generic[R]):
    """A lister-watcher that records every failure of the one it wraps, then re-raises."""

    def __init__(
        self, inner: ListerWatcher[R], failures: list[Failure], what: str, clock: Clock
    ) -> None:
        self._inner = inner
        self._failures = failures
        self._what = what
        self._clock = clock

    @contextlib.contextmanager
    def _recorded(self, request: str) -> Iterator[None]:
        try:
            yield
        except (ApiError, ClientError, TimeoutError) as error:
            self._failures.append(
                Failure(self._clock.monotonic(), request, status_of(error), str(error))
            )
            raise

    async def list(
        self,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListResult[R]:
        with self._recorded(f"list {self._what}"):
            return await self._inner.list(
                limit=limit, continue_token=continue_token, resource_version=resource_version
            )

    async def watch(
        self,
        *,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent[R]]:
        stream = self._inner.watch(
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=allow_bookmarks,
        )
        try:
            with self._recorded(f"watch {self._what} from {resource_version}"):
                async for event in stream:
                    yield event
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()


class Watcher(Generic[R]):
    """A reflector on one kind in the workload's namespace, recording what it sees; the
    reflector's store (``replace``, ``add``, ``update``, ``delete``)."""

    def __init__(self, client: Client, cls: type[R], namespace: str, clock: Clock | None = None):
        self.cls = cls
        self.clock: Clock = clock or RealClock()
        self.seen: list[Seen] = []
        self.failures: list[Failure] = []
        self.nodes: dict[str, str] = {}
        """Each pod's node (by uid) as first seen bound."""
        self.rebound: list[str] = []
        inner = client_lister_watcher(client, cls, namespace)
        lister_watcher = _RecordingListerWatcher(
            inner, self.failures, cls.kind_info.plural, self.clock
        )
        self.reflector = Reflector(
            lister_watcher, self, clock=self.clock, name=f"chaos {cls.kind_info.plural}"
        )

    @property
    def name(self) -> str:
        return self.cls.kind_info.plural

    async def run(self) -> None:
        await self.reflector.run()

    def replace(self, items: Sequence[R], resource_version: str) -> None:
        self.seen.append(Seen(self.clock.monotonic(), LIST, int(resource_version or 0)))
        for item in items:
            self._bound(item)

    def add(self, obj: R) -> None:
        self._event("ADDED", obj)

    def update(self, obj: R) -> None:
        self._event("MODIFIED", obj)

    def delete(self, obj: R) -> None:
        self._event("DELETED", obj)

    def _event(self, what: str, obj: R) -> None:
        self.seen.append(Seen(self.clock.monotonic(), what, version(obj), key_of(obj)))
        self._bound(obj)

    def _bound(self, obj: R) -> None:
        if not isinstance(obj, Pod) or obj.spec is None or not obj.spec.node_name:
            return
        uid = obj.metadata.uid or ""
        first = self.nodes.setdefault(uid, obj.spec.node_name)
        if first != obj.spec.node_name:
            self.rebound.append(
                f"pod {obj.metadata.name} ({uid}) bound to {first}, then to {obj.spec.node_name}"
            )

    def relists_after_gone(self) -> int:
        """How many times the watch answered 410 (each one followed by a re-list)."""
        return sum(1 for f in self.failures if f.status == GONE)


# -- the Service --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    at: float
    ok: bool
    detail: str


class Prober:
    """Runs ``command`` every ``interval`` (each run at most ``timeout``) until cancelled;
    success is exit status 0."""

    def __init__(
        self, command: Sequence[str], *, interval: float = 0.5, timeout: float = 5.0
    ) -> None:
        self.command = list(command)
        self.interval = interval
        self.timeout = timeout
        self.probes: list[Probe] = []

    async def run(self) -> None:
        while True:
            self.probes.append(await self.probe_once())
            await asyncio.sleep(self.interval)

    async def probe_once(self) -> Probe:
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            async with asyncio.timeout(self.timeout):
                output, _ = await process.communicate()
        except TimeoutError:
            return Probe(started, False, f"no answer in {self.timeout:g}s")
        finally:
            if process.returncode is None:  # timed out, or the prober was cancelled
                process.kill()
                await process.wait()
        detail = output.decode(errors="replace").strip()[-200:]
        return Probe(started, process.returncode == 0, detail)

    def availability(self) -> float:
        """The fraction of probes that succeeded (1.0 if none ran)."""
        return sum(p.ok for p in self.probes) / len(self.probes) if self.probes else 1.0


# -- invariants ---------------------------------------------------------------------------------


def lost_writes(attempts: Sequence[Attempt], current: Mapping[str, int | None]) -> list[str]:
    """Acknowledged writes the objects no longer hold.

    ``current`` maps each object's key to the write number it holds now (None: the object is
    gone or holds none).  An object must hold its last acknowledged write or a later one; a
    later one must be a write that was attempted (a failed write may still have landed),
    never a number nobody wrote.
    """
    last_acked: dict[str, Attempt] = {}
    attempted: dict[str, set[int]] = {}
    for attempt in attempts:
        attempted.setdefault(attempt.key, set()).add(attempt.seq)
        if attempt.acknowledged and (
            attempt.key not in last_acked or attempt.seq > last_acked[attempt.key].seq
        ):
            last_acked[attempt.key] = attempt
    lost = []
    for key, acked in sorted(last_acked.items()):
        held = current.get(key)
        if held is None:
            lost.append(f"{key}: write {acked.seq} ({acked.value}) acknowledged, object gone")
        elif held < acked.seq:
            lost.append(
                f"{key}: write {acked.seq} ({acked.value}, resourceVersion "
                f"{acked.resource_version}) acknowledged, object holds write {held}"
            )
        elif held not in attempted[key]:
            lost.append(f"{key}: holds write {held}, which nobody attempted")
    return lost


def backward_versions(name: str, seen: Sequence[Seen]) -> list[str]:
    """Where a watcher was handed a version older than one it had: an event must be newer
    than everything before it, a list (after a 410 or a failed watch) no older."""
    problems = []
    latest: Seen | None = None
    for item in seen:
        if latest is not None:
            older = item.resource_version < latest.resource_version
            repeated = item.what != LIST and item.resource_version == latest.resource_version
            if older or repeated:
                problems.append(
                    f"watcher {name}: {item.what} {item.key} at {item.resource_version} after "
                    f"{latest.what} {latest.key} at {latest.resource_version}"
                )
        if latest is None or item.resource_version >= latest.resource_version:
            latest = item
    return problems


def unexpected_failures(failures: Sequence[Attempt | Failure]) -> list[str]:
    """Failures a fault may not cause: any answered status other than 429, 503 or 504 (a 500
    above all), and a 410 outside a watch (where it means re-list)."""
    problems = []
    for failure in failures:
        status = failure.status
        if status is None or status in TOLERATED:
            continue
        what = failure.request if isinstance(failure, Failure) else f"write {failure.key}"
        if status == GONE and what.startswith("watch "):
            continue
        problems.append(f"{what}: {status} {failure.error}")
    return problems


async def current_writes(
    client: Client, namespace: str, kinds: Sequence[type[Resource]] = (Deployment, ConfigMap)
) -> dict[str, int | None]:
    """The write number each object of ``kinds`` in ``namespace`` holds now, by key."""
    held: dict[str, int | None] = {}
    for cls in kinds:
        for obj in (await client.list(cls, namespace)).items:
            held[key_of(obj)] = seq_of(obj)
    return held


def owned_by(obj: Resource, owner: Resource) -> bool:
    return any(ref.uid == owner.metadata.uid for ref in obj.metadata.owner_references or ())


async def replica_mismatches(client: Client, namespace: str) -> list[str]:
    """Where the namespace's ReplicaSets do not have exactly their replicas (live pods each
    owns, against its spec), or a Deployment's ReplicaSets together want other than it."""
    sets = (await client.list(ReplicaSet, namespace)).items
    pods = [
        p
        for p in (await client.list(Pod, namespace)).items
        if p.metadata.deletion_timestamp is None
        and (p.status is None or p.status.phase not in ("Succeeded", "Failed"))
    ]
    problems = []
    for rs in sets:
        wanted = rs.spec.replicas if rs.spec and rs.spec.replicas is not None else 1
        have = sorted(p.metadata.name or "" for p in pods if owned_by(p, rs))
        if len(have) != wanted:
            problems.append(f"ReplicaSet {rs.metadata.name}: {wanted} replicas, pods {have}")
    for deployment in (await client.list(Deployment, namespace)).items:
        spec = deployment.spec
        wanted = spec.replicas if spec and spec.replicas is not None else 1
        total = sum(rs.spec.replicas or 0 for rs in sets if rs.spec and owned_by(rs, deployment))
        if total != wanted:
            problems.append(
                f"Deployment {deployment.metadata.name}: {wanted} replicas, its ReplicaSets "
                f"want {total}"
            )
    return problems


async def settled(
    check: Callable[[], Awaitable[list[str]]], within: float, interval: float = 1.0
) -> list[str]:
    """``check``'s violations once it finds none, or its last ones after ``within`` seconds
    (a failing request counts as a violation, retried like the others)."""
    deadline = time.monotonic() + within
    while True:
        try:
            problems = await check()
        except (ApiError, ClientError, TimeoutError) as error:
            problems = [f"{check}: {error}"]
        if not problems or time.monotonic() > deadline:
            return problems
        await asyncio.sleep(interval)


# -- the whole workload -------------------------------------------------------------------------


def manifests(namespace: str, name: str, image: str, port: int) -> list[dict[str, Any]]:
    """The workload's objects: its namespace, a Deployment of ``image`` serving on ``port``
    (two replicas to start with), and a ClusterIP Service ``name`` on port 80 in front."""
    labels = {"app": name}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "terminationGracePeriodSeconds": 1,
                        "containers": [
                            {"name": name, "image": image, "ports": [{"containerPort": port}]}
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": port}]},
        },
    ]


async def create_all(client: Client, objects: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Create each object (in order) and return what the server made of them."""
    created = []
    for obj in objects:
        resource = await client.resource(str(obj["kind"]).lower())
        created.append(await resource.create(obj))
    return created


@dataclass
class Workload:
    """Writers, watchers and probers run together; ``running()`` starts them and stops them
    at the end of the block, ``violations()`` checks every invariant."""

    client: Client
    """A client that never retries (``max_retries=0``), through the load-balanced address."""
    namespace: str
    writers: list[Writer] = field(default_factory=list)
    watchers: list[Watcher[Any]] = field(default_factory=list)
    probers: list[Prober] = field(default_factory=list)

    @classmethod
    def standard(
        cls, client: Client, namespace: str, deployment: str, probe: Sequence[str] | None = None
    ) -> Workload:
        """The fault tests' workload: ``deployment`` scaled every second, a ConfigMap created
        every second, watchers of Deployments, ReplicaSets, Pods and ConfigMaps, and
        ``probe`` (a command reaching the Service) run twice a second."""
        return cls(
            client,
            namespace,
            writers=[
                Writer(DeploymentScaler(client, namespace, deployment)),
                Writer(ConfigMapCreator(client, namespace)),
            ],
            watchers=[
                Watcher(client, kind, namespace)
                for kind in (Deployment, ReplicaSet, Pod, ConfigMap)
            ],
            probers=[Prober(probe)] if probe is not None else [],
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Workload]:
        runners: list[Callable[[], Coroutine[Any, Any, None]]] = [
            *(w.run for w in self.watchers),
            *(w.run for w in self.writers),
            *(p.run for p in self.probers),
        ]
        tasks = [asyncio.create_task(run()) for run in runners]
        try:
            yield self
        finally:
            for task in tasks:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            for result in results:
                if isinstance(result, Exception):
                    raise result

    def attempts(self) -> list[Attempt]:
        return [a for w in self.writers for a in w.attempts]

    def failures(self) -> list[Attempt | Failure]:
        return [
            *(a for a in self.attempts() if not a.acknowledged),
            *(f for w in self.watchers for f in w.failures),
        ]

    async def violations(self, settle: float = 60.0) -> list[str]:
        """Every broken invariant: lost acknowledged writes, versions going backwards, pods
        bound twice, failures no fault may cause, ReplicaSets without exactly their replicas
        (after up to ``settle`` seconds for the controllers to catch up)."""
        problems = [
            *(p for w in self.watchers for p in backward_versions(w.name, w.seen)),
            *(p for w in self.watchers for p in w.rebound),
            *unexpected_failures(self.failures()),
        ]
        held = await self._held()
        problems += lost_writes(self.attempts(), held)
        problems += await settled(lambda: replica_mismatches(self.client, self.namespace), settle)
        return problems

    async def _held(self) -> dict[str, int | None]:
        """``current_writes``, which must succeed once the faults are over: retried for a
        while."""
        deadline = time.monotonic() + 60
        while True:
            try:
                return await current_writes(self.client, self.namespace)
            except (ApiError, ClientError) as error:
                if time.monotonic() > deadline:
                    raise
                log.info("chaos: final read failed, retrying: %s", error)
                await asyncio.sleep(1)

    def summary(self) -> str:
        """One line per writer, watcher and prober: what happened, for the test's output."""
        lines = []
        for writer in self.writers:
            statuses: dict[str, int] = {}
            for failure in writer.failures():
                label = str(failure.status or "no answer")
                statuses[label] = statuses.get(label, 0) + 1
            lines.append(
                f"writer {writer.operation.key(0).partition('/')[0]}: "
                f"{len(writer.acknowledged())} acknowledged, failures {statuses or 'none'}"
            )
        for watcher in self.watchers:
            lists = sum(1 for s in watcher.seen if s.what == LIST)
            lines.append(
                f"watcher {watcher.name}: {len(watcher.seen) - lists} events, {lists} lists, "
                f"{len(watcher.failures)} failures ({watcher.relists_after_gone()} 410s)"
            )
        for prober in self.probers:
            lines.append(
                f"prober: {len(prober.probes)} probes, {prober.availability():.0%} answered"
            )
        return "\n".join(lines)
