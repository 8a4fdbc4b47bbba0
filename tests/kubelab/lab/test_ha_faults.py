"""Faults in the HA lab, each while a workload runs, each ending with the invariants.

The package's HA lab (``ha_lab``), brought up as a user does: ``kubelab lab up
--control-planes 3 --store etcd --nodes 1`` (three control planes, each an etcd member and a
``kubelab server`` whose scheduler and controllers elect leaders; the router load-balances
10.240.0.10:6443 over the servers answering ``/readyz``; one worker).

Each test creates its own namespace with the workload of ``tests.kubelab.lab.chaos``: a Deployment
of the echo server scaled between 2 and 3 replicas every second and a ConfigMap created every
second, both through the host forwarder and so through the load balancer, by a client that
never retries on its own (every answer is recorded, and it backs off after a failure);
watchers of Deployments, ReplicaSets, Pods and ConfigMaps; and ``curl`` of the Service's
ClusterIP from node1 twice a second.  Faults come from ``kubelab.lab.faults``; a component
"killed" here is sent SIGKILL and at once taken out of the process table so the supervisor
leaves it down until the test starts it again.  Every test then checks, through
``Workload.violations``: each acknowledged write is held (or superseded by a later attempted
one), no watcher saw a resourceVersion go backwards (a 410 followed by a re-list is allowed
and recorded), no pod bound twice, no failure other than 429/503/504 or no answer (never a
500), and each ReplicaSet has exactly its replicas.  The ``faults`` fixture starts whatever a
test kept down and heals any partition, then waits until every component runs, every etcd
member is healthy with one leader and the load balancer has every server back, so the next
test starts from a healthy lab.
"""

from __future__ import annotations

import asyncio
import datetime
import signal
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from kube.api.kinds.apps_v1 import Deployment
from kube.api.kinds.coordination_v1 import Lease
from kube.api.kinds.core_v1.cluster import ConfigMap, Namespace
from kube.api.kinds.core_v1.service import Endpoints
from kube.api.struct import parse_micro_time
from kube.client.errors import ApiError, ClientError
from kube.client.leaderelection import JITTER_FACTOR
from kube.client.rest import Client
from kubelab.lab import components, faults, hastatus
from kubelab.lab.cluster import probe
from kubelab.lab.images import ECHOSERVER_IMAGE, ECHOSERVER_PORT
from kubelab.lab.processes import ProcessTable
from kubelab.lab.topology import API_PORT, CONTROLPLANE_IP, Lab
from tests.kubelab.lab.chaos import Attempt, Workload, create_all, manifests, settled
from tests.kubelab.lab.labs import UP_TIMEOUT, RunningLab

HEALTHY_TIMEOUT = 120.0
FAILOVER = 5.0
"""Seconds within which a client's writes must succeed again after its API server died."""
PARTITION_RECOVERY = 30.0
"""Seconds within which writes must work again after one control plane is cut off: an API
server whose store talks to the isolated member moves on when a request there times out
(``controlplane.storage.etcd.REQUEST_TIMEOUT``, 10 s), then passes /readyz (checked every
second) after etcd's election."""
TAKEOVER_SLACK = 2 * 2.0 * (1 + JITTER_FACTOR)
"""Seconds a standby may take beyond one lease duration: it tries every retry period (2 s)
plus up to 120 % jitter, so it sees the holder's last renewal up to one such period late,
counts the lease duration from then, and takes the lease at its next try."""
pytestmark = [
    pytest.mark.lab,
    pytest.mark.long,
    pytest.mark.privileged,
    pytest.mark.containerd,
    pytest.mark.etcd,
    pytest.mark.slow,
    pytest.mark.timeout(UP_TIMEOUT + 600),
]


@pytest.fixture(name="lab")
def lab_fixture(ha_lab: RunningLab) -> Lab:
    return ha_lab.lab


# -- the lab's state --------------------------------------------------------------------------


async def members(lab: Lab) -> dict[str, hastatus.MemberStatus]:
    """Each etcd member's own view, by node name."""
    found = await asyncio.to_thread(hastatus.collect_members, lab)
    return {m.name: m for m in found}


async def etcd_leader(lab: Lab) -> hastatus.MemberStatus:
    """The member that says it leads, once exactly one does."""
    deadline = time.monotonic() + 30
    while True:
        leading = [m for m in (await members(lab)).values() if m.leader]
        if len(leading) == 1:
            return leading[0]
        assert time.monotonic() < deadline, f"no single etcd leader: {leading}"
        await asyncio.sleep(0.5)


