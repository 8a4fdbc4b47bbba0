"""Generic REST storage: create, read, update, delete and watch any kind over a ``Store``.

One ``ResourceStore`` per served kind turns API semantics into store operations:

- keys ``/registry/<group>/<resource>/<namespace>/<name>`` (core kinds without the group);
  values are the object's JSON without ``resourceVersion``, which is the store revision and is
  set on every read, at the storage version of its resource (converted to and from the version
  served, for a resource served in several), under the key of the group it is stored in
  (events.k8s.io Events are core Events);
- create: namespace and name checks, ``generateName``, uid, creationTimestamp, generation;
  then the kind's strategy, defaults, admission, validation and a create-if-absent write;
- update: optimistic concurrency (a stale resourceVersion is a 409; none means unconditional),
  spec/status separation for kinds with a status subresource, ``metadata.generation`` bumped
  only by spec changes, no write at all when nothing changed;
- delete: preconditions, graceful deletion (pods bound to a node get a deletionTimestamp and
  are removed when the kubelet confirms with grace 0), finalizers (the object stays, marked,
  until an update removes the last one), and the ``orphan`` / ``foregroundDeletion`` finalizers
  that record the propagation policy for the garbage collector;
- managedFields: a field tracker, when given (server-side apply's ``record_update``), records
  who changed what on every create and update, after admission and before validation;
- list and watch with label and field selectors; a watch turns an object moving into or out of
  the selection into ADDED / DELETED, and sends BOOKMARKs when asked: after each quiet
  ``bookmark_interval``, at the store's progress (``storage.interface.Progress``), so a
  client that resumes from a quiet watch's bookmark resumes from a recent revision.

Everything a client can get wrong raises ``ApiError`` (a 4xx Status); nothing is written unless
every check passed.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import secrets
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from controlplane.apiserver import errors
from controlplane.apiserver.registry.strategy import Strategy, strategy_for
from controlplane.storage.interface import (
    ADDED,
    DELETED,
    MODIFIED,
    Conflict,
    Event,
    Expired,
    KeyExists,
    KeyNotFound,
    KeyValue,
    Progress,
    Store,
)
from kube.api import walk
from kube.api.fieldselector import FieldSelector, FieldSelectorError, parse_field_selector
from kube.api.labels import Selector, SelectorError, parse_selector
from kube.api.meta_v1 import (
    FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
    DeleteOptions,
    ListMeta,
    Resource,
    ResourceList,
)
from kube.api.scheme import SCHEME, KindInfo
from kube.clock import Clock

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"


@dataclass
class RequestContext:
    """Who is asking and how: what every write carries through the pipeline."""

    user: str = ""
    groups: tuple[str, ...] = ()
    dry_run: bool = False
    field_manager: str | None = None
    user_agent: str = ""
    subresource: str = ""
    """The subresource the request names (``status``, ``eviction``, ...), for admission."""
    # A server-side apply: the handler has settled the object's managedFields already.
    server_side_apply: bool = False
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)
    """What admission records in the request's audit event (upstream ``AddAuditAnnotation``)."""


Admission = Callable[[str, KindInfo, Resource, Resource | None, RequestContext], Awaitable[None]]
"""An admission stage: (operation, kind, object, old object, context); raises ApiError to deny."""


FieldTracker = Callable[
    [KindInfo, Resource, Resource | None, RequestContext, str, datetime.datetime], None
]
"""Records who changed which fields in ``metadata.managedFields``: (kind, new object, old object
or None on create, context, subresource, now); runs after admission, before validation."""


class Transaction(Protocol):
    """What a write hook prepared: made final once the object is written, taken back if the
    write fails or is only a dry run (as upstream's Service REST storage's transactions)."""

    async def commit(self) -> None: ...

    async def revert(self) -> None: ...


class WriteHook(Protocol):
    """Side effects of the storage layer itself, such as allocating a Service's ClusterIP.

    ``prepare`` runs after validation, just before the write (persisting nothing when
    ``dry_run``); ``deleted`` runs once an object is really gone.
    """

    async def prepare(self, obj: Resource, old: Resource | None, dry_run: bool) -> Transaction: ...

    async def deleted(self, obj: Resource) -> None: ...


