"""``kubectl create token``: signed service-account tokens from ``serviceaccounts/token``."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from tests.servers import Kubectl, ServerProcess


def _part(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _verified_claims(token: str, apiserver: ServerProcess) -> dict[str, Any]:
    """The token's claims, after checking its ES256 signature with the cluster's public key."""
    header, payload, signature = token.split(".")
    public = serialization.load_pem_public_key((apiserver.data_dir / "pki" / "sa.pub").read_bytes())
    assert isinstance(public, ec.EllipticCurvePublicKey)
    raw = _part(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, f"{header}.{payload}".encode(), ec.ECDSA(hashes.SHA256()))
    assert json.loads(_part(header))["alg"] == "ES256"
    claims: dict[str, Any] = json.loads(_part(payload))
    return claims


def _service_account(kubectl: Kubectl) -> dict[str, Any]:
    kubectl.run("create", "serviceaccount", "robot")
    return kubectl.json("get", "serviceaccount", "robot")


def test_create_token(kubectl: Kubectl, apiserver: ServerProcess) -> None:
    account = _service_account(kubectl)
    token = kubectl.run("create", "token", "robot", "--duration=2h").stdout.strip()
    claims = _verified_claims(token, apiserver)
    assert claims["sub"] == f"system:serviceaccount:{kubectl.namespace}:robot"
    assert claims["kubernetes.io"]["serviceaccount"] == {
        "name": "robot",
        "uid": account["metadata"]["uid"],
    }
    assert claims["aud"] == ["https://kubernetes.default.svc.cluster.local"]
    assert claims["exp"] - claims["iat"] == 7200
    assert abs(claims["iat"] - time.time()) < 60


def test_bound_token_and_audiences(kubectl: Kubectl, apiserver: ServerProcess) -> None:
    _service_account(kubectl)
    kubectl.run("create", "secret", "generic", "anchor", "--from-literal=a=b")
    secret = kubectl.json("get", "secret", "anchor")
    uid = secret["metadata"]["uid"]
    token = kubectl.run(
        "create",
        "token",
        "robot",
        "--audience=vault",
        "--bound-object-kind=Secret",
        "--bound-object-name=anchor",
        f"--bound-object-uid={uid}",
    ).stdout.strip()
    claims = _verified_claims(token, apiserver)
    assert claims["aud"] == ["vault"]
    assert claims["kubernetes.io"]["secret"] == {"name": "anchor", "uid": uid}


def test_token_errors(kubectl: Kubectl) -> None:
    missing = kubectl.run("create", "token", "nobody", check=False)
    assert 'serviceaccounts "nobody" not found' in missing.stderr
    _service_account(kubectl)
    short = kubectl.run("create", "token", "robot", "--duration=1m", check=False)
    assert "may not specify a duration less than 10 minutes" in short.stderr
    unbound = kubectl.run(
        "create",
        "token",
        "robot",
        "--bound-object-kind=Pod",
        "--bound-object-name=ghost",
        check=False,
    )
    assert "spec.boundObjectRef.name: Not found" in unbound.stderr
