"""Fakes for controller unit tests: the shared in-memory API (:mod:`tests.fakeapi`), a
recorder that keeps events, and a context whose informer caches tests fill directly.

As with client-go's fake clientset, a test puts objects into the informer caches (what the
controller reads) and into the fake API (what it writes against), calls ``controller.sync``
with a key, and asserts on ``client.actions``.  Nothing runs in the background and time is a
``FakeClock``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from controlplane.controllers.context import ControllerContext, ControllerOptions
from kube.api.meta_v1 import Resource
from kube.client.events import EventRecorder
from kube.client.informers import SharedInformerFactory
from kube.clock import FakeClock
from tests.fakeapi import Action, FakeApi, stamp


@dataclass
class FakeRecorder:
    """Keeps events as (type, reason, message, object name) for assertions; the recorders
    ``for_component`` makes keep theirs in the same list."""

    events: list[tuple[str, str, str, str]] = field(default_factory=list)
    component: str = ""

    def for_component(self, component: str) -> FakeRecorder:
        return FakeRecorder(self.events, component)

    def event(self, obj: Resource, type: str, reason: str, message: str) -> None:
        self.events.append((type, reason, message, obj.metadata.name or ""))

    def reasons(self) -> list[str]:
        return [reason for _, reason, _, _ in self.events]


@dataclass
class Harness:
    """A controller context made of fakes, with helpers to fill the informer caches."""

    client: FakeApi
    recorder: FakeRecorder
    ctx: ControllerContext

    @property
    def clock(self) -> FakeClock:
        return self.client.clock

    def cache(self, *objs: Resource, field_selector: str | None = None) -> None:
        """Add objects to the informer cache of their kind (with that field selector)."""
        for obj in objs:
            self.ctx.informers.informer_for(type(obj), field_selector=field_selector).lister.add(
                obj
            )

    def uncache(self, *objs: Resource, field_selector: str | None = None) -> None:
        for obj in objs:
            lister = self.ctx.informers.informer_for(
                type(obj), field_selector=field_selector
            ).lister
            lister.delete(obj)

    def store(self, *objs: Resource) -> None:
        """Objects both in the caches and in the fake API."""
        self.cache(*objs)
        self.client.seed(*objs)


def harness(options: ControllerOptions | None = None) -> Harness:
    client = FakeApi()
    recorder = FakeRecorder()
    ctx = ControllerContext(
        client=client,
        informers=SharedInformerFactory(client, clock=client.clock),
        recorder=cast(EventRecorder, recorder),
        clock=client.clock,
        options=options or ControllerOptions(),
    )
    return Harness(client, recorder, ctx)


__all__ = ["Action", "FakeRecorder", "Harness", "harness", "stamp"]
