"""kube-proxy's nftables mode: full syncs of 1,000 / 5,000 / 10,000 Services beside ``nft -f``
of the same transaction, and a one-Service partial sync against a full one.

For each size, a fresh "node" network namespace gets a worker process (``nsenter --net``, as
the proxy runs on a node) that feeds the :class:`~node.proxy.nftproxier.NftablesProxier` that
many ClusterIP Services with ``ENDPOINTS`` endpoints each (the workload of bench/proxy.py,
in-memory lookups, no API server: only the sync is timed) and measures:

- ``full (cold)``: the first sync, into an empty namespace: render everything, list the
  table's chains and sets, run the transaction;
- ``full (warm)``: the periodic full sync, everything already in the kernel;
- ``partial``: one Service gains an endpoint, and only its chains and elements change;
- the **floor** beside the full syncs: ``nft -f`` of the identical script the proxier ran,
  into an empty second namespace (cold) and into the loaded table (warm); beside the partial
  sync, its script run again alone;
- how long the warm sync's listing of the table's chains and sets took (part of the sync:
  stale chains are found that way, as upstream does).

The warm and partial syncs run ``--rounds`` times, each followed at once by its floor (another
Service gains an endpoint each round), and their medians are printed: on a shared machine one
transaction of minutes measures the neighbours as much as the code.

Targets (issue 23): a full sync at most 1.5x its floor, and the partial sync at most 10% of a
full one at 10,000 Services.  ``python -m bench.nftproxy [--sizes 1000 5000 10000] [--rounds
3]`` needs root; everything it creates lives in namespaces it deletes, also when interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence

from bench.proxy import (
    ENDPOINTS,
    LONG_SYNC_PERIOD,
    add_sizes,
    gain_endpoint,
    in_namespaces,
    start,
    syncs,
    timed_sync,
    verdicts,
)
from bench.proxy import workload as services_workload

SAMPLED = ("full_warm", "floor_warm", "list_warm", "partial", "floor_partial")


def worker(services: int, rounds: int, floor_netns: str) -> dict[str, float]:
    """Run inside the node netns: the proxier's syncs and the floors, in seconds (the warm
    and partial ones the medians of ``rounds``)."""
    from kube.clock import RealClock
    from node.nftables import SubprocessNftables
    from node.proxy.nftproxier import NftablesProxier

    objects, slices = services_workload(services)
    scripts: list[list[str]] = []
    listing: list[float] = []

    class Recording(SubprocessNftables):
        def run(self, lines: Sequence[str]) -> None:
            scripts.append(list(lines))
            super().run(lines)

        def list_names(self, kind: str) -> list[str]:
            start = time.perf_counter()
            names = super().list_names(kind)
            listing.append(time.perf_counter() - start)
            return names

    def captured() -> tuple[list[str], float]:
        """The sync's transaction, and its seconds in ``nft list``."""
        listed = sum(listing)
        listing.clear()
        return scripts[-1], listed

    proxier = NftablesProxier(
        Recording(), "node", RealClock(), cluster_cidr="10.128.0.0/9", sync_period=LONG_SYNC_PERIOD
    )

    async def run() -> dict[str, float]:
        start(proxier, objects, slices)
        cold = await timed_sync(proxier)
        cold_script, _ = captured()
        samples: dict[str, list[float]] = {name: [] for name in SAMPLED}
        for i in range(rounds):
            proxier.needs_full = True
            samples["full_warm"].append(await timed_sync(proxier))
            warm, listed = captured()
            samples["list_warm"].append(listed)
            samples["floor_warm"].append(nft_time(warm, None))
            gain_endpoint(proxier, slices, 7 + i)
            samples["partial"].append(await timed_sync(proxier))
            partial, _ = captured()
            # Endpoints only added: no element to delete, so the script applies again.
            samples["floor_partial"].append(nft_time(partial, None))
        return {
            "full_cold": cold,
            "floor_cold": nft_time(cold_script, floor_netns),
            **{name: statistics.median(values) for name, values in samples.items()},
            "lines": len(warm),
            "partial_lines": len(partial),
        }

    return asyncio.run(run())


def nft_time(lines: Sequence[str], netns: str | None) -> float:
    """Seconds ``nft -f`` takes to apply ``lines`` (here, or in ``netns``)."""
    argv = ["nft", "-f", "-"]
    if netns is not None:
        argv = ["nsenter", f"--net=/run/netns/{netns}", *argv]
    with tempfile.TemporaryFile("w+") as script:
        script.write("\n".join(lines) + "\n")
        script.seek(0)
        start = time.perf_counter()
        subprocess.run(argv, stdin=script, check=True)
        return time.perf_counter() - start


def report(size: int, r: dict[str, float]) -> None:
    """One size's line, printed as soon as it is measured (a 10,000-Service run is long)."""
    print(
        f"  {size:>6} Services ({int(r['lines'])} nft lines): {syncs(r)} "
        f"({int(r['partial_lines'])} lines, {r['partial'] / r['full_warm']:.1%} of full warm; "
        f"its script alone {r['floor_partial'] * 1e3:.0f} ms); "
        f"the warm sync's nft list of chains and sets {r['list_warm'] * 1e3:.0f} ms",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> dict[int, dict[str, float]]:
    parser = argparse.ArgumentParser(prog="python -m bench.nftproxy")
    add_sizes(parser)
    parser.add_argument(
        "--rounds", type=int, default=3, help="warm and partial syncs per size (default: 3)"
    )
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        services, rounds, floor = args.worker
        print(json.dumps(worker(int(services), int(rounds), floor)))
        return {}
    print(f"kube-proxy nftables sync, {ENDPOINTS} endpoints per Service, nft in a netns")
    results: dict[int, dict[str, float]] = {}
    for size in args.sizes:
        results[size] = in_namespaces("bench.nftproxy", str(size), str(args.rounds))
        report(size, results[size])
    verdicts(results)
    return results


if __name__ == "__main__":
    main()