async def caught_up(lab: Lab, node: str, within: float = 30.0) -> float:
    """Wait until ``node``'s member has applied the leader's raft index as of now; seconds."""
    started = time.monotonic()
    target = (await etcd_leader(lab)).raft_index or 0
    while True:
        member = (await members(lab))[node]
        if member.healthy and (member.raft_index or 0) >= target:
            return time.monotonic() - started
        assert time.monotonic() - started < within, f"{node} never caught up: {member}"
        await asyncio.sleep(0.5)


async def lab_problems(lab: Lab) -> list[str]:
    """What is not healthy: dead components, etcd members, API servers out of the load
    balancer or missing from the ``kubernetes`` Service's endpoints (a restarted server
    adds itself back on its next lease reconcile)."""
    problems = []
    table = ProcessTable(lab.process_file)
    wanted = components.lab_components(lab)
    for component in wanted:
        record = table.get(component.key)
        if record is None or not record.alive():
            problems.append(f"{component.key} not running")
    found = (await members(lab)).values()
    problems += [f"etcd {m.name}: {m.error or 'unhealthy'}" for m in found if not m.healthy]
    if sum(m.leader for m in found) != 1:
        problems.append(f"etcd leaders: {[m.name for m in found if m.leader]}")
    backends = hastatus.read_backends(lab) or ()
    problems += [f"load balancer: {b.address} out" for b in backends if not b.healthy]
    for cp in lab.controlplanes:
        health = components.server(lab, cp).health
        assert health is not None
        ok, answer = await probe(health)
        if not ok:
            problems.append(f"{cp.name} server /readyz: {answer}")
    advertised = await kubernetes_endpoints(lab)
    problems += [
        f"kubernetes endpoints: {cp.ip} missing"
        for cp in lab.controlplanes
        if cp.ip not in advertised
    ]
    return problems


async def kubernetes_endpoints(lab: Lab) -> set[str]:
    """The addresses the ``kubernetes`` Service leads to (empty while the API is away)."""
    async with Client.from_kubeconfig(lab.host_kubeconfig, max_retries=0) as client:
        try:
            endpoints = await client.get(Endpoints, "kubernetes", "default")
        except (ApiError, ClientError):
            return set()
    return {a.ip for subset in endpoints.subsets or () for a in subset.addresses or () if a.ip}


@dataclass
class Faults:
    """The faults one test makes, undone (and the lab waited healthy) by ``restore``."""

    lab: Lab
    down: list[tuple[str, str]] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)

    def kill(self, node: str, component: str) -> float:
        """SIGKILL the component and keep it down (out of the supervisor's table); when."""
        faults.kill(self.lab, node, component, signal.SIGKILL)
        killed = time.monotonic()
        faults.stop(self.lab, node, component)
        self.down.append((node, component))
        return killed

    def start(self, node: str, component: str) -> None:
        faults.start(self.lab, node, component)
        self.down.remove((node, component))

    def partition(self, node: str) -> float:
        faults.partition(self.lab, node)
        self.cut.append(node)
        return time.monotonic()

    def heal(self, node: str) -> None:
        faults.heal(self.lab, node)
        self.cut.remove(node)

    async def restore(self) -> None:
        for node in list(self.cut):
            self.heal(node)
        for node, component in list(self.down):
            self.start(node, component)
        problems = await settled(lambda: lab_problems(self.lab), HEALTHY_TIMEOUT)
        assert problems == [], f"the lab did not come back healthy: {problems}"


@pytest.fixture(name="faults")
async def faults_fixture(lab: Lab) -> AsyncIterator[Faults]:
    made = Faults(lab)
    problems = await settled(lambda: lab_problems(lab), HEALTHY_TIMEOUT)
    assert problems == [], f"the lab is not healthy before the test: {problems}"
    try:
        yield made
    finally:
        await made.restore()


# -- the workload -----------------------------------------------------------------------------


@dataclass
class Work:
    client: Client
    workload: Workload
    namespace: str


