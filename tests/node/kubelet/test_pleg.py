"""The PLEG: relist, fingerprint, report changed pods, keep the last relist, health."""

from __future__ import annotations

import datetime

from kube.clock import FakeClock
from node.kubelet.pleg import RELIST_THRESHOLD, PodLifecycleEventGenerator
from node.kubelet.runtime.state import PodRuntimeState, SandboxState
from node.kubelet.status import RuntimeContainer, RuntimeState

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _state(uid: str, *containers: tuple[str, RuntimeState], ready: bool = True) -> PodRuntimeState:
    return PodRuntimeState(
        uid=uid,
        sandboxes=(SandboxState(id=f"sb-{uid}", attempt=0, ready=ready, created_at=T0, ips=()),),
        containers=tuple(
            RuntimeContainer(
                id=cid,
                name="c",
                image="i",
                image_ref="i",
                state=state,
                created_at=T0,
            )
            for cid, state in containers
        ),
    )


class Runtime:
    def __init__(self) -> None:
        self.pods: dict[str, PodRuntimeState] = {}
        self.fail = False

    async def snapshot(self) -> dict[str, PodRuntimeState]:
        if self.fail:
            raise ConnectionError("runtime down")
        return dict(self.pods)


async def test_only_changed_appeared_and_vanished_pods_are_reported() -> None:
    runtime, woken = Runtime(), list[str]()
    pleg = PodLifecycleEventGenerator(runtime.snapshot, woken.append, FakeClock())
    runtime.pods = {"a": _state("a", ("c1", "running")), "b": _state("b", ("c2", "running"))}
    assert await pleg.relist() == {"a", "b"}
    assert await pleg.relist() == set()
    runtime.pods["a"] = _state("a", ("c1", "exited"))
    runtime.pods["c"] = _state("c")
    del runtime.pods["b"]
    assert await pleg.relist() == {"a", "b", "c"}
    runtime.pods["c"] = _state("c", ready=False)
    assert await pleg.relist() == {"c"}
    assert sorted(woken) == ["a", "a", "b", "b", "c", "c"]
    assert set(pleg.pods) == {"a", "c"}


async def test_a_state_seen_by_a_worker_updates_the_cache_but_not_detection() -> None:
    runtime, woken = Runtime(), list[str]()
    pleg = PodLifecycleEventGenerator(runtime.snapshot, woken.append, FakeClock())
    runtime.pods = {"a": _state("a")}
    await pleg.relist()
    pleg.observed(_state("a", ("c1", "running")))
    assert [c.id for c in pleg.pods["a"].containers] == ["c1"]
    runtime.pods = {"a": _state("a", ("c1", "running"))}
    assert await pleg.relist() == {"a"}


async def test_health_follows_the_last_successful_relist() -> None:
    runtime, clock = Runtime(), FakeClock()
    pleg = PodLifecycleEventGenerator(runtime.snapshot, lambda _: None, clock)
    await pleg.relist()
    await clock.advance(RELIST_THRESHOLD)
    assert pleg.healthy() == (True, "")
    await clock.advance(1)
    healthy, message = pleg.healthy()
    assert not healthy and message.startswith("PLEG is not healthy: pleg was last seen active")
