"""Resource requests: from a parsed request to a registry call and back to bytes.

One handler serves every kind.  It decodes bodies (JSON, YAML, the patch types) with unknown
field handling per ``fieldValidation`` (Strict: 400; Warn, the default: ``Warning`` headers;
Ignore), calls the kind's ``ResourceStore``, and encodes the answer in the representation the
client asked for (the object, a Table, PartialObjectMetadata) and the media type it prefers
(JSON, YAML, or protobuf for kinds that have a message).  Watches stream one JSON event per line,
or length-prefixed protobuf WatchEvents, over a chunked response until the client leaves,
``timeoutSeconds`` passes, or the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web

from controlplane.apiserver import errors, protobuf
from controlplane.apiserver.auth import User, reviews
from controlplane.apiserver.crd import customresources
from controlplane.apiserver.endpoints import apply, audit, negotiation, patch, tables
from controlplane.apiserver.endpoints.requestinfo import RequestInfo, true
from controlplane.apiserver.registry import rest, subresources
from controlplane.apiserver.registry.object import ObjectREST
from controlplane.apiserver.registry.store import (
    BOOKMARK,
    ERROR,
    RequestContext,
    ResourceStore,
    Selection,
    WatchEvent,
)
from controlplane.apiserver.storage import watchcache
from kube.api import codec
from kube.api.meta_v1 import (
    DeleteOptions,
    ListMeta,
    PartialObjectMetadata,
    PartialObjectMetadataList,
    Resource,
    ResourceList,
    Status,
    StatusCause,
    StatusDetails,
    TypeMeta,
)
from kube.api.scheme import KindInfo
from kube.clock import Clock

FIELD_VALIDATION = ("Strict", "Warn", "Ignore")
DEFAULT_WATCH_TIMEOUT = 1800.0


def encode(value: Any) -> bytes:
    """One JSON document as upstream's encoder writes it: followed by a newline (clients and
    scripts compare bodies byte for byte, and a watch stream is one document per line)."""
    return msgspec.json.encode(value) + b"\n"


def json_response(
    value: Any, status: int = 200, content_type: str = negotiation.JSON
) -> web.Response:
    response = web.Response(body=encode(value), status=status)
    response.content_type = negotiation.JSON
    if content_type != negotiation.JSON:
        response.headers["Content-Type"] = content_type
    return response


def json_dict(value: Any) -> dict[str, Any]:
    """A response object as the JSON dict ``protobuf.encode_body`` takes."""
    if isinstance(value, dict):
        return value
    decoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(value))
    return decoded


def message_of(api_version: str | None, kind: str | None) -> Callable[[], bool]:
    """Whether a kind has a protobuf message: asked only once a client prefers protobuf (the
    tables are built on first use)."""
    return lambda: protobuf.has_message(api_version or "", kind or "")


def serves_protobuf(value: Any) -> Callable[[], bool]:
    """Whether ``value``'s kind has a protobuf message."""
    if isinstance(value, dict):
        return message_of(value.get("apiVersion"), value.get("kind"))
    return message_of(getattr(value, "api_version", None), getattr(value, "kind", None))


def protobuf_response(
    value: Any, status: int = 200, content_type: str = negotiation.PROTOBUF
) -> web.Response:
    """An object as ``application/vnd.kubernetes.protobuf``, for a kind that has a message."""
    response = web.Response(body=protobuf.encode_body(json_dict(value)), status=status)
    response.headers["Content-Type"] = content_type
    return response


def respond(value: Any, status: int, output: negotiation.Output) -> web.Response:
    """``value`` in the negotiated media type: YAML, protobuf or JSON."""
    if output.media_type == negotiation.YAML:
        response = web.Response(text=codec.dump_yaml(value), status=status)
        response.content_type = negotiation.YAML
        return response
    if output.media_type == negotiation.PROTOBUF:
        return protobuf_response(value, status, output.content_type)
    return json_response(value, status, output.content_type)


