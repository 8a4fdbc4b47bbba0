"""Per-controller service-account clients: the account is created when missing, a token is
requested for it, and the token is requested again at 80% of its lifetime."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from controlplane.controllers.clientbuilder import ServiceAccountClients
from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.client.kubeconfig import ClientConfig
from kube.clock import FakeClock
from tests.fakeapi import Action, FakeApi


def fake_root(clock: FakeClock) -> FakeApi:
    """The controller-manager's own client, whose token requests are granted for an hour."""
    root = FakeApi(
        clock,
        config=ClientConfig(
            server="https://127.0.0.1:6443", ca_pem=None, cert_pem=b"c", key_pem=b"k"
        ),
    )

    def grant(action: Action) -> dict[str, Any] | None:
        if action.subresource != "token":
            return None
        assert action.namespace == "kube-system"
        expires = clock.now() + datetime.timedelta(seconds=3600)
        return {
            "status": {
                "token": f"token-{len(token_requests(root)) + 1}",
                "expirationTimestamp": expires.isoformat(),
            }
        }

    root.react("create", "ServiceAccount", grant)
    return root


def token_requests(root: FakeApi) -> list[tuple[str, int]]:
    """(account, expirationSeconds) of each token asked for."""
    return [
        (a.name, a.obj.spec.expiration_seconds)
        for a in root.writes("create", "ServiceAccount")
        if a.subresource == "token"
    ]


async def test_a_controller_gets_its_account_and_a_fresh_token() -> None:
    clock = FakeClock()
    root = fake_root(clock)
    builder = ServiceAccountClients(root, clock)
    try:
        client = await builder.client("deployment-controller")
        assert list(root.objects) == [(ServiceAccount, "kube-system", "deployment-controller")]
        assert token_requests(root) == [("deployment-controller", 3600)]
        assert client.config.cert_pem is None  # the token, not the manager's certificate
        assert client._auth_headers() == {"Authorization": "Bearer token-1"}
        assert await builder.client("deployment-controller") is client  # one per account

        for _ in range(100):  # until the refresher reaches its sleep
            if clock.sleepers:
                break
            await asyncio.sleep(0)
        await clock.advance(3600 * 0.8 - 1)
        await asyncio.sleep(0)
        assert len(token_requests(root)) == 1
        await clock.advance(2)
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(token_requests(root)) == 2
        assert client._auth_headers() == {"Authorization": "Bearer token-2"}
    finally:
        await builder.close()


def test_every_controller_has_a_service_account_with_a_role() -> None:
    from controlplane.apiserver.auth.bootstrappolicy import controller_roles, namespace_roles
    from controlplane.controllers.registry import CONTROLLERS, SERVICE_ACCOUNTS

    assert set(SERVICE_ACCOUNTS) == set(CONTROLLERS)
    roles = {role.metadata.name for role in (*controller_roles(), *namespace_roles())}
    missing = {a for a in SERVICE_ACCOUNTS.values() if f"system:controller:{a}" not in roles}
    assert missing == set()
