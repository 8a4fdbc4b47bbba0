"""Service-account tokens: the ``serviceaccounts/token`` subresource (``kubectl create token``).

A TokenRequest gets back a JWT signed with the cluster's service-account key (ES256), with
the claims upstream issues: ``iss``, ``sub`` = ``system:serviceaccount:<ns>:<name>``,
``aud``, ``iat``/``nbf``/``exp``, and a ``kubernetes.io`` claim naming the namespace, the
service account (name and uid) and, for a bound token, the Pod or Secret it is bound to, which
must exist with the uid given.  Verifying these tokens on incoming requests belongs to the
authentication stage (the security issue); the key's public half is written beside it for that.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from controlplane.apiserver import errors
from kube.api.errors import ROOT, ErrorList
from kube.api.kinds.authentication_v1 import TokenRequest, TokenRequestStatus
from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.api.meta_v1 import ObjectMeta, Resource
from kube.pki import write_file

ISSUER = "https://kubernetes.default.svc.cluster.local"
BINDABLE = ("Pod", "Secret")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenIssuer:
    """Signs service-account tokens with one ECDSA P-256 key."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, issuer: str = ISSUER) -> None:
        self.key = key
        self.issuer = issuer
        public = key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.key_id = _b64(hashlib.sha256(public).digest())

    @classmethod
    def load_or_create(cls, directory: Path) -> TokenIssuer:
        """The key kept as ``sa.key`` (and ``sa.pub``) in ``directory``, created on first use."""
        path = directory / "sa.key"
        if path.exists():
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
            assert isinstance(key, ec.EllipticCurvePrivateKey)
            return cls(key)
        key = ec.generate_private_key(ec.SECP256R1())
        write_file(
            path,
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
            0o600,
        )
        write_file(
            directory / "sa.pub",
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        )
        return cls(key)

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"alg": "ES256", "kid": self.key_id}
        signing_input = (
            _b64(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64(json.dumps(claims, separators=(",", ":")).encode())
        )
        r, s = decode_dss_signature(
            self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        )
        return signing_input + "." + _b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

    def issue(
        self,
        account: ServiceAccount,
        request: TokenRequest,
        bound: Resource | None,
        now: datetime.datetime,
    ) -> TokenRequest:
        """Fill ``request``'s status with a token for ``account``."""
        spec = request.spec
        assert spec is not None and spec.expiration_seconds is not None
        issued = int(now.timestamp())
        expires = issued + spec.expiration_seconds
        identity: dict[str, Any] = {
            "namespace": account.metadata.namespace,
            "serviceaccount": {"name": account.metadata.name, "uid": account.metadata.uid},
        }
        if bound is not None:
            identity[bound.kind_info.kind.lower()] = {
                "name": bound.metadata.name,
                "uid": bound.metadata.uid,
            }
        claims = {
            "aud": spec.audiences or [self.issuer],
            "exp": expires,
            "iat": issued,
            "iss": self.issuer,
            "kubernetes.io": identity,
            "nbf": issued,
            "sub": f"system:serviceaccount:{account.metadata.namespace}:{account.metadata.name}",
        }
        spec.audiences = spec.audiences or [self.issuer]
        request.metadata = ObjectMeta(
            name=account.metadata.name,
            namespace=account.metadata.namespace,
            creation_timestamp=now.replace(microsecond=0),
        )
        request.status = TokenRequestStatus(
            token=self.sign(claims),
            expiration_timestamp=datetime.datetime.fromtimestamp(expires, datetime.UTC),
        )
        return request


def check_binding(request: TokenRequest, bound: Resource | None) -> None:
    """A bound token's object must be a Pod or Secret that exists with the uid given."""
    spec = request.spec
    ref = spec.bound_object_ref if spec is not None else None
    if ref is None:
        return
    problems = ErrorList()
    path = ROOT.child("spec").child("boundObjectRef")
    if ref.kind not in BINDABLE:
        problems.not_supported(path.child("kind"), ref.kind, BINDABLE)
    elif bound is None:
        problems.not_found(path.child("name"), ref.name)
    elif ref.uid and ref.uid != bound.metadata.uid:
        problems.invalid(
            path.child("uid"), ref.uid, f"does not match {ref.kind} uid {bound.metadata.uid}"
        )
    if problems:
        raise errors.invalid(request.kind_info, "", problems)
