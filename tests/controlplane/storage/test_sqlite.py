"""SQLite durability: reopening and kill -9 lose nothing acknowledged; revisions never go back."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from controlplane.storage.sqlite import SQLiteStore

WRITER = """
import asyncio, sys
from controlplane.storage.sqlite import SQLiteStore

async def main() -> None:
    store = await SQLiteStore.open(sys.argv[1])
    i = 0
    while True:
        kv = await store.create(f"/registry/configmaps/ns/{i}", b"x" * 200)
        print(kv.key, kv.mod_revision, flush=True)
        i += 1

asyncio.run(main())
"""


async def test_reopen_keeps_data_and_revision(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "db")
    await store.create("/registry/a", b"1")
    await store.create("/registry/b", b"1")
    await store.delete("/registry/b")
    top = await store.current_revision()
    await store.compact(top)
    await store.close()

    reopened = await SQLiteStore.open(tmp_path / "db")
    try:
        assert await reopened.current_revision() == top, "compacting the newest row keeps it"
        assert (await reopened.get("/registry/a")).value == b"1"
        created = await reopened.create("/registry/c", b"1")
        assert created.mod_revision == top + 1
    finally:
        await reopened.close()


async def test_kill_9_loses_nothing_acknowledged(tmp_path: Path) -> None:
    db = tmp_path / "db"
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WRITER,
        str(db),
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[3],
    )
    acknowledged: list[tuple[str, int]] = []
    try:
        assert child.stdout is not None
        while len(acknowledged) < 50:
            line = await child.stdout.readline()
            assert line, "the writer died early"
            key, written = line.decode().split()
            acknowledged.append((key, int(written)))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        await child.wait()

    store = await SQLiteStore.open(db)
    try:
        for key, revision in acknowledged:
            assert (await store.get(key)).mod_revision == revision
        assert await store.current_revision() >= acknowledged[-1][1]
    finally:
        await store.close()
