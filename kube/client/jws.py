"""Detached JWS signatures with a bootstrap token: how cluster-info is vouched for.

The bootstrap-signer controller signs the ``kubeconfig`` of ``kube-public/cluster-info`` with
every bootstrap token allowed to sign, and a joining node that knows only a token checks the
signature before it trusts the CA in that kubeconfig.  Both sides use this module, so they
agree byte for byte with each other and with upstream (``k8s.io/cluster-bootstrap/token/jws``).

The format is RFC 7515's compact serialization with the payload left out (its Appendix F):
``<header>..<signature>``, where the header is ``{"alg":"HS256","kid":"<token id>"}`` and the
signature is HMAC-SHA256, keyed with the token secret, over ``<header>.<payload>`` (each part
base64url without padding).  Upstream pads the key with zeros to 32 bytes for its JOSE
library; HMAC zero-pads any key shorter than its 64-byte block anyway, so the plain secret
gives the same signature.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json


def b64url(data: bytes) -> str:
    """Base64url without padding, as JWS encodes every part."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def detached_signature(content: str, token_id: str, token_secret: str) -> str:
    """The detached JWS of ``content`` with the token ``<token_id>.<token_secret>``."""
    header = b64url(json.dumps({"alg": "HS256", "kid": token_id}, separators=(",", ":")).encode())
    signing_input = f"{header}.{b64url(content.encode())}".encode()
    mac = hmac.new(token_secret.encode(), signing_input, hashlib.sha256).digest()
    return f"{header}..{b64url(mac)}"


def signature_valid(signature: str, content: str, token_id: str, token_secret: str) -> bool:
    """Whether ``signature`` is the detached JWS of ``content`` with this token (compared in
    constant time, as an attacker may probe it)."""
    expected = detached_signature(content, token_id, token_secret)
    return hmac.compare_digest(signature.encode(), expected.encode())
