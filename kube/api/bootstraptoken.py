"""Bootstrap tokens' format: ``<id>.<secret>``, and the kube-system Secret that makes one valid.

A token is 6 and 16 characters of ``[a-z0-9]``; it is valid while ``kube-system`` holds a
Secret of type ``bootstrap.kubernetes.io/token`` named ``bootstrap-token-<id>`` whose data
repeats the id and the secret, with an optional ``expiration`` (RFC 3339), ``description``,
``auth-extra-groups`` and ``usage-bootstrap-<usage>: "true"`` marks.  Upstream keeps this in
``k8s.io/cluster-bootstrap`` for every side that reads or writes tokens, and so it is here, in
the shared base: the API server's authenticator, the bootstrapsigner and tokencleaner
controllers and ``kubelab token`` (the control plane) read Secrets with it, and a joining
node's discovery (``kube.client.clusterinfo``, which may not import the control plane)
checks the token it is given.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeGuard

if TYPE_CHECKING:
    from kube.api.kinds.core_v1.cluster import Secret

NAMESPACE = "kube-system"
SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_PREFIX = "bootstrap-token-"
"""Followed by the token id: the name of the token's Secret."""
USAGE_PREFIX = "usage-bootstrap-"
"""Followed by a usage (``authentication``, ``signing``): a key whose value ``"true"`` allows it."""
TOKEN = re.compile(r"\A([a-z0-9]{6})\.([a-z0-9]{16})\Z")
"""A bootstrap token: ``<token id>.<token secret>``."""
TOKEN_ID = re.compile(r"\A[a-z0-9]{6}\Z")


def is_token_secret(obj: object) -> TypeGuard[Secret]:
    """Whether ``obj`` is a bootstrap-token Secret where tokens live (kube-system)."""
    from kube.api.kinds.core_v1.cluster import Secret

    return (
        isinstance(obj, Secret) and obj.type == SECRET_TYPE and obj.metadata.namespace == NAMESPACE
    )


def parse_secret_name(name: str) -> str | None:
    """The token id a Secret named ``name`` is for (``None``: not a bootstrap-token name)."""
    token_id = name.removeprefix(SECRET_PREFIX)
    return token_id if token_id != name and TOKEN_ID.match(token_id) else None


def token_data(secret: Secret) -> dict[str, str]:
    """A bootstrap-token Secret's data as text (values that are not UTF-8 are mangled, never
    raised on: a token with them is refused by what reads it)."""
    return {key: value.decode(errors="replace") for key, value in secret.decoded_data().items()}


def extra_groups(data: Mapping[str, str]) -> list[str]:
    """The groups ``auth-extra-groups`` of ``data`` (``token_data``) names, besides
    ``system:bootstrappers``."""
    return [g.strip() for g in data.get("auth-extra-groups", "").split(",") if g]


def usages(data: Mapping[str, str]) -> list[str]:
    """What the token of ``data`` may be used for (``authentication``, ``signing``), sorted."""
    return sorted(
        key.removeprefix(USAGE_PREFIX)
        for key, value in data.items()
        if key.startswith(USAGE_PREFIX) and value == "true"
    )


def expiration(data: Mapping[str, str]) -> datetime.datetime | None:
    """When the token of ``data`` expires, ``None`` if never; ``ValueError`` for an
    ``expiration`` that is not an RFC 3339 time with a zone."""
    text = data.get("expiration")
    if not text:
        return None
    expires = datetime.datetime.fromisoformat(text)
    if expires.tzinfo is None:
        raise ValueError(f"expiration {text!r} has no time zone")
    return expires


def seconds_left(data: Mapping[str, str], now: datetime.datetime) -> float | None:
    """Seconds until the token of ``data`` expires: ``None`` if it never does, 0 if it has, and
    0 too for an ``expiration`` that ``expiration`` refuses (upstream treats such a token as
    expired)."""
    try:
        expires = expiration(data)
    except ValueError:
        return 0.0
    return None if expires is None else max((expires - now).total_seconds(), 0.0)
