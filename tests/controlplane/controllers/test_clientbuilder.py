"""Per-controller service-account clients: the account is created when missing, a token is
requested for it, and the token is requested again at 80% of its lifetime."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from controlplane.controllers.clientbuilder import ServiceAccountClients
from kubelab.api.kinds.core_v1.cluster import ServiceAccount
from kubelab.api.meta_v1 import Status
from kubelab.client.errors import ApiError
from kubelab.client.kubeconfig import ClientConfig
from kubelab.clock import FakeClock


class FakeRoot:
    """The controller-manager's own client, as far as the builder uses it."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.config = ClientConfig(
            server="https://127.0.0.1:6443", ca_pem=None, cert_pem=b"c", key_pem=b"k"
        )
        self.accounts: set[str] = set()
        self.requests: list[tuple[str, int]] = []

    async def get(self, cls: type[Any], name: str, namespace: str) -> ServiceAccount:
        if name not in self.accounts:
            raise ApiError(Status(code=404, reason="NotFound", message="not found"))
        return ServiceAccount()

    async def create(self, obj: ServiceAccount) -> ServiceAccount:
        self.accounts.add(obj.metadata.name or "")
        return obj

    async def create_subresource(
        self, cls: type[Any], name: str, namespace: str, sub: str, body: Any
    ) -> dict[str, Any]:
        assert (namespace, sub) == ("kube-system", "token")
        self.requests.append((name, body.spec.expiration_seconds))
        expires = self.clock.now() + datetime.timedelta(seconds=3600)
        return {
            "status": {
                "token": f"token-{len(self.requests)}",
                "expirationTimestamp": expires.isoformat(),
            }
        }


async def test_a_controller_gets_its_account_and_a_fresh_token() -> None:
    clock = FakeClock()
    root = FakeRoot(clock)
    builder = ServiceAccountClients(root, clock)  # type: ignore[arg-type]
    try:
        client = await builder.client("deployment-controller")
        assert root.accounts == {"deployment-controller"}
        assert root.requests == [("deployment-controller", 3600)]
        assert client.config.cert_pem is None  # the token, not the manager's certificate
        assert client._auth_headers() == {"Authorization": "Bearer token-1"}
        assert await builder.client("deployment-controller") is client  # one per account

        for _ in range(100):  # until the refresher reaches its sleep
            if clock.sleepers:
                break
            await asyncio.sleep(0)
        await clock.advance(3600 * 0.8 - 1)
        await asyncio.sleep(0)
        assert len(root.requests) == 1
        await clock.advance(2)
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(root.requests) == 2
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
