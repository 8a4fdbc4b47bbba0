"""Fakes for controller unit tests: an in-memory API that records what a controller did, a
recorder that keeps events, and a context whose informer caches tests fill directly.

As with client-go's fake clientset, a test puts objects into the informer caches (what the
controller reads) and into the fake API (what it writes against), calls ``controller.sync``
with a key, and asserts on ``client.actions``.  Nothing runs in the background and time is a
``FakeClock``.
"""

from __future__ import annotations

import copy
import datetime
import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import msgspec

from controlplane.controllers.context import ControllerContext, ControllerOptions
from kubelab.api import codec
from kubelab.api.labels import parse_selector
from kubelab.api.meta_v1 import Preconditions, Resource, Status
from kubelab.client.errors import ApiError
from kubelab.client.events import EventRecorder
from kubelab.client.informers import SharedInformerFactory
from kubelab.client.rest import Client, ListResult
from kubelab.clock import FakeClock

R = TypeVar("R", bound=Resource)


@dataclass
class Action:
    """One write the controller made: ``verb`` is create, update, patch or delete."""

    verb: str
    kind: str
    namespace: str | None
    name: str
    subresource: str = ""
    obj: Any = None
    """The object written (create/update), the patch body, or the delete options."""


def _error(code: int, reason: str, message: str) -> ApiError:
    return ApiError(Status(code=code, reason=reason, message=message))


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 merge patch of plain values."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


