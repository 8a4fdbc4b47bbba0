"""The bootstrap-token format every reader shares: the token and id patterns, Secret names,
usages, extra groups and ``expiration`` (RFC 3339 with a zone, or no token)."""

from __future__ import annotations

import datetime

import pytest

from kube.api.bootstraptoken import (
    TOKEN,
    expiration,
    extra_groups,
    is_token_secret,
    parse_secret_name,
    seconds_left,
    usages,
)
from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.api.meta_v1 import ObjectMeta

NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("abcdef.0123456789abcdef", ("abcdef", "0123456789abcdef")),
        ("abcdef.0123456789abcdef\n", None),
        ("ABCDEF.0123456789abcdef", None),
        ("abcdef0123456789abcdef", None),
        ("abcde.0123456789abcdefg", None),
    ],
)
def test_the_token_pattern(text: str, parts: tuple[str, str] | None) -> None:
    match = TOKEN.match(text)
    assert (match.groups() if match else None) == parts


@pytest.mark.parametrize(
    ("name", "token_id"),
    [
        ("bootstrap-token-abcdef", "abcdef"),
        ("bootstrap-token-abcde", None),
        ("bootstrap-token-abcdef\n", None),
        ("abcdef", None),
        ("other-abcdef", None),
    ],
)
def test_secret_names_name_a_token_id(name: str, token_id: str | None) -> None:
    assert parse_secret_name(name) == token_id


def test_only_kube_system_token_secrets_hold_tokens() -> None:
    token_type = "bootstrap.kubernetes.io/token"
    meta = ObjectMeta(name="bootstrap-token-abcdef", namespace="kube-system")
    assert is_token_secret(Secret(metadata=meta, type=token_type))
    assert not is_token_secret(Secret(metadata=meta, type="Opaque"))
    assert not is_token_secret(
        Secret(metadata=ObjectMeta(name=meta.name, namespace="team"), type=token_type)
    )
    assert not is_token_secret(ConfigMap(metadata=meta))


def test_usages_and_groups() -> None:
    data = {
        "usage-bootstrap-signing": "true",
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-other": "false",
        "auth-extra-groups": "system:bootstrappers:a, system:bootstrappers:b",
    }
    assert usages(data) == ["authentication", "signing"]
    assert extra_groups(data) == ["system:bootstrappers:a", "system:bootstrappers:b"]
    assert usages({}) == [] and extra_groups({}) == []


@pytest.mark.parametrize(
    ("text", "left"),
    [
        ("", None),
        ("2026-11-22T13:00:00Z", 3600.0),
        ("2026-11-22T14:00:00+01:00", 3600.0),
        ("2026-11-22T11:00:00Z", 0.0),
    ],
)
def test_expiration(text: str, left: float | None) -> None:
    data = {"expiration": text} if text else {}
    assert seconds_left(data, NOW) == left
    expires = expiration(data)
    assert (expires is None) == (left is None)


@pytest.mark.parametrize("text", ["tomorrow", "2026-11-23T12:00:00", "2026-11-23"])
def test_an_expiration_without_a_zone_or_unreadable_is_refused_and_counts_as_expired(
    text: str,
) -> None:
    with pytest.raises(ValueError, match=r"isoformat|time zone"):
        expiration({"expiration": text})
    assert seconds_left({"expiration": text}, NOW) == 0.0
