"""Per-controller credentials: each controller talks to the API as its own service account.

Upstream's controller-manager with ``--use-service-account-credentials`` gives every
controller a client built from a token of the ``kube-system`` service account named for it
(``deployment-controller``, ``namespace-controller``, ...), so RBAC grants each controller
only its ``system:controller:<name>`` role and the API server's audit log names the controller
that acted.  The controller-manager's own identity (``system:kube-controller-manager``) only
creates those service accounts, requests their tokens (``serviceaccounts/<name>/token``), and
feeds the shared informers.

This is client-go's ``DynamicControllerClientBuilder``: a token is requested for an hour and
requested again once 80% of its lifetime has passed; a refresh that fails is retried with
backoff while the previous token, still valid, stays in use.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from dataclasses import dataclass, field

from kube.api.kinds.authentication_v1 import TokenRequest, TokenRequestSpec
from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError, ClientError
from kube.client.interface import ApiClient
from kube.client.rest import Client
from kube.clock import Clock

log = logging.getLogger(__name__)

NAMESPACE = "kube-system"
TOKEN_SECONDS = 3600
REFRESH_AT = 0.8
"""Fraction of a token's lifetime after which a new one is requested."""
RETRY_MIN, RETRY_MAX = 1.0, 60.0


@dataclass
class ServiceAccountToken:
    """The current token of one service account (a ``TokenSource`` for ``Client``)."""

    account: str
    token: str = ""
    expires: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))

    def current(self) -> str:
        return self.token


class ServiceAccountClients:
    """Builds a client per controller service account and keeps their tokens fresh.

    ``close()`` stops the refreshes and closes the clients it built (not ``root``).
    """

    def __init__(
        self, root: ApiClient, clock: Clock, *, qps: float = 100.0, burst: int = 200
    ) -> None:
        self.root = root
        self.clock = clock
        self.qps, self.burst = qps, burst
        self._clients: dict[str, Client] = {}
        self._refreshers: list[asyncio.Task[None]] = []

    async def client(self, account: str) -> Client:
        """The client acting as ``system:serviceaccount:kube-system:<account>`` (one per
        account, however many controllers share it)."""
        if account in self._clients:
            return self._clients[account]
        await self._ensure_account(account)
        token = ServiceAccountToken(account)
        await self._refresh(token)
        # The server and its CA only: a client certificate would authenticate first.
        anonymous = dataclasses.replace(
            self.root.config, cert_pem=None, key_pem=None, token=None, token_file=None
        )
        client = Client(
            anonymous,
            user_agent=f"kubelab-controller-manager/{account}",
            qps=self.qps,
            burst=self.burst,
            clock=self.clock,
            token_source=token,
        )
        self._clients[account] = client
        self._refreshers.append(
            asyncio.create_task(self._keep_fresh(token), name=f"token {account}")
        )
        return client

    async def close(self) -> None:
        for task in self._refreshers:
            task.cancel()
        await asyncio.gather(*self._refreshers, return_exceptions=True)
        for client in self._clients.values():
            await client.close()

    async def _ensure_account(self, account: str) -> None:
        try:
            await self.root.get(ServiceAccount, account, NAMESPACE)
        except ApiError as error:
            if error.code != 404:
                raise
            try:
                await self.root.create(
                    ServiceAccount(metadata=ObjectMeta(name=account, namespace=NAMESPACE))
                )
            except ApiError as conflict:
                if conflict.code != 409:
                    raise

    async def _refresh(self, token: ServiceAccountToken) -> None:
        request = TokenRequest(spec=TokenRequestSpec(expiration_seconds=TOKEN_SECONDS))
        answer = await self.root.create_subresource(
            ServiceAccount, token.account, NAMESPACE, "token", request
        )
        status = answer.get("status") or {}
        if not status.get("token"):
            raise ClientError(f"the token request for {token.account} returned no token")
        token.token = status["token"]
        expires = status.get("expirationTimestamp")
        token.expires = (
            datetime.datetime.fromisoformat(expires)
            if expires
            else self.clock.now() + datetime.timedelta(seconds=TOKEN_SECONDS)
        )

    async def _keep_fresh(self, token: ServiceAccountToken) -> None:
        while True:
            lifetime = (token.expires - self.clock.now()).total_seconds()
            await self.clock.sleep(max(lifetime * REFRESH_AT, RETRY_MIN))
            delay = RETRY_MIN
            while True:
                try:
                    await self._refresh(token)
                    break
                except (ApiError, ClientError) as error:
                    log.warning("refreshing the token of %s: %s", token.account, error)
                    await self.clock.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX)
