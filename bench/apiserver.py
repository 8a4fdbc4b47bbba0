"""The API server over HTTPS beside the raw store it stands on, for SQLite and for etcd.

For each backend the server runs as a subprocess (``python -m kubelab apiserver``, as users run
it, so its RSS is its own) and the raw store is opened in this process on a separate data
directory (SQLite) or key prefix of the same etcd.  The client is aiohttp with the admin client
certificate from the server's data directory, keep-alive.  Measured:

1. create latency: p50/p99 of ``LATENCY_OPS`` sequential ConfigMap creates, beside
   ``store.create`` of the same JSON bytes.  Target: API p50 within 3x the raw p50.
2. get latency: p50/p99 of as many sequential gets, beside ``store.get``.
3. list: ``PODS`` pods seeded through the API with ``SEED_CONCURRENCY`` creates in flight
   (throughput reported; the raw store is seeded the same way with the stored objects' bytes),
   then one full ``GET .../pods`` and a ``?limit=500`` walk through every page, beside
   ``store.list`` of the same shape.  Target: the full list under 1 s.
4. watch: ``WATCHERS`` concurrent watches from a resourceVersion on one namespace, then
   ``UPDATES`` updates of one ConfigMap at ``UPDATE_RATE``/s; each event's latency is the time
   the watcher read it minus the time the writer got the update's response (the acknowledgement).
   Beside the same with ``store.watch``/``store.update`` in-process.  Target: p99 under 50 ms.
   The server hands an event to its watchers before it answers the writer, so this is often
   negative; the latency from the moment the write was sent is reported too.
5. memory: the server's RSS after seeding the pods minus before (and after the lists), and the
   database's size (SQLite: the file and its WAL; etcd: ``member/snap/db``).

The HTTPS round trip alone (``GET /version``, no store, no codec) is printed beside the tables:
it is the part of every API latency that the raw store does not pay.

``python -m bench.apiserver`` runs both backends (etcd only if an ``etcd`` binary is on PATH).
Client, server and etcd share the machine's CPUs, so the numbers include their contention.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from bench.api_codec import make_pod
from controlplane.storage.interface import Event, KeyValue, Store
from tests.controlplane.storage.etcd_server import EtcdServer, etcd_available
from tests.servers import BARE_APISERVER, ServerProcess, start_server, stop_server

REPO = Path(__file__).resolve().parents[1]

LATENCY_OPS = 500
PODS = 10_000
SEED_CONCURRENCY = 32
PAGE = 500
LIST_ROUNDS = 3
WATCHERS = 100
UPDATES = 200
UPDATE_RATE = 50.0
NAMESPACE = "bench"

PHASE_TIMEOUT = 240.0
"""Seconds any one phase may take before the bench gives up on it."""

Timings = dict[str, float]


# Processes: the same launchers the tests use (started and stopped by PID).


def launch(data_dir: Path, store: str) -> ServerProcess:
    data_dir.mkdir(parents=True)
    return start_server(data_dir, *BARE_APISERVER, "--store", store)


def file_size(*paths: Path) -> int:
    return sum(p.stat().st_size for p in paths if p.exists())


# Measurement helpers.


def pct(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, nearest rank."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[rank]


async def timed(fn: Callable[[], Awaitable[object]], count: int) -> list[float]:
    """``count`` sequential calls of ``fn``, each timed in seconds."""
    times = []
    for _ in range(count):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return times


async def in_parallel(
    count: int, concurrency: int, fn: Callable[[int], Awaitable[object]]
) -> float:
    """Calls ``fn(0..count-1)`` with ``concurrency`` in flight; returns the seconds taken."""
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < count:
            index = next_index
            next_index += 1
            await fn(index)

    start = time.perf_counter()
    async with asyncio.timeout(PHASE_TIMEOUT):
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


def configmap(name: str, value: str = "x" * 64) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "data": {"value": value},
    }


def pod(i: int) -> dict[str, Any]:
    """bench/api_codec's pod as a client sends it: no status and no server-set metadata."""
    sent = make_pod(i)
    del sent["status"]
    for field in ("namespace", "uid", "resourceVersion", "creationTimestamp", "generateName"):
        sent["metadata"].pop(field, None)
    return sent


