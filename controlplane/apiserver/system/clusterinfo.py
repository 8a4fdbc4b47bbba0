"""Publishing ``kube-public/cluster-info`` at every start: where the cluster is, and its CA.

kubeadm writes this ConfigMap at ``init`` from the admin kubeconfig; kubelab has no separate
init, so the API server does it once it serves, from its own CA and advertised URL.  It holds
a ``kubeconfig`` without credentials (``kube.client.clusterinfo.kubeconfig``), which the
bootstrap policy lets ``system:anonymous`` read and the bootstrap-signer controller signs with
each bootstrap token, so a node that knows only a token can trust it.

Only the ``kubeconfig`` key is this code's (``configmaps.publish``: signatures beside it are
kept, a restart writes nothing, concurrent servers retry).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controlplane.apiserver.system import configmaps
from kube.client import clusterinfo

if TYPE_CHECKING:
    from controlplane.apiserver.registry.rest import Lookup


async def publish(registry: Lookup, url: str, ca_pem: bytes) -> bool:
    """Make cluster-info's ``kubeconfig`` name this server's advertised ``url`` and
    ``ca_pem``; whether anything was written."""
    return await configmaps.publish(
        registry,
        clusterinfo.NAMESPACE,
        clusterinfo.NAME,
        {clusterinfo.KUBECONFIG_KEY: clusterinfo.kubeconfig(url, ca_pem)},
    )
