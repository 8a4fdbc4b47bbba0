"""The agent's loop over the in-memory API and the fake nftables: it applies the table at
start, reapplies it when a pod or namespace label changes (well within a second), leaves it
alone when nothing changed, survives a refused script and an unreadable policy."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.pod import Pod
from kube.client.informers import SharedInformerFactory
from kube.clock import RealClock
from node.netpol.agent import NetworkPolicyAgent
from node.netpol.compiler import FAMILY, TABLE
from node.nftables import FakeNftables
from tests.fakeapi import FakeApi
from tests.node.netpol.cluster import namespace, pod, policy

ALLOW_FROM_BLUE = """
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-blue, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {team: blue}}, podSelector: {}}]}]
"""


@dataclass
class Env:
    api: FakeApi
    nft: FakeNftables
    agent: NetworkPolicyAgent

    async def until(self, condition: Callable[[], bool], within: float = 1.0) -> float:
        """Seconds until ``condition`` held (fails after ``within``)."""
        start = asyncio.get_running_loop().time()
        while not condition():
            assert asyncio.get_running_loop().time() - start < within, "not within time"
            await asyncio.sleep(0.01)
        return asyncio.get_running_loop().time() - start


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    api = FakeApi()
    for obj in (namespace("x"), namespace("y")):
        await api.create(obj)
    await api.create(pod("x", "a", "10.244.1.2"))
    await api.create(pod("y", "b", "10.244.2.2", node="node2"))
    await api.create(policy(ALLOW_FROM_BLUE))
    nft = FakeNftables(FAMILY, TABLE)
    agent = NetworkPolicyAgent(nft, "node1", RealClock(), min_sync_period=0.05)
    informers = SharedInformerFactory(api)
    agent.bind(informers)
    informers.start()
    await informers.wait_for_cache_sync()
    task = asyncio.create_task(agent.run())
    try:
        yield Env(api, nft, agent)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await informers.shutdown()


def peer_set(nft: FakeNftables) -> list[str]:
    return list(nft.current.sets["ingress/x/allow-blue/0"])


def isolated(nft: FakeNftables) -> list[str]:
    return list(nft.current.sets["ingress-isolated"])


async def test_a_namespace_relabelled_is_enforced_within_a_second(env: Env) -> None:
    await env.until(lambda: env.agent.syncs >= 1)
    assert not any("10.244.2.2" in line for line in peer_set(env.nft))
    y = await env.api.get(Namespace, "y")
    assert y.metadata.labels is not None
    y.metadata.labels["team"] = "blue"
    await env.api.update(y)
    await env.until(lambda: any("10.244.2.2" in line for line in peer_set(env.nft)))


async def test_a_pod_relabelled_is_enforced_within_a_second(env: Env) -> None:
    await env.until(lambda: env.agent.syncs >= 1)
    assert isolated(env.nft) == ["10.244.1.2"]
    a = await env.api.get(Pod, "a", "x")
    a.metadata.labels = {"pod": "other"}
    await env.api.update(a)
    await env.until(lambda: isolated(env.nft) == [])


async def test_nothing_is_reapplied_while_nothing_changes(env: Env) -> None:
    await env.until(lambda: env.agent.syncs >= 1)
    b = await env.api.get(Pod, "b", "y")
    b.metadata.annotations = {"unrelated": "yes"}
    await env.api.update(b)
    await asyncio.sleep(0.3)
    assert env.agent.syncs == 1 and len(env.nft.scripts) == 1


async def test_a_refused_script_is_retried_and_an_unreadable_policy_left_out(env: Env) -> None:
    await env.until(lambda: env.agent.syncs >= 1)
    env.nft.fail_on = "pods/x/deny"
    await env.api.create(
        policy("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: x}
spec: {podSelector: {}}
""")
    )
    await env.until(lambda: not env.agent.healthy)
    env.nft.fail_on = None
    await env.until(lambda: env.agent.healthy, within=2.0)
    assert "pods/x/deny" in env.nft.current.sets
    bad = policy(ALLOW_FROM_BLUE.replace("allow-blue", "bad").replace("team: blue", "'!': x"))
    await env.api.create(bad)
    await asyncio.sleep(0.3)
    assert env.agent.healthy
    assert [p.split(":")[0] for p in env.agent.ruleset().problems] == ["x/bad"]
    assert "pods/x/bad" not in env.nft.current.sets
