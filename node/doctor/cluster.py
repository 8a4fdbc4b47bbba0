"""Checks of the node as the cluster sees it: clock skew, the node's Lease, kube-proxy's syncs.

- ``clock-skew``: the node's clock against the API server's (its ``Date`` header, to the
  second): certificates' validity, Lease renewals and tokens' expiry are all read against
  another machine's clock.
- ``node-lease``: the node's Lease in kube-node-lease, renewed every quarter of its duration
  by the kubelet; the node lifecycle controller marks the Node unknown once it is older than
  the grace period, so a stale one is a kubelet that cannot reach the API server.
- ``kube-proxy-sync``: kube-proxy's ``/healthz`` (as upstream's: 200 while syncs keep
  happening, ``lastUpdated`` the time of the last successful one).
"""

from __future__ import annotations

import datetime
import json

from kube.api.struct import parse_micro_time
from node.doctor.access import HostError
from node.doctor.check import Check, Context, Finding, Status, passed

SKEW_WARN = 2.0
"""Seconds: the Date header is to the second, and the request takes some time."""
SKEW_FAIL = 30.0
LEASE_DURATION = 40
"""Seconds, the kubelet's default when the Lease does not say."""


async def _clock_skew(context: Context) -> Finding:
    server = await context.cluster.server_time()
    skew = (context.host.now() - server).total_seconds()
    side = "ahead of" if skew > 0 else "behind"
    evidence = f"this node's clock is {abs(skew):.1f}s {side} the API server's"
    if abs(skew) < SKEW_WARN:
        return passed(evidence)
    return Finding(
        Status.FAIL if abs(skew) >= SKEW_FAIL else Status.WARN,
        f"{evidence}: certificates, Leases and tokens are judged by another clock",
        "synchronise the clocks (chrony or systemd-timesyncd on every machine)",
    )


async def _node_lease(context: Context) -> Finding:
    name = context.config.node_name
    lease = await context.cluster.lease(name)
    if lease is None or lease.spec is None or not lease.spec.renew_time:
        return Finding(
            Status.FAIL,
            f"no Lease kube-node-lease/{name} (or never renewed): the kubelet has not "
            "registered or cannot reach the API server",
            "check the kubelet's log (kubelab lab logs NODE kubelet)",
        )
    duration = lease.spec.lease_duration_seconds or LEASE_DURATION
    age = (
        await context.cluster.server_time() - parse_micro_time(lease.spec.renew_time)
    ).total_seconds()
    evidence = f"kube-node-lease/{name} renewed {age:.0f}s ago (duration {duration}s)"
    if age <= duration / 2:
        return passed(evidence)
    return Finding(
        Status.FAIL if age > duration else Status.WARN,
        f"{evidence}: the kubelet renews it every {duration / 4:.0f}s",
        "check that the kubelet runs and reaches the API server (its log says why not)",
    )


async def _proxy_sync(context: Context) -> Finding:
    url = context.config.proxy_healthz
    try:
        status, body = context.host.http_get(url)
    except HostError as error:
        return Finding(
            Status.FAIL,
            f"kube-proxy does not answer: {error}",
            "start kube-proxy on this node (kubelab lab status shows it), or pass --proxy-healthz",
        )
    try:
        last = datetime.datetime.fromisoformat(json.loads(body)["lastUpdated"])
        evidence = (
            f"{url}: {status}, last sync {(context.host.now() - last).total_seconds():.1f}s ago"
        )
    except (json.JSONDecodeError, TypeError, KeyError, ValueError):
        evidence = f"{url}: {status}, no sync yet"
    if status == 200:
        return passed(evidence)
    return Finding(
        Status.FAIL,
        f"{evidence}: Services on this node follow no recent change",
        "read kube-proxy's log: a failing restore names its line",
    )


CHECKS = (
    Check("clock-skew", "the API server's Date", _clock_skew),
    Check("node-lease", "the node's Lease", _node_lease),
    Check("kube-proxy-sync", "kube-proxy's /healthz", _proxy_sync),
)
