"""API write throughput and latency on a three-member etcd cluster, one member, and SQLite.

The cost of replication, measured the way a client sees it: for each store the API server runs
as a subprocess (``python -m kubelab apiserver --store ...``, as ``bench/apiserver.py`` runs it)
and ``CLIENTS`` concurrent clients create small ConfigMaps (``OPS`` creates per round, one
round per client count).  Reported per round: creates per second and the p50/p99 latency of
one create, with each etcd figure's ratio to SQLite's beside it.

Stores: SQLite (the default, ``synchronous=FULL``), one etcd member, and three etcd members on
loopback with peer TLS (``kubelab.lab.etcd``, as the lab's control-plane nodes run them; the
API server is given all three and talks to the first, which forwards writes to the leader if
it is not the leader itself).  Every member fsyncs its WAL, so a three-member write pays for
a quorum of fsyncs plus the peer round trips; all members, the server and the client share the
machine's CPUs and disk, which a real cluster would not.

``python -m bench.ha`` runs it (etcd only if an ``etcd`` binary is on PATH).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.apiserver import Client, configmap, in_parallel, launch, pct
from tests.controlplane.storage.etcd_server import etcd_available, loopback_cluster
from tests.servers import stop_server

CLIENTS = (1, 8, 32)
OPS = 400
NAMESPACE = "bench-ha"

Round = dict[str, float]


async def rounds(client: Client) -> dict[int, Round]:
    """For each client count: creates/s, p50 and p99 of ``OPS`` ConfigMap creates."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    await client.request("POST", "/api/v1/namespaces", _json(namespace), expect=201)
    path = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
    results: dict[int, Round] = {}
    for clients in CLIENTS:
        latencies: list[float] = []

        async def create(
            i: int, clients: int = clients, latencies: list[float] = latencies
        ) -> None:
            body = _json(configmap(f"c{clients}-{i}"))
            start = time.perf_counter()
            await client.request("POST", path, body, expect=201)
            latencies.append(time.perf_counter() - start)

        wall = await in_parallel(OPS, clients, create)
        results[clients] = {
            "per s": OPS / wall,
            "p50": pct(latencies, 50),
            "p99": pct(latencies, 99),
        }
    return results


def _json(obj: object) -> bytes:
    return json.dumps(obj).encode()


def measure(base: Path, store: str) -> dict[int, Round]:
    server = launch(base / "server", store)
    try:

        async def run() -> dict[int, Round]:
            client = Client(server)
            try:
                return await rounds(client)
            finally:
                await client.close()

        return asyncio.run(run())
    finally:
        stop_server(server)


@contextlib.contextmanager
def etcd_cluster(base: Path, size: int) -> Iterator[str]:
    """``size`` members on loopback, started and stopped by PID; yields the ``--store`` value."""
    runner = loopback_cluster(base / "etcd", size)
    runner.start()
    try:
        yield runner.cluster.store_url()
    finally:
        runner.stop()


def run_sqlite(base: Path) -> dict[int, Round]:
    return measure(base, "sqlite")


def run_etcd(size: int) -> Callable[[Path], dict[int, Round]]:
    def run(base: Path) -> dict[int, Round]:
        with etcd_cluster(base, size) as store:
            return measure(base, store)

    return run


def report(results: dict[str, dict[int, Round]]) -> None:
    names = list(results)
    print(f"ha: {OPS} ConfigMap creates per round through the API server, same machine")
    header = f"  {'clients':>7}  {'metric':<10}" + "".join(f"{n:>14}" for n in names)
    print(header + "".join(f"{n + '/sqlite':>16}" for n in names[1:]))
    for clients in CLIENTS:
        for metric, scale, unit in (
            ("per s", 1.0, "/s"),
            ("p50", 1000.0, "ms"),
            ("p99", 1000.0, "ms"),
        ):
            values = [results[n][clients][metric] for n in names]
            cells = "".join(f"{v * scale:>12.1f}{unit:>2}" for v in values)
            ratios = "".join(f"{v / values[0]:>15.2f}x" for v in values[1:])
            print(f"  {clients:>7}  {metric:<10}{cells}{ratios}")


def main() -> dict[str, dict[int, Round]]:
    setups: list[tuple[str, Callable[[Path], dict[int, Round]]]] = [("sqlite", run_sqlite)]
    if etcd_available():
        setups += [("etcd x1", run_etcd(1)), ("etcd x3", run_etcd(3))]
    else:
        print("ha: no etcd binary on PATH; only SQLite measured")
    results: dict[str, dict[int, Round]] = {}
    for name, run in setups:
        with tempfile.TemporaryDirectory(prefix="kubelab-bench-ha-") as tmp:
            results[name] = run(Path(tmp))
    report(results)
    return results


if __name__ == "__main__":
    main()
