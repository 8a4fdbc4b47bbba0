"""The tokencleaner, with fake informers, a fake API and a fake clock."""

from __future__ import annotations

import pytest

from controlplane.controllers import tokencleaner
from kube.api.bootstraptoken import SECRET_TYPE
from kube.api.kinds.core_v1.cluster import Secret
from kube.api.meta_v1 import ObjectMeta, Status
from kube.client.errors import ApiError
from kube.clock import FakeClock
from tests.controlplane.controllers.fakes import Harness, harness, stamp
from tests.controlplane.controllers.tokenfixtures import b64, token

KEY = "kube-system/bootstrap-token-abcdef"


def cleaner_with(secret: Secret) -> tuple[Harness, tokencleaner.TokenCleaner]:
    h = harness()
    h.store(secret)
    return h, tokencleaner.new(h.ctx)


@pytest.mark.parametrize(
    ("expires_in", "overrides"),
    [
        pytest.param(-1.0, {}, id="expired"),
        pytest.param(0.0, {}, id="expiring-now"),
        pytest.param(None, {"expiration": "tomorrow"}, id="unparsable-counts-as-expired"),
        pytest.param(None, {"expiration": "2026-01-02T00:00:00"}, id="no-zone-counts-as-expired"),
    ],
)
async def test_an_expired_token_is_deleted(
    expires_in: float | None, overrides: dict[str, str]
) -> None:
    secret = token(FakeClock(), expires_in, data=overrides)
    h, cleaner = cleaner_with(secret)
    await cleaner.sync(KEY)
    assert [(a.verb, a.namespace, a.name) for a in h.client.actions] == [
        ("delete", "kube-system", secret.metadata.name)
    ]
    assert h.client.objects == {}


async def test_a_token_replaced_under_the_same_name_survives() -> None:
    """The delete carries the cached uid: a new Secret of that name is not the expired one."""
    clock = FakeClock()
    h = harness()
    cleaner = tokencleaner.new(h.ctx)
    h.cache(token(clock, -1))
    h.client.seed(token(clock, 3600))  # another uid
    await cleaner.sync(KEY)
    assert h.client.writes() == [] and len(h.client.objects) == 1


async def test_a_live_token_is_kept_until_its_expiry_then_deleted() -> None:
    h = harness()
    cleaner = tokencleaner.new(h.ctx)  # before the cache is filled: nothing queued by handlers
    h.store(token(h.clock, 3600))
    await cleaner.sync(KEY)
    assert h.client.actions == []
    await h.clock.advance(3599)
    assert len(cleaner.queue) == 0
    await h.clock.advance(2)
    assert await cleaner.queue.get() == KEY
    await cleaner.sync(KEY)
    assert [a.verb for a in h.client.actions] == ["delete"]


async def test_a_token_without_expiration_lives_forever() -> None:
    h = harness()
    cleaner = tokencleaner.new(h.ctx)
    h.store(token(h.clock))
    await cleaner.sync(KEY)
    await h.clock.advance(10 * 365 * 86400)
    assert h.client.actions == [] and len(cleaner.queue) == 0


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param(
            Secret(metadata=ObjectMeta(name="bootstrap-token-abcdef", namespace="kube-system")),
            id="opaque",
        ),
        pytest.param(
            Secret(
                metadata=ObjectMeta(name="bootstrap-token-abcdef", namespace="team"),
                type=SECRET_TYPE,
            ),
            id="outside-kube-system",
        ),
    ],
)
async def test_other_secrets_are_ignored(secret: Secret) -> None:
    secret.data = {"expiration": b64("2000-01-01T00:00:00Z")}
    h = harness()
    cleaner = tokencleaner.new(h.ctx)
    h.store(stamp(secret))
    await cleaner.sync(f"{secret.metadata.namespace}/{secret.metadata.name}")
    cleaner._added(secret)
    assert h.client.actions == [] and len(cleaner.queue) == 0


@pytest.mark.parametrize("code", [404, 409])
async def test_a_token_gone_or_replaced_meanwhile_is_no_error(code: int) -> None:
    h, cleaner = cleaner_with(token(FakeClock(), -1))
    h.client.fail_next("delete", ApiError(Status(code=code, reason="Gone", message="gone")))
    await cleaner.sync(KEY)  # raising would retry the key forever
    assert h.client.writes() == []


async def test_other_errors_are_retried() -> None:
    h, cleaner = cleaner_with(token(FakeClock(), -1))
    h.client.fail_next("delete", ApiError(Status(code=500, reason="InternalError", message="x")))
    with pytest.raises(ApiError):
        await cleaner.sync(KEY)


async def test_informer_events_enqueue_tokens() -> None:
    h = harness()
    cleaner = tokencleaner.new(h.ctx)
    old = token(h.clock, 60)
    cleaner._added(old)
    assert await cleaner.queue.get() == KEY
    cleaner.queue.done(KEY)
    cleaner._updated(old, old)  # a resync: nothing changed
    assert len(cleaner.queue) == 0
    cleaner._updated(old, stamp(token(h.clock, 60), rv="2"))
    assert len(cleaner.queue) == 1
