"""One in-memory API for unit tests of the controllers, the scheduler and the kubelet.

:class:`FakeApi` implements :class:`kube.client.interface.ApiClient`, the Protocol the
components are typed against, so mypy checks it like the real client; it is shaped as
client-go's fake clientset:

- an object tracker: objects by (class, namespace, name), each write stamping a uid, a
  creationTimestamp and a new resourceVersion from one counter; a stale resourceVersion on
  update is a 409 Conflict, a missing object a 404, a delete's uid and resourceVersion
  preconditions are checked; patches go through the API server's own JSON, merge and
  strategic merge patch code;
- recorded actions: ``actions`` holds the writes in order (create, update, patch, delete and
  subresource creates), ``reads`` the gets, lists and watches, each an :class:`Action`;
- watches: every write is an event, replayed after a watch's resourceVersion and sent to the
  open watches of its kind whose namespace and selectors it matches;
- reactors: ``react(verb, kind, reactor)`` puts a function in front of the tracker for that verb
  (``"*"`` for any kind), which answers the call (anything but None), falls through (None), or
  raises to inject an error; ``fail_next`` is a reactor that raises once.  Raw ``request`` calls
  reach reactors as verb ``"request"`` with the :class:`RawRequest` in ``Action.obj``; without
  one, GET and DELETE of a known kind's paths reach the tracker and anything else is a 404.

Nothing runs in the background and the clock is a ``FakeClock``.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import itertools
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast
from urllib.parse import unquote

import msgspec

from controlplane.apiserver.endpoints import patch as patches
from kube.api import codec
from kube.api.fieldselector import parse_field_selector
from kube.api.labels import parse_selector
from kube.api.meta_v1 import Preconditions, Resource, Status
from kube.api.scheme import SCHEME
from kube.client.errors import ApiError
from kube.client.kubeconfig import ClientConfig
from kube.client.rest import ListResult, ResourcePath, WatchEvent
from kube.clock import FakeClock

R = TypeVar("R", bound=Resource)
Key = tuple[type[Resource], str | None, str]


@dataclass
class Action:
    """One call the component made: ``verb`` is get, list, watch, create, update, patch,
    delete or request; ``kind`` the class name (the HTTP method for a request)."""

    verb: str
    kind: str
    namespace: str | None
    name: str
    subresource: str = ""
    obj: Any = None
    """The object written (create/update), the patch body, the delete options, the
    subresource body, or the :class:`RawRequest`."""
    patch_type: str = ""
    """For a patch: json, merge, strategic or apply."""


@dataclass(frozen=True)
class RawRequest:
    """A ``request`` call as sent."""

    method: str
    path: str
    params: Mapping[str, str]
    body: bytes | None


Reactor = Callable[[Action], Any]
"""Answers an action (any value but None), lets it through (None), or raises."""


def api_error(code: int, reason: str, message: str) -> ApiError:
    return ApiError(Status(code=code, reason=reason, message=message))


def not_found(cls: type[Resource], name: str) -> ApiError:
    return api_error(404, "NotFound", f'{cls.kind_info.group_resource} "{name}" not found')


@dataclass
class _Watcher:
    cls: type[Resource]
    namespace: str | None
    label_selector: str | None
    field_selector: str | None
    queue: asyncio.Queue[WatchEvent[Any]] = field(default_factory=asyncio.Queue)

    def wants(self, obj: Resource) -> bool:
        if type(obj) is not self.cls:
            return False
        if self.namespace is not None and obj.metadata.namespace != self.namespace:
            return False
        if self.label_selector and not parse_selector(self.label_selector).matches(
            obj.metadata.labels or {}
        ):
            return False
        fields = self.cls.kind_info.selectable_fields(obj)
        return not self.field_selector or parse_field_selector(self.field_selector).matches(fields)


@dataclass
class FakeApi:
    """The API server in memory, as an :class:`ApiClient` (see the module docstring)."""

    clock: FakeClock = field(default_factory=FakeClock)
    config: ClientConfig = field(default_factory=lambda: ClientConfig(server="https://fake"))
    actions: list[Action] = field(default_factory=list)
    reads: list[Action] = field(default_factory=list)
    objects: dict[Key, Resource] = field(default_factory=dict)
    presented: list[tuple[bytes, bytes]] = field(default_factory=list)
    """The client certificates ``reload_client_certificate`` was given, in order."""
    _reactors: list[tuple[str, str, Reactor]] = field(default_factory=list)
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    _events: list[tuple[int, WatchEvent[Any]]] = field(default_factory=list)
    _watchers: list[_Watcher] = field(default_factory=list)

    # The test's side.

    def seed(self, *objs: Resource) -> None:
        """Put objects into the tracker as they are (they should carry uid and
        resourceVersion); no action is recorded and no watch sees them."""
        for obj in objs:
            self.objects[_key(obj)] = obj

    def stored(self, cls: type[R], name: str, namespace: str | None = None) -> R:
        """The tracked object (not a copy); KeyError if there is none."""
        return cast(R, self.objects[(cls, namespace, name)])

    def writes(self, verb: str | None = None, kind: str | None = None) -> list[Action]:
        return [
            a
            for a in self.actions
            if (verb is None or a.verb == verb) and (kind is None or a.kind == kind)
        ]

    def react(self, verb: str, kind: str, reactor: Reactor) -> None:
        """Put ``reactor`` before every other for ``verb`` on ``kind`` (a class name, or "*")."""
        self._reactors.insert(0, (verb, kind, reactor))

    def fail_next(self, verb: str, error: Exception, kind: str = "*") -> None:
        """The next ``verb`` call (on ``kind``) raises ``error``; later ones go on as usual."""
        entry: tuple[str, str, Reactor]

        def fail(_: Action) -> None:
            self._reactors.remove(entry)
            raise error

        entry = (verb, kind, fail)
        self._reactors.insert(0, entry)

    # The tracker.

    def _react(self, action: Action) -> Any:
        for verb, kind, reactor in list(self._reactors):
            if verb == action.verb and kind in ("*", action.kind):
                answer = reactor(action)
                if answer is not None:
                    return answer
        return None

    def _found(self, key: Key) -> Resource:
        current = self.objects.get(key)
        if current is None:
            raise not_found(key[0], key[2])
        return current

    def _store(self, key: Key, obj: Resource, event: str) -> None:
        version = next(self._versions)
        obj.metadata.resource_version = str(version)
        if event == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        happened: WatchEvent[Any] = WatchEvent(event, copy.deepcopy(obj))
        self._events.append((version, happened))
        for watcher in self._watchers:
            if watcher.wants(obj):
                watcher.queue.put_nowait(happened)

    # ApiClient.

    async def get(self, cls: type[R], name: str, namespace: str | None = None) -> R:
        action = Action("get", cls.__name__, namespace, name)
        self.reads.append(action)
        answer = self._react(action)
        if answer is not None:
            return cast(R, answer)
        return cast(R, copy.deepcopy(self._found((cls, namespace, name))))

    async def list(
        self,
        cls: type[R],
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListResult[R]:
        """The whole list at once (``limit`` is not paged)."""
        action = Action("list", cls.__name__, namespace, "")
        self.reads.append(action)
        answer = self._react(action)
        if answer is not None:
            return cast(ListResult[R], answer)
        watcher = _Watcher(cls, namespace, label_selector, field_selector)
        items = [cast(R, copy.deepcopy(obj)) for obj in self.objects.values() if watcher.wants(obj)]
        return ListResult(items, str(next(self._versions)))

    async def watch(
        self,
        cls: type[R],
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncGenerator[WatchEvent[R], None]:
        """The events after ``resource_version`` (none before the watch when it is empty or
        "0"), then every later one, until the caller stops reading."""
        action = Action("watch", cls.__name__, namespace, "")
        self.reads.append(action)
        self._react(action)
        watcher = _Watcher(cls, namespace, label_selector, field_selector)
        if resource_version and resource_version != "0":
            for version, event in self._events:
                if version > int(resource_version) and watcher.wants(event.object):
                    watcher.queue.put_nowait(event)
        self._watchers.append(watcher)
        try:
            while True:
                yield cast(WatchEvent[R], await watcher.queue.get())
        finally:
            self._watchers.remove(watcher)

    async def create(self, obj: R, *, field_manager: str | None = None) -> R:
        created = copy.deepcopy(obj)
        meta = created.metadata
        if not meta.name and meta.generate_name:
            meta.name = meta.generate_name + uuid.uuid4().hex[:5]
        action = Action("create", type(obj).__name__, meta.namespace, meta.name or "", obj=created)
        answer = self._react(action)
        if answer is not None:
            self.actions.append(action)
            return cast(R, answer)
        key = _key(created)
        if key in self.objects:
            raise api_error(
                409,
                "AlreadyExists",
                f'{type(obj).kind_info.group_resource} "{meta.name}" already exists',
            )
        meta.uid = meta.uid or str(uuid.uuid4())
        meta.creation_timestamp = meta.creation_timestamp or self.clock.now().replace(microsecond=0)
        self._store(key, created, "ADDED")
        self.actions.append(action)
        return copy.deepcopy(created)

    async def update(self, obj: R, *, subresource: str = "") -> R:
        meta = obj.metadata
        updated = copy.deepcopy(obj)
        action = Action(
            "update", type(obj).__name__, meta.namespace, meta.name or "", subresource, updated
        )
        answer = self._react(action)
        if answer is not None:
            self.actions.append(action)
            return cast(R, answer)
        key = _key(obj)
        current = self._found(key)
        if meta.resource_version and meta.resource_version != current.metadata.resource_version:
            raise api_error(
                409,
                "Conflict",
                f"Operation cannot be fulfilled on {type(obj).kind_info.group_resource}"
                f' "{meta.name}": the object has been modified; please apply your changes to the'
                " latest version and try again",
            )
        self._store(key, updated, "MODIFIED")
        self.actions.append(action)
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
        field_manager: str | None = None,
        force: bool = False,
    ) -> R:
        """JSON, merge and strategic merge patches as the API server applies them; an apply
        patch is merged in as a merge patch would be (the fake keeps no field ownership, so a
        field a manager stops applying stays).  The body is recorded as sent."""
        action = Action("patch", cls.__name__, namespace, name, subresource, patch, patch_type)
        answer = self._react(action)
        if answer is not None:
            self.actions.append(action)
            return cast(R, answer)
        key = (cls, namespace, name)
        document = codec.to_builtins(self._found(key))
        body = msgspec.json.decode(patch) if isinstance(patch, bytes) else patch
        if patch_type == "json":
            patched = patches.apply_json_patch(document, body)
        elif patch_type == "strategic":
            patched = patches.apply_strategic_merge_patch(document, body, cls)
        else:
            patched = patches.apply_merge_patch(document, codec.to_builtins(body))
        updated = msgspec.convert(patched, cls)
        self._store(key, updated, "MODIFIED")
        self.actions.append(action)
        return copy.deepcopy(updated)

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
        """Removes the object at once (no finalizers, no graceful deletion), if its uid and
        resourceVersion match the preconditions."""
        options = {
            "gracePeriodSeconds": grace_period_seconds,
            "propagationPolicy": propagation_policy,
            "preconditions": preconditions,
        }
        action = Action("delete", cls.__name__, namespace, name, obj=options)
        if self._react(action) is not None:
            self.actions.append(action)
            return
        key = (cls, namespace, name)
        current = self._found(key)
        if preconditions and preconditions.uid and preconditions.uid != current.metadata.uid:
            raise api_error(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {preconditions.uid}, UID in object"
                f" meta: {current.metadata.uid}",
            )
        version = preconditions.resource_version if preconditions else None
        if version and version != current.metadata.resource_version:
            raise api_error(
                409,
                "Conflict",
                f"Precondition failed: ResourceVersion in precondition: {version},"
                f" ResourceVersion in object meta: {current.metadata.resource_version}",
            )
        self._store(key, current, "DELETED")
        self.actions.append(action)

    async def create_subresource(
        self, cls: type[Resource], name: str, namespace: str | None, subresource: str, body: Any
    ) -> dict[str, Any]:
        """Recorded; a reactor gives the answer (by default the body sent back)."""
        action = Action("create", cls.__name__, namespace, name, subresource, body)
        answer = self._react(action)
        self.actions.append(action)
        if answer is not None:
            return cast(dict[str, Any], answer)
        sent: dict[str, Any] = codec.to_builtins(
            copy.deepcopy(body).typed() if isinstance(body, Resource) else body
        )
        return sent

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> bytes:
        raw = RawRequest(method, path, dict(params or {}), body)
        action = Action("request", method, None, path, obj=raw)
        self.reads.append(action)
        answer = self._react(action)
        if answer is not None:
            return cast(bytes, answer)
        return await self._route(raw)

    def reload_client_certificate(self, cert_pem: bytes, key_pem: bytes) -> None:
        self.presented.append((cert_pem, key_pem))

    async def _route(self, raw: RawRequest) -> bytes:
        """GET and DELETE of a known kind's object or collection, through the typed verbs."""
        for info in SCHEME.served():
            found = _match(ResourcePath.of(info), raw.path)
            if found is None:
                continue
            namespace, name = found
            cls = info.cls
            if raw.method == "GET" and name:
                return codec.encode_json((await self.get(cls, name, namespace)).typed())
            if raw.method == "GET":
                listed = await self.list(cls, namespace)
                return codec.encode_json(
                    {
                        "kind": info.list_kind,
                        "apiVersion": info.api_version,
                        "metadata": {"resourceVersion": listed.resource_version},
                        "items": [item.typed() for item in listed.items],
                    }
                )
            if raw.method == "DELETE":
                targets = (
                    [name]
                    if name
                    else [o.metadata.name or "" for o in (await self.list(cls, namespace)).items]
                )
                for target in targets:
                    await self.delete(cls, target, namespace)
                return codec.encode_json({"kind": "Status", "status": "Success"})
        raise api_error(
            404,
            "NotFound",
            f"the server could not find the requested resource ({raw.method} {raw.path})",
        )


def _key(obj: Resource) -> Key:
    return (type(obj), obj.metadata.namespace, obj.metadata.name or "")


def _match(where: ResourcePath, path: str) -> tuple[str | None, str] | None:
    """(namespace, name) when ``path`` is this resource's collection or one of its objects
    (name "" for the collection); None otherwise."""
    parts = [unquote(p) for p in path.strip("/").split("/")]
    base = ["apis", where.group, where.version] if where.group else ["api", where.version]
    if parts[: len(base)] != base:
        return None
    rest = parts[len(base) :]
    namespace = None
    if where.namespaced and len(rest) >= 2 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or rest[0] != where.plural or len(rest) > 2:
        return None
    return namespace, rest[1] if len(rest) == 2 else ""


def stamp(obj: R, *, rv: str = "1", created: datetime.datetime | None = None) -> R:
    """Give a test object what the API server would: a uid, a resourceVersion, a time."""
    obj.metadata.uid = obj.metadata.uid or str(uuid.uuid4())
    obj.metadata.resource_version = rv
    obj.metadata.creation_timestamp = created or datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    return obj


__all__ = ["Action", "FakeApi", "RawRequest", "Reactor", "api_error", "not_found", "stamp"]
