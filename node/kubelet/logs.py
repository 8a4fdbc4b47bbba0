"""Container logs: reading CRI log files for ``kubectl logs`` and rotating them.

The runtime writes each container's output to the file the kubelet named in
``ContainerConfig.log_path``, one line per write: ``<RFC3339Nano> <stdout|stderr> <F|P> <text>``,
``P`` marking a partial line continued by the next entry (CRI ``kuberuntime/logs``).  This
module turns those files back into what the user wrote:

- ``parse_line`` / ``records`` are pure: entries in, whole lines (partials joined) out;
- ``log_container_id`` picks the instance whose log is wanted from the pod's status, as
  upstream's ``validateContainerLogStatus``: the status is what the user sees, so ``--previous``
  reads the instance ``lastState.terminated`` names (the one the container GC keeps), and a
  container that cannot show a log says why, in upstream's words;
- ``LogOptions.from_query`` validates the ``/containerLogs`` query (PodLogOptions);
- ``stream_logs`` writes the selected lines to a sink: the rotated files of the container
  (``<path>.<timestamp>``, oldest first) and then the live file; with ``follow`` it keeps
  reading as the file grows, switches to the new file when the runtime reopens it after a
  rotation, and stops once the container is no longer running and the file is drained.  The
  poll interval and the clock are injected, so tests drive it without sleeping;
- ``LogRotator`` does what upstream's ``container_log_manager.go`` does on each pass: a
  running container's log bigger than ``max_bytes`` is renamed to ``<path>.<UTC timestamp>``,
  the runtime is told to reopen it (ReopenContainerLog), and only ``keep - 1`` rotated files
  are kept (the live file is the ``keep``-th).  Rotated files are not compressed.

Output follows the kubelet: each line ends with a newline, ``timestamps`` prefixes the line
with the runtime's own RFC3339Nano stamp of its first fragment, ``sinceTime``/``sinceSeconds``
drop lines stamped earlier, ``tailLines`` keeps the last N lines (before following), and
``limitBytes`` cuts the output, mid-line if need be, once that many bytes were written.
"""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final, Protocol

from kube.api.kinds.core_v1.pod import ContainerStatus, PodStatus
from kube.clock import Clock
from node.kubelet.status import ERR_IMAGE_PULL, IMAGE_PULL_BACK_OFF, bare_id

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES: Final = 10 * 1024 * 1024
DEFAULT_KEEP: Final = 5
ROTATION_TIME_FORMAT: Final = "%Y%m%d-%H%M%S"

Sink = Callable[[bytes], Awaitable[None]]


class LogFormatError(ValueError):
    """A line of a CRI log file that does not have the CRI format."""


class NoLogError(Exception):
    """The container has no instance whose log can be read; the message says why."""


def _find_status(status: PodStatus, container: str) -> ContainerStatus | None:
    groups = (
        status.container_statuses,
        status.init_container_statuses,
        status.ephemeral_container_statuses,
    )
    return next((s for group in groups for s in group or () if s.name == container), None)


def log_container_id(pod_name: str, status: PodStatus, container: str, previous: bool) -> str:
    """The runtime id of the instance of ``container`` whose log to read (see the module
    docstring); raises ``NoLogError`` with upstream's message when there is none."""
    found = _find_status(status, container)
    if found is None:
        raise NoLogError(f'container "{container}" in pod "{pod_name}" is not available')
    where = f'"{container}" in pod "{pod_name}"'
    state = found.state
    waiting = state.waiting if state else None
    running = state.running if state else None
    terminated = state.terminated if state else None
    last = found.last_state.terminated if found.last_state else None
    last_id = bare_id(last.container_id if last else None)
    if previous:
        if not last_id:
            raise NoLogError(f"previous terminated container {where} not found")
        return last_id
    if running is not None:
        return bare_id(found.container_id)
    if terminated is not None or last is not None:
        # A terminated state without an id: the next instance did not start; the last one
        # that ran has the log.
        chosen = bare_id(terminated.container_id if terminated else None) or last_id
        if not chosen:
            raise NoLogError(f"container {where} is terminated")
        return chosen
    if waiting is not None:
        reasons = {
            ERR_IMAGE_PULL: "image can't be pulled",
            IMAGE_PULL_BACK_OFF: "trying and failing to pull image",
        }
        reason = waiting.reason or ""
        raise NoLogError(f"container {where} is waiting to start: {reasons.get(reason, reason)}")
    raise NoLogError(f"container {where} is waiting to start - no logs yet")


@dataclass(frozen=True)
class Entry:
    """One line of a CRI log file."""

    stamp: str
    time: datetime.datetime
    stream: str
    partial: bool
    content: bytes