def status_response(request: web.Request, error: errors.ApiError) -> web.Response:
    """The Status of a failed request, in protobuf if the client prefers it (as upstream's
    ErrorNegotiated), else in JSON: also when nothing it accepts is served, and always for a
    406, which upstream writes as raw JSON."""
    output = negotiation.Output(negotiation.JSON)
    if error.code != 406:
        with contextlib.suppress(errors.ApiError):
            output = negotiation.choose(
                request.headers.get("Accept"), protobuf=lambda: True, transforms=False
            )
    if output.media_type == negotiation.PROTOBUF:
        response = protobuf_response(error.status(), error.code)
    else:
        response = json_response(error.status(), error.code)
    if error.retry_after is not None:
        response.headers["Retry-After"] = str(error.retry_after)
    return response


def event_frame(event_type: str, obj: Any, framed: bool) -> bytes:
    """One watch event: a JSON line, or a length-prefixed protobuf WatchEvent."""
    if framed:
        return protobuf.watch_frame(event_type, protobuf.encode_body(json_dict(obj)))
    return encode({"type": event_type, "object": obj})


@dataclass
class Request:
    """What a resource handler needs from the HTTP request."""

    http: web.Request
    info: RequestInfo
    ctx: RequestContext
    user: User

    @property
    def query(self) -> Any:
        return self.http.query

    def param(self, name: str) -> str | None:
        value = self.http.query.get(name)
        return value if value is None else str(value)


