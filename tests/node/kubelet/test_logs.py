"""CRI log parsing, the /containerLogs options, which instance's log is read, reading
(rotated files, tail, since, limits), following a growing and rotating file on a fake clock,
and log rotation."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

import pytest

from kube.api.kinds.core_v1.pod import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    PodStatus,
)
from kube.clock import FakeClock
from node.kubelet.logs import (
    LogFormatError,
    LogOptions,
    LogRotator,
    NoLogError,
    Record,
    log_container_id,
    parse_line,
    records,
    rotated_files,
    stream_logs,
)

T0 = "2026-01-01T00:00:00.000000001Z"
T1 = "2026-01-01T00:00:01.000000000Z"
T2 = "2026-01-01T00:00:02.500000000+00:00"
NOW = datetime.datetime(2026, 1, 1, 0, 0, 10, tzinfo=datetime.UTC)


def test_parse_line() -> None:
    entry = parse_line(f"{T0} stderr P half a line ".encode())
    assert (entry.stream, entry.partial, entry.content) == ("stderr", True, b"half a line ")
    assert entry.time == datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    assert parse_line(f"{T1} stdout F".encode()).content == b""


@pytest.mark.parametrize(
    "line",
    [b"garbage", b"2026-01-01T00:00:00Z stdin F x", b"2026-01-01T00:00:00Z stdout X x", b"x y F z"],
    ids=["short", "stream", "tag", "time"],
)
def test_parse_line_rejects(line: bytes) -> None:
    with pytest.raises(LogFormatError):
        parse_line(line)


def test_records_join_partials_and_skip_bad_lines() -> None:
    data = (
        f"{T0} stdout P hel\n{T1} stdout F lo\nnot a log line\n{T2} stderr F bye\n{T2} stdout P cut"
    )
    assert records(data.encode()) == [
        Record(T0, datetime.datetime(2026, 1, 1, 0, 0, 0, tzinfo=datetime.UTC), "stdout", b"hello"),
        Record(T2, datetime.datetime(2026, 1, 1, 0, 0, 2, 500000, datetime.UTC), "stderr", b"bye"),
    ]


def _terminated(container_id: str = "") -> ContainerState:
    return ContainerState(
        terminated=ContainerStateTerminated(
            exit_code=1, container_id=f"containerd://{container_id}" if container_id else None
        )
    )


def _waiting(reason: str) -> ContainerState:
    return ContainerState(waiting=ContainerStateWaiting(reason=reason))


RUNNING = ContainerState(running=ContainerStateRunning())


@pytest.mark.parametrize(
    ("state", "last", "previous", "expected"),
    [
        (RUNNING, None, False, "cur"),
        (RUNNING, _terminated("old"), True, "old"),
        (_terminated("cur"), _terminated("old"), False, "cur"),
        (_terminated(), _terminated("old"), False, "old"),
        (_waiting("CrashLoopBackOff"), _terminated("old"), False, "old"),
        (_waiting("CrashLoopBackOff"), _terminated("old"), True, "old"),
        (RUNNING, None, True, 'previous terminated container "app" in pod "web" not found'),
        (
            RUNNING,
            _terminated(),
            True,
            'previous terminated container "app" in pod "web" not found',
        ),
        (_terminated(), None, False, 'container "app" in pod "web" is terminated'),
        (_waiting("Running"), _terminated(), False, 'container "app" in pod "web" is terminated'),
        (
            _waiting("ErrImagePull"),
            None,
            False,
            'container "app" in pod "web" is waiting to start: image can\'t be pulled',
        ),
        (
            _waiting("ImagePullBackOff"),
            None,
            False,
            'container "app" in pod "web" is waiting to start: trying and failing to pull image',
        ),
        (
            _waiting("ContainerCreating"),
            None,
            False,
            'container "app" in pod "web" is waiting to start: ContainerCreating',
        ),
        (
            ContainerState(),
            None,
            False,
            'container "app" in pod "web" is waiting to start - no logs yet',
        ),
    ],
    ids=[
        "running",
        "running-previous",
        "terminated",
        "terminated-without-id",
        "crash-loop",
        "crash-loop-previous",
        "no-previous",
        "previous-without-id",
        "terminated-nothing",
        "last-without-id",
        "image-pull",
        "image-backoff",
        "creating",
        "no-state",
    ],
)
def test_which_instance_a_log_comes_from(
    state: ContainerState, last: ContainerState | None, previous: bool, expected: str
) -> None:
    """Upstream's validateContainerLogStatus, from the status the user sees: an id where there
    is a log, else upstream's message."""
    status = PodStatus(
        container_statuses=[
            ContainerStatus(
                name="app",
                container_id="containerd://cur",
                state=state,
                last_state=last or ContainerState(),
            )
        ]
    )
    try:
        got = log_container_id("web", status, "app", previous)
    except NoLogError as error:
        got = str(error)
    assert got == expected