@dataclass(frozen=True)
class Record:
    """One line as the container wrote it: the entries of a partial run joined."""

    stamp: str
    time: datetime.datetime
    stream: str
    content: bytes

    def render(self, timestamps: bool) -> bytes:
        prefix = f"{self.stamp} ".encode() if timestamps else b""
        return prefix + self.content + b"\n"


def parse_time(text: str) -> datetime.datetime:
    """An RFC 3339 timestamp (nanoseconds are cut to microseconds), timezone-aware."""
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise LogFormatError(f"invalid timestamp {text!r}") from None
    if value.tzinfo is None:
        raise LogFormatError(f"timestamp {text!r} has no timezone")
    return value


def parse_line(line: bytes) -> Entry:
    """Parse one CRI log line, without its newline."""
    parts = line.split(b" ", 3)
    if len(parts) < 3:
        raise LogFormatError(f"not a CRI log line: {line[:80]!r}")
    stamp = parts[0].decode(errors="replace")
    stream = parts[1].decode(errors="replace")
    if stream not in ("stdout", "stderr"):
        raise LogFormatError(f"unknown stream {stream!r} in a CRI log line")
    tag = parts[2]
    if tag not in (b"F", b"P"):
        raise LogFormatError(f"unknown tag {tag!r} in a CRI log line")
    content = parts[3] if len(parts) == 4 else b""
    return Entry(stamp, parse_time(stamp), stream, tag == b"P", content)


class _Joiner:
    """Joins partial entries into records, across reads and files."""

    def __init__(self) -> None:
        self._pending: list[Entry] = []

    def add(self, entry: Entry) -> Record | None:
        if entry.partial:
            self._pending.append(entry)
            return None
        first = self._pending[0] if self._pending else entry
        content = b"".join(e.content for e in self._pending) + entry.content
        self._pending.clear()
        return Record(first.stamp, first.time, first.stream, content)


def _lines_to_records(lines: Iterable[bytes], joiner: _Joiner) -> Iterator[Record]:
    for line in lines:
        if not line:
            continue
        try:
            entry = parse_line(line)
        except LogFormatError as error:
            log.warning("skipping a log line: %s", error)
            continue
        record = joiner.add(entry)
        if record is not None:
            yield record


def records(data: bytes) -> list[Record]:
    """Every complete record in the text of a log file (a trailing partial is dropped)."""
    return list(_lines_to_records(data.split(b"\n"), _Joiner()))


@dataclass(frozen=True)
class LogOptions:
    """What to read (PodLogOptions as the kubelet receives them)."""

    follow: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    since: datetime.datetime | None = None
    limit_bytes: int | None = None
    previous: bool = False

    @classmethod
    def from_query(cls, query: Mapping[str, str], now: datetime.datetime) -> LogOptions:
        """Validate a ``/containerLogs`` query; ValueError with a user-facing message."""
        since: datetime.datetime | None = None
        if "sinceSeconds" in query and "sinceTime" in query:
            raise ValueError("at most one of sinceTime or sinceSeconds may be specified")
        if "sinceSeconds" in query:
            seconds = _positive(query, "sinceSeconds")
            since = now - datetime.timedelta(seconds=seconds)
        elif "sinceTime" in query:
            try:
                since = parse_time(query["sinceTime"])
            except LogFormatError as error:
                raise ValueError(f"sinceTime: {error}") from None
        tail = _non_negative(query, "tailLines") if "tailLines" in query else None
        limit = _positive(query, "limitBytes") if "limitBytes" in query else None
        return cls(
            follow=_flag(query, "follow"),
            timestamps=_flag(query, "timestamps"),
            tail_lines=tail,
            since=since,
            limit_bytes=limit,
            previous=_flag(query, "previous"),
        )


def _flag(query: Mapping[str, str], name: str) -> bool:
    value = query.get(name, "false").lower()
    if value in ("", "1", "true"):
        return True
    if value in ("0", "false"):
        return False
    raise ValueError(f"{name}: invalid boolean {query[name]!r}")


def _non_negative(query: Mapping[str, str], name: str) -> int:
    try:
        value = int(query[name])
    except ValueError:
        raise ValueError(f"{name}: invalid integer {query[name]!r}") from None
    if value < 0:
        raise ValueError(f"{name}: must be greater than or equal to 0")
    return value


def _positive(query: Mapping[str, str], name: str) -> int:
    value = _non_negative(query, name)
    if value == 0:
        raise ValueError(f"{name}: must be greater than 0")
    return value


def rotated_files(path: Path) -> list[Path]:
    """The rotated files of a container log, oldest first (timestamps sort as text)."""
    if not path.parent.is_dir():
        return []
    prefix = path.name + "."
    return sorted(p for p in path.parent.iterdir() if p.name.startswith(prefix) and p.is_file())