class ResourceHandler:
    """Serves ``/api/...`` and ``/apis/...`` resource requests for the registry's kinds."""

    def __init__(
        self,
        lookup: Callable[[str, str, str], ResourceStore | None],
        clock: Clock,
        reviewers: dict[tuple[str, str], reviews.Reviewer],
        backends: rest.Backends,
        bookmark_interval: float = 60.0,
    ) -> None:
        self.lookup = lookup
        self.backends = backends
        """What subresources' REST objects reach beyond their kind's store."""
        self.clock = clock
        self.reviewers = reviewers
        self.bookmark_interval = bookmark_interval
        self.caches: Callable[[ResourceStore], watchcache.WatchCache] | None = None
        """The watch cache of a kind, for lists and gets with a resourceVersion."""

    async def handle(self, req: Request) -> web.StreamResponse:
        info = req.info
        store = self.lookup(info.group, info.version, info.resource)
        if store is None:
            raise errors.not_routed()
        sub = info.subresource
        if sub and sub not in store.info.subresources:
            raise errors.not_routed()
        if store.info.deprecation is not None:
            req.ctx.warnings.append(store.info.deprecation)
        if not sub and info.verb not in store.info.verbs:
            raise errors.verb_not_served(bool(info.name), store.info.verbs)
        if (
            store.info.namespaced
            and not info.namespace
            and info.verb
            not in (
                "list",
                "watch",
                "deletecollection",
            )
            and not (info.verb == "create" and info.name)
        ):
            raise errors.bad_request("a namespace is required for this resource")
        served_by = subresources.rest(store, sub, self.backends)
        if served_by is not None:
            return await self._rest(req, store, served_by)
        if sub:
            raise errors.method_not_allowed(f"{store.info.plural}/{sub} is not served yet")
        verb = info.verb
        if verb == "get":
            return self._render(req, store, await self._get(req, store))
        if verb == "list":
            return await self._list(req, store)
        if verb == "watch":
            return await self._watch(req, store)
        reviewer = self.reviewers.get((store.info.group, store.info.kind))
        if reviewer is not None and verb == "create":
            review = await self._read_object(req, store.info)
            reviews.validate(store.info, review)
            answered = await reviewer(review, req.user, info.namespace)
            return self._plain(req, answered, 201)
        if verb == "create":
            obj = await self._read_object(req, store.info)
            created = await store.create(info.namespace, obj, req.ctx)
            return self._render(req, store, created, status=201)
        if verb == "update":
            obj = await self._read_object(req, store.info)
            updated, was_created = await store.update(info.namespace, info.name, obj, req.ctx)
            return self._render(req, store, updated, status=201 if was_created else 200)
        if verb == "patch":
            return await self._patch(req, store, ObjectREST(store, ""))
        if verb == "delete":
            return await self._delete(req, store)
        if verb == "deletecollection":
            return await self._delete_collection(req, store)
        raise errors.method_not_allowed(f"{verb or req.http.method} is not supported")

    async def _rest(
        self, req: Request, store: ResourceStore, subresource: object
    ) -> web.StreamResponse:
        """A verb served by the interface a REST object implements: a subresource's, or a
        kind's own where a REST object replaces the store (``bindings``)."""
        info = req.info
        namespace, name = info.namespace, info.name
        if isinstance(subresource, rest.Connecter):
            tail = "/".join(info.parts[3:])
            path = f"/{tail}" + ("/" if req.http.path.endswith("/") and tail else "")
            return await subresource.connect(req.http, namespace, name, path)
        if info.verb == "get" and isinstance(subresource, rest.Getter):
            return self._answer(req, store, await subresource.get(namespace, name))
        if info.verb == "list" and isinstance(subresource, rest.Lister):
            listed = await subresource.list(namespace, self._selection(req, store))
            return self._render_list(req, store, listed)
        if info.verb == "create" and isinstance(subresource, rest.Creater):
            obj = await self._read_object(req, subresource.body)
            created = await subresource.create(namespace, name, obj, req.ctx)
            return self._answer(req, store, created, status=201)
        if info.verb == "update" and isinstance(subresource, rest.Updater):
            obj = await self._read_object(req, subresource.body)
            return self._answer(req, store, await subresource.update(namespace, name, obj, req.ctx))
        if info.verb == "patch" and isinstance(subresource, rest.Patcher):
            return await self._patch(req, store, subresource)
        raise errors.method_not_routed()

    # Bodies.

    def _field_validation(self, req: Request) -> str:
        value = req.param("fieldValidation") or "Warn"
        if value not in FIELD_VALIDATION:
            raise errors.bad_request(
                f'fieldValidation: Unsupported value: "{value}": supported values: '
                '"Ignore", "Strict", "Warn"'
            )
        return value

    async def _body(self, req: Request) -> bytes:
        try:
            return await req.http.read()
        except web.HTTPRequestEntityTooLarge:
            raise errors.too_large() from None

    async def _read_object(self, req: Request, info: KindInfo) -> Resource:
        """The request body as an object of ``info``'s kind (the resource's, or another for a
        subresource that takes one, such as ``serviceaccounts/token``)."""
        body = await self._body(req)
        media = negotiation.body_type(req.http.headers.get("Content-Type"))
        try:
            if media == negotiation.JSON:
                decoded = codec.decode_json(body, info.cls)
            elif media in negotiation.YAML_TYPES:
                documents = codec.load_yaml_documents(body)
                if len(documents) != 1:
                    raise errors.bad_request("the request body must hold exactly one object")
                decoded = codec.from_builtins(documents[0], info.cls)
            elif media == negotiation.PROTOBUF:
                decoded = codec.from_builtins(protobuf.decode_body(body), info.cls)
            else:
                raise errors.unsupported_media_type(media)
        except (codec.DecodeError, protobuf.ProtobufError) as error:
            raise errors.bad_request(f"error decoding request body: {error}") from None
        obj = decoded.obj
        audit.log_request_object(req.http, obj.metadata)
        self._check_type(obj, info)
        self._unknown_fields(req, decoded)
        return obj

    def _check_type(self, obj: Resource, info: KindInfo) -> None:
        """The body's kind must be the endpoint's; a body without one takes the endpoint's."""
        obj.api_version = obj.api_version or info.api_version
        obj.kind = obj.kind or info.kind
        if obj.api_version != info.api_version:
            raise errors.bad_request(
                f"the API version in the data ({obj.api_version}) does not match the expected "
                f"API version ({info.api_version})"
            )
        if obj.kind != info.kind:
            raise errors.bad_request(
                f"the kind in the data ({obj.kind}) does not match the expected kind ({info.kind})"
            )

    def _unknown_fields(self, req: Request, decoded: codec.Decoded[Any]) -> None:
        """Fields of a body its kind does not know (with what a custom resource's schema
        prunes), handled as ``fieldValidation`` says."""
        unknown = customresources.unknown_fields(decoded.obj, decoded.unknown_fields)
        mode = self._field_validation(req)
        if not unknown:
            return
        messages = [f'unknown field "{path}"' for path in unknown]
        if mode == "Strict":
            raise errors.bad_request("strict decoding error: " + ", ".join(messages))
        if mode == "Warn":
            req.ctx.warnings.extend(messages)

    # Reads.

    def _render(
        self, req: Request, store: ResourceStore, obj: Resource, status: int = 200
    ) -> web.Response:
        output = negotiation.choose(
            req.http.headers.get("Accept"),
            protobuf=message_of(store.info.api_version, store.info.kind),
        )
        if output.as_ == negotiation.TABLE:
            table = tables.table(
                store.info,
                [obj],
                self.clock.now(),
                include=req.param("includeObject") or "Metadata",
                list_meta=ListMeta(resource_version=obj.metadata.resource_version),
            )
            return self._respond(req, table, status, output)
        if output.as_ == negotiation.PARTIAL:
            return self._respond(req, PartialObjectMetadata(metadata=obj.metadata), status, output)
        if output.as_ == negotiation.PARTIAL_LIST:
            raise errors.not_acceptable("a single object cannot be a PartialObjectMetadataList")
        return self._respond(req, obj, status, output)

    def _answer(
        self, req: Request, store: ResourceStore, obj: TypeMeta, status: int = 200
    ) -> web.Response:
        """An object of the resource's kind as negotiated; any other (a Scale, a Status, a
        TokenRequest) as itself, in JSON, YAML or protobuf."""
        if isinstance(obj, store.info.cls):
            return self._render(req, store, obj, status)
        return self._plain(req, obj, status)

    def _plain(self, req: Request, value: Any, status: int) -> web.Response:
        """An answer that is no representation of the resource (a Status, a review), as the
        client accepts it: no Table or PartialObjectMetadata of it."""
        output = negotiation.choose(
            req.http.headers.get("Accept"), protobuf=serves_protobuf(value), transforms=False
        )
        return self._respond(req, value, status, output)

    def _respond(
        self, req: Request, value: Any, status: int, output: negotiation.Output
    ) -> web.Response:
        response = respond(value, status, output)
        for warning in req.ctx.warnings:
            response.headers.add("Warning", f'299 - "{_escape(warning)}"')
        return response

    def _selection(self, req: Request, store: ResourceStore) -> Selection:
        return Selection.parse(store.info, req.param("labelSelector"), req.param("fieldSelector"))

    def _cache(self, store: ResourceStore) -> watchcache.WatchCache | None:
        """The kind's watch cache once it has been filled (reads go to the store until
        then, as upstream's do)."""
        cache = self.caches(store) if self.caches is not None else None
        return cache if cache is not None and cache.ready else None

    async def _get(self, req: Request, store: ResourceStore) -> Resource:
        info, version = req.info, req.param("resourceVersion")
        cache = self._cache(store) if watchcache.serves_get(version) else None
        if cache is None or version is None:
            return await store.get(info.namespace, info.name)
        return await cache.read(info.namespace, info.name, version)

    async def _list(self, req: Request, store: ResourceStore) -> web.Response:
        limit = _int_param(req, "limit", 0)
        version, match = req.param("resourceVersion"), req.param("resourceVersionMatch")
        token = req.param("continue")
        selection = self._selection(req, store)
        cache = self._cache(store) if watchcache.serves_list(version, match, limit, token) else None
        if cache is not None and version is not None:
            listed = await cache.list(req.info.namespace, selection, version)
        else:
            listed = await store.list(
                req.info.namespace,
                selection,
                limit=limit,
                continue_token=token,
                resource_version=version,
                resource_version_match=match,
            )
        return self._render_list(req, store, listed)

    def _render_list(
        self, req: Request, store: ResourceStore, listed: ResourceList[Any]
    ) -> web.Response:
        output = negotiation.choose(
            req.http.headers.get("Accept"),
            protobuf=message_of(store.info.api_version, store.info.list_kind),
        )
        if output.as_ == negotiation.TABLE:
            table = tables.table(
                store.info,
                listed.items,
                self.clock.now(),
                include=req.param("includeObject") or "Metadata",
                list_meta=listed.metadata,
            )
            return self._respond(req, table, 200, output)
        if output.as_ in (negotiation.PARTIAL_LIST, negotiation.PARTIAL):
            partial = PartialObjectMetadataList(
                metadata=listed.metadata,
                items=[PartialObjectMetadata(metadata=o.metadata) for o in listed.items],
            )
            return self._respond(
                req, partial, 200, negotiation.Output(output.media_type, negotiation.PARTIAL_LIST)
            )
        return self._respond(req, listed, 200, output)

    async def _watch(self, req: Request, store: ResourceStore) -> web.StreamResponse:
        output = negotiation.choose(
            req.http.headers.get("Accept"),
            protobuf=message_of(store.info.api_version, store.info.kind),
            stream=True,
        )
        framed = output.media_type == negotiation.PROTOBUF
        timeout = float(_int_param(req, "timeoutSeconds", 0)) or DEFAULT_WATCH_TIMEOUT
        bookmarks = true(req.param("allowWatchBookmarks"))
        send_initial = req.param("sendInitialEvents")
        events = store.watch(
            req.info.namespace,
            self._selection(req, store),
            req.param("resourceVersion"),
            send_initial=true(send_initial) if send_initial is not None else None,
            bookmark_interval=self.bookmark_interval if bookmarks else None,
        )
        response = web.StreamResponse(status=200)
        # A stream is named by its serializer alone, as upstream's: a Table watch is JSON.
        response.headers["Content-Type"] = (
            f"{negotiation.PROTOBUF};stream=watch" if framed else output.media_type
        )
        response.headers["Cache-Control"] = "no-cache, private"
        response.enable_chunked_encoding()
        await response.prepare(req.http)
        first = True
        initial_end = bookmarks and send_initial is not None and true(send_initial)
        include = req.param("includeObject") or "Metadata"

        def frame(event: WatchEvent) -> bytes:
            nonlocal first, initial_end
            obj: Any
            if event.type == BOOKMARK:
                obj = {
                    "kind": store.info.kind,
                    "apiVersion": store.info.api_version,
                    "metadata": {"resourceVersion": str(event.revision)},
                }
                if initial_end:
                    obj["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
                    initial_end = False
            elif output.as_ == negotiation.TABLE:
                assert event.obj is not None
                obj = tables.table(
                    store.info,
                    [event.obj],
                    self.clock.now(),
                    include=include,
                    with_columns=first,
                    list_meta=ListMeta(resource_version=str(event.revision)),
                )
                first = False
            elif output.as_ in (negotiation.PARTIAL, negotiation.PARTIAL_LIST):
                assert event.obj is not None
                obj = PartialObjectMetadata(metadata=event.obj.metadata)
            else:
                obj = event.obj
            return event_frame(event.type, obj, framed)

        try:
            async with asyncio.timeout(timeout):
                async for event in events:
                    await response.write(frame(event))
        except TimeoutError:
            pass
        except errors.ApiError as error:
            with contextlib.suppress(ConnectionError):
                await response.write(event_frame(ERROR, error.status(), framed))
        except ConnectionError:
            return response
        finally:
            await events.aclose()
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response

    # Writes.

    async def _patch(
        self, req: Request, store: ResourceStore, target: rest.Patcher
    ) -> web.Response:
        """A patch of ``target``'s representation (the object, or a subresource's)."""
        media = negotiation.body_type(req.http.headers.get("Content-Type"))
        if media not in negotiation.PATCH_TYPES:
            raise errors.unsupported_media_type(media)
        body = await self._body(req)
        try:
            document: Any = (
                codec.load_yaml_documents(body)[0]
                if media == negotiation.APPLY_PATCH
                else msgspec.json.decode(body)
            )
        except (msgspec.DecodeError, codec.DecodeError, IndexError) as error:
            raise errors.bad_request(f"error decoding patch: {error}") from None
        if media == negotiation.APPLY_PATCH:
            if not target.applies:
                raise errors.unsupported_media_type(media)
            return await self._server_side_apply(req, store, target, document)
        if req.param("force") is not None:
            raise _invalid_options(
                "force",
                "FieldValueForbidden",
                "Forbidden: may not be specified for non-apply patch",
            )
        info = req.info

        def change(current: Resource) -> Resource:
            return self._apply_patch(req, target.body, current, media, document)

        updated = await target.patch(info.namespace, info.name, change, req.ctx)
        return self._answer(req, store, updated)

    async def _server_side_apply(
        self, req: Request, store: ResourceStore, target: rest.Patcher, document: Any
    ) -> web.Response:
        """``application/apply-patch+yaml``: apply the configuration; create the object if
        it is absent (201)."""
        info = req.info
        manager = req.param("fieldManager") or ""
        if not manager:
            raise _invalid_options(
                "fieldManager", "FieldValueRequired", "Required value: is required for apply patch"
            )
        if len(manager) > apply.MAX_MANAGER_LENGTH:
            raise _invalid_options(
                "fieldManager",
                "FieldValueTooLong",
                f"Too long: may not be more than {apply.MAX_MANAGER_LENGTH} bytes",
            )
        force = true(req.param("force"))
        subresource = target.subresource
        config = self._apply_config(req, store, document)
        req.ctx.server_side_apply = True

        def change(current: Resource) -> Resource:
            return apply.apply(
                store.info,
                current,
                config,
                manager,
                force=force,
                subresource=subresource,
                now=self.clock.now(),
            )

        for _ in range(4):
            try:
                updated = await target.patch(info.namespace, info.name, change, req.ctx)
                return self._answer(req, store, updated)
            except errors.ApiError as error:
                if error.code != 404 or subresource:
                    raise
            created = apply.apply(
                store.info,
                None,
                config,
                manager,
                force=force,
                subresource=subresource,
                now=self.clock.now(),
            )
            try:
                obj = await store.create(info.namespace, created, req.ctx)
                return self._render(req, store, obj, status=201)
            except errors.ApiError as error:
                if error.reason != "AlreadyExists":
                    raise
        raise errors.conflict(store.info, info.name, errors.MODIFIED)

    def _apply_config(self, req: Request, store: ResourceStore, document: Any) -> dict[str, Any]:
        """An apply configuration checked against the endpoint, as plain values without
        unknown fields (handled per ``fieldValidation``) and nulls."""
        info = store.info
        if not isinstance(document, dict):
            raise errors.bad_request("error decoding YAML: the configuration must be an object")
        version = document.get("apiVersion")
        if version != info.api_version:
            raise errors.bad_request(
                "Incorrect version specified in apply patch. Specified patch version: "
                f"{version or ''}, expected: {info.api_version}"
            )
        kind = document.get("kind")
        if kind != info.kind:
            raise errors.bad_request(
                f"the kind in the apply patch ({kind or ''}) does not match the expected kind "
                f"({info.kind})"
            )
        metadata = document.get("metadata")
        if isinstance(metadata, dict) and metadata.get("managedFields") is not None:
            raise errors.bad_request("metadata.managedFields must be nil")
        try:
            decoded = codec.from_builtins(document, info.cls)
        except codec.DecodeError as error:
            raise errors.ApiError(
                422,
                "Invalid",
                f"failed to create typed patch object ({info.api_version}, Kind={info.kind}): "
                f"{error}",
            ) from None
        self._unknown_fields(req, decoded)
        config: dict[str, Any] = codec.to_builtins(decoded.obj)
        meta = config.setdefault("metadata", {})
        name = req.info.name
        if meta.get("name") not in (None, name):
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        meta["name"] = name
        namespace = req.info.namespace
        if info.namespaced:
            if meta.get("namespace") not in (None, namespace):
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
        elif meta.get("namespace"):
            raise errors.bad_request(
                f"{info.kind} {name} is cluster-scoped: metadata.namespace must be empty"
            )
        return config

    def _apply_patch(
        self, req: Request, kind: KindInfo, current: Resource, media: str, document: Any
    ) -> Resource:
        original = codec.to_builtins(current)
        try:
            if media == negotiation.JSON_PATCH:
                patched = patch.apply_json_patch(original, document)
            elif media == negotiation.MERGE_PATCH:
                patched = patch.apply_merge_patch(original, document)
            else:
                patched = patch.apply_strategic_merge_patch(original, document, kind.cls)
        except patch.PatchError as error:
            raise errors.ApiError(
                error.code, "Invalid" if error.code == 422 else "BadRequest", str(error)
            ) from None
        try:
            decoded = codec.from_builtins(patched, kind.cls)
        except codec.DecodeError as error:
            raise errors.ApiError(
                422, "Invalid", f"the patch produced an invalid object: {error}"
            ) from None
        self._check_type(decoded.obj, kind)
        self._unknown_fields(req, decoded)
        return decoded.obj

    async def _delete_options(self, req: Request) -> DeleteOptions:
        body = await self._body(req)
        options = DeleteOptions()
        if body.strip():
            try:
                options = codec.decode_json(body, DeleteOptions).obj
            except codec.DecodeError as error:
                raise errors.bad_request(f"error decoding DeleteOptions: {error}") from None
        grace = req.param("gracePeriodSeconds")
        if grace is not None:
            options.grace_period_seconds = _int_param(req, "gracePeriodSeconds", 0)
        policy = req.param("propagationPolicy")
        if policy is not None:
            options.propagation_policy = policy
        orphan = req.param("orphanDependents")
        if orphan is not None:
            options.orphan_dependents = true(orphan)
        if options.propagation_policy not in (None, "Orphan", "Background", "Foreground"):
            raise errors.bad_request(
                f'propagationPolicy: Unsupported value: "{options.propagation_policy}"'
            )
        if options.propagation_policy is not None and options.orphan_dependents is not None:
            raise errors.bad_request("orphanDependents and propagationPolicy cannot be both set")
        if options.dry_run or req.param("dryRun"):
            req.ctx.dry_run = True
        return options

    async def _delete(self, req: Request, store: ResourceStore) -> web.Response:
        options = await self._delete_options(req)
        obj, gone = await store.delete(req.info.namespace, req.info.name, options, req.ctx)
        if not gone or store.info.returns_deleted:
            return self._render(req, store, obj)
        status = Status(
            status="Success",
            details=StatusDetails(
                name=obj.metadata.name,
                group=store.info.group or None,
                kind=store.info.plural,
                uid=obj.metadata.uid,
            ),
        )
        return self._plain(req, status, 200)

    async def _delete_collection(self, req: Request, store: ResourceStore) -> web.Response:
        options = await self._delete_options(req)
        listed = await store.list(req.info.namespace, self._selection(req, store))
        deleted = []
        for obj in listed.items:
            try:
                done, _ = await store.delete(
                    obj.metadata.namespace or "", obj.metadata.name or "", options, req.ctx
                )
            except errors.ApiError as error:
                if error.code == 404:
                    continue
                raise
            deleted.append(done)
        result: ResourceList[Any] = ResourceList(
            api_version=store.info.api_version,
            kind=store.info.list_kind,
            metadata=ListMeta(resource_version=listed.metadata.resource_version),
            items=deleted,
        )
        return self._plain(req, result, 200)


def _invalid_options(field: str, reason: str, message: str) -> errors.ApiError:
    """A 422 about the PatchOptions of a request, as upstream words it."""
    return errors.ApiError(
        422,
        "Invalid",
        f'PatchOptions.meta.k8s.io "" is invalid: {field}: {message}',
        StatusDetails(
            group="meta.k8s.io",
            kind="PatchOptions",
            causes=[StatusCause(reason=reason, message=message, field=field)],
        ),
    )


def _escape(text: str) -> str:
    """A warning's text as an RFC 9110 quoted string; control characters (an unknown field
    named with a newline) become ``\\xNN``, so the header cannot break the response."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in escaped)


def _int_param(req: Request, name: str, default: int) -> int:
    value = req.param(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise errors.bad_request(f'{name}: Invalid value: "{value}": must be an integer') from None
    if number < 0:
        raise errors.bad_request(f'{name}: Invalid value: "{value}": must be non-negative')
    return number
