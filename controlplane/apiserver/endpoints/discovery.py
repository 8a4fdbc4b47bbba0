"""Discovery documents: what the server serves, in the legacy and the aggregated form.

kubectl prefers the aggregated form (``apidiscovery.k8s.io/v2``, one document for ``/api`` and
one for ``/apis``, answered only with the exact content type it asked for); the Python client
and older tools walk the legacy documents (``/api``, ``/apis``, ``/api/v1``, ``/apis/G/V``).
Both come from the same list of ``KindInfo`` records, so they never disagree; custom resources
join by being in that list.  Groups an extension API server serves (non-local APIServices)
join as ``Remote`` versions: listed in ``/apis`` and ``/apis/G`` from their APIServices, and in
the aggregated document with the resources their server last answered.  Groups are ordered as
upstream's aggregator orders them: by their highest ``groupPriorityMinimum`` (highest first),
then by name; versions by ``versionPriority``, then by kube-like version order.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube.api.meta_v1 import (
    APIGroup,
    APIGroupDiscovery,
    APIGroupDiscoveryList,
    APIGroupList,
    APIResource,
    APIResourceDiscovery,
    APIResourceList,
    APISubresourceDiscovery,
    APIVersionDiscovery,
    APIVersions,
    GroupVersionForDiscovery,
    GroupVersionKind,
    ObjectMeta,
    ServerAddressByClientCIDR,
)
from kube.api.scheme import KindInfo, version_priority

AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

# What each subresource answers with and which verbs it takes.
_SUBRESOURCES: dict[str, tuple[tuple[str, str, str] | None, tuple[str, ...]]] = {
    "status": (None, ("get", "patch", "update")),
    "scale": (("autoscaling", "v1", "Scale"), ("get", "patch", "update")),
    "binding": (("", "v1", "Binding"), ("create",)),
    "eviction": (("policy", "v1", "Eviction"), ("create",)),
    "log": (("", "v1", "Pod"), ("get",)),
    "exec": (("", "v1", "PodExecOptions"), ("create", "get")),
    "attach": (("", "v1", "PodAttachOptions"), ("create", "get")),
    "portforward": (("", "v1", "PodPortForwardOptions"), ("create", "get")),
    "proxy": (None, ("create", "delete", "get", "patch", "update")),
    "finalize": (("", "v1", "Namespace"), ("update",)),
    "approval": (None, ("get", "patch", "update")),
    "token": (("authentication.k8s.io", "v1", "TokenRequest"), ("create",)),
    "ephemeralcontainers": (None, ("get", "patch", "update")),
    "resize": (None, ("get", "patch", "update")),
}


def _subresource(info: KindInfo, name: str) -> tuple[GroupVersionKind, tuple[str, ...]]:
    kind, verbs = _SUBRESOURCES.get(name, (None, ("get",)))
    if kind is None:
        return GroupVersionKind(group=info.group, version=info.version, kind=info.kind), verbs
    return GroupVersionKind(group=kind[0], version=kind[1], kind=kind[2]), verbs


def _storage_version_hash(info: KindInfo) -> str:
    digest = hashlib.sha256(f"{info.storage_api_version}/{info.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


Priorities = Mapping[tuple[str, str], tuple[int, int]]
"""(group, version) → (groupPriorityMinimum, versionPriority), from the APIServices."""


@dataclass(frozen=True)
class Aggregation:
    """What the APIServices add: every group/version's priorities, the group/versions
    extension servers answer, and what each last said it serves."""

    priorities: Priorities = field(default_factory=dict)
    versions: Sequence[tuple[str, str]] = ()
    resources: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    """(group, version) → the APIResourceList its server answered (only available ones)."""


LOCAL_ONLY = Aggregation()


def _group_versions(kinds: Iterable[KindInfo], remote: Aggregation) -> dict[str, list[str]]:
    """Versions of each group, groups and versions in the order clients should prefer."""
    priorities = remote.priorities
    groups: dict[str, list[str]] = {}
    for group, version in [*((i.group, i.version) for i in kinds), *remote.versions]:
        versions = groups.setdefault(group, [])
        if version not in versions:
            versions.append(version)

    def group_order(group: str) -> tuple[int, str]:
        return (-max(priorities.get((group, v), (0, 0))[0] for v in groups[group]), group)

    return {
        group: sorted(
            groups[group],
            key=lambda v: (-priorities.get((group, v), (0, 0))[1], version_priority(v)),
        )
        for group in sorted(groups, key=group_order)
    }


def api_versions(address: str) -> APIVersions:
    """``/api``: the core group's versions."""
    return APIVersions(
        versions=["v1"],
        server_address_by_client_cidrs=[
            ServerAddressByClientCIDR(client_cidr="0.0.0.0/0", server_address=address)
        ],
    )


def api_group_list(kinds: Iterable[KindInfo], remote: Aggregation = LOCAL_ONLY) -> APIGroupList:
    """``/apis``: every named group with its versions, the first one preferred."""
    groups = []
    for group, versions in _group_versions(kinds, remote).items():
        if not group:
            continue
        listed = [
            GroupVersionForDiscovery(group_version=f"{group}/{v}", version=v) for v in versions
        ]
        groups.append(APIGroup(name=group, versions=listed, preferred_version=listed[0]))
    return APIGroupList(groups=groups)


