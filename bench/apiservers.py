"""Would several API server processes serve more than one?  Measured, to decide on numbers.

``kubelab server`` runs one API server process.  The way to use more cores for serving would
be several serving processes over one store, each fanning the store's events out to its own
watchers: what the HA lab already does with three API servers over etcd (SQLite's revision
log is one process's).  So: one etcd member (``tests.controlplane.storage.etcd_server``),
then one and then two ``kubelab apiserver`` processes over it, and ``CLIENTS`` connections in
flight creating small ConfigMaps, split evenly over the servers; creates per second over
``OPS`` creates, and the CPU each process used (psutil: servers, etcd, and this client).

``python -m bench.apiservers`` (needs an ``etcd`` binary on PATH).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.apiserver import Client, configmap, in_parallel, launch
from bench.ha import etcd_cluster
from tests.controlplane.storage.etcd_server import etcd_available
from tests.servers import ServerProcess, stop_server

CLIENTS = 32
OPS = 2_000
NAMESPACE = "bench-apiservers"


@dataclass
class Result:
    servers: int
    per_second: float
    cores: dict[str, float]


async def creates(servers: list[ServerProcess], namespace_name: str) -> float:
    """Seconds for ``OPS`` creates, ``CLIENTS`` in flight split over ``servers``."""
    clients = [Client(server) for server in servers]
    try:
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace_name},
        }
        await clients[0].request(
            "POST", "/api/v1/namespaces", json.dumps(namespace).encode(), expect=201
        )
        path = f"/api/v1/namespaces/{namespace_name}/configmaps"

        def create_on(client: Client, offset: int) -> Callable[[int], Awaitable[None]]:
            async def create(i: int) -> None:
                body = json.dumps(configmap(f"c{offset}-{i}")).encode()
                await client.request("POST", path, body, expect=201)

            return create

        share = OPS // len(clients)
        started = time.perf_counter()
        await asyncio.gather(
            *(
                in_parallel(share, CLIENTS // len(clients), create_on(client, n))
                for n, client in enumerate(clients)
            )
        )
        return time.perf_counter() - started
    finally:
        for client in clients:
            await client.close()


def etcd_process(base: Path) -> psutil.Process:
    """Our etcd member (others may run on the machine): the one whose data is under ``base``."""
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] == "etcd" and str(base) in " ".join(process.info["cmdline"]):
            return process
    raise LookupError(f"no etcd process with its data under {base}")


def measure(base: Path, store: str, count: int, run: int) -> Result:
    """``count`` API servers over ``store``; ``run`` numbers the runs over one store."""
    servers = [launch(base / f"server-{run}-{i}", store) for i in range(count)]
    try:
        watched = {
            f"apiserver {i + 1}": psutil.Process(s.process.pid) for i, s in enumerate(servers)
        }
        watched["etcd"] = etcd_process(base)
        watched["client"] = psutil.Process()
        before = {name: p.cpu_times() for name, p in watched.items()}
        took = asyncio.run(creates(servers, f"{NAMESPACE}-{run}"))
        cores = {}
        for name, process in watched.items():
            after, earlier = process.cpu_times(), before[name]
            cores[name] = (after.user - earlier.user + after.system - earlier.system) / took
    finally:
        for server in servers:
            stop_server(server)
    return Result(count, OPS / took, cores)


def main() -> list[Result]:
    if not etcd_available():
        print("apiservers: no etcd binary on PATH", file=sys.stderr)
        return []
    results = []
    with tempfile.TemporaryDirectory(prefix="kubelab-bench-apiservers-") as name:
        base = Path(name)
        with etcd_cluster(base, 1) as store:
            for run, count in enumerate((1, 2, 1, 2)):
                results.append(measure(base, store, count, run))
                print(results[-1], flush=True)
    print(f"\napiservers: {OPS} ConfigMap creates, {CLIENTS} in flight, over one etcd member")
    for r in results:
        cores = ", ".join(f"{name} {used:.2f}" for name, used in r.cores.items())
        print(f"  {r.servers} API server(s): {r.per_second:7.1f}/s; cores: {cores}")
    return results


if __name__ == "__main__":
    main()
