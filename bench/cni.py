"""Pod network ADD/DEL latency: kubelab-cni through its agent, in-process, and the reference.

Three networks, each in its own "node" network namespace with its own bin and data
directories, driven exactly as containerd drives them (:class:`CniLab`): the rendered
``.conflist``'s plugins run as executables from the bin dir in order with ``prevResult`` chained
on ADD and in reverse with the cached result on DEL, the ``CNI_*`` environment set, the config
on stdin, the process in the node netns (``nsenter --net``, as containerd lives there):

- ``kubelab``: the ``kubelab-cni`` shim answered by :mod:`node.cni.agent`, itself started in
  the node netns (the fast path);
- ``kubelab-inprocess``: the same shim with no agent listening, so it falls back to running
  the plugin in its own process (pyroute2 imported on every call);
- ``reference``: ``bridge`` + ``host-local`` then ``portmap`` from /usr/lib/cni.

Each network sets up ``PODS`` pods (one pod netns each, one hostPort each, as a pod with a
hostPort would ask), then tears them down; a warm-up pod comes first so the bridge exists, as on
a node that runs pods.  Printed: ADD and DEL p50/p99 per network and the ratio to the reference.
Target: kubelab (agent) ADD p50 within 1.5x the reference's.  ``nsenter`` itself is in every
number alike; its own cost (``nsenter ... true``) is printed beside them.

``python -m bench.cni [--pods N]`` needs root; everything it creates lives in namespaces and a
temporary directory it removes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from node.cni.netconf import install_plugins, render_netconf

REPO = Path(__file__).resolve().parents[1]
PODS = 50
POD_CIDR = "10.251.0.0/24"
CLUSTER_CIDR = "10.251.0.0/16"
Flavour = Literal["kubelab", "kubelab-inprocess", "reference"]
FLAVOURS: tuple[Flavour, ...] = ("kubelab", "kubelab-inprocess", "reference")
TARGET = 1.5
AGENT_START_TIMEOUT = 20.0


class CniError(Exception):
    """A plugin exited non-zero: the command, its stdout and stderr."""


def netns_path(name: str) -> str:
    return f"/run/netns/{name}"


def in_netns(netns: str, *argv: str) -> list[str]:
    """``argv`` run inside the named netns (nsenter: no /sys remount, unlike ``ip netns exec``)."""
    return ["nsenter", f"--net={netns_path(netns)}", "--", *argv]


class CniLab:
    """A node netns with one CNI network installed, and the pod namespaces it wires.

    Use as a context manager: leaving it stops the agent (by PID), deletes every namespace it
    made (which takes the bridge, veths and NAT rules of the node netns with them) and its
    directory.
    """

    def __init__(
        self,
        flavour: Flavour,
        pod_cidr: str = POD_CIDR,
        cluster_cidr: str = CLUSTER_CIDR,
        mtu: int = 1500,
    ) -> None:
        self.flavour: Flavour = flavour
        self.prefix = f"kcni-{uuid.uuid4().hex[:6]}"
        self.node = f"{self.prefix}-node"
        self.root = Path(tempfile.mkdtemp(prefix="kubelab-cni-"))
        self.bin_dir = self.root / "bin"
        self.data_dir = self.root / "data"
        self.agent_socket = self.root / "agent.sock"
        self.agent_log = self.root / "agent.log"
        self.conflist = render_netconf(
            pod_cidr,
            plugin="reference" if flavour == "reference" else "kubelab",
            cluster_cidr=cluster_cidr,
            data_dir=self.data_dir,
            mtu=mtu,
            agent_socket=self.agent_socket,
        )
        self.pods: dict[str, str] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.agent: subprocess.Popen[bytes] | None = None
        self._namespaces: list[str] = []

    def __enter__(self) -> CniLab:
        try:
            install_plugins(self.bin_dir)
            self._add_netns(self.node)
            self.run_in(self.node, "ip", "link", "set", "lo", "up")
            if self.flavour == "kubelab":
                self.start_agent()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.stop_agent()
        for name in reversed(self._namespaces):
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)
        self._namespaces.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def start_agent(self) -> None:
        """``python -m node.cni.agent`` in the node netns; returns once it accepts calls."""
        with self.agent_log.open("wb") as log:
            self.agent = subprocess.Popen(
                in_netns(self.node, sys.executable, "-m", "node.cni.agent", str(self.agent_socket)),
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + AGENT_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.agent.poll() is not None:
                raise RuntimeError(f"CNI agent exited with {self.agent.returncode}")
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(str(self.agent_socket))
                    return
                except OSError:
                    time.sleep(0.05)
        raise RuntimeError(f"CNI agent not listening on {self.agent_socket}")

    def stop_agent(self) -> None:
        if self.agent is None:
            return
        self.agent.send_signal(signal.SIGTERM)
        try:
            self.agent.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.agent.kill()
            self.agent.wait()
        self.agent = None

    def add_pod(self, pod: str) -> str:
        """A new pod netns (loopback up); its name."""
        name = f"{self.prefix}-{pod}"
        self._add_netns(name)
        self.run_in(name, "ip", "link", "set", "lo", "up")
        self.pods[pod] = name
        return name

    def delete_pod_netns(self, pod: str) -> None:
        name = self.pods[pod]
        subprocess.run(["ip", "netns", "del", name], check=True)
        self._namespaces.remove(name)

    def cni(
        self,
        command: Literal["ADD", "DEL"],
        pod: str,
        *,
        netns: str | None = None,
        port_mappings: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any] | None:
        """One ADD or DEL of ``pod`` through the conflist, as containerd's libcni does it."""
        env = {
            "PATH": os.environ["PATH"],
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": f"cid-{pod}",
            "CNI_NETNS": netns_path(self.pods[pod]) if netns is None else netns,
            "CNI_IFNAME": "eth0",
            "CNI_PATH": str(self.bin_dir),
        }
        plugins = self.conflist["plugins"]
        result = self.results.get(pod) if command == "DEL" else None
        for plugin in plugins if command == "ADD" else reversed(plugins):
            config = {
                **plugin,
                "cniVersion": self.conflist["cniVersion"],
                "name": self.conflist["name"],
            }
            if port_mappings and plugin.get("capabilities", {}).get("portMappings"):
                config["runtimeConfig"] = {"portMappings": list(port_mappings)}
            if result is not None:
                config["prevResult"] = result
            out = self._exec(plugin["type"], env, config)
            if self.agent is not None and self.agent.poll() is not None:
                raise RuntimeError(f"CNI agent exited with {self.agent.returncode}")
            if command == "ADD":
                result = out
        if command == "ADD":
            assert result is not None
            self.results[pod] = result
            return result
        self.results.pop(pod, None)
        return None

    def allocated(self) -> list[str]:
        """Every address either IPAM holds under the data dir."""
        return sorted(
            path.name
            for path in self.data_dir.rglob("*")
            if path.name.count(".") == 3 and path.name.replace(".", "").isdigit()
        )

    def run_in(self, netns: str, *argv: str, timeout: float = 30) -> str:
        done = subprocess.run(
            in_netns(netns, *argv), capture_output=True, text=True, check=False, timeout=timeout
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} in {netns}: {done.stdout}{done.stderr}")
        return done.stdout

    def _exec(self, plugin: str, env: dict[str, str], config: dict[str, Any]) -> Any:
        done = subprocess.run(
            in_netns(self.node, str(self.bin_dir / plugin)),
            input=json.dumps(config).encode(),
            env=env,
            capture_output=True,
            check=False,
            timeout=60,
        )
        if done.returncode != 0:
            raise CniError(
                f"{plugin} {env['CNI_COMMAND']} exited {done.returncode}: "
                f"{done.stdout.decode()} {done.stderr.decode()}"
            )
        return json.loads(done.stdout) if done.stdout.strip() else None

    def _add_netns(self, name: str) -> None:
        subprocess.run(["ip", "netns", "add", name], check=True)
        self._namespaces.append(name)


