"""Pods held at Permit: each plugin that answers WAIT gets a timer, and the pod waits until
every waiting plugin allows it, any one rejects it, or a timer expires.  The binding cycle
awaits the verdict; timers run on the scheduler's clock, so tests drive them with
``FakeClock.advance``.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Mapping
from typing import TYPE_CHECKING

from controlplane.scheduler.framework import interface
from controlplane.scheduler.framework.interface import SUCCESS, Status
from kube.component import go_duration

if TYPE_CHECKING:
    from kube.api.kinds.core_v1.pod import Pod
    from kube.clock import Clock


class WaitingPod:
    """A pod held at Permit until each waiting plugin allows it or any one rejects it.

    ``allow`` and ``reject`` never block; the first verdict is the one ``wait_on_permit``
    sees, later ones are ignored (upstream: a non-blocking send on a one-slot channel).
    Each waiting plugin has a timer that rejects the pod when it expires.  Create within a
    running event loop: the timers are tasks.
    """

    def __init__(self, pod: Pod, timeouts: Mapping[str, float], clock: Clock) -> None:
        self._pod = pod
        self._verdict: asyncio.Future[Status] = asyncio.get_running_loop().create_future()
        self._timers = {
            plugin: asyncio.create_task(self._expire(plugin, timeout, clock))
            for plugin, timeout in timeouts.items()
        }

    @property
    def pod(self) -> Pod:
        return self._pod

    @property
    def pending_plugins(self) -> list[str]:
        """The plugins that have not allowed the pod yet."""
        return list(self._timers)

    async def _expire(self, plugin: str, seconds: float, clock: Clock) -> None:
        await clock.sleep(seconds)
        self._timers.pop(plugin, None)
        self.reject(
            plugin,
            f"rejected due to timeout after waiting {go_duration(seconds)} at plugin {plugin}",
        )

    def allow(self, plugin: str) -> None:
        timer = self._timers.pop(plugin, None)
        if timer is not None:
            timer.cancel()
        if not self._timers:
            self._deliver(SUCCESS)

    def reject(self, plugin: str, message: str) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._deliver(Status.unschedulable(message).with_plugin(plugin))

    def _deliver(self, status: Status) -> None:
        if not self._verdict.done():
            self._verdict.set_result(status)

    async def verdict(self) -> Status:
        return await self._verdict


class WaitingPods:
    """The pods waiting at Permit, by uid; shared by every profile of a scheduler."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, uid: str, pod: WaitingPod) -> None:
        self._pods[uid] = pod

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def list(self) -> builtins.list[interface.WaitingPod]:
        return builtins.list(self._pods.values())
