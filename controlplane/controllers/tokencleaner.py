"""The tokencleaner: bootstrap tokens are deleted once their ``expiration`` has passed.

Keys are ``kube-system/<secret>`` for Secrets of type ``bootstrap.kubernetes.io/token`` (only
kube-system holds bootstrap tokens; the API server's authenticator looks nowhere else).  A
sync deletes the Secret if its token has expired, with its uid as a precondition so a token
created again under the same name meanwhile survives; a token not yet expired is requeued for
the moment it expires (``add_after`` on the controller's clock), so nothing polls and tests
move a fake clock.  An ``expiration`` that is not RFC 3339 counts as expired, as upstream.
Upstream's tokencleaner is off unless ``--controllers`` names it, and so is this one.
"""

from __future__ import annotations

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller
from kube.api.bootstraptoken import is_token_secret, seconds_left, token_data
from kube.api.kinds.core_v1.cluster import Secret
from kube.api.meta_v1 import Preconditions
from kube.client.errors import ApiError

NAME = "tokencleaner"


class TokenCleaner(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.secrets = ctx.informers.informer_for(Secret)
        self.secrets.add_event_handler(self._added, self._updated)

    def _added(self, secret: Secret) -> None:
        if is_token_secret(secret):
            self.enqueue(secret)

    def _updated(self, old: Secret, new: Secret) -> None:
        if is_token_secret(new):
            self.enqueue_update(old, new)

    async def sync_key(self, key: str) -> None:
        secret = self.secrets.lister.get(key)
        if secret is None or not is_token_secret(secret):
            return
        left = seconds_left(token_data(secret), self.ctx.clock.now())
        if left is None:
            return
        if left > 0:
            self.queue.add_after(key, left)
            return
        try:
            await self.ctx.client.delete(
                Secret,
                secret.metadata.name or "",
                secret.metadata.namespace,
                preconditions=Preconditions(uid=secret.metadata.uid),
            )
        except ApiError as error:
            # Gone already, or a new Secret of that name took its place (uid precondition).
            if not (error.not_found or error.conflict):
                raise


def new(ctx: ControllerContext) -> TokenCleaner:
    return TokenCleaner(ctx)
