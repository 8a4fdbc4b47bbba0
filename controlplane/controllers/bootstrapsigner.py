"""The bootstrapsigner: cluster-info carries a signature of its kubeconfig per signing token.

``kube-public/cluster-info`` holds a ``kubeconfig`` (the API server's URL and CA, published by
the API server at start) that anyone may read.  For each bootstrap token in kube-system marked
``usage-bootstrap-signing: "true"`` and not expired, this keeps ``jws-kubeconfig-<token id>``
beside it: the detached JWS of the kubeconfig keyed with the token (``kube.client.jws``),
so a joining node holding the token can tell the kubeconfig is genuine
(``kube.client.clusterinfo``).  Signatures of tokens that are gone, expired or no longer
allowed to sign are removed; every other key of the ConfigMap is left as it is.

There is one key, ``kube-public/cluster-info``: the ConfigMap's changes and every
bootstrap-token Secret's add, update or delete enqueue it, so the queue collapses bursts into
one sync.  A token's expiry is not an event, so a sync that signs with an expiring token
requeues the key for the soonest expiry.  A write that conflicts is dropped: the newer
ConfigMap's update event brings the key back.  Upstream's bootstrapsigner is off unless
``--controllers`` names it, and so is this one.
"""

from __future__ import annotations

import copy
import datetime

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from kube.api.bootstraptoken import (
    NAMESPACE,
    is_token_secret,
    parse_secret_name,
    seconds_left,
    token_data,
)
from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.client import clusterinfo, jws
from kube.client.errors import ApiError

NAME = "bootstrapsigner"
KEY = f"{clusterinfo.NAMESPACE}/{clusterinfo.NAME}"


def signing_token(secret: Secret, now: datetime.datetime) -> tuple[str, str, float | None] | None:
    """``(token id, token secret, seconds left or None)`` if ``secret`` holds a token that may
    sign now: named ``bootstrap-token-<id>`` for its own ``token-id``, with a secret, marked
    for signing, and not expired."""
    data = token_data(secret)
    token_id, token_secret = data.get("token-id", ""), data.get("token-secret", "")
    if parse_secret_name(secret.metadata.name or "") != token_id or not token_secret:
        return None
    if data.get("usage-bootstrap-signing") != "true":
        return None
    left = seconds_left(data, now)
    if left is not None and left <= 0:
        return None
    return token_id, token_secret, left


class BootstrapSigner(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.configmaps = ctx.informers.informer_for(ConfigMap)
        self.secrets = ctx.informers.informer_for(Secret)
        self.configmaps.add_event_handler(self._configmap_added, self._configmap_updated)
        self.secrets.add_event_handler(
            self._secret_changed, self._secret_updated, self._secret_changed
        )

    def _configmap_added(self, configmap: ConfigMap) -> None:
        if self._ours(configmap):
            self.queue.add(KEY)

    def _configmap_updated(self, old: ConfigMap, new: ConfigMap) -> None:
        if self._ours(new) and old.metadata.resource_version != new.metadata.resource_version:
            self.queue.add(KEY)

    def _secret_updated(self, old: Secret, new: Secret) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._secret_changed(new)

    def _secret_changed(self, obj: object) -> None:
        if is_token_secret(unwrap(obj)):
            self.queue.add(KEY)

    @staticmethod
    def _ours(configmap: ConfigMap) -> bool:
        meta = configmap.metadata
        return meta.namespace == clusterinfo.NAMESPACE and meta.name == clusterinfo.NAME

    async def sync_key(self, key: str) -> None:
        configmap = self.configmaps.lister.get(key)
        if configmap is None:
            return
        data = configmap.data or {}
        content = data.get(clusterinfo.KUBECONFIG_KEY)
        if content is None:
            return
        wanted = {k: v for k, v in data.items() if not k.startswith(clusterinfo.SIGNATURE_PREFIX)}
        soonest: float | None = None
        now = self.ctx.clock.now()
        for secret in self.secrets.lister.list(NAMESPACE):
            token = signing_token(secret, now) if is_token_secret(secret) else None
            if token is None:
                continue
            token_id, token_secret, left = token
            wanted[clusterinfo.SIGNATURE_PREFIX + token_id] = jws.detached_signature(
                content, token_id, token_secret
            )
            if left is not None:
                soonest = left if soonest is None else min(soonest, left)
        if soonest is not None:
            self.queue.add_after(key, soonest)
        if wanted == data:
            return
        updated = copy.deepcopy(configmap)
        updated.data = wanted
        try:
            await self.ctx.client.update(updated)
        except ApiError as error:
            # A newer cluster-info (whose update event requeues the key) or none at all.
            if not (error.conflict or error.not_found):
                raise


def new(ctx: ControllerContext) -> BootstrapSigner:
    return BootstrapSigner(ctx)