@dataclass
class FakeClient:
    """The subset of ``kubelab.client.rest.Client`` controllers use, in memory."""

    clock: FakeClock = field(default_factory=FakeClock)
    actions: list[Action] = field(default_factory=list)
    objects: dict[tuple[type[Any], str | None, str], Resource] = field(default_factory=dict)
    failures: dict[str, ApiError] = field(default_factory=dict)
    """``verb`` → the error the next call of that verb raises (once)."""
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def seed(self, *objs: Resource) -> None:
        """Put objects into the fake API as they are (they should carry uid and resourceVersion)."""
        for obj in objs:
            self.objects[(type(obj), obj.metadata.namespace, obj.metadata.name or "")] = obj

    def writes(self, verb: str | None = None, kind: str | None = None) -> list[Action]:
        return [
            a
            for a in self.actions
            if (verb is None or a.verb == verb) and (kind is None or a.kind == kind)
        ]

    def _fail(self, verb: str) -> None:
        error = self.failures.pop(verb, None)
        if error is not None:
            raise error

    def _stamp(self, obj: Resource) -> None:
        obj.metadata.resource_version = str(next(self._versions))

    async def get(self, cls: type[R], name: str, namespace: str | None = None) -> R:
        self._fail("get")
        found = self.objects.get((cls, namespace, name))
        if found is None:
            raise _error(404, "NotFound", f'{cls.__name__.lower()}s "{name}" not found')
        return cast(R, copy.deepcopy(found))

    async def list(
        self,
        cls: type[R],
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        **_: Any,
    ) -> ListResult[R]:
        selector = parse_selector(label_selector) if label_selector else None
        items = [
            cast(R, copy.deepcopy(obj))
            for (kind, ns, _name), obj in self.objects.items()
            if kind is cls
            and (namespace is None or ns == namespace)
            and (selector is None or selector.matches(obj.metadata.labels or {}))
        ]
        return ListResult(items, str(next(self._versions)))

    async def create(self, obj: R, *, field_manager: str | None = None) -> R:
        self._fail("create")
        created = copy.deepcopy(obj)
        meta = created.metadata
        if not meta.name and meta.generate_name:
            meta.name = meta.generate_name + uuid.uuid4().hex[:5]
        key = (type(created), meta.namespace, meta.name or "")
        if key in self.objects:
            raise _error(409, "AlreadyExists", f'"{meta.name}" already exists')
        meta.uid = meta.uid or str(uuid.uuid4())
        meta.creation_timestamp = meta.creation_timestamp or self.clock.now().replace(microsecond=0)
        self._stamp(created)
        self.objects[key] = created
        self.actions.append(
            Action("create", type(obj).__name__, meta.namespace, meta.name or "", obj=created)
        )
        return copy.deepcopy(created)

    async def update(self, obj: R, *, subresource: str = "") -> R:
        self._fail("update")
        meta = obj.metadata
        key = (type(obj), meta.namespace, meta.name or "")
        current = self.objects.get(key)
        if current is None:
            raise _error(404, "NotFound", f'"{meta.name}" not found')
        if meta.resource_version and meta.resource_version != current.metadata.resource_version:
            raise _error(409, "Conflict", "the object has been modified")
        updated = copy.deepcopy(obj)
        self._stamp(updated)
        self.objects[key] = updated
        self.actions.append(
            Action(
                "update", type(obj).__name__, meta.namespace, meta.name or "", subresource, updated
            )
        )
        return copy.deepcopy(updated)

    async def update_status(self, obj: R) -> R:
        return await self.update(obj, subresource="status")

    async def patch(
        self,
        cls: type[R],
        name: str,
        namespace: str | None,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str = "",
        **_: Any,
    ) -> R:
        """Merge and strategic patches are applied as merge patches (enough for the simple
        patches controllers send); the body is recorded as sent."""
        self._fail("patch")
        key = (cls, namespace, name)
        current = self.objects.get(key)
        if current is None:
            raise _error(404, "NotFound", f'"{name}" not found')
        merged = _merge(codec.to_builtins(current), patch)
        patched = msgspec.convert(merged, cls)
        self._stamp(patched)
        self.objects[key] = patched
        self.actions.append(Action("patch", cls.__name__, namespace, name, subresource, patch))
        return copy.deepcopy(patched)

    async def delete(
        self,
        cls: type[Resource],
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        preconditions: Preconditions | None = None,
    ) -> None:
        self._fail("delete")
        key = (cls, namespace, name)
        current = self.objects.get(key)
        if current is None:
            raise _error(404, "NotFound", f'"{name}" not found')
        if preconditions and preconditions.uid and preconditions.uid != current.metadata.uid:
            raise _error(409, "Conflict", "Precondition failed: UID in precondition")
        del self.objects[key]
        options = {
            "gracePeriodSeconds": grace_period_seconds,
            "propagationPolicy": propagation_policy,
        }
        self.actions.append(Action("delete", cls.__name__, namespace, name, obj=options))

    async def create_subresource(
        self, cls: type[Resource], name: str, namespace: str | None, subresource: str, body: Any
    ) -> None:
        self._fail("create")
        self.actions.append(Action("create", cls.__name__, namespace, name, subresource, body))


@dataclass
class FakeRecorder:
    """Keeps events as (reason, message, object name) for assertions."""

    events: list[tuple[str, str, str, str]] = field(default_factory=list)

    def event(self, obj: Resource, type: str, reason: str, message: str) -> None:
        self.events.append((type, reason, message, obj.metadata.name or ""))

    def reasons(self) -> list[str]:
        return [reason for _, reason, _, _ in self.events]


@dataclass
class Harness:
    """A controller context made of fakes, with helpers to fill the informer caches."""

    client: FakeClient
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
    client = FakeClient()
    recorder = FakeRecorder()
    ctx = ControllerContext(
        client=cast(Client, client),
        informers=SharedInformerFactory(cast(Client, client), clock=client.clock),
        recorder=cast(EventRecorder, recorder),
        clock=client.clock,
        options=options or ControllerOptions(),
    )
    return Harness(client, recorder, ctx)


def stamp(obj: R, *, rv: str = "1", created: datetime.datetime | None = None) -> R:
    """Give a test object what the API server would: a uid, a resourceVersion, a time."""
    obj.metadata.uid = obj.metadata.uid or str(uuid.uuid4())
    obj.metadata.resource_version = rv
    obj.metadata.creation_timestamp = created or datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    return obj
