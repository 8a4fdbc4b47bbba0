"""Detached JWS with a bootstrap token: upstream's vectors, and one built here by hand."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from kube.client import jws

CONTENT = "Hello from the other side. I must have called a thousand times."


@pytest.mark.parametrize(
    ("content", "secret", "signature"),
    [
        pytest.param(
            CONTENT,
            "my voice is my passcode",
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8",
            id="content",
        ),
        pytest.param(
            "",
            "my voice is my passcode",
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk",
            id="empty-content",
        ),
        pytest.param(
            CONTENT,
            "",
            "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..UfkqvDGiIFxrMnFseDj9LYJOLNrvjW8aHhF71mvvAs8",
            id="empty-secret",
        ),
    ],
)
def test_signatures_match_upstreams_vectors(content: str, secret: str, signature: str) -> None:
    """The expected values are k8s.io/cluster-bootstrap's own test vectors (token id joshua)."""
    assert jws.detached_signature(content, "joshua", secret) == signature
    assert jws.signature_valid(signature, content, "joshua", secret)


def test_a_signature_built_by_hand_from_the_rfc() -> None:
    def part(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    header = part(b'{"alg":"HS256","kid":"abcdef"}')
    payload = part(b"apiVersion: v1\n")
    mac = hmac.new(b"0123456789abcdef", header + b"." + payload, hashlib.sha256).digest()
    expected = (header + b".." + part(mac)).decode()
    assert jws.detached_signature("apiVersion: v1\n", "abcdef", "0123456789abcdef") == expected


@pytest.mark.parametrize(
    ("content", "token_id", "secret"),
    [
        pytest.param(CONTENT + " ", "joshua", "my voice is my passcode", id="other-content"),
        pytest.param(CONTENT, "joshub", "my voice is my passcode", id="other-id"),
        pytest.param(CONTENT, "joshua", "my voice is my passcodf", id="other-secret"),
    ],
)
def test_a_signature_is_refused_for_anything_else(content: str, token_id: str, secret: str) -> None:
    signature = jws.detached_signature(CONTENT, "joshua", "my voice is my passcode")
    assert not jws.signature_valid(signature, content, token_id, secret)
    assert not jws.signature_valid(signature + "x", CONTENT, "joshua", "my voice is my passcode")