def test_init_and_ephemeral_containers_have_logs_too() -> None:
    def one(name: str) -> list[ContainerStatus]:
        return [ContainerStatus(name=name, container_id=f"containerd://{name}-id", state=RUNNING)]

    status = PodStatus(
        init_container_statuses=one("init"), ephemeral_container_statuses=one("debugger")
    )
    assert log_container_id("web", status, "init", False) == "init-id"
    assert log_container_id("web", status, "debugger", False) == "debugger-id"
    with pytest.raises(NoLogError, match='container "app" in pod "web" is not available'):
        log_container_id("web", status, "app", False)


def test_options_from_query() -> None:
    query = {"follow": "true", "timestamps": "1", "tailLines": "3", "sinceSeconds": "5"}
    options = LogOptions.from_query(query, NOW)
    assert options == LogOptions(
        follow=True, timestamps=True, tail_lines=3, since=NOW - datetime.timedelta(seconds=5)
    )
    assert LogOptions.from_query({"sinceTime": T1, "limitBytes": "9"}, NOW).since == (
        datetime.datetime(2026, 1, 1, 0, 0, 1, tzinfo=datetime.UTC)
    )
    assert LogOptions.from_query({"previous": "false"}, NOW) == LogOptions()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"tailLines": "-1"}, "tailLines: must be greater than or equal to 0"),
        ({"limitBytes": "0"}, "limitBytes: must be greater than 0"),
        ({"sinceSeconds": "x"}, "sinceSeconds: invalid integer"),
        ({"sinceSeconds": "1", "sinceTime": T0}, "at most one of"),
        ({"sinceTime": "yesterday"}, "sinceTime: invalid timestamp"),
        ({"follow": "maybe"}, "follow: invalid boolean"),
    ],
    ids=["tail", "limit", "since-int", "both-since", "since-time", "bool"],
)
def test_options_reject(query: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LogOptions.from_query(query, NOW)


def write_lines(path: Path, *lines: str) -> None:
    with path.open("a") as handle:
        handle.writelines(line + "\n" for line in lines)


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    """A container log with two rotated files (given out of order) and the live file."""
    path = tmp_path / "c" / "0.log"
    path.parent.mkdir()
    write_lines(path.with_name("0.log.20260101-000002"), f"{T1} stdout F o")
    write_lines(path.with_name("0.log.20260101-000001"), f"{T0} stdout F one", f"{T0} stdout P tw")
    write_lines(path, f"{T1} stdout F three", f"{T2} stderr F four")
    return path


async def read(path: Path, options: LogOptions) -> bytes:
    out = bytearray()

    async def sink(data: bytes) -> None:
        out.extend(data)

    async def running() -> bool:
        return False

    await stream_logs(path, options, sink, running=running, clock=FakeClock())
    return bytes(out)


async def test_reads_rotated_files_oldest_first(log_path: Path) -> None:
    assert [p.name for p in rotated_files(log_path)] == [
        "0.log.20260101-000001",
        "0.log.20260101-000002",
    ]
    assert await read(log_path, LogOptions()) == b"one\ntwo\nthree\nfour\n"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (LogOptions(tail_lines=2), b"three\nfour\n"),
        (LogOptions(tail_lines=0), b""),
        (LogOptions(tail_lines=10), b"one\ntwo\nthree\nfour\n"),
        (LogOptions(timestamps=True, tail_lines=1), f"{T2} four\n".encode()),
        (
            LogOptions(since=datetime.datetime(2026, 1, 1, 0, 0, 1, tzinfo=datetime.UTC)),
            b"three\nfour\n",
        ),
        (LogOptions(limit_bytes=6), b"one\ntw"),
    ],
    ids=["tail", "tail-0", "tail-all", "timestamps", "since", "limit"],
)
async def test_read_options(log_path: Path, options: LogOptions, expected: bytes) -> None:
    assert await read(log_path, options) == expected


