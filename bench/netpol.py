"""NetworkPolicy agent: from a policy created to its table in the kernel, beside the ``nft -f``
floor of the same table.

One node's view of a cluster of ``--pods`` pods (half of them on the node, in ten namespaces
of three apps each, every pod with a named port) and ``--policies`` policies of every shape
the compiler handles (default deny, pods by label, namespaces by label, both, an ipBlock with
except, named and numeric ports, egress).  In a fresh network namespace (deleted afterwards)
it measures, median of ``--rounds``:

- ``compile``: :func:`~node.netpol.compiler.compile_ruleset` and the script's rendering;
- ``apply``: :class:`~node.nftables.SubprocessNftables` replacing the loaded table;
- ``policy → enforced``: one more policy, compiled and applied (what the agent does after an
  informer event, less the event's own delivery);
- the floor: ``nft -f`` of the identical script, the least any writer of that table pays.

``python -m bench.netpol [--pods 1000] [--policies 100] [--rounds 5]`` needs root.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence

from bench.netns import path, temporary_netns
from kube.api.codec import from_builtins
from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.pod import (
    Container,
    ContainerPort,
    Pod,
    PodIP,
    PodSpec,
    PodStatus,
)
from kube.api.kinds.networking_v1 import NetworkPolicy
from kube.api.meta_v1 import ObjectMeta
from kube.api.walk import set_defaults
from node.netpol.compiler import FAMILY, TABLE, compile_ruleset
from node.nftables import SubprocessNftables

NODE = "node1"
NAMESPACES = 10
APPS = ("web", "api", "db")


def pods(count: int) -> list[Pod]:
    """``count`` running pods, every other one on ``NODE``."""
    return [
        Pod(
            metadata=ObjectMeta(
                name=f"p{i}", namespace=f"ns{i % NAMESPACES}", labels={"app": APPS[i % 3]}
            ),
            spec=PodSpec(
                node_name=NODE if i % 2 == 0 else "node2",
                containers=[
                    Container(
                        name="c",
                        image="busybox",
                        ports=[ContainerPort(name="http", container_port=8000 + i % 7)],
                    )
                ],
            ),
            status=PodStatus(
                phase="Running",
                pod_ip=f"10.244.{i // 250}.{i % 250 + 2}",
                pod_ips=[PodIP(ip=f"10.244.{i // 250}.{i % 250 + 2}")],
            ),
        )
        for i in range(count)
    ]


def namespaces() -> list[Namespace]:
    return [
        Namespace(metadata=ObjectMeta(name=f"ns{i}", labels={"team": f"t{i % 3}"}))
        for i in range(NAMESPACES)
    ]


def policy(i: int) -> NetworkPolicy:
    """The ``i``-th policy: one of five shapes, in turn."""
    shapes: list[dict[str, object]] = [
        {"podSelector": {}},
        {
            "podSelector": {"matchLabels": {"app": APPS[i % 3]}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}]}],
        },
        {
            "podSelector": {},
            "ingress": [
                {
                    "from": [{"namespaceSelector": {"matchLabels": {"team": "t1"}}}],
                    "ports": [{"port": "http"}, {"port": 80, "endPort": 90}],
                }
            ],
        },
        {
            "podSelector": {"matchLabels": {"app": "db"}},
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {},
                            "podSelector": {"matchLabels": {"app": "api"}},
                        },
                        {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.244.0.0/16"]}},
                    ]
                }
            ],
        },
        {
            "podSelector": {"matchLabels": {"app": "api"}},
            "policyTypes": ["Egress"],
            "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}, {"to": [{"podSelector": {}}]}],
        },
    ]
    raw = {"metadata": {"name": f"pol{i}", "namespace": f"ns{i % NAMESPACES}"}}
    decoded = from_builtins({**raw, "spec": shapes[i % len(shapes)]}, NetworkPolicy).obj
    set_defaults(decoded)
    return decoded


def median(work: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.netpol", description=__doc__)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--policies", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    cluster, labels = pods(args.pods), namespaces()
    policies = [policy(i) for i in range(args.policies)]
    with temporary_netns("klnp-bench") as (name,):
        netns = path(name)
        nft = SubprocessNftables(FAMILY, TABLE, netns=netns)
        ruleset = compile_ruleset(NODE, cluster, labels, policies)
        commands = ruleset.commands()
        script = "\n".join(commands) + "\n"
        nft.run(commands)
        with tempfile.NamedTemporaryFile("w", suffix=".nft") as file:
            file.write(script)
            file.flush()
            floor = median(
                lambda: subprocess.run(
                    ["nsenter", f"--net={netns}", "nft", "-f", file.name], check=True
                ),
                args.rounds,
            )
        compile_time = median(
            lambda: compile_ruleset(NODE, cluster, labels, policies).commands(), args.rounds
        )
        apply_time = median(lambda: nft.run(commands), args.rounds)
        more = [*policies, policy(args.policies)]
        enforced = median(
            lambda: nft.run(compile_ruleset(NODE, cluster, labels, more).commands()), args.rounds
        )
    lines = len(commands)
    print(
        f"netpol: {args.pods} pods ({args.pods // 2} local), {args.policies} policies, "
        f"{len(ruleset.sets)} sets, {len(ruleset.chains)} chains, {lines} script lines"
    )
    print(f"  compile              {compile_time * 1000:8.1f} ms")
    print(f"  apply                {apply_time * 1000:8.1f} ms   floor (nft -f) "
          f"{floor * 1000:8.1f} ms")  # fmt: skip
    print(f"  policy → enforced    {enforced * 1000:8.1f} ms   {enforced / floor:.2f}x the floor")


if __name__ == "__main__":
    main()