def timed(call: Any) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def pct(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, nearest rank."""
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[rank]


def measure(flavour: Flavour, pods: int) -> dict[str, list[float]]:
    """ADD then DEL latencies (seconds) of ``pods`` pods with a hostPort each."""
    with CniLab(flavour) as lab:
        lab.add_pod("warmup")
        lab.cni("ADD", "warmup")
        names = [f"p{i}" for i in range(pods)]
        for name in names:
            lab.add_pod(name)
        ports = {
            name: [{"hostPort": 20000 + i, "containerPort": 80, "protocol": "tcp"}]
            for i, name in enumerate(names)
        }
        adds = [timed(lambda n=n: lab.cni("ADD", n, port_mappings=ports[n])) for n in names]
        dels = [timed(lambda n=n: lab.cni("DEL", n, port_mappings=ports[n])) for n in names]
        lab.cni("DEL", "warmup")
        leaked = lab.allocated()
        if leaked:
            raise RuntimeError(f"{flavour}: addresses left allocated: {leaked}")
        nsenter = [timed(lambda: lab.run_in(lab.node, "true")) for _ in range(20)]
    return {"ADD": adds, "DEL": dels, "nsenter": nsenter}


def report(results: dict[Flavour, dict[str, list[float]]], pods: int) -> None:
    reference = results["reference"]
    print(f"\ncni: {pods} pods per network, one hostPort each, ADD then DEL (ms)")
    print(
        f"  {'network':<20}{'ADD p50':>9}{'ADD p99':>9}{'DEL p50':>9}{'DEL p99':>9}  ratio ADD/DEL"
    )
    for flavour, times in results.items():
        add50, del50 = statistics.median(times["ADD"]), statistics.median(times["DEL"])
        ratio_add = add50 / statistics.median(reference["ADD"])
        ratio_del = del50 / statistics.median(reference["DEL"])
        print(
            f"  {flavour:<20}{add50 * 1000:>9.1f}{pct(times['ADD'], 99) * 1000:>9.1f}"
            f"{del50 * 1000:>9.1f}{pct(times['DEL'], 99) * 1000:>9.1f}"
            f"  {ratio_add:.2f}x / {ratio_del:.2f}x"
        )
    ratio = statistics.median(results["kubelab"]["ADD"]) / statistics.median(reference["ADD"])
    verdict = "meets" if ratio <= TARGET else "MISSES"
    nsenter = statistics.median(reference["nsenter"]) * 1000
    print(f"  kubelab (agent) ADD p50 / reference: {ratio:.2f}x (target <= {TARGET}x: {verdict})")
    print(f"  nsenter alone, in every number above: {nsenter:.1f} ms per plugin executable")


def main(argv: Sequence[str] | None = None) -> dict[Flavour, dict[str, list[float]]]:
    parser = argparse.ArgumentParser(prog="python -m bench.cni", description=__doc__)
    parser.add_argument("--pods", type=int, default=PODS, help="pods per network")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("cni: needs root (network namespaces); skipped")
        return {}
    results = {flavour: measure(flavour, args.pods) for flavour in FLAVOURS}
    report(results, args.pods)
    return results


if __name__ == "__main__":
    main()
