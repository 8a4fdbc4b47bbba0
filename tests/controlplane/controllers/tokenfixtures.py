"""Bootstrap-token Secrets as the API server stores them, for the token controllers' tests."""

from __future__ import annotations

import base64
import datetime

from controlplane import bootstraptoken
from kube.api.kinds.core_v1.cluster import Secret
from kube.clock import FakeClock
from tests.controlplane.controllers.fakes import stamp


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def token(
    clock: FakeClock,
    expires_in: float | None = None,
    *,
    token_id: str = "abcdef",
    secret: str = "0123456789abcdef",
    data: dict[str, str] | None = None,
) -> Secret:
    """The Secret of ``<token_id>.<secret>``, expiring ``expires_in`` seconds from ``clock``'s
    now (never if None), with ``data`` replacing or adding keys (``""`` removes one),
    its data base64-encoded as stored."""
    expires = (
        clock.now() + datetime.timedelta(seconds=expires_in) if expires_in is not None else None
    )
    made = bootstraptoken.token_secret(token_id, secret, expires=expires)
    merged = {**(made.string_data or {}), **(data or {})}
    stored = Secret(metadata=made.metadata, type=made.type)
    stored.data = {key: b64(value) for key, value in merged.items() if value}
    return stamp(stored)
