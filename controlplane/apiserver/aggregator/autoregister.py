"""Local APIServices for what the API server serves itself, kept in sync.

As upstream's autoregister controller: every built-in group/version the server serves gets an
APIService ``VERSION.GROUP`` without a service, at the priorities of kube-apiserver's table
(a group/version missing from the table gets none, as upstream logs "Skipping APIService
creation"), labelled ``kube-aggregator.kubernetes.io/automanaged: onstart``; every custom
resource group/version gets one at upstream's CRD priorities (1000, 100), labelled ``true``.
An automanaged APIService whose group/version is no longer served is deleted; APIServices
users made are never touched.  ``sync`` is level-triggered and idempotent: the server calls it
at start and whenever the kinds it serves change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api.kinds.apiregistration_v1 import APIService, APIServiceSpec
from kube.api.meta_v1 import DeleteOptions, ObjectMeta
from kube.api.scheme import SCHEME, KindInfo

log = logging.getLogger(__name__)

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
ON_START = "onstart"
"""Built-ins: registered at every start."""
SYNCED = "true"
"""Custom resources: kept as their definitions come and go."""
CRD_PRIORITY = (1000, 100)
APIREGISTRATION_PRIORITY = (20001, 1)
"""apiregistration.k8s.io/v1's place in discovery: above the highest group priority a user may
set, so it is listed first, as upstream (it has no APIService of its own)."""

PRIORITIES: Mapping[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    ("events.k8s.io", "v1"): (17750, 15),
    ("events.k8s.io", "v1beta1"): (17750, 5),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authentication.k8s.io", "v1beta1"): (17700, 9),
    ("authentication.k8s.io", "v1alpha1"): (17700, 1),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("certificates.k8s.io", "v1beta1"): (17300, 9),
    ("certificates.k8s.io", "v1alpha1"): (17300, 1),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1beta1"): (16700, 12),
    ("admissionregistration.k8s.io", "v1alpha1"): (16700, 9),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("coordination.k8s.io", "v1beta1"): (16500, 13),
    ("coordination.k8s.io", "v1alpha2"): (16500, 12),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("discovery.k8s.io", "v1beta1"): (16200, 12),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
    ("flowcontrol.apiserver.k8s.io", "v1beta3"): (16100, 18),
    ("flowcontrol.apiserver.k8s.io", "v1beta2"): (16100, 15),
    ("flowcontrol.apiserver.k8s.io", "v1beta1"): (16100, 12),
    ("flowcontrol.apiserver.k8s.io", "v1alpha1"): (16100, 9),
    ("internal.apiserver.k8s.io", "v1alpha1"): (16000, 9),
    ("storagemigration.k8s.io", "v1beta1"): (15800, 9),
    ("apps", "v1"): (17800, 15),
    ("autoscaling", "v1"): (17500, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("autoscaling", "v2beta1"): (17500, 9),
    ("autoscaling", "v2beta2"): (17500, 1),
    ("batch", "v1"): (17400, 15),
    ("batch", "v1beta1"): (17400, 9),
    ("batch", "v2alpha1"): (17400, 9),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("networking.k8s.io", "v1beta1"): (17200, 9),
    ("policy", "v1"): (17100, 15),
    ("policy", "v1beta1"): (17100, 9),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("storage.k8s.io", "v1beta1"): (16800, 9),
    ("storage.k8s.io", "v1alpha1"): (16800, 1),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("node.k8s.io", "v1"): (16300, 15),
    ("node.k8s.io", "v1alpha1"): (16300, 1),
    ("node.k8s.io", "v1beta1"): (16300, 9),
    ("resource.k8s.io", "v1beta2"): (16200, 15),
    ("resource.k8s.io", "v1beta1"): (16200, 9),
    ("resource.k8s.io", "v1alpha3"): (16200, 1),
}
"""kube-apiserver's (group, version) → (groupPriorityMinimum, versionPriority): the generic
control plane's table with kube-apiserver's own entries merged over it."""


def name_of(group: str, version: str) -> str:
    return f"{version}.{group}"


def wanted(kinds: Iterable[KindInfo]) -> dict[str, APIService]:
    """The local APIServices the served kinds call for, by name."""
    found: dict[str, APIService] = {}
    for info in kinds:
        gv = (info.group, info.version)
        builtin = SCHEME.by_resource(info.group, info.version, info.plural) is not None
        priority = PRIORITIES.get(gv) if builtin else CRD_PRIORITY
        if priority is None:
            continue
        name = name_of(*gv)
        found[name] = APIService(
            metadata=ObjectMeta(name=name, labels={AUTOMANAGED: ON_START if builtin else SYNCED}),
            spec=APIServiceSpec(
                group=info.group,
                version=info.version,
                group_priority_minimum=priority[0],
                version_priority=priority[1],
            ),
        )
    return found


async def sync(store: ResourceStore, kinds: Iterable[KindInfo]) -> None:
    """Create or correct the wanted local APIServices; delete automanaged ones not wanted."""
    system = RequestContext(user="system:apiserver", groups=("system:masters",))
    want = wanted(kinds)
    existing = {o.metadata.name or "": o for o in (await store.list("", None)).items}
    for name, service in want.items():
        have = existing.get(name)
        try:
            if have is None:
                await store.create("", service, system)
            elif isinstance(have, APIService) and (
                have.spec != service.spec
                or (have.metadata.labels or {}).get(AUTOMANAGED)
                != (service.metadata.labels or {})[AUTOMANAGED]
            ):
                have.spec = service.spec
                have.metadata.labels = {
                    **(have.metadata.labels or {}),
                    **(service.metadata.labels or {}),
                }
                await store.update("", name, have, system)
        except errors.ApiError as error:
            if error.code != 409:  # 409: another API server wrote it meanwhile
                raise
    for name, have in existing.items():
        if name not in want and (have.metadata.labels or {}).get(AUTOMANAGED):
            try:
                await store.delete("", name, DeleteOptions(), system)
            except errors.ApiError as error:
                if error.code != 404:
                    raise
            log.info("deleted APIService %s: its group/version is no longer served", name)
