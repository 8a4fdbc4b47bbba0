"""Content negotiation: which representation a client asked for, and what it sent.

Kubernetes clients ask for alternative representations with media-type parameters:
``application/json;as=Table;v=v1;g=meta.k8s.io`` (kubectl get), ``as=PartialObjectMetadata``
(metadata-only informers), ``as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io`` (aggregated
discovery), and for protobuf: client-go's default for built-in kinds is
``application/vnd.kubernetes.protobuf, */*``.  Bodies come as JSON, YAML, one of the patch types,
or protobuf (for kubectl's generator commands).

The choice is upstream's (apiserver's ``NegotiateMediaTypeOptions`` over goautoneg): the Accept
clauses sorted by q-value, and before wildcards, the order kept otherwise; each clause tried
against the server's media types in their order (JSON, YAML, protobuf: ``*/*`` is JSON), the
first one whose parameters the endpoint allows wins.  A transformation (``as``) is allowed where
the endpoint serves it: Table in JSON and YAML, PartialObjectMetadata in any of the three.
Protobuf without a transformation only for kinds that have a message (custom resources do
not: their clients' ``*/*`` gets JSON); ``stream=watch`` only for JSON and protobuf.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controlplane.apiserver import errors

JSON = "application/json"
YAML = "application/yaml"
YAML_TYPES = (YAML, "application/x-yaml", "text/yaml")
PROTOBUF = "application/vnd.kubernetes.protobuf"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
APPLY_PATCH_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)

TABLE, PARTIAL, PARTIAL_LIST, DISCOVERY = (
    "Table",
    "PartialObjectMetadata",
    "PartialObjectMetadataList",
    "APIGroupDiscoveryList",
)


SERVED = (JSON, YAML, PROTOBUF)
"""The media types of responses, in upstream's order (a wildcard takes the first)."""
STREAMED = (JSON, PROTOBUF)
"""Those with a watch stream encoding."""
META_GROUP_VERSIONS = (("meta.k8s.io", "v1"), ("meta.k8s.io", "v1beta1"))


@dataclass(frozen=True)
class MediaType:
    type: str
    params: dict[str, str]
    q: float = 1.0

    @property
    def as_(self) -> str:
        return self.params.get("as", "")

    def matches(self, offered: str) -> bool:
        """Whether this (possibly wildcard) clause admits the media type ``offered``."""
        major, _, minor = self.type.partition("/")
        offered_major = offered.partition("/")[0]
        return self.type == offered or (minor == "*" and major in ("*", offered_major))


def parse_media_types(header: str | None) -> list[MediaType]:
    """The entries of an Accept header, in order."""
    found = []
    for entry in (header or "").split(","):
        parts = [p.strip() for p in entry.split(";")]
        media = parts[0].lower()
        if media == "*":
            media = "*/*"
        if media.count("/") != 1:
            continue
        params, q = {}, 1.0
        for part in parts[1:]:
            key, equals, value = part.partition("=")
            key = key.strip().lower()
            if not equals:
                continue
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            else:
                params[key] = value.strip().strip('"')
        found.append(MediaType(media, params, q))
    return found


def _before(a: MediaType, b: MediaType) -> bool:
    """goautoneg's order: higher q first; a concrete type or subtype before a wildcard."""
    a_major, _, a_minor = a.type.partition("/")
    b_major, _, b_minor = b.type.partition("/")
    return a.q > b.q or (a_major != "*" and b_major == "*") or (a_minor != "*" and b_minor == "*")


def accepted(header: str | None) -> list[MediaType]:
    """The clauses of an Accept header in the order they are tried: sorted as goautoneg sorts
    them (Go's insertion sort, which its sort uses for the dozen clauses a header has)."""
    clauses = parse_media_types(header)
    for i in range(1, len(clauses)):
        j = i
        while j > 0 and _before(clauses[j], clauses[j - 1]):
            clauses[j - 1], clauses[j] = clauses[j], clauses[j - 1]
            j -= 1
    return clauses


@dataclass(frozen=True)
class Output:
    """The chosen representation: ``as_`` names an alternative kind ("" for the object)."""

    media_type: str
    as_: str = ""

    @property
    def content_type(self) -> str:
        """The Content-Type of a single response in this representation."""
        if self.as_ in (TABLE, PARTIAL, PARTIAL_LIST):
            return f"{self.media_type};as={self.as_};v=v1;g=meta.k8s.io"
        return self.media_type


def _never() -> bool:
    return False


def _option(
    clause: MediaType,
    offered: str,
    *,
    protobuf: Callable[[], bool],
    transforms: bool,
    discovery: bool,
    stream: bool,
) -> Output | None:
    """What ``clause`` asks of the media type ``offered``, if the endpoint serves it."""
    stream_schema = clause.params.get("stream", "")
    if stream_schema and (offered not in STREAMED or stream_schema != "watch"):
        return None
    if stream and offered not in STREAMED:
        return None
    target = {key: clause.params[key] for key in ("as", "g", "v") if key in clause.params}
    if not target:
        if offered == PROTOBUF and not protobuf():
            return None
        return Output(offered)
    group_version = (target.get("g", ""), target.get("v", ""))
    kind = target.get("as", "")
    if discovery:
        if offered == JSON and kind == DISCOVERY and group_version == ("apidiscovery.k8s.io", "v2"):
            return Output(JSON, DISCOVERY)
        return None
    if not transforms or group_version not in META_GROUP_VERSIONS:
        return None
    if kind == TABLE and offered in (JSON, YAML):
        return Output(offered, TABLE)
    if kind in (PARTIAL, PARTIAL_LIST):
        return Output(offered, kind)
    return None


def choose(
    header: str | None,
    *,
    protobuf: Callable[[], bool] = _never,
    transforms: bool = True,
    discovery: bool = False,
    stream: bool = False,
) -> Output:
    """The representation to answer with; 406 when nothing acceptable is offered.

    ``protobuf`` says whether the answer's kind has a protobuf message (asked only when a
    clause names protobuf); ``transforms`` whether the endpoint serves Table and
    PartialObjectMetadata; ``discovery`` whether it serves aggregated discovery; ``stream``
    that the answer is a watch stream."""
    if not header:
        return Output(JSON)
    for clause in accepted(header):
        for offered in SERVED:
            if not clause.matches(offered):
                continue
            option = _option(
                clause,
                offered,
                protobuf=protobuf,
                transforms=transforms,
                discovery=discovery,
                stream=stream,
            )
            if option is not None:
                return option
    listed = [f"{media};stream=watch" for media in STREAMED] if stream else SERVED
    raise errors.not_acceptable(f"only the following media types are accepted: {', '.join(listed)}")


def body_type(header: str | None) -> str:
    """The media type of a request body (JSON when none is given)."""
    entries = parse_media_types(header)
    return entries[0].type if entries else JSON
