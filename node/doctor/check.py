"""The shape of a doctor check, and running a list of them.

A :class:`Check` is a name, what it reads (shown with its result, so a reader knows where the
evidence came from) and a coroutine from a :class:`Context` to a :class:`Finding`: pass, warn
or fail, the evidence seen, the fix in words, and, when the fix is safe to apply without a
person deciding (a sysctl back to the value the node needs, chains kube-proxy itself would
delete), a ``repair`` that applies it.  Checks never raise for what they find; a read that
fails (the API server does not answer, a command is missing) is itself the finding, a fail
naming the read, so one broken thing never hides the others.

``Config`` is what a check needs to know about the node beyond what it can read: the paths
and addresses its components were started with (the kubelet's flags, containerd's
configuration, kube-proxy's health endpoint), with upstream's defaults.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from kube.client.errors import ApiError, ClientError
from node.doctor.access import Cluster, Host, HostError
from node.iptables import RulesError


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    status: Status
    evidence: str
    fix: str = ""
    repair: Callable[[], None] | None = None
    """Applies the fix; only where the fix is safe (see the module docstring)."""


def passed(evidence: str) -> Finding:
    return Finding(Status.PASS, evidence)


@dataclass(frozen=True)
class Config:
    node_name: str
    kubeconfig: Path
    cert_dir: Path = Path("/var/lib/kubelet/pki")
    cni_conf_dir: Path = Path("/etc/cni/net.d")
    cni_bin_dir: Path = Path("/opt/cni/bin")
    containerd_config: Path = Path("/etc/containerd/config.toml")
    runtime_socket: Path = Path("/run/containerd/containerd.sock")
    resolv_conf: Path = Path("/etc/resolv.conf")
    cluster_dns: tuple[str, ...] = ()
    proxy_healthz: str = "http://127.0.0.1:10256/healthz"


@dataclass(frozen=True)
class Context:
    host: Host
    cluster: Cluster
    config: Config
    api_host: str = ""
    """The API server's address, from the kubeconfig."""
    kubeconfig_certificates: tuple[tuple[str, str], ...] = ()
    """(where, PEM) of the certificates the kubeconfig holds: its CA and client certificate."""


@dataclass(frozen=True)
class Check:
    name: str
    reads: str
    run: Callable[[Context], Awaitable[Finding]]


@dataclass(frozen=True)
class Result:
    check: Check
    finding: Finding


READ_ERRORS = (HostError, RulesError, ApiError, ClientError, OSError)


async def diagnose(checks: Sequence[Check], context: Context) -> list[Result]:
    """Every check's finding, in order; a failed read is the check's fail."""

    async def one(check: Check) -> Result:
        try:
            finding = await check.run(context)
        except READ_ERRORS as error:
            finding = Finding(Status.FAIL, f"could not read {check.reads}: {error}")
        return Result(check, finding)

    return list(await asyncio.gather(*(one(c) for c in checks)))


def repair(results: Sequence[Result]) -> list[tuple[Result, str | None]]:
    """Apply the safe repairs of the findings that are not a pass; for each repair tried,
    None when it applied or the error that stopped it."""
    done: list[tuple[Result, str | None]] = []
    for result in results:
        action = result.finding.repair
        if result.finding.status is Status.PASS or action is None:
            continue
        try:
            action()
            done.append((result, None))
        except READ_ERRORS as error:
            done.append((result, str(error)))
    return done
