"""Hollow nodes' synthetic usage: the annotation or the profile, CPU integrated so that two
measurements give exactly the rate asked for, rate changes taking effect when the kubelet hears
of them (else from the measurement that sees them), and the node as its own share plus its
running pods'."""

from __future__ import annotations

import datetime
import json

from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec, PodStatus
from kube.api.meta_v1 import ObjectMeta
from kube.clock import FakeClock
from node.hollow.usage import (
    USAGE_ANNOTATION,
    HollowUsage,
    Usage,
    UsageProfile,
    container_usage,
)
from node.kubelet.stats import CPUStats, MemoryStats

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=datetime.UTC)
STARTED = T0 - datetime.timedelta(seconds=4)
MI = 1024 * 1024
PROFILE = UsageProfile(container=Usage(10, 16 * MI), node=Usage(100, 512 * MI))


def _pod(name: str, annotation: object = None, phase: str = "Running") -> Pod:
    annotations = {USAGE_ANNOTATION: json.dumps(annotation)} if annotation is not None else None
    return Pod(
        metadata=ObjectMeta(
            name=name, namespace="default", uid=f"uid-{name}", annotations=annotations
        ),
        spec=PodSpec(containers=[Container(name="app"), Container(name="sidecar")]),
        status=PodStatus(phase=phase, start_time=STARTED),
    )


def test_annotation_or_profile_per_container() -> None:
    told = _pod("web", {"app": {"cpu": "250m", "memory": "64Mi"}, "ghost": {"cpu": "1"}})
    assert container_usage(told, PROFILE) == {
        "app": Usage(250, 64 * MI),
        "sidecar": Usage(10, 16 * MI),
    }
    for bad in ({"app": {"cpu": "lots"}}, ["app"], {"app": "250m"}):
        assert container_usage(_pod("web", bad), PROFILE) == {
            "app": PROFILE.container,
            "sidecar": PROFILE.container,
        }


async def test_rates_are_exact_and_change_from_the_next_measurement() -> None:
    clock = FakeClock(T0)
    pods = [
        _pod("web", {"app": {"cpu": "250m", "memory": "64Mi"}}),
        _pod("done", phase="Succeeded"),
    ]
    usage = HollowUsage("hollow-node-0", lambda: pods, PROFILE, clock)
    first = await usage.summary()
    at = T0.replace(microsecond=123000)
    (web,) = first.pods
    assert (web.name, web.uid, web.start_time) == ("web", "uid-web", STARTED)
    assert [(c.name, c.cpu, c.memory) for c in web.containers] == [
        ("app", CPUStats(at, 1_000_000_000, 250_000_000), MemoryStats(at, 64 * MI, 64 * MI)),
        ("sidecar", CPUStats(at, 40_000_000, 10_000_000), MemoryStats(at, 16 * MI, 16 * MI)),
    ]
    assert first.node.memory == MemoryStats(at, 592 * MI, 592 * MI)
    assert first.node.cpu == CPUStats(at, 0, 360_000_000)

    await clock.advance(10.0004)
    pods[0] = _pod("web", {"app": {"cpu": "500m", "memory": "64Mi"}})
    second = await usage.summary()
    app = second.pods[0].containers[0]
    assert app.cpu is not None and app.cpu.usage_core_nano_seconds == 3_500_000_000
    assert app.cpu.time - at == datetime.timedelta(seconds=10)
    assert second.pods[0].cpu is not None
    assert second.pods[0].cpu.usage_core_nano_seconds == 3_640_000_000
    assert second.node.cpu is not None and second.node.cpu.usage_core_nano_seconds == 3_600_000_000

    await clock.advance(2)
    third = await usage.summary()
    app = third.pods[0].containers[0]
    assert app.cpu is not None and app.cpu.usage_core_nano_seconds == 4_500_000_000


async def test_a_told_change_steps_the_rate_when_it_is_heard_of() -> None:
    """A change heard of between two measurements shows, in part, at the second: the counter
    runs at the old rate up to the moment it was heard of, then at the new one."""
    clock = FakeClock(T0)
    pods = [_pod("web", {"app": {"cpu": "250m"}})]
    usage = HollowUsage("hollow-node-0", lambda: pods, PROFILE, clock)
    first = await usage.summary()
    await clock.advance(4)
    pods[0] = _pod("web", {"app": {"cpu": "500m"}})
    usage.usage_changed()
    await clock.advance(6)
    second = await usage.summary()
    before, after = (summary.pods[0].containers[0].cpu for summary in (first, second))
    assert before is not None and after is not None
    used = after.usage_core_nano_seconds - before.usage_core_nano_seconds
    assert used == 250_000_000 * 4 + 500_000_000 * 6
    node_before, node_after = first.node.cpu, second.node.cpu
    assert node_before is not None and node_after is not None
    node_used = node_after.usage_core_nano_seconds - node_before.usage_core_nano_seconds
    assert node_used == (100 + 250 + 10) * 1_000_000 * 4 + (100 + 500 + 10) * 1_000_000 * 6