@dataclass
class Selection:
    """Label and field selectors of a list or watch."""

    labels: Selector | None = None
    fields: FieldSelector | None = None

    @classmethod
    def parse(cls, info: KindInfo, label_text: str | None, field_text: str | None) -> Selection:
        selection = cls()
        try:
            if label_text:
                selection.labels = parse_selector(label_text)
            if field_text:
                selection.fields = parse_field_selector(field_text)
        except (SelectorError, FieldSelectorError) as error:
            raise errors.bad_request(str(error)) from None
        for requirement in selection.fields.requirements if selection.fields else ():
            if not info.supports_field(requirement.field):
                raise errors.bad_request(
                    f'"{requirement.field}" is not a known field selector: only '
                    + ", ".join(sorted(_selectable(info)))
                )
        return selection

    def matches(self, info: KindInfo, obj: Resource) -> bool:
        if self.labels is not None and not self.labels.matches(obj.metadata.labels or {}):
            return False
        return self.fields is None or self.fields.matches(info.selectable_fields(obj))

    @property
    def everything(self) -> bool:
        return self.labels is None and self.fields is None


def _selectable(info: KindInfo) -> list[str]:
    names = ["metadata.name", *info.field_selectors]
    return [*names, "metadata.namespace"] if info.namespaced else names


@dataclass(frozen=True)
class WatchEvent:
    """A decoded watch event; ``obj`` is None only for bookmarks carrying just a revision."""

    type: str
    obj: Resource | None
    revision: int