# The client side of the API.


class Client:
    """HTTPS to one server as its admin (client certificate), keep-alive."""

    def __init__(self, server: ServerProcess) -> None:
        pki = server.data_dir / "pki"
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        self.base = server.url
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=0),
            timeout=aiohttp.ClientTimeout(total=PHASE_TIMEOUT),
        )

    async def close(self) -> None:
        await self.session.close()

    async def request(
        self, method: str, path: str, body: bytes | None = None, expect: int = 200
    ) -> bytes:
        headers = {"Content-Type": "application/json"} if body is not None else None
        async with self.session.request(
            method, self.base + path, data=body, headers=headers
        ) as response:
            data = await response.read()
            if response.status != expect:
                raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
            return data


# The phases, each on the API and on the raw store.


async def api_phases(client: Client, server: ServerProcess, db_files: Callable[[], int]) -> Timings:
    out: Timings = {}
    ns = f"/api/v1/namespaces/{NAMESPACE}"
    cms, pods = f"{ns}/configmaps", f"{ns}/pods"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    await client.request("POST", "/api/v1/namespaces", json.dumps(namespace).encode(), 201)

    bodies = [json.dumps(configmap(f"lat-{i:04d}")).encode() for i in range(LATENCY_OPS)]
    await client.request("POST", cms, json.dumps(configmap("warm")).encode(), 201)
    await client.request("GET", f"{cms}/warm")
    it = iter(bodies)
    creates = await timed(lambda: client.request("POST", cms, next(it), 201), LATENCY_OPS)
    out["create p50"], out["create p99"] = pct(creates, 50), pct(creates, 99)
    names = iter(range(LATENCY_OPS))
    gets = await timed(lambda: client.request("GET", f"{cms}/lat-{next(names):04d}"), LATENCY_OPS)
    out["get p50"], out["get p99"] = pct(gets, 50), pct(gets, 99)
    # The HTTPS round trip alone: an endpoint that touches neither the store nor the codec.
    out["https rtt p50"] = pct(await timed(lambda: client.request("GET", "/version"), 200), 50)

    process = psutil.Process(server.process.pid)
    rss_before = process.memory_info().rss
    db_before = db_files()
    pod_bodies = [json.dumps(pod(i)).encode() for i in range(PODS)]
    seconds = await in_parallel(
        PODS, SEED_CONCURRENCY, lambda i: client.request("POST", pods, pod_bodies[i], 201)
    )
    out["seed creates/s"] = PODS / seconds
    await asyncio.sleep(0.5)
    out["rss MB / 10k pods"] = (process.memory_info().rss - rss_before) / 2**20 * 10_000 / PODS
    out["rss MB"] = process.memory_info().rss / 2**20
    out["db MB / 10k pods"] = (db_files() - db_before) / 2**20 * 10_000 / PODS
    out["db MB"] = db_files() / 2**20

    full: list[float] = []
    data = b""
    for _ in range(LIST_ROUNDS):
        start = time.perf_counter()
        data = await client.request("GET", pods)
        full.append(time.perf_counter() - start)
    out["list full"] = statistics.median(full)
    out["list full first"] = full[0]
    out["list MB"] = len(data) / 1e6
    out["rss MB after list"] = process.memory_info().rss / 2**20
    listed = json.loads(data)["items"]
    if len(listed) != PODS:
        raise RuntimeError(f"listed {len(listed)} pods, expected {PODS}")

    start = time.perf_counter()
    seen, token = 0, ""
    for _ in range(PODS // PAGE + 2):
        query = f"?limit={PAGE}" + (f"&continue={token}" if token else "")
        page = json.loads(await client.request("GET", pods + query))
        seen += len(page["items"])
        token = page["metadata"].get("continue", "")
        if not token:
            break
    out["list paged"] = time.perf_counter() - start
    if seen != PODS:
        raise RuntimeError(f"paged through {seen} pods, expected {PODS}")
    STORED.clear()
    STORED.extend(json.dumps(item, separators=(",", ":")).encode() for item in listed)

    latencies, from_send = await api_watch(client, cms)
    out["watch p50"], out["watch p99"] = pct(latencies, 50), pct(latencies, 99)
    out["watch p99 from send"] = pct(from_send, 99)
    out["watch events"] = float(len(latencies))
    return out


STORED: list[bytes] = []
"""The pods as the API server listed them: what the raw store is seeded with."""


async def api_watch(client: Client, cms: str) -> tuple[list[float], list[float]]:
    created = await client.request("POST", cms, json.dumps(configmap("watched")).encode(), 201)
    obj = json.loads(created)
    start_rv = int(obj["metadata"]["resourceVersion"])
    url = f"{client.base}{cms}?watch=true&resourceVersion={start_rv}&timeoutSeconds=120"
    received: list[list[tuple[float, bytes]]] = [[] for _ in range(WATCHERS)]
    connected = 0
    all_connected = asyncio.Event()

    async def watcher(index: int) -> None:
        nonlocal connected
        async with client.session.get(url) as response:
            if response.status != 200:
                raise RuntimeError(f"watch: {response.status}")
            connected += 1
            if connected == WATCHERS:
                all_connected.set()
            got = received[index]
            async for line in response.content:
                got.append((time.perf_counter(), line))
                if len(got) >= UPDATES:
                    return

    acked: dict[int, tuple[float, float]] = {}

    async def writer() -> None:
        await all_connected.wait()
        await asyncio.sleep(0.5)  # let every watch register with the store
        current = obj
        begin = time.perf_counter()
        for i in range(UPDATES):
            await asyncio.sleep(max(0.0, begin + i / UPDATE_RATE - time.perf_counter()))
            current["data"] = {"value": f"update-{i}"}
            sent = time.perf_counter()
            data = await client.request("PUT", f"{cms}/watched", json.dumps(current).encode())
            ack = time.perf_counter()
            current = json.loads(data)
            acked[int(current["metadata"]["resourceVersion"])] = (sent, ack)

    async with asyncio.timeout(PHASE_TIMEOUT):
        await asyncio.gather(writer(), *(watcher(i) for i in range(WATCHERS)))
    return match_events(
        received, acked, lambda line: int(json.loads(line)["object"]["metadata"]["resourceVersion"])
    )


def match_events(
    received: Sequence[Sequence[tuple[float, Any]]],
    acked: dict[int, tuple[float, float]],
    revision: Callable[[Any], int],
) -> tuple[list[float], list[float]]:
    """Per event received: (receive - ack, receive - send) of the write it reports."""
    from_ack, from_send = [], []
    for events in received:
        for at, item in events:
            sent, ack = acked[revision(item)]
            from_ack.append(at - ack)
            from_send.append(at - sent)
    return from_ack, from_send


async def raw_phases(store: Store, root: str) -> Timings:
    out: Timings = {}
    cms, pods = f"{root}/registry/configmaps/{NAMESPACE}/", f"{root}/registry/pods/{NAMESPACE}/"
    bodies = [json.dumps(configmap(f"lat-{i:04d}")).encode() for i in range(LATENCY_OPS)]
    await store.create(cms + "warm", bodies[0])
    await store.get(cms + "warm")
    counter = iter(range(LATENCY_OPS))

    def create() -> Awaitable[KeyValue]:
        i = next(counter)
        return store.create(f"{cms}lat-{i:04d}", bodies[i])

    creates = await timed(create, LATENCY_OPS)
    out["create p50"], out["create p99"] = pct(creates, 50), pct(creates, 99)
    names = iter(range(LATENCY_OPS))
    gets = await timed(lambda: store.get(f"{cms}lat-{next(names):04d}"), LATENCY_OPS)
    out["get p50"], out["get p99"] = pct(gets, 50), pct(gets, 99)

    names_of = [json.loads(b)["metadata"]["name"] for b in STORED]
    seconds = await in_parallel(
        len(STORED), SEED_CONCURRENCY, lambda i: store.create(pods + names_of[i], STORED[i])
    )
    out["seed creates/s"] = len(STORED) / seconds

    full = []
    for _ in range(LIST_ROUNDS):
        start = time.perf_counter()
        result = await store.list(pods)
        full.append(time.perf_counter() - start)
    out["list full"] = statistics.median(full)
    out["list full first"] = full[0]
    out["list MB"] = sum(len(kv.value) for kv in result.items) / 1e6
    start = time.perf_counter()
    seen, after, revision = 0, None, 0
    for _ in range(len(STORED) // PAGE + 2):
        page = await store.list(pods, limit=PAGE, start_after=after, revision=revision)
        seen += len(page.items)
        revision = page.revision
        if not page.more:
            break
        after = page.items[-1].key
    out["list paged"] = time.perf_counter() - start
    if seen != len(STORED):
        raise RuntimeError(f"raw paging saw {seen} of {len(STORED)}")

    latencies, from_send = await raw_watch(store, cms)
    out["watch p50"], out["watch p99"] = pct(latencies, 50), pct(latencies, 99)
    out["watch p99 from send"] = pct(from_send, 99)
    out["watch events"] = float(len(latencies))
    return out


async def raw_watch(store: Store, cms: str) -> tuple[list[float], list[float]]:
    key = cms + "watched"
    kv = await store.create(key, json.dumps(configmap("watched")).encode())
    received: list[list[tuple[float, Event]]] = [[] for _ in range(WATCHERS)]

    async def watcher(index: int) -> None:
        events = store.watch(cms, kv.mod_revision)
        got = received[index]
        try:
            async for event in events:
                assert isinstance(event, Event)
                got.append((time.perf_counter(), event))
                if len(got) >= UPDATES:
                    return
        finally:
            await events.aclose()

    acked: dict[int, tuple[float, float]] = {}

    async def writer() -> None:
        await asyncio.sleep(0.5)  # let every watch register with the store
        revision = kv.mod_revision
        begin = time.perf_counter()
        for i in range(UPDATES):
            await asyncio.sleep(max(0.0, begin + i / UPDATE_RATE - time.perf_counter()))
            value = json.dumps(configmap("watched", f"update-{i}")).encode()
            sent = time.perf_counter()
            written = await store.update(key, value, revision)
            acked[written.mod_revision] = (sent, time.perf_counter())
            revision = written.mod_revision

    async with asyncio.timeout(PHASE_TIMEOUT):
        await asyncio.gather(writer(), *(watcher(i) for i in range(WATCHERS)))
    return match_events(received, acked, lambda event: int(event.revision))


# Per backend.


async def measure(
    server: ServerProcess,
    open_raw: Callable[[], Awaitable[Store]],
    root: str,
    db_files: Callable[[], int],
) -> dict[str, Timings]:
    client = Client(server)
    try:
        api = await api_phases(client, server, db_files)
    finally:
        await client.close()
    store = await open_raw()
    try:
        raw = await raw_phases(store, root)
    finally:
        await store.close()
    return {"api": api, "raw": raw}


def run_sqlite(base: Path) -> dict[str, Timings]:
    from controlplane.storage.sqlite import SQLiteStore

    data_dir = base / "server"
    db = data_dir / "state.db"
    server = launch(data_dir, "sqlite")
    raw_db = base / "raw" / "state.db"
    raw_db.parent.mkdir()
    try:
        return asyncio.run(
            measure(
                server,
                lambda: SQLiteStore.open(raw_db),
                "",
                lambda: file_size(db, Path(f"{db}-wal")),
            )
        )
    finally:
        stop_server(server)


def run_etcd(base: Path) -> dict[str, Timings]:
    from controlplane.storage.etcd import EtcdStore

    etcd = EtcdServer(base / "etcd", name="bench")
    etcd.start()
    try:
        server = launch(base / "server", f"etcd://{etcd.endpoint}")
        try:
            return asyncio.run(
                measure(
                    server,
                    lambda: EtcdStore.open([etcd.endpoint]),
                    "/rawbench",
                    lambda: file_size(etcd.data_dir / "member" / "snap" / "db"),
                )
            )
        finally:
            stop_server(server)
    finally:
        etcd.stop()


# Report.

ROWS: list[tuple[str, str, str]] = [
    # (key, unit, target description)
    ("create p50", "ms", "<= 3x raw"),
    ("create p99", "ms", ""),
    ("get p50", "ms", ""),
    ("get p99", "ms", ""),
    ("seed creates/s", "/s", ""),
    ("list full", "ms", "< 1000 ms"),
    ("list full first", "ms", ""),
    ("list paged", "ms", ""),
    ("list MB", "MB", ""),
    ("watch p50", "ms", ""),
    ("watch p99", "ms", "< 50 ms"),
    ("watch p99 from send", "ms", ""),
]


def verdict(key: str, api: Timings, raw: Timings) -> str:
    if key == "create p50":
        return "meets" if api[key] <= 3 * raw[key] else "MISSES"
    if key == "list full":
        return "meets" if api[key] < 1.0 else "MISSES"
    if key == "watch p99":
        return "meets" if api[key] < 0.050 else "MISSES"
    return ""


def report(backend: str, api: Timings, raw: Timings, wall: float) -> None:
    """One table: the API beside the raw store, the ratio, and the verdict per target."""
    print(
        f"apiserver [{backend}]: {LATENCY_OPS} ops, {PODS} pods, {WATCHERS} watchers x "
        f"{UPDATES} updates at {UPDATE_RATE:.0f}/s; {wall:.0f} s"
    )
    print(f"  {'':<26}{'api':>10}{'raw store':>11}{'ratio':>8}  target")
    for key, unit, target in ROWS:
        scale = 1000.0 if unit == "ms" else 1.0
        a, r = api[key] * scale, raw[key] * scale
        # No ratio of negative latencies (events that reached watchers before the ack).
        ratio = f"{a / r:.1f}x" if a > 0 and r > 0 else "-"
        mark = verdict(key, api, raw)
        fmt = ".1f" if unit != "ms" or abs(a) >= 10 else ".2f"
        print(
            f"  {key + ' (' + unit + ')':<26}{a:>10{fmt}}{r:>11{fmt}}{ratio:>8}  "
            f"{target} {mark}".rstrip()
        )
    print(
        f"  server RSS: +{api['rss MB / 10k pods']:.0f} MB per 10k pods ({api['rss MB']:.0f} MB "
        f"total, {api['rss MB after list']:.0f} MB after the lists); "
        f"db: +{api['db MB / 10k pods']:.1f} MB per 10k pods ({api['db MB']:.1f} MB)"
    )
    print(
        f"  HTTPS round trip alone (GET /version) p50: {api['https rtt p50'] * 1000:.2f} ms; "
        "watch latency is from the writer's ack (negative: the watchers had it first)"
    )


def main() -> dict[str, dict[str, Timings]]:
    backends: list[tuple[str, Callable[[Path], dict[str, Timings]]]] = [("sqlite", run_sqlite)]
    if etcd_available():
        backends.append(("etcd", run_etcd))
    else:
        print("apiserver: no etcd binary on PATH; etcd skipped")
    results: dict[str, dict[str, Timings]] = {}
    for name, run in backends:
        with tempfile.TemporaryDirectory(prefix=f"kubelab-bench-{name}-") as tmp:
            start = time.perf_counter()
            results[name] = run(Path(tmp))
            report(name, results[name]["api"], results[name]["raw"], time.perf_counter() - start)
    return results


if __name__ == "__main__":
    main()
