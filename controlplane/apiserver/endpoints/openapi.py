"""The OpenAPI documents the server publishes: ``/openapi/v2`` and ``/openapi/v3``, the v3
root linking one document per group-version.

kubectl fetches the v3 root and its object's group-version document before every ``create``
and ``apply`` (to validate fields), and building and encoding a document takes hundreds of
milliseconds, so each document is encoded once, with its hash, and kept until a custom
resource of its group-version comes or goes (``forget``).  As upstream's kube-openapi serves
them: every answer has an ``ETag`` (a matching ``If-None-Match`` gets 304); a document asked
for by the hash the root links is ``Cache-Control: public, immutable``, so a client's disk
cache keeps it; a hash that is no longer current is redirected (301) to the document's current
link.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

import msgspec
from aiohttp import web

from controlplane.apiserver import errors
from kube.api import openapi, openapi_proto
from kube.api.scheme import KindInfo

JSON = "application/json"


class OpenAPIDocuments:
    """The encoded documents of the kinds ``kinds()`` lists when asked, kept until forgotten."""

    def __init__(self, kinds: Callable[[], list[KindInfo]]) -> None:
        self._kinds = kinds
        self._v3: dict[tuple[str, str], tuple[bytes, str]] = {}
        self._root: tuple[bytes, str] | None = None
        self._v2: dict[str, bytes] = {}

    def forget(self, group: str, version: str) -> None:
        """The kinds of ``group/version`` changed: its document (and the root) are rebuilt."""
        self._v3.pop((group, version), None)
        self._root = None

    def respond(self, request: web.Request, path: str) -> web.Response:
        if path == "/openapi/v2":
            return self._v2_response(request)
        if path == "/openapi/v3":
            data, etag = self._v3_root()
            return _content(request, data, etag, JSON)
        rest = path.removeprefix("/openapi/v3/")
        for group, version in {k.group_version for k in self._kinds()}:
            if openapi.group_version_path(group, version) == rest:
                return self._v3_response(request, group, version)
        raise errors.not_routed()

    def _v3_document(self, group: str, version: str) -> tuple[bytes, str]:
        if (group, version) not in self._v3:
            data = openapi.encoded_document(group, version, self._kinds())
            self._v3[group, version] = (data, openapi.document_hash(data))
        return self._v3[group, version]

    def _v3_root(self) -> tuple[bytes, str]:
        if self._root is None:
            group_versions = {k.group_version for k in self._kinds()}
            hashes = {gv: self._v3_document(*gv)[1] for gv in group_versions}
            data = msgspec.json.encode(openapi.root(hashes))
            self._root = (data, openapi.document_hash(data))
        return self._root

    def _v3_response(self, request: web.Request, group: str, version: str) -> web.Response:
        data, etag = self._v3_document(group, version)
        asked = request.query.get("hash")
        if asked and asked != etag:
            current = f"/openapi/v3/{openapi.group_version_path(group, version)}?hash={etag}"
            return web.Response(status=301, headers={"Location": current})
        response = _content(request, data, etag, JSON)
        response.headers["Vary"] = "Accept"
        if asked:
            response.headers["Cache-Control"] = "public, immutable"
            expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=365)
            response.headers["Expires"] = expires.strftime("%a, %d %b %Y %H:%M:%S UTC")
        return response

    def _v2_response(self, request: web.Request) -> web.Response:
        # Built-in kinds only, so computed once per encoding; kubectl asks for protobuf.
        accept = request.headers.get("Accept") or ""
        protobuf = any(media in accept for media in openapi_proto.ACCEPTED)
        encoding = "protobuf" if protobuf else "json"
        if encoding not in self._v2:
            swagger = openapi.swagger_v2()
            self._v2[encoding] = (
                openapi_proto.document(swagger) if protobuf else msgspec.json.encode(swagger)
            )
        media = openapi_proto.MEDIA_TYPE if protobuf else JSON
        return web.Response(body=self._v2[encoding], headers={"Content-Type": media})


def _content(request: web.Request, data: bytes, etag: str, media: str) -> web.Response:
    quoted = f'"{etag}"'
    headers = {"ETag": quoted, "Content-Type": media}
    if quoted in (request.headers.get("If-None-Match") or ""):
        return web.Response(status=304, headers=headers)
    return web.Response(body=data, headers=headers)
