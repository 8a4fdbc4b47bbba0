"""Publishing ``kube-public/cluster-info`` at every start: where the cluster is, and its CA.

kubeadm writes this ConfigMap at ``init`` from the admin kubeconfig; kubelab has no separate
init, so the API server does it once it serves, from its own CA and advertised URL.  It holds
a ``kubeconfig`` without credentials (``kube.client.clusterinfo.kubeconfig``), which the
bootstrap policy lets ``system:anonymous`` read and the bootstrap-signer controller signs with
each bootstrap token, so a node that knows only a token can trust it.

Only the ``kubeconfig`` key is this code's: the signatures beside it are kept, and nothing is
written when the key already says the same, so a restart changes nothing.  Several API servers
may start at once: a create that finds the ConfigMap made meanwhile, or an update that finds it
changed since read, reads it again and retries.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.meta_v1 import ObjectMeta
from kube.client import clusterinfo

if TYPE_CHECKING:
    from controlplane.apiserver.registry.rest import Lookup

ATTEMPTS = 5
"""Reads and writes tried before a run of conflicts is an error (each conflict means another
server wrote, and each server writes at most once)."""


async def publish(registry: Lookup, url: str, ca_pem: bytes) -> bool:
    """Make cluster-info's ``kubeconfig`` name this server's advertised ``url`` and
    ``ca_pem``; whether anything was written."""
    content = clusterinfo.kubeconfig(url, ca_pem)
    store = registry.lookup("", "v1", "configmaps")
    assert store is not None
    attempt = 1
    while True:
        try:
            return await _write(store, content)
        except errors.ApiError as error:
            if error.code != 409 or attempt == ATTEMPTS:
                raise
        attempt += 1


async def _write(store: ResourceStore, content: str) -> bool:
    """One read and, if needed, one create or update of cluster-info."""
    system = RequestContext(user="system:apiserver", groups=("system:masters",))
    namespace, name = clusterinfo.NAMESPACE, clusterinfo.NAME
    try:
        existing = await store.get(namespace, name)
    except errors.ApiError as error:
        if error.code != 404:
            raise
        configmap = ConfigMap(
            metadata=ObjectMeta(name=name, namespace=namespace),
            data={clusterinfo.KUBECONFIG_KEY: content},
        )
        await store.create(namespace, configmap, system)
        return True
    assert isinstance(existing, ConfigMap)
    data = existing.data or {}
    if data.get(clusterinfo.KUBECONFIG_KEY) == content:
        return False
    updated = copy.deepcopy(existing)
    updated.data = {**data, clusterinfo.KUBECONFIG_KEY: content}
    await store.update(namespace, name, updated, system)
    return True
