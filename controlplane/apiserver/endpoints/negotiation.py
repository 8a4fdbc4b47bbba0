"""Content negotiation: which representation a client asked for, and what it sent.

Kubernetes clients ask for alternative representations with media-type parameters:
``application/json;as=Table;v=v1;g=meta.k8s.io`` (kubectl get), ``as=PartialObjectMetadata``
(metadata-only informers), ``as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io`` (aggregated
discovery).  The first acceptable entry of the Accept header wins, as upstream does.  Bodies
come as JSON, YAML, one of the patch types, or protobuf (for kubectl's generator commands).
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class MediaType:
    type: str
    params: dict[str, str]

    @property
    def as_(self) -> str:
        return self.params.get("as", "")


def parse_media_types(header: str | None) -> list[MediaType]:
    """The entries of an Accept header, in order."""
    found = []
    for entry in (header or "").split(","):
        parts = [p.strip() for p in entry.split(";")]
        if not parts[0]:
            continue
        params = {}
        for part in parts[1:]:
            key, _, value = part.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        found.append(MediaType(parts[0].lower(), params))
    return found


@dataclass(frozen=True)
class Output:
    """The chosen representation: ``as_`` names an alternative kind ("" for the object)."""

    media_type: str
    as_: str = ""


def _plain(media: MediaType) -> Output | None:
    if media.type in (JSON, "application/*", "*/*"):
        return Output(JSON)
    if media.type == YAML:
        return Output(YAML)
    return None


def choose(header: str | None, *, discovery: bool = False) -> Output:
    """The representation to answer with; 406 when nothing acceptable is offered."""
    entries = parse_media_types(header)
    if not entries:
        return Output(JSON)
    for media in entries:
        kind = media.as_
        if not kind:
            plain = _plain(media)
            if plain is not None:
                return plain
            continue
        if media.type != JSON:
            continue
        group, version = media.params.get("g", ""), media.params.get("v", "")
        if discovery and kind == DISCOVERY and group == "apidiscovery.k8s.io" and version == "v2":
            return Output(JSON, DISCOVERY)
        if (
            group == "meta.k8s.io"
            and version in ("v1", "v1beta1")
            and kind
            in (
                TABLE,
                PARTIAL,
                PARTIAL_LIST,
            )
        ):
            return Output(JSON, kind)
    raise errors.not_acceptable(
        "only the following media types are accepted: application/json, application/yaml, "
        "application/json;as=Table;v=v1;g=meta.k8s.io"
    )


def body_type(header: str | None) -> str:
    """The media type of a request body (JSON when none is given)."""
    entries = parse_media_types(header)
    return entries[0].type if entries else JSON