class _Budget:
    """Writes to the sink until ``limit_bytes`` were written."""

    def __init__(self, sink: Sink, limit: int | None) -> None:
        self._sink = sink
        self.left = limit

    @property
    def exhausted(self) -> bool:
        return self.left is not None and self.left <= 0

    async def write(self, data: bytes) -> None:
        if self.left is not None:
            data = data[: self.left]
            self.left -= len(data)
        if data:
            await self._sink(data)


async def stream_logs(
    path: Path,
    options: LogOptions,
    sink: Sink,
    *,
    running: Callable[[], Awaitable[bool]],
    clock: Clock,
    poll_interval: float = 0.2,
) -> None:
    """Write a container's log to ``sink`` as ``options`` select; see the module docstring.

    ``running`` says whether the container may still write (checked only when ``follow`` has
    drained the file).  A missing file reads as empty.
    """
    budget = _Budget(sink, options.limit_bytes)

    def wanted(record: Record) -> bool:
        return options.since is None or record.time >= options.since

    joiner = _Joiner()
    pending = bytearray()

    def complete_records(data: bytes) -> Iterator[Record]:
        pending.extend(data)
        complete, _, rest = bytes(pending).rpartition(b"\n")
        pending[:] = rest
        return _lines_to_records(complete.split(b"\n"), joiner)

    async def emit(data: bytes) -> None:
        for record in complete_records(data):
            if wanted(record):
                await budget.write(record.render(options.timestamps))

    backlog: list[Record] = []
    for rotated in rotated_files(path):
        backlog += _lines_to_records(_read_all(rotated).split(b"\n"), joiner)
    live = _open(path)
    try:
        if live is not None:
            backlog += complete_records(_drain(live))
        selected = [r for r in backlog if wanted(r)]
        if options.tail_lines is not None:
            selected = selected[max(0, len(selected) - options.tail_lines) :]
        for record in selected:
            await budget.write(record.render(options.timestamps))
        while options.follow and not budget.exhausted:
            data = _drain(live) if live is not None else b""
            if data:
                await emit(data)
            elif _replaced(path, live):
                if live is not None:
                    # The runtime may have written to the old file until it reopened.
                    await emit(_drain(live))
                    live.close()
                live = _open(path)
            elif not await running():
                if live is not None:
                    await emit(_drain(live))
                break
            else:
                await clock.sleep(poll_interval)
    finally:
        if live is not None:
            live.close()


def _read_all(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _open(path: Path) -> BinaryIO | None:
    try:
        return path.open("rb")
    except FileNotFoundError:
        return None


def _drain(handle: BinaryIO) -> bytes:
    """Everything written to the file since the last read."""
    return handle.read()


def _replaced(path: Path, handle: BinaryIO | None) -> bool:
    """Whether ``path`` now names another file than the one open (rotation happened)."""
    try:
        current = path.stat()
    except FileNotFoundError:
        return False
    if handle is None:
        return True
    opened = os.fstat(handle.fileno())
    return (current.st_ino, current.st_dev) != (opened.st_ino, opened.st_dev)


class LogRuntime(Protocol):
    """The one CRI call rotation needs (``RuntimeClient`` has it)."""

    async def reopen_container_log(self, container_id: str) -> None: ...


class LogRotator:
    """Rotates the logs of running containers; see the module docstring."""

    def __init__(
        self,
        cri: LogRuntime,
        clock: Clock,
        max_bytes: int = DEFAULT_MAX_BYTES,
        keep: int = DEFAULT_KEEP,
    ) -> None:
        if keep < 2:
            raise ValueError("keep must be at least 2 (the live file and one rotated file)")
        self._cri = cri
        self._clock = clock
        self.max_bytes = max_bytes
        self.keep = keep

    async def rotate(self, containers: Sequence[tuple[str, Path]]) -> None:
        """One pass over (container id, log path) of running containers; never raises for
        one container's failure (it is logged and the next pass retries)."""
        for container_id, path in containers:
            try:
                await self._rotate_one(container_id, path)
            except Exception:
                log.exception("rotating the log of container %s failed", container_id)

    async def _rotate_one(self, container_id: str, path: Path) -> None:
        if _size(path) > self.max_bytes:
            stamp = self._clock.now().astimezone(datetime.UTC).strftime(ROTATION_TIME_FORMAT)
            target = path.with_name(f"{path.name}.{stamp}")
            _rename(path, target)
            try:
                await self._cri.reopen_container_log(container_id)
            except Exception:
                # The runtime still writes to the renamed file: give it its name back.
                _rename(target, path)
                raise
        _prune(path, self.keep - 1)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _rename(source: Path, target: Path) -> None:
    source.rename(target)


def _prune(path: Path, keep: int) -> None:
    """Delete the oldest rotated files of ``path`` beyond ``keep``."""
    for old in rotated_files(path)[:-keep]:
        old.unlink(missing_ok=True)