def api_group(
    kinds: Iterable[KindInfo], group: str, remote: Aggregation = LOCAL_ONLY
) -> APIGroup | None:
    """``/apis/G``: one group."""
    for listed in api_group_list(kinds, remote).groups:
        if listed.name == group:
            return listed.typed()
    return None


def api_resource_list(kinds: Iterable[KindInfo], group: str, version: str) -> APIResourceList:
    """``/api/v1`` or ``/apis/G/V``: resources and their subresources."""
    resources: list[APIResource] = []
    for info in kinds:
        if info.group_version != (group, version) or not info.verbs:
            continue
        resources.append(
            APIResource(
                name=info.plural,
                singular_name=info.singular,
                namespaced=info.namespaced,
                kind=info.kind,
                verbs=sorted(info.verbs),
                short_names=list(info.short_names) or None,
                categories=list(info.categories) or None,
                storage_version_hash=_storage_version_hash(info),
            )
        )
        for sub in info.subresources:
            gvk, verbs = _subresource(info, sub)
            resources.append(
                APIResource(
                    name=f"{info.plural}/{sub}",
                    singular_name="",
                    namespaced=info.namespaced,
                    kind=gvk.kind,
                    verbs=sorted(verbs),
                    group=gvk.group if gvk.group != group else None,
                    version=gvk.version if gvk.group != group else None,
                )
            )
    return APIResourceList(
        group_version=f"{group}/{version}" if group else version, resources=resources
    )


def aggregated(
    kinds: Iterable[KindInfo],
    core: bool,
    remote: Aggregation = LOCAL_ONLY,
) -> APIGroupDiscoveryList:
    """The aggregated document of ``/api`` (core) or ``/apis`` (every named group)."""
    items = []
    kinds = list(kinds)
    served = {(i.group, i.version) for i in kinds}
    for group, versions in _group_versions(kinds, remote).items():
        if bool(group) == core:
            continue
        listed = []
        for version in versions:
            if (group, version) not in served:
                answered = remote.resources.get((group, version))
                if answered is not None:
                    listed.append(_remote_version(version, answered))
                continue
            resources = []
            for info in kinds:
                if info.group_version != (group, version) or not info.verbs:
                    continue
                subresources = []
                for sub in info.subresources:
                    gvk, verbs = _subresource(info, sub)
                    subresources.append(
                        APISubresourceDiscovery(
                            subresource=sub, response_kind=gvk, verbs=sorted(verbs)
                        )
                    )
                resources.append(
                    APIResourceDiscovery(
                        resource=info.plural,
                        response_kind=GroupVersionKind(
                            group=info.group, version=info.version, kind=info.kind
                        ),
                        scope="Namespaced" if info.namespaced else "Cluster",
                        singular_resource=info.singular,
                        verbs=sorted(info.verbs),
                        short_names=list(info.short_names) or None,
                        categories=list(info.categories) or None,
                        subresources=subresources or None,
                    )
                )
            listed.append(
                APIVersionDiscovery(version=version, resources=resources, freshness="Current")
            )
        if listed:
            items.append(APIGroupDiscovery(metadata=ObjectMeta(name=group), versions=listed))
    return APIGroupDiscoveryList(items=items)


def _remote_version(version: str, answered: Mapping[str, Any]) -> APIVersionDiscovery:
    """An extension server's APIResourceList in the aggregated form, as upstream's
    aggregator converts a server that does not serve aggregated discovery itself."""
    group_version = str(answered.get("groupVersion", ""))
    group = group_version.rpartition("/")[0]
    entries = [r for r in answered.get("resources") or () if isinstance(r, dict)]
    subresources: dict[str, list[APISubresourceDiscovery]] = {}
    for entry in entries:
        parent, slash, sub = str(entry.get("name", "")).partition("/")
        if slash:
            subresources.setdefault(parent, []).append(
                APISubresourceDiscovery(
                    subresource=sub,
                    response_kind=GroupVersionKind(
                        group=str(entry.get("group") or group),
                        version=str(entry.get("version") or version),
                        kind=str(entry.get("kind", "")),
                    ),
                    verbs=list(entry.get("verbs") or []),
                )
            )
    resources = [
        APIResourceDiscovery(
            resource=str(entry["name"]),
            response_kind=GroupVersionKind(
                group=group, version=version, kind=str(entry.get("kind", ""))
            ),
            scope="Namespaced" if entry.get("namespaced") else "Cluster",
            singular_resource=str(entry.get("singularName") or ""),
            verbs=list(entry.get("verbs") or []),
            short_names=list(entry.get("shortNames") or []) or None,
            categories=list(entry.get("categories") or []) or None,
            subresources=subresources.get(str(entry["name"])),
        )
        for entry in entries
        if "/" not in str(entry.get("name", "/"))
    ]
    return APIVersionDiscovery(version=version, resources=resources, freshness="Current")
