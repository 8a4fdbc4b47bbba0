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
  into an empty second namespace (cold) and into the loaded table (warm).

Targets (issue 23): a full sync at most 1.5x its floor, and the partial sync at most 10% of a
full one at 10,000 Services.  ``python -m bench.nftproxy [--sizes 1000,5000,10000]`` needs
root; everything it creates lives in namespaces it deletes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
import time
from collections.abc import Sequence

from bench.proxy import (
    ENDPOINTS,
    LONG_SYNC_PERIOD,
    add_sizes,
    in_namespaces,
    syncs,
    timed_syncs,
    verdicts,
)
from bench.proxy import workload as services_workload


def worker(services: int, floor_netns: str) -> dict[str, float]:
    """Run inside the node netns: the proxier's syncs and the floors, in seconds."""
    from kube.clock import RealClock
    from node.nftables import SubprocessNftables
    from node.proxy.nftproxier import NftablesProxier

    objects, slices = services_workload(services)
    scripts: list[list[str]] = []

    class Recording(SubprocessNftables):
        def run(self, lines: Sequence[str]) -> None:
            scripts.append(list(lines))
            super().run(lines)

    proxier = NftablesProxier(
        Recording(), "node", RealClock(), cluster_cidr="10.128.0.0/9", sync_period=LONG_SYNC_PERIOD
    )

    async def run() -> dict[str, float]:
        times, (cold_script, warm_script, partial_script) = await timed_syncs(
            proxier, objects, slices, lambda: scripts[-1]
        )
        return {
            **times,
            "floor_cold": nft_time(cold_script, floor_netns),
            "floor_warm": nft_time(warm_script, None),
            "lines": len(warm_script),
            "partial_lines": len(partial_script),
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


def report(results: dict[int, dict[str, float]]) -> None:
    print(f"kube-proxy nftables sync, {ENDPOINTS} endpoints per Service, nft in a netns")
    for size, r in results.items():
        print(
            f"  {size:>6} Services ({int(r['lines'])} nft lines): {syncs(r)} "
            f"({int(r['partial_lines'])} lines, {r['partial'] / r['full_warm']:.1%} of full warm)"
        )
    verdicts(results)


def main(argv: Sequence[str] | None = None) -> dict[int, dict[str, float]]:
    parser = argparse.ArgumentParser(prog="python -m bench.nftproxy")
    add_sizes(parser)
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        services, floor = args.worker
        print(json.dumps(worker(int(services), floor)))
        return {}
    results = {size: in_namespaces("bench.nftproxy", str(size)) for size in args.sizes}
    report(results)
    return results


if __name__ == "__main__":
    main()