class ResourceStore:
    """API semantics for one kind over the store (see the module docstring)."""

    def __init__(
        self,
        info: KindInfo,
        store: Store,
        clock: Clock,
        admission: Sequence[Admission] = (),
        strategy: Strategy | None = None,
        hooks: Sequence[WriteHook] = (),
        track_fields: FieldTracker | None = None,
    ) -> None:
        self.info = info
        self.track_fields = track_fields
        self.store = store
        self.clock = clock
        self.admission = list(admission)
        self.hooks = list(hooks)
        self.strategy = strategy or strategy_for(info)
        # A resource served in several versions is stored at one (kube.api.scheme).
        self._stored_as = SCHEME.storage_class(info)
        self._decoder = msgspec.json.Decoder(self._stored_as)
        group = f"{info.stored_group}/" if info.stored_group else ""
        self.root = f"/registry/{group}{info.plural}/"

    # Keys and bytes.

    def prefix(self, namespace: str = "") -> str:
        return f"{self.root}{namespace}/" if namespace and self.info.namespaced else self.root

    def key(self, namespace: str, name: str) -> str:
        if self.info.namespaced:
            return f"{self.root}{namespace}/{name}"
        return f"{self.root}{name}"

    def encode(self, obj: Resource) -> bytes:
        rv = obj.metadata.resource_version
        obj.metadata.resource_version = None
        try:
            return msgspec.json.encode(SCHEME.convert(obj, self._stored_as))
        finally:
            obj.metadata.resource_version = rv

    def decode(self, kv: KeyValue) -> Resource:
        obj: Resource = SCHEME.convert(self._decoder.decode(kv.value), self.info.cls)
        obj.metadata.resource_version = str(kv.mod_revision)
        return obj

    # Reads.

    async def get(self, namespace: str, name: str) -> Resource:
        try:
            return self.decode(await self.store.get(self.key(namespace, name)))
        except KeyNotFound:
            raise errors.not_found(self.info, name) from None

    async def list(
        self,
        namespace: str = "",
        selection: Selection | None = None,
        *,
        limit: int = 0,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> ResourceList[Any]:
        selection = selection or Selection()
        revision, start_after = 0, None
        if continue_token:
            if resource_version not in (None, ""):
                raise errors.bad_request(
                    "specifying resource version is not allowed when using continue"
                )
            revision, start_after = _decode_continue(continue_token, self.prefix(namespace))
        elif resource_version_match == "Exact":
            revision = parse_resource_version(resource_version)
        elif resource_version_match not in (None, "", "NotOlderThan"):
            raise errors.bad_request(
                f"resourceVersionMatch: Unsupported value: {resource_version_match!r}"
            )
        elif resource_version not in (None, "", "0"):
            parse_resource_version(resource_version)
        items: list[Resource] = []
        prefix = self.prefix(namespace)
        more, remaining = False, 0
        page_limit = limit if limit > 0 else 0
        while True:
            try:
                page = await self.store.list(
                    prefix, limit=page_limit, start_after=start_after, revision=revision
                )
            except Expired as error:
                raise errors.gone(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                    if continue_token
                    else str(error)
                ) from None
            revision = page.revision
            for kv in page.items:
                obj = self.decode(kv)
                if selection.everything or selection.matches(self.info, obj):
                    items.append(obj)
            more = page.more
            if page.items:
                start_after = page.items[-1].key
            if not more or (page_limit and len(items) >= page_limit):
                remaining = page.remaining if selection.everything else 0
                break
            # A selective page came back short: read on until it is full or the list ends.
        meta = ListMeta(resource_version=str(revision))
        if more and start_after is not None:
            meta.continue_ = _encode_continue(revision, start_after, prefix)
            if remaining:
                meta.remaining_item_count = remaining
        return ResourceList(
            api_version=self.info.api_version, kind=self.info.list_kind, metadata=meta, items=items
        )

    # Writes.

    async def create(self, namespace: str, obj: Resource, ctx: RequestContext) -> Resource:
        info = self.info
        meta = obj.metadata
        self._check_namespace(namespace, meta.namespace, meta.name)
        if info.namespaced:
            meta.namespace = namespace
        if meta.resource_version:
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        if not meta.name and meta.generate_name:
            meta.name = meta.generate_name + "".join(
                secrets.choice(NAME_ALPHABET) for _ in range(5)
            )
        meta.uid = str(uuid.uuid4())
        meta.creation_timestamp = self.clock.now().replace(microsecond=0)
        meta.deletion_timestamp = None
        meta.deletion_grace_period_seconds = None
        meta.generation = 1 if self.strategy.has_spec else None
        meta.self_link = None
        self.strategy.prepare_for_create(obj)
        walk.set_defaults(obj)
        await self._admit("CREATE", obj, None, ctx)
        self._track(obj, None, ctx, "")
        problems = self.strategy.validate_create(obj)
        if problems:
            raise errors.invalid(info, meta.name or "", problems)
        async with self._prepared(obj, None, ctx.dry_run):
            if ctx.dry_run:
                return obj
            try:
                kv = await self.store.create(self.key(namespace, meta.name or ""), self.encode(obj))
            except KeyExists:
                raise errors.already_exists(info, meta.name or "") from None
        meta.resource_version = str(kv.mod_revision)
        return obj

    async def update(
        self,
        namespace: str,
        name: str,
        obj: Resource,
        ctx: RequestContext,
        subresource: str = "",
    ) -> tuple[Resource, bool]:
        """Replace an object; returns it and whether it was created (allowCreateOnUpdate)."""
        self._check_namespace(namespace, obj.metadata.namespace, obj.metadata.name)
        if obj.metadata.name and obj.metadata.name != name:
            raise errors.bad_request(
                f"the name of the object ({obj.metadata.name}) does not match the name on "
                f"the URL ({name})"
            )
        obj.metadata.name = name
        if self.info.namespaced:
            obj.metadata.namespace = namespace
        expected = obj.metadata.resource_version
        if expected:
            parse_resource_version(expected)
        for _ in range(16):
            try:
                current_kv = await self.store.get(self.key(namespace, name))
            except KeyNotFound:
                if self.strategy.allow_create_on_update and not subresource:
                    obj.metadata.resource_version = None
                    return await self.create(namespace, obj, ctx), True
                raise errors.not_found(self.info, name) from None
            try:
                replaced = await self._replace(current_kv, obj, ctx, subresource, expected or None)
            except _Retry:
                continue  # an unconditional update raced another write: onto the newer one
            return replaced, False
        raise errors.conflict(self.info, name, errors.MODIFIED)

    async def mutate(
        self,
        namespace: str,
        name: str,
        change: Callable[[Resource], Resource | Awaitable[Resource]],
        ctx: RequestContext,
        subresource: str = "",
    ) -> Resource:
        """Read, change, write back; on a conflicting write read again (patches, scale, ...).

        A change that sets a resourceVersion pins the write to that version (a 409 if stale).
        """
        for _ in range(16):
            try:
                current_kv = await self.store.get(self.key(namespace, name))
            except KeyNotFound:
                raise errors.not_found(self.info, name) from None
            changed = change(self.decode(current_kv))
            new = await changed if isinstance(changed, Awaitable) else changed
            pinned = new.metadata.resource_version
            if pinned == str(current_kv.mod_revision):
                pinned = None
            try:
                return await self._replace(current_kv, new, ctx, subresource, pinned)
            except _Retry:
                continue
        raise errors.conflict(self.info, name, errors.MODIFIED)

    async def _replace(
        self,
        current_kv: KeyValue,
        obj: Resource,
        ctx: RequestContext,
        subresource: str,
        expected: str | None,
    ) -> Resource:
        info = self.info
        old = self.decode(current_kv)
        name = old.metadata.name or ""
        if expected is not None and expected != str(current_kv.mod_revision):
            raise errors.conflict(info, name, errors.MODIFIED)
        new_meta, old_meta = obj.metadata, old.metadata
        for attr in ("uid", "creation_timestamp", "deletion_timestamp", "generation"):
            if getattr(new_meta, attr) is None:
                setattr(new_meta, attr, getattr(old_meta, attr))
        if new_meta.deletion_grace_period_seconds is None:
            new_meta.deletion_grace_period_seconds = old_meta.deletion_grace_period_seconds
        if old_meta.deletion_timestamp is not None:
            new_meta.deletion_timestamp = old_meta.deletion_timestamp
        self.strategy.prepare_for_subresource_update(subresource, obj, old)
        if self.strategy.has_spec:
            spec_changed = _spec_bytes(obj) != _spec_bytes(old)
            new_meta.generation = (old_meta.generation or 1) + (1 if spec_changed else 0)
        walk.set_defaults(obj)
        await self._admit("UPDATE", obj, old, ctx)
        self._track(obj, old, ctx, subresource)
        problems = self.strategy.validate_update(obj, old, subresource)
        if problems:
            raise errors.invalid(info, name, problems)
        new_meta.resource_version = None
        key = current_kv.key
        finalized = self._finalized(obj)
        async with self._prepared(obj, old, ctx.dry_run):
            data = self.encode(obj)
            if data == self.encode(old) and not current_kv.stale:
                obj.metadata.resource_version = str(current_kv.mod_revision)
                return obj
            if ctx.dry_run:
                return obj
            try:
                if finalized:
                    kv = await self.store.delete(key, current_kv.mod_revision)
                else:
                    kv = await self.store.update(key, data, current_kv.mod_revision)
            except Conflict:
                if expected is not None:
                    raise errors.conflict(info, name, errors.MODIFIED) from None
                raise _Retry() from None
            except KeyNotFound:
                raise errors.not_found(info, name) from None
        if finalized:
            await self._deleted(obj)
        obj.metadata.resource_version = str(kv.mod_revision)
        return obj

    async def delete(
        self, namespace: str, name: str, options: DeleteOptions, ctx: RequestContext
    ) -> tuple[Resource, bool]:
        """Delete, or mark for deletion; returns the object and whether it is gone."""
        for _ in range(16):
            try:
                current_kv = await self.store.get(self.key(namespace, name))
            except KeyNotFound:
                raise errors.not_found(self.info, name) from None
            try:
                return await self._delete(current_kv, options, ctx)
            except _Retry:
                continue
        raise errors.conflict(self.info, name, errors.MODIFIED)

    async def _delete(
        self, current_kv: KeyValue, options: DeleteOptions, ctx: RequestContext
    ) -> tuple[Resource, bool]:
        obj = self.decode(current_kv)
        meta = obj.metadata
        name = meta.name or ""
        pre = options.preconditions
        if pre is not None and pre.uid and pre.uid != meta.uid:
            raise errors.conflict(
                self.info,
                name,
                f"Precondition failed: UID in precondition: {pre.uid}, UID in object meta: "
                f"{meta.uid}",
            )
        if (
            pre is not None
            and pre.resource_version
            and pre.resource_version != str(current_kv.mod_revision)
        ):
            raise errors.conflict(
                self.info,
                name,
                f"Precondition failed: ResourceVersion in precondition: {pre.resource_version}, "
                f"ResourceVersion in object meta: {current_kv.mod_revision}",
            )
        await self._admit("DELETE", obj, obj, ctx)
        grace = self.strategy.grace_period(obj, options)
        finalizers = _finalizers_for(options, meta.finalizers, self.strategy.default_propagation)
        changed = finalizers != (meta.finalizers or [])
        meta.finalizers = finalizers or None
        if not grace and not self.strategy.finalizers_pending(obj):
            if ctx.dry_run:
                return obj, True
            try:
                kv = await self.store.delete(current_kv.key, current_kv.mod_revision)
            except Conflict:
                raise _Retry() from None
            except KeyNotFound:
                raise errors.not_found(self.info, name) from None
            await self._deleted(obj)
            obj.metadata.resource_version = str(kv.mod_revision)
            return obj, True
        if meta.deletion_timestamp is None or (
            grace is not None and grace < (meta.deletion_grace_period_seconds or 0)
        ):
            now = self.clock.now().replace(microsecond=0)
            meta.deletion_timestamp = now + datetime.timedelta(seconds=grace or 0)
            meta.deletion_grace_period_seconds = grace or 0
            self.strategy.mark_deleting(obj)
            changed = True
        if not changed:
            return obj, False
        if ctx.dry_run:
            return obj, False
        try:
            kv = await self.store.update(current_kv.key, self.encode(obj), current_kv.mod_revision)
        except Conflict:
            raise _Retry() from None
        except KeyNotFound:
            raise errors.not_found(self.info, name) from None
        obj.metadata.resource_version = str(kv.mod_revision)
        return obj, False

    # Watch.

    async def watch(
        self,
        namespace: str = "",
        selection: Selection | None = None,
        resource_version: str | None = None,
        *,
        send_initial: bool | None = None,
        bookmark_interval: float | None = None,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Changes under a namespace (or everywhere); raises ``ApiError`` 410 when too old.

        Without a resourceVersion (or with "0") the current objects come first as ADDED.
        """
        selection = selection or Selection()
        prefix = self.prefix(namespace)
        initial = resource_version in (None, "", "0") if send_initial is None else send_initial
        if initial:
            listed = await self.list(namespace, selection)
            start = int(listed.metadata.resource_version or 0)
            for obj in listed.items:
                yield WatchEvent(ADDED, obj, int(obj.metadata.resource_version or 0))
            if send_initial and bookmark_interval is not None:
                # The end of the initial events (a watch list), marked by the handler.
                yield WatchEvent(BOOKMARK, None, start)
        else:
            start = parse_resource_version(resource_version)
        events = self.store.watch(prefix, start, progress_after=bookmark_interval)
        try:
            async for event in events:
                if isinstance(event, Progress):
                    yield WatchEvent(BOOKMARK, None, event.revision)
                    continue
                translated = self._translate(event, selection)
                if translated is not None:
                    yield translated
        except Expired as error:
            raise errors.gone(str(error)) from None
        finally:
            await events.aclose()

    def _translate(self, event: Event, selection: Selection) -> WatchEvent | None:
        obj = self.decode(event.kv)
        if selection.everything:
            return WatchEvent(event.type, obj, event.revision)
        now_in = selection.matches(self.info, obj)
        if event.type == DELETED:
            return WatchEvent(DELETED, obj, event.revision) if now_in else None
        was_in = (
            event.type == MODIFIED
            and event.prev is not None
            and selection.matches(self.info, self.decode(event.prev))
        )
        if now_in and was_in:
            return WatchEvent(MODIFIED, obj, event.revision)
        if now_in:
            return WatchEvent(ADDED, obj, event.revision)
        if was_in:
            return WatchEvent(DELETED, obj, event.revision)
        return None

    # Helpers.

    def _check_namespace(self, path_ns: str, body_ns: str | None, name: str | None) -> None:
        if self.info.namespaced:
            if not path_ns:
                raise errors.bad_request(
                    "the namespace of the provided object does not match "
                    "the namespace sent on the request"
                    if body_ns
                    else "a namespace is required for this resource"
                )
            if body_ns and body_ns != path_ns:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
        elif body_ns:
            raise errors.bad_request(
                f"{self.info.kind} {name or ''} is cluster-scoped: metadata.namespace must be empty"
            )

    def _finalized(self, obj: Resource) -> bool:
        """Marked for deletion, its grace period over and its last finalizer gone."""
        meta = obj.metadata
        return (
            meta.deletion_timestamp is not None
            and not meta.deletion_grace_period_seconds
            and not self.strategy.finalizers_pending(obj)
        )

    @contextlib.asynccontextmanager
    async def _prepared(
        self, obj: Resource, old: Resource | None, dry_run: bool
    ) -> AsyncIterator[None]:
        """Run the write hooks' preparations; commit them once the write happened, revert
        them if it did not (or was only a dry run)."""
        prepared: list[Transaction] = []
        keep = not dry_run
        try:
            for hook in self.hooks:
                prepared.append(await hook.prepare(obj, old, dry_run))
            yield
        except BaseException:
            keep = False
            raise
        finally:
            for transaction in prepared if keep else reversed(prepared):
                await (transaction.commit() if keep else transaction.revert())

    async def _deleted(self, obj: Resource) -> None:
        for hook in self.hooks:
            await hook.deleted(obj)

    def _track(
        self, obj: Resource, old: Resource | None, ctx: RequestContext, subresource: str
    ) -> None:
        if self.track_fields is not None:
            self.track_fields(self.info, obj, old, ctx, subresource, self.clock.now())

    async def _admit(
        self, operation: str, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        for stage in self.admission:
            await stage(operation, self.info, obj, old, ctx)


class _Retry(Exception):
    """An unconditional write lost a race: read again and retry."""


def _spec_bytes(obj: Resource) -> bytes:
    return msgspec.json.encode(getattr(obj, "spec", None))


def _finalizers_for(
    options: DeleteOptions, current: list[str] | None, default_policy: str
) -> list[str]:
    """The finalizers an object should carry once this delete is recorded."""
    finalizers = [f for f in current or () if f not in (FINALIZER_ORPHAN, FINALIZER_FOREGROUND)]
    policy = options.propagation_policy
    if policy is None and options.orphan_dependents is not None:
        policy = "Orphan" if options.orphan_dependents else "Background"
    if policy is None:
        existing = {FINALIZER_ORPHAN: "Orphan", FINALIZER_FOREGROUND: "Foreground"}
        policy = next((existing[f] for f in current or () if f in existing), default_policy)
    if policy == "Orphan":
        finalizers.append(FINALIZER_ORPHAN)
    elif policy == "Foreground":
        finalizers.append(FINALIZER_FOREGROUND)
    return finalizers


def parse_resource_version(value: str | None) -> int:
    """A request's resourceVersion as a revision; anything but a non-negative integer is a 400."""
    try:
        revision = int(value or "")
    except ValueError:
        raise errors.bad_request(f'invalid resource version "{value}"') from None
    if revision < 0:
        raise errors.bad_request(f'invalid resource version "{value}"')
    return revision


def _encode_continue(revision: int, last_key: str, prefix: str) -> str:
    token = {"v": "meta.k8s.io/v1", "rv": revision, "start": last_key[len(prefix) :]}
    return base64.urlsafe_b64encode(json.dumps(token).encode()).decode()


def _decode_continue(token: str, prefix: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        revision, start = int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError):
        raise errors.bad_request("continue key is not valid: invalid token") from None
    if data.get("v") != "meta.k8s.io/v1" or revision <= 0 or ".." in start:
        raise errors.bad_request(
            "continue key is not valid: incorrect encoded start "
            "resourceVersion (version meta.k8s.io/v1)"
        )
    return revision, prefix + start
