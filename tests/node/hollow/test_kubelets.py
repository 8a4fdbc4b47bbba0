"""The hollow nodes' kubelet servers over a fake API: a pod told to use something else steps
its node's counters the moment the fleet's informer hears of it, not at the next
measurement."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec, PodStatus
from kube.api.meta_v1 import ObjectMeta
from kube.client.informers import SharedInformerFactory
from kube.pki import CertificateAuthority
from node.hollow.kubelets import kubelet_servers
from node.hollow.usage import USAGE_ANNOTATION, HollowUsage, UsageProfile
from tests.fakeapi import FakeApi

NAMESPACE = "default"


def _told(cpu: str) -> dict[str, str]:
    return {USAGE_ANNOTATION: json.dumps({"app": {"cpu": cpu}})}


async def test_a_pod_told_anew_steps_its_nodes_usage_when_heard_of(tmp_path: Path) -> None:
    client = FakeApi()
    clock = client.clock
    client.seed(
        Pod(
            metadata=ObjectMeta(name="web", namespace=NAMESPACE, annotations=_told("100m")),
            spec=PodSpec(node_name="hollow-node-0", containers=[Container(name="app")]),
            status=PodStatus(phase="Running", start_time=clock.now()),
        )
    )
    informers = SharedInformerFactory(client, clock=clock)
    pods = informers.informer_for(Pod, field_selector="spec.nodeName!=")
    ca = CertificateAuthority.create("hollow-test-ca")
    client_ca = tmp_path / "ca.crt"
    client_ca.write_bytes(ca.cert_pem)
    (server,) = kubelet_servers(
        ["hollow-node-0"],
        pods,
        client,
        clock,
        address="127.0.0.1",
        certificate=ca.issue("hollow-kubelet", server=True, ip_addresses=["127.0.0.1"]),
        client_ca=client_ca,
        profile=UsageProfile(),
    )
    usage = server.stats_provider
    assert isinstance(usage, HollowUsage)
    heard = asyncio.Event()
    pods.add_event_handler(on_update=lambda _, __: heard.set())
    informers.start()
    try:
        await informers.wait_for_cache_sync()
        first = await usage.summary()
        await clock.advance(4)
        await client.patch(Pod, "web", NAMESPACE, {"metadata": {"annotations": _told("1")}})
        await asyncio.wait_for(heard.wait(), 10)
        await clock.advance(6)
        second = await usage.summary()
    finally:
        await informers.shutdown()
    before, after = (s.pods[0].containers[0].cpu for s in (first, second))
    assert before is not None and after is not None
    used = after.usage_core_nano_seconds - before.usage_core_nano_seconds
    assert used == 100_000_000 * 4 + 1_000_000_000 * 6