async def test_missing_file_reads_empty(tmp_path: Path) -> None:
    assert await read(tmp_path / "none" / "0.log", LogOptions(follow=True)) == b""


async def test_follow_growth_rotation_and_exit(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    write_lines(path, f"{T0} stdout F first")
    clock = FakeClock()
    out = bytearray()
    alive = True

    async def sink(data: bytes) -> None:
        out.extend(data)

    async def running() -> bool:
        return alive

    async def settle() -> None:
        """Let the follower run until it sleeps again (or ends)."""
        for _ in range(100):
            if clock.sleepers or task.done():
                return
            await asyncio.sleep(0)

    async def tick() -> None:
        await clock.advance(0.2)
        await settle()

    task = asyncio.create_task(
        stream_logs(path, LogOptions(follow=True), sink, running=running, clock=clock)
    )
    await settle()
    assert out == b"first\n"

    with path.open("a") as handle:
        handle.write(f"{T1} stdout P sec")
    await tick()
    assert out == b"first\n"
    with path.open("a") as handle:
        handle.write("\n")
    write_lines(path, f"{T1} stdout F ond")
    await tick()
    assert out == b"first\nsecond\n"

    # Rotation: the runtime's last line goes to the renamed file, then to a new one.
    path.rename(path.with_name("0.log.20260101-000000"))
    write_lines(path.with_name("0.log.20260101-000000"), f"{T1} stdout F late")
    write_lines(path, f"{T2} stdout F new file")
    await tick()
    assert out == b"first\nsecond\nlate\nnew file\n"

    write_lines(path, f"{T2} stdout F last words")
    alive = False
    await tick()
    await asyncio.wait_for(task, 5)
    assert out == b"first\nsecond\nlate\nnew file\nlast words\n"


async def test_follow_stops_at_limit(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    write_lines(path, f"{T0} stdout F 0123456789")
    out = bytearray()

    async def sink(data: bytes) -> None:
        out.extend(data)

    async def running() -> bool:
        return True

    options = LogOptions(follow=True, limit_bytes=4)
    await asyncio.wait_for(stream_logs(path, options, sink, running=running, clock=FakeClock()), 5)
    assert out == b"0123"


class StubRuntime:
    def __init__(self, fail: bool = False) -> None:
        self.reopened: list[str] = []
        self.fail = fail

    async def reopen_container_log(self, container_id: str) -> None:
        if self.fail:
            raise RuntimeError("container is not running")
        self.reopened.append(container_id)


async def test_rotator_rotates_big_logs_and_prunes(tmp_path: Path) -> None:
    big, small = tmp_path / "big.log", tmp_path / "small.log"
    big.write_bytes(b"x" * 11)
    small.write_bytes(b"x" * 10)
    for stamp in ("20250101-000000", "20250101-000001", "20250101-000002"):
        big.with_name(f"big.log.{stamp}").write_bytes(b"old")
    cri = StubRuntime()
    clock = FakeClock(datetime.datetime(2026, 3, 4, 5, 6, 7, tzinfo=datetime.UTC))
    rotator = LogRotator(cri, clock, max_bytes=10, keep=3)

    await rotator.rotate([("big", big), ("small", small), ("gone", tmp_path / "gone.log")])

    assert cri.reopened == ["big"]
    assert not big.exists() and small.exists()
    assert [p.name for p in rotated_files(big)] == [
        "big.log.20250101-000002",
        "big.log.20260304-050607",
    ]


async def test_rotator_undoes_a_rename_when_reopen_fails(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    big.write_bytes(b"x" * 11)
    await LogRotator(StubRuntime(fail=True), FakeClock(), max_bytes=10).rotate([("big", big)])
    assert big.read_bytes() == b"x" * 11
    assert rotated_files(big) == []


def test_rotator_needs_room_for_a_rotated_file() -> None:
    with pytest.raises(ValueError, match="keep"):
        LogRotator(StubRuntime(), FakeClock(), keep=1)
