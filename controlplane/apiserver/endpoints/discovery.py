"""Discovery documents: what the server serves, in the legacy and the aggregated form.

kubectl prefers the aggregated form (``apidiscovery.k8s.io/v2``, one document for ``/api`` and
one for ``/apis``, answered only with the exact content type it asked for); the Python client
and older tools walk the legacy documents (``/api``, ``/apis``, ``/api/v1``, ``/apis/G/V``).
Both come from the same list of ``KindInfo`` records, so they never disagree; custom resources
join by being in that list.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable

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


def _group_versions(kinds: Iterable[KindInfo]) -> dict[str, list[str]]:
    """Versions of each group, the preferred one first (upstream's version priority)."""
    groups: dict[str, list[str]] = {}
    for info in kinds:
        versions = groups.setdefault(info.group, [])
        if info.version not in versions:
            versions.append(info.version)
    return {group: sorted(versions, key=version_priority) for group, versions in groups.items()}


def api_versions(address: str) -> APIVersions:
    """``/api``: the core group's versions."""
    return APIVersions(
        versions=["v1"],
        server_address_by_client_cidrs=[
            ServerAddressByClientCIDR(client_cidr="0.0.0.0/0", server_address=address)
        ],
    )


def api_group_list(kinds: Iterable[KindInfo]) -> APIGroupList:
    """``/apis``: every named group with its versions, the first one preferred."""
    groups = []
    for group, versions in _group_versions(kinds).items():
        if not group:
            continue
        listed = [
            GroupVersionForDiscovery(group_version=f"{group}/{v}", version=v) for v in versions
        ]
        groups.append(APIGroup(name=group, versions=listed, preferred_version=listed[0]))
    return APIGroupList(groups=groups)


def api_group(kinds: Iterable[KindInfo], group: str) -> APIGroup | None:
    """``/apis/G``: one group."""
    for listed in api_group_list(kinds).groups:
        if listed.name == group:
            return listed
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


def aggregated(kinds: Iterable[KindInfo], core: bool) -> APIGroupDiscoveryList:
    """The aggregated document of ``/api`` (core) or ``/apis`` (every named group)."""
    items = []
    kinds = list(kinds)
    for group, versions in _group_versions(kinds).items():
        if bool(group) == core:
            continue
        listed = []
        for version in versions:
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
        items.append(APIGroupDiscovery(metadata=ObjectMeta(name=group), versions=listed))
    return APIGroupDiscoveryList(items=items)