@pytest.fixture(name="work")
async def work_fixture(lab: Lab) -> AsyncIterator[Work]:
    """The workload in a namespace of its own, its Deployment ready and its Service
    answering from node1; the client goes through the host forwarder, so the load
    balancer."""
    namespace = f"chaos-{uuid.uuid4().hex[:6]}"
    async with Client.from_kubeconfig(
        lab.host_kubeconfig, user_agent="chaos", max_retries=0
    ) as client:
        made = await create_all(
            client, manifests(namespace, "web", ECHOSERVER_IMAGE, ECHOSERVER_PORT)
        )
        cluster_ip = made[-1]["spec"]["clusterIP"]
        node1 = lab.node("node1")
        curl = [
            *("nsenter", f"--net={node1.netns_path}", "--"),
            *("curl", "-sf", "-m", "2", "-o", "/dev/null", "-w", "%{http_code}"),
            f"http://{cluster_ip}/",
        ]
        workload = Workload.standard(client, namespace, "web", probe=curl)

        async def not_serving() -> list[str]:
            deployment = await client.get(Deployment, "web", namespace)
            ready = deployment.status.ready_replicas if deployment.status else None
            answer = await workload.probers[0].probe_once()
            return [] if ready == 2 and answer.ok else [f"ready {ready}, curl {answer.detail}"]

        assert await settled(not_serving, 120) == []
        try:
            yield Work(client, workload, namespace)
        finally:
            try:
                await client.delete(Namespace, namespace)
            except (ApiError, ClientError) as error:
                print(f"namespace {namespace} not deleted: {error}")


async def check_invariants(work: Work) -> None:
    print(work.workload.summary())
    assert await work.workload.violations(settle=90) == []
    prober = work.workload.probers[0]

    async def not_answering() -> list[str]:
        answer = await prober.probe_once()
        return [] if answer.ok else [f"curl of the Service from node1: {answer.detail}"]

    assert await settled(not_answering, 30) == []


def acked_between(attempts: list[Attempt], start: float, end: float) -> list[Attempt]:
    """Acknowledged writes that started in [start, end)."""
    return [a for a in attempts if a.acknowledged and start <= a.started < end]


# -- the faults -------------------------------------------------------------------------------


async def test_one_etcd_member_killed_writes_continue_and_it_catches_up(
    lab: Lab, faults: Faults, work: Work
) -> None:
    async with work.workload.running():
        await asyncio.sleep(3)
        victim = (await etcd_leader(lab)).name  # the leader: the others must elect another
        killed = faults.kill(victim, "etcd")
        await asyncio.sleep(15)
        # Writes went on with one member down: a write in flight at the kill may wait for
        # etcd's request timeout (its leader was gone), the next ones go through.
        for writer in work.workload.writers:
            done = acked_between(writer.attempts, killed + 3, time.monotonic())
            after = [a for a in writer.attempts if a.started >= killed - 1]
            assert len(done) >= 5, f"{writer.operation.key(0)}: while down {after}"
            print(f"{writer.operation.key(0)}: {len(done)} writes in the 12 s after the kill")
        faults.start(victim, "etcd")
        took = await caught_up(lab, victim)
        print(f"etcd member {victim} caught up {took:.1f}s after its restart")
        await asyncio.sleep(3)
    await check_invariants(work)


async def test_two_etcd_members_killed_writes_fail_cleanly_and_nothing_acknowledged_is_lost(
    lab: Lab, faults: Faults, work: Work
) -> None:
    first, second, third = (cp.name for cp in lab.controlplanes)
    async with work.workload.running():
        await asyncio.sleep(3)
        faults.kill(second, "etcd")
        lost_quorum = faults.kill(third, "etcd")
        await asyncio.sleep(12)
        # Reads say what they can.  A consistent read fails: an API server answers 503 naming
        # the storage (after etcd's request timeout), never a 500; the load balancer, with no
        # server passing /readyz, still hands connections to them.  A read at
        # resourceVersion=0 answers from the server's watch cache, as upstream's does.
        with pytest.raises(ApiError) as refused:
            await work.client.list(ConfigMap, work.namespace)
        print(f"a consistent read without quorum: {refused.value!r}")
        assert refused.value.code == 503, refused.value
        assert "storage is unavailable" in refused.value.message, refused.value
        cached = await work.client.list(ConfigMap, work.namespace, resource_version="0")
        print(f"a resourceVersion=0 read without quorum: {len(cached.items)} ConfigMaps")
        assert cached.items, "the watch cache answered no ConfigMaps"
        outage_end = time.monotonic()
        for writer in work.workload.writers:
            # No quorum: nothing can be acknowledged, every failure is a clean one.
            assert acked_between(writer.attempts, lost_quorum + 0.5, outage_end) == []
            during = [a for a in writer.failures() if a.started >= lost_quorum]
            assert during, f"{writer.operation.key(0)}: no write attempted during the outage"
            print(
                f"{writer.operation.key(0)}: {len(during)} failed writes in "
                f"{outage_end - lost_quorum:.0f}s: {sorted({a.status or 0 for a in during})}"
            )
        faults.start(second, "etcd")
        back = time.monotonic()
        await asyncio.sleep(15)
        for writer in work.workload.writers:
            assert acked_between(writer.attempts, back, time.monotonic()), (
                f"{writer.operation.key(0)}: no write succeeded once a second member was back"
            )
        faults.start(third, "etcd")
        await caught_up(lab, third)
        await asyncio.sleep(2)
    print(f"the surviving member was {first}")
    await check_invariants(work)


