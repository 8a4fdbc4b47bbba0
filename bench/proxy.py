"""kube-proxy sync time: full syncs of 1,000 / 5,000 / 10,000 Services beside the floor, and a
one-Service partial sync at the largest size.

For each size, a fresh "node" network namespace gets a worker process (``nsenter --net``, as
the proxy runs on a node) that feeds the :class:`~node.proxy.proxier.IptablesProxier` that many
ClusterIP Services with ``ENDPOINTS`` endpoints each (in-memory lookups, no API server: only
the sync is timed) over either backend, :class:`~node.iptables.RestoreIptables` or (legacy
tables only) :class:`~node.proxy.libiptc.LibiptcIptables`, and measures:

- ``full (cold)``: the first sync, into empty tables: render every rule, save, restore;
- ``full (warm)``: the periodic full sync, everything already in the kernel;
- ``partial``: one Service gains an endpoint, and only its chains (plus the top-level chains)
  are rewritten;
- the **floor** beside each: ``iptables-restore --noflush`` of the identical input the proxier
  produced (both tables in one file), into empty tables (in a second fresh namespace) and into
  the loaded ones.  With the legacy backend any change, however small, costs a read and a
  rewrite of the whole table in the kernel, so the partial sync's own floor is printed too,
  and beside it an empty ``*nat``/``COMMIT`` transaction on the loaded table (what
  ``iptables-restore --noflush`` pays before it changes anything).

Targets (issue 7): full sync at most 1.5x the floor at 10,000 Services, and the partial sync
under 10% of the full one.  ``python -m bench.proxy [--sizes 1000 5000 10000] [--backend
legacy] [--writers restore,libiptc]`` needs root; everything it creates lives in namespaces it
deletes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from bench.netns import run_in, temporary_netns
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, Endpoint, EndpointPort, EndpointSlice
from kube.api.meta_v1 import ObjectMeta
from node.proxy.base import Proxier

REPO = Path(__file__).resolve().parents[1]
SIZES = (1_000, 5_000, 10_000)
ENDPOINTS = 10
FULL_TARGET = 1.5
PARTIAL_TARGET = 0.10
WRITERS = ("restore", "libiptc")
LONG_SYNC_PERIOD = 3600.0
"""Longer than a run: a slow full sync must not make the partial sync after it full."""
T = TypeVar("T")


def address(first: int, n: int) -> str:
    """The ``n``-th address of 10.<first>.0.0 onwards."""
    return f"10.{first + n // 65536}.{n // 256 % 256}.{n % 256}"


def endpoint_slice(i: int, count: int) -> EndpointSlice:
    """The slice of Service ``i``: ``count`` endpoints on another node."""
    base = i * 16
    return EndpointSlice(
        metadata=ObjectMeta(
            namespace="bench", name=f"svc-{i}-1", labels={SERVICE_NAME_LABEL: f"svc-{i}"}
        ),
        address_type="IPv4",
        ports=[EndpointPort(name="http", protocol="TCP", port=8080)],
        endpoints=[
            Endpoint(addresses=[address(128, base + n)], node_name="other") for n in range(count)
        ],
    )


def workload(services: int) -> tuple[dict[str, Service], dict[str, list[EndpointSlice]]]:
    """``services`` ClusterIP Services with ``ENDPOINTS`` endpoints each, by key."""
    objects = {
        f"bench/svc-{i}": Service(
            metadata=ObjectMeta(namespace="bench", name=f"svc-{i}"),
            spec=ServiceSpec(
                type="ClusterIP",
                cluster_ip=address(96, i),
                ports=[ServicePort(name="http", protocol="TCP", port=80)],
            ),
        )
        for i in range(services)
    }
    slices = {f"bench/svc-{i}": [endpoint_slice(i, ENDPOINTS)] for i in range(services)}
    return objects, slices


async def timed_sync(proxier: Proxier) -> float:
    """Seconds of one sync, which must succeed."""
    start = time.perf_counter()
    assert await proxier.sync(), "sync failed"
    return time.perf_counter() - start


def gain_endpoint(proxier: Proxier, slices: dict[str, list[EndpointSlice]], i: int) -> None:
    """Service ``i`` gains an endpoint: the next sync is a partial one, of that Service."""
    slices[f"bench/svc-{i}"] = [endpoint_slice(i, ENDPOINTS + 1)]
    proxier.tracker.service_changed(f"bench/svc-{i}")


def start(
    proxier: Proxier, objects: dict[str, Service], slices: dict[str, list[EndpointSlice]]
) -> None:
    """Feed ``proxier`` the workload: its next sync writes every Service."""
    proxier.set_lookups(objects.get, lambda key: slices.get(key, []))
    for key in objects:
        proxier.tracker.service_changed(key)


async def timed_syncs(
    proxier: Proxier,
    objects: dict[str, Service],
    slices: dict[str, list[EndpointSlice]],
    capture: Callable[[], T],
) -> tuple[dict[str, float], list[T]]:
    """A cold full sync of the workload, a warm one, then a partial sync after one Service
    gains an endpoint: their seconds, and what ``capture`` returned after each."""
    start(proxier, objects, slices)
    cold = await timed_sync(proxier)
    captured = [capture()]
    proxier.needs_full = True
    warm = await timed_sync(proxier)
    captured.append(capture())
    gain_endpoint(proxier, slices, 7)
    partial = await timed_sync(proxier)
    captured.append(capture())
    return {"full_cold": cold, "full_warm": warm, "partial": partial}, captured


def worker(services: int, floor_netns: str, backend: str, writer: str) -> dict[str, float]:
    """Run inside the node netns: the proxier's syncs (rules written by ``writer``:
    ``restore`` or ``libiptc``) and the floor, in seconds."""
    from kube.clock import RealClock
    from node.iptables import Iptables, RestoreIptables
    from node.proxy.proxier import IptablesProxier

    objects, slices = workload(services)
    iptables: Iptables
    if writer == "libiptc":
        from node.proxy.libiptc import LibiptcIptables

        iptables = LibiptcIptables()
    else:
        iptables = RestoreIptables(backend)
    recorded: dict[str, list[str]] = {}
    restore = iptables.restore

    def recording(table: str, lines: Sequence[str]) -> None:
        recorded[table] = list(lines)
        restore(table, lines)

    iptables.restore = recording  # type: ignore[method-assign]
    proxier = IptablesProxier(
        iptables, "node", RealClock(), cluster_cidr="10.128.0.0/9", sync_period=LONG_SYNC_PERIOD
    )

    async def run() -> dict[str, float]:
        times, (text, _, partial_text) = await timed_syncs(
            proxier, objects, slices, lambda: restore_text(recorded)
        )
        floor_partial = restore_time(backend, partial_text, None)
        floor_read = restore_time(backend, "*nat\nCOMMIT\n", None)
        floor_warm = restore_time(backend, text, None)
        floor_cold = restore_time(backend, text, floor_netns)
        return {
            **times,
            "floor_cold": floor_cold,
            "floor_warm": floor_warm,
            "floor_partial": floor_partial,
            "floor_read": floor_read,
            "lines": text.count("\n"),
        }

    return asyncio.run(run())


def restore_text(tables: dict[str, list[str]]) -> str:
    """One ``iptables-restore`` input holding both tables, as the proxier restored them."""
    return "".join(f"*{t}\n" + "\n".join(tables[t]) + "\nCOMMIT\n" for t in ("filter", "nat"))


def restore_time(backend: str, text: str, netns: str | None) -> float:
    """Seconds ``iptables-<backend>-restore --noflush`` takes to apply ``text``."""
    argv = [f"iptables-{backend}-restore", "--noflush", "--wait", "5"]
    if netns is not None:
        argv = ["nsenter", f"--net=/run/netns/{netns}", *argv]
    with tempfile.TemporaryFile("w+") as rules:
        rules.write(text)
        rules.seek(0)
        start = time.perf_counter()
        subprocess.run(argv, stdin=rules, check=True)
        return time.perf_counter() - start


def in_namespaces(module: str, *args: str) -> dict[str, float]:
    """Run ``python -m module --worker args... FLOOR`` in a fresh "node" netns, FLOOR being
    a second fresh netns for the floor's cold run; its last line's JSON.  Both namespaces are
    deleted afterwards, also when the run is interrupted (:mod:`bench.netns`)."""
    with temporary_netns("kl-bpx", "kl-bpf") as (node, floor):
        argv = [sys.executable, "-m", module, "--worker", *args, floor]
        done = run_in(node, argv, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"bench worker failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(services: int, backend: str, writer: str) -> dict[str, float]:
    return in_namespaces("bench.proxy", str(services), backend, writer)


def syncs(r: dict[str, float]) -> str:
    """One size's full syncs beside their floors, and the partial sync's time."""
    return (
        f"full cold {r['full_cold'] * 1e3:.0f} ms vs floor {r['floor_cold'] * 1e3:.0f} ms "
        f"({r['full_cold'] / r['floor_cold']:.2f}x); "
        f"full warm {r['full_warm'] * 1e3:.0f} ms vs floor {r['floor_warm'] * 1e3:.0f} ms "
        f"({r['full_warm'] / r['floor_warm']:.2f}x); partial {r['partial'] * 1e3:.0f} ms"
    )


def verdicts(results: dict[int, dict[str, float]]) -> None:
    """The ratios at the largest size against the targets."""
    largest = max(results)
    r = results[largest]
    for label, ratio, target in (
        ("full (cold) / floor", r["full_cold"] / r["floor_cold"], FULL_TARGET),
        ("full (warm) / floor", r["full_warm"] / r["floor_warm"], FULL_TARGET),
        ("partial / full (warm)", r["partial"] / r["full_warm"], PARTIAL_TARGET),
    ):
        verdict = "meets" if ratio <= target else "MISSES"
        print(f"  at {largest}: {label} = {ratio:.2f} vs target {target}: {verdict}")


def add_sizes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=list(SIZES),
        help="Service counts (default: 1000 5000 10000)",
    )


def report(results: dict[int, dict[str, float]], backend: str, writer: str) -> None:
    print(
        f"kube-proxy sync, {ENDPOINTS} endpoints per Service, iptables-{backend} in a netns, "
        f"rules written by {writer}"
    )
    for size, r in results.items():
        print(
            f"  {size:>6} Services ({int(r['lines'])} restore lines): {syncs(r)} "
            f"vs floor {r['floor_partial'] * 1e3:.0f} ms (an empty nat transaction alone: "
            f"{r['floor_read'] * 1e3:.0f} ms)"
        )
    verdicts(results)


def main(argv: Sequence[str] | None = None) -> dict[str, dict[int, dict[str, float]]]:
    parser = argparse.ArgumentParser(prog="python -m bench.proxy")
    add_sizes(parser)
    parser.add_argument(
        "--backend",
        choices=("nft", "legacy"),
        default="nft",
        help="iptables backend of the node (default: nft, Debian 12's)",
    )
    parser.add_argument(
        "--writers",
        type=lambda text: text.split(","),
        default=None,
        help="how the proxier writes rules: restore and/or libiptc (legacy tables only; "
        "default: both on legacy, restore on nft)",
    )
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        services, backend, writer, floor = args.worker
        print(json.dumps(worker(int(services), floor, backend, writer)))
        return {}
    writers = args.writers or (list(WRITERS) if args.backend == "legacy" else ["restore"])
    if "libiptc" in writers and args.backend != "legacy":
        parser.error("the libiptc writer writes the legacy tables only: use --backend legacy")
    everything: dict[str, dict[int, dict[str, float]]] = {}
    for writer in writers:
        results = {size: measure(size, args.backend, writer) for size in args.sizes}
        report(results, args.backend, writer)
        everything[writer] = results
    return everything


if __name__ == "__main__":
    main()
