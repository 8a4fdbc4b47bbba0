"""ConfigMaps the API server publishes at every start (``kube-public/cluster-info``,
``kube-system/extension-apiserver-authentication``).

Only the keys given are this code's: other keys beside them are kept, and nothing is written
when the keys already say the same, so a restart changes nothing.  Several API servers may
start at once: a create that finds the ConfigMap made meanwhile, or an update that finds it
changed since read, reads it again and retries.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.meta_v1 import ObjectMeta

if TYPE_CHECKING:
    from controlplane.apiserver.registry.rest import Lookup

ATTEMPTS = 5
"""Reads and writes tried before a run of conflicts is an error (each conflict means another
server wrote, and each server writes at most once)."""


async def publish(registry: Lookup, namespace: str, name: str, data: Mapping[str, str]) -> bool:
    """Make ConfigMap ``namespace/name`` hold ``data`` (beside its other keys); whether
    anything was written."""
    store = registry.lookup("", "v1", "configmaps")
    assert store is not None
    attempt = 1
    while True:
        try:
            return await _write(store, namespace, name, data)
        except errors.ApiError as error:
            if error.code != 409 or attempt == ATTEMPTS:
                raise
        attempt += 1


async def _write(store: ResourceStore, namespace: str, name: str, data: Mapping[str, str]) -> bool:
    """One read and, if needed, one create or update."""
    system = RequestContext(user="system:apiserver", groups=("system:masters",))
    try:
        existing = await store.get(namespace, name)
    except errors.ApiError as error:
        if error.code != 404:
            raise
        configmap = ConfigMap(metadata=ObjectMeta(name=name, namespace=namespace), data=dict(data))
        await store.create(namespace, configmap, system)
        return True
    assert isinstance(existing, ConfigMap)
    current = existing.data or {}
    if all(current.get(key) == value for key, value in data.items()):
        return False
    updated = copy.deepcopy(existing)
    updated.data = {**current, **data}
    await store.update(namespace, name, updated, system)
    return True
