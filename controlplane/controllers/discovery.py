"""What the API server serves, asked of the server itself (``/api/v1``, ``/apis``).

The namespace controller must empty a namespace of every kind, custom resources included,
and the garbage collector must look up owners of kinds it does not know; neither can rely
on the scheme compiled into this program, so both ask discovery, as upstream does.
Only the plain (non-aggregated) documents are read: ``/api/v1``, then ``/apis`` and each
group's preferred version.  A group version that fails does not fail the rest: its error
is reported beside what was found, so callers can act on what they have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kube.client.errors import ApiError, ClientError
from kube.client.interface import ApiClient
from kube.client.rest import ResourcePath


@dataclass(frozen=True)
class APIResource:
    """One resource of one group version, with the verbs it supports."""

    path: ResourcePath
    kind: str
    verbs: frozenset[str]

    @property
    def group_version(self) -> str:
        return f"{self.path.group}/{self.path.version}" if self.path.group else self.path.version

    @property
    def group_resource(self) -> str:
        """``deployments.apps``; ``pods.`` for the core group, as upstream's messages print it."""
        return f"{self.path.plural}.{self.path.group}"


@dataclass
class Discovered:
    resources: list[APIResource] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Group version → why it could not be listed."""

    def error(self) -> str:
        """Upstream's ErrGroupDiscoveryFailed text; empty when nothing failed."""
        if not self.failed:
            return ""
        listed = ", ".join(f"{gv}: {why}" for gv, why in sorted(self.failed.items()))
        return f"unable to retrieve the complete list of server APIs: {listed}"


def _decode(data: bytes) -> Mapping[str, Any]:
    decoded: Mapping[str, Any] = msgspec.json.decode(data)
    return decoded


async def resource_list(client: ApiClient, group_version: str) -> list[APIResource]:
    """The top-level resources (not subresources) of ``v1`` or ``group/version``."""
    group, _, version = group_version.rpartition("/")
    url = f"/apis/{group_version}" if group else f"/api/{version}"
    listing = _decode(await client.request("GET", url))
    return [
        APIResource(
            ResourcePath(group, version, entry["name"], bool(entry.get("namespaced"))),
            entry.get("kind", ""),
            frozenset(entry.get("verbs") or ()),
        )
        for entry in listing.get("resources") or ()
        if "/" not in entry["name"]
    ]


async def discover(client: ApiClient) -> Discovered:
    """Every resource the server serves, in the core group and each group's preferred version.

    Raises only when even the list of groups cannot be had."""
    found = Discovered()
    group_versions = ["v1"]
    groups = _decode(await client.request("GET", "/apis"))
    for group in groups.get("groups") or ():
        group_versions.append(group["preferredVersion"]["groupVersion"])
    for group_version in group_versions:
        try:
            found.resources.extend(await resource_list(client, group_version))
        except (ApiError, ClientError) as error:
            found.failed[group_version] = str(error)
    return found


class NoKindMatchError(LookupError):
    """No resource of a group version has the kind asked for."""


class RESTMapper:
    """Kinds to the resources that serve them, from discovery (upstream's deferred discovery
    REST mapper, as the autoscaler uses it to find a target's ``scale`` subresource).

    Each group version's resources are read once and kept; a kind not found in them reads
    the group version again (a custom resource defined since), and only then fails."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client
        self._known: dict[str, list[APIResource]] = {}

    async def resource_for(self, api_version: str, kind: str) -> APIResource:
        """The resource of ``kind`` in ``api_version`` (``apps/v1``, ``v1``); raises
        ``NoKindMatchError``, or ``ApiError``/``ClientError`` when discovery fails."""
        resources = self._known.get(api_version)
        if resources is None or all(resource.kind != kind for resource in resources):
            resources = self._known[api_version] = await resource_list(self._client, api_version)
        for resource in resources:
            if resource.kind == kind:
                return resource
        group = api_version.rpartition("/")[0]
        raise NoKindMatchError(f'no matches for kind "{kind}" in group "{group}"')