async def test_the_api_server_a_client_uses_killed_it_fails_over_within_seconds(
    lab: Lab, faults: Faults, work: Work
) -> None:
    async with work.workload.running():
        await asyncio.sleep(4)  # the workload's connections are open
        victim = server_relaying_the_host(lab)
        killed = faults.kill(victim, "server")
        await asyncio.sleep(10)
    # The balancer relayed the client's connections to it (``server_relaying_the_host``);
    # those idle at the kill break unseen, so how many requests failed is only reported.
    broken = [f for f in work.workload.failures() if f.at >= killed]
    print(f"{len(broken)} of the client's requests or watches broke at the kill of {victim}")
    for writer in work.workload.writers:
        after = acked_between(writer.attempts, killed, killed + 60)
        assert after, f"{writer.operation.key(0)}: no write succeeded after the kill"
        failover = after[0].ended - killed
        print(f"{writer.operation.key(0)}: first write acknowledged {failover:.2f}s after the kill")
        assert failover < FAILOVER
    # Watches of what the client itself writes resumed.  (ReplicaSets and Pods may stay
    # quiet: the killed server may have been running the leading controller-manager.)
    for watcher in work.workload.watchers:
        if watcher.cls in (Deployment, ConfigMap):
            assert watcher.seen[-1].at > killed + 2, f"watcher {watcher.name} saw nothing after"
    await check_invariants(work)


def server_relaying_the_host(lab: Lab) -> str:
    """The control plane whose API server the balancer relays the most connections from the
    host to: the host forwarder connects from the balancer's own address, every node from
    its own, so during a test these are the test client's."""
    from_host = f"{CONTROLPLANE_IP}:"
    relaying = {
        b.address: sum(c.startswith(from_host) for c in b.clients)
        for b in hastatus.read_backends(lab) or ()
    }
    address, count = max(relaying.items(), key=lambda item: item[1], default=("", 0))
    assert count, f"the balancer relays no connection from the host: {relaying}"
    return next(cp.name for cp in lab.controlplanes if address == f"{cp.ip}:{API_PORT}")


async def lease_holders(client: Client) -> dict[str, Lease]:
    """The control-plane Leases by name (read with retries: a server may be down)."""
    found: dict[str, Lease] = {}
    for name in hastatus.LEASES:
        deadline = time.monotonic() + 30
        while name not in found:
            try:
                found[name] = await client.get(Lease, name, "kube-system")
            except (ApiError, ClientError):
                assert time.monotonic() < deadline, f"lease {name} unreadable"
                await asyncio.sleep(0.5)
    return found


def lease_duration(lease: Lease) -> float:
    return float((lease.spec.lease_duration_seconds if lease.spec else None) or 15)


def renewed_after(lease: Lease, before: Lease) -> bool:
    """``lease`` was renewed (by anyone) since ``before`` was read."""

    def renew_time(lease: Lease) -> datetime.datetime | None:
        stamp = lease.spec.renew_time if lease.spec else None
        return parse_micro_time(stamp) if stamp else None

    now, was = renew_time(lease), renew_time(before)
    return now is not None and (was is None or now > was)


async def test_the_leading_scheduler_and_controller_manager_killed_standbys_take_over(
    lab: Lab, faults: Faults, work: Work
) -> None:
    leaders = ("kube-scheduler", "kube-controller-manager")
    async with work.workload.running():
        await asyncio.sleep(3)
        before = await lease_holders(work.client)
        victims = {hastatus.holder(lab, before[name]).node or "" for name in leaders}
        assert "" not in victims, f"lease holders on no node: {before}"
        killed = min(faults.kill(node, "server") for node in sorted(victims))
        for node in victims:
            await leases_leave(lab, work.client, node, before, killed)
        await asyncio.sleep(10)  # the new leaders at work on the scaling
    await check_invariants(work)


async def writes_resumed(work: Work, since: float, *, within: float, lab: Lab) -> float:
    """Seconds after ``since`` until every writer had a write that started then acknowledged."""
    while True:
        now = time.monotonic()
        waiting = [w for w in work.workload.writers if not acked_between(w.attempts, since, now)]
        if not waiting:
            return (
                max(acked_between(w.attempts, since, now)[0].ended for w in work.workload.writers)
                - since
            )
        assert now - since < within, (
            f"no write acknowledged in {within:.0f}s: load balancer "
            f"{hastatus.read_backends(lab)}; last attempts {waiting[0].attempts[-3:]}"
        )
        await asyncio.sleep(0.5)


async def leases_leave(
    lab: Lab, client: Client, node: str, before: dict[str, Lease], since: float
) -> None:
    """Wait until no Lease that ``node`` held at ``before`` is held by it any more; a
    standby takes each within one lease duration (and ``TAKEOVER_SLACK``) of ``since``."""
    held = [name for name, lease in before.items() if hastatus.holder(lab, lease).node == node]
    print(f"{node} held {held or 'no lease'}")
    while held:
        now = await lease_holders(client)
        for name in list(held):
            if hastatus.holder(lab, now[name]).node not in (node, None):
                took = time.monotonic() - since
                print(f"{name}: {hastatus.holder(lab, now[name]).node} took over in {took:.1f}s")
                assert took <= lease_duration(before[name]) + TAKEOVER_SLACK, name
                held.remove(name)
        assert time.monotonic() - since < 60, f"{node} still holds {held}"
        await asyncio.sleep(0.5)


async def leases_renewed(lab: Lab, client: Client, before: dict[str, Lease], since: float) -> None:
    """Wait until every Lease was renewed after ``before``; within one lease duration (and
    ``TAKEOVER_SLACK``) of ``since``."""
    while True:
        now = await lease_holders(client)
        stale = [name for name in now if not renewed_after(now[name], before[name])]
        if not stale:
            break
        waited = time.monotonic() - since
        assert waited <= max(map(lease_duration, now.values())) + TAKEOVER_SLACK, (
            f"not renewed {waited:.0f}s after the API came back: {stale}"
        )
        await asyncio.sleep(0.5)
    print(f"every Lease renewed {time.monotonic() - since:.1f}s after the API came back")
    for name, lease in now.items():
        print(f"{name}: held by {hastatus.holder(lab, lease).node}")


async def test_a_partitioned_control_plane_stops_leading_and_no_split_brain_after_healing(
    lab: Lab, faults: Faults, work: Work
) -> None:
    async with work.workload.running():
        await asyncio.sleep(3)
        isolated = (await etcd_leader(lab)).name
        before = await lease_holders(work.client)
        cut = faults.partition(isolated)
        # The majority elects another leader; the isolated member stops leading (etcd's
        # check-quorum steps a leader down once it hears no quorum for an election timeout).
        while True:
            seen = await members(lab)
            leaders = [m.name for m in seen.values() if m.leader]
            if leaders and isolated not in leaders:
                break
            assert time.monotonic() - cut < 15, f"leaders still {leaders} after the partition"
            await asyncio.sleep(0.5)
        print(f"{isolated} cut off; {leaders} leads after {time.monotonic() - cut:.1f}s")
        # Writes resume through the load balancer once the servers' stores have left the
        # isolated member (a request to it times out) and /readyz lets them back in.
        took = await writes_resumed(work, cut, within=PARTITION_RECOVERY, lab=lab)
        print(f"writes acknowledged again {took:.1f}s after the partition")
        # The isolated server's components talk to their own API server, which cannot reach
        # a quorum: a Lease they held goes to a standby across the partition.  The standbys
        # read the Lease through the majority's servers, which answer again only now, and
        # count the lease duration from when they see its last renewal.
        await leases_leave(lab, work.client, isolated, before, cut + took)
        # Every Lease is renewed again, in the majority's store: one leader per component
        # (a leader whose renewals failed while the API was away lost its lease at its renew
        # deadline, and a standby takes it once it has expired).
        await leases_renewed(lab, work.client, before, cut + took)
        faults.heal(isolated)
        took = await caught_up(lab, isolated)
        print(f"{isolated} caught up {took:.1f}s after healing")
        await asyncio.sleep(3)
    await check_invariants(work)
