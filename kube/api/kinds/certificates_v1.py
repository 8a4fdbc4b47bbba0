"""certificates.k8s.io/v1: CertificateSigningRequest, a request for a signed X.509 certificate.

A client posts a PEM-encoded PKCS#10 request naming the signer it wants; the API server records
who asked (username, groups, uid, extra); an approver adds an Approved or Denied condition
through the ``approval`` subresource and the signer writes the certificate through ``status``.
The request's signature and the issued certificate are checked with ``cryptography``.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import re
from typing import Annotated, Self

from kube.api import names
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.meta_v1 import Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column, human_duration
from kube.api.scheme import PATH_SEGMENT, kind
from kube.api.struct import Struct, Time, atomic, meta

APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"
LEGACY_UNKNOWN_SIGNER = "kubernetes.io/legacy-unknown"

KEY_USAGES = (
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
)

_DNS1123_SUBDOMAIN_MAX = 253
_DNS1123_LABEL_MAX = 63
_SIGNER_PATH_MAX = _DNS1123_SUBDOMAIN_MAX + _DNS1123_LABEL_MAX + 1
_SIGNER_NAME_MAX = _DNS1123_SUBDOMAIN_MAX + _SIGNER_PATH_MAX + 1


def validate_signer_name(signer_name: str, path: Path, errors: ErrorList) -> None:
    """``example.com/signer-name``: a domain of two or more labels, a slash, subdomain parts."""
    domain, slash, rest = signer_name.partition("/")
    if not slash or "/" in rest:
        errors.invalid(
            path,
            signer_name,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )
        return
    if len(domain) > _DNS1123_SUBDOMAIN_MAX:
        errors.too_long(path, _DNS1123_SUBDOMAIN_MAX)
    labels = domain.split(".")
    for label in labels:
        problems = names.is_dns1123_label(label)
        for problem in problems:
            errors.invalid(path, domain, f"validating label {json.dumps(label)}: {problem}")
        if problems:
            break
    if len(labels) < 2:
        errors.invalid(
            path, domain, "should be a domain with at least two segments separated by dots"
        )
    for part in rest.split("."):
        problems = names.is_dns1123_subdomain(part)
        for problem in problems:
            errors.invalid(path, rest, f"validating label {json.dumps(part)}: {problem}")
        if problems:
            break
    if len(signer_name) > _SIGNER_NAME_MAX:
        errors.too_long(path, _SIGNER_NAME_MAX)


# PEM as Go's encoding/pem reads it: typed blocks, optional "Key: value" headers, base64 body.
_PEM_BLOCK = re.compile(rb"-----BEGIN ([^\r\n-]*)-----\r?\n(.*?)^-----END \1-----", re.S | re.M)


def _pem_blocks(data: bytes) -> list[tuple[str, bool, bytes]]:
    """(type, has headers, DER bytes) of every well-formed PEM block in ``data``, in order."""
    blocks = []
    for match in _PEM_BLOCK.finditer(data):
        lines = match.group(2).splitlines()
        has_headers = any(b":" in line for line in lines)
        body = b"".join(line.strip() for line in lines if b":" not in line)
        try:
            der = base64.b64decode(body, validate=True)
        except binascii.Error:
            continue
        blocks.append((match.group(1).decode("ascii", "replace"), has_headers, der))
    return blocks


def _signature_failure(public_key: object) -> str:
    """The message Go's x509 gives when a request's signature does not verify."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(public_key, rsa.RSAPublicKey):
        return "crypto/rsa: verification error"
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        return "x509: ECDSA verification failure"
    if isinstance(public_key, ed25519.Ed25519PublicKey):
        return "x509: Ed25519 verification failure"
    return "x509: signature verification failure"


def csr_problem(request: bytes) -> str | None:
    """Why ``request`` is not a PEM PKCS#10 request with a valid signature (None if it is)."""
    from cryptography import x509  # imported on use: only CSR validation needs it

    blocks = _pem_blocks(request)
    if not blocks or blocks[0][0] != "CERTIFICATE REQUEST":
        return "PEM block type must be CERTIFICATE REQUEST"
    try:
        csr = x509.load_der_x509_csr(blocks[0][2])
        public_key = csr.public_key()
        valid = csr.is_signature_valid
    except (ValueError, TypeError):
        return "x509: malformed certificate request"
    return None if valid else _signature_failure(public_key)


def certificate_problem(data: bytes) -> str | None:
    """Why ``data`` is not one or more PEM CERTIFICATE blocks (None if it is, or is empty)."""
    from cryptography import x509  # imported on use: only CSR validation needs it

    if not data:
        return None
    blocks = _pem_blocks(data)
    for block_type, has_headers, der in blocks:
        if block_type != "CERTIFICATE":
            return f"only CERTIFICATE PEM blocks are allowed, found {json.dumps(block_type)}"
        if has_headers:
            return "no PEM block headers are permitted"
        try:
            x509.load_der_x509_certificate(der)
        except ValueError:
            return "x509: malformed certificate"
    return None if blocks else "must contain at least one CERTIFICATE PEM block"


class CertificateSigningRequestSpec(Struct):
    """The PEM request, the signer asked for, and who asked (filled in by the server)."""

    request: Annotated[
        bytes | None, meta(required=True, doc="A PEM-encoded PKCS#10 certificate request.", proto=1)
    ] = None
    signer_name: Annotated[
        str | None,
        meta(required=True, doc="The signer asked for, e.g. example.com/my-signer.", proto=7),
    ] = None
    expiration_seconds: Annotated[
        int | None, meta(doc="The validity asked for, in seconds (at least 600).", proto=8)
    ] = None
    usages: Annotated[
        list[Annotated[str, meta(enum=KEY_USAGES)]] | None,
        atomic(required=True, doc="Key usages asked for, such as 'client auth'.", proto=5),
    ] = None
    username: Annotated[
        str | None,
        meta(doc="Who created the request (set by the server).", proto=2, omitempty=True),
    ] = None
    uid: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    groups: Annotated[list[str] | None, atomic(proto=4)] = None
    extra: Annotated[dict[str, list[str]] | None, meta(proto=6)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.request is not None:
            problem = csr_problem(self.request)
            if problem:
                text = self.request.decode("utf-8", "replace")
                errors.invalid(path.child("request"), text, problem)
        seen: set[str] = set()
        for i, usage in enumerate(self.usages or ()):
            if usage in seen:
                errors.duplicate(path.child("usages").index(i), usage)
            seen.add(usage)
        if self.signer_name == LEGACY_UNKNOWN_SIGNER:
            errors.invalid(
                path.child("signerName"),
                self.signer_name,
                "the legacy signerName is not allowed via this API version",
            )
        elif self.signer_name:
            validate_signer_name(self.signer_name, path.child("signerName"), errors)
        if self.expiration_seconds is not None and self.expiration_seconds < 600:
            errors.invalid(
                path.child("expirationSeconds"),
                self.expiration_seconds,
                "may not specify a duration less than 600 seconds (10 minutes)",
            )


class CertificateSigningRequestCondition(Struct):
    """Approved, Denied or Failed (or a signer's own condition type), with why and when."""

    type: Annotated[str | None, meta(proto=1)] = None
    status: Annotated[str | None, meta(proto=6)] = None
    reason: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    last_update_time: Annotated[Time | None, meta(proto=4, omitempty=True)] = None
    last_transition_time: Annotated[Time | None, meta(proto=5, omitempty=True)] = None


_TRUE_ONLY = (APPROVED, DENIED, FAILED)


class CertificateSigningRequestStatus(Struct):
    """The approval conditions and, once signed, the certificate."""

    conditions: Annotated[
        list[CertificateSigningRequestCondition] | None,
        meta(list_type="map", list_map_keys=("type",), doc="Approved, Denied and Failed.", proto=1),
    ] = None
    certificate: Annotated[
        bytes | None,
        meta(doc="The issued certificate chain, PEM-encoded (set by the signer).", proto=2),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        seen: set[str] = set()
        approved = denied = False
        for i, condition in enumerate(self.conditions or ()):
            item = path.child("conditions").index(i)
            if not condition.type:
                errors.required(item.child("type"))
            allowed = ("True",) if condition.type in _TRUE_ONLY else ("True", "False", "Unknown")
            if not condition.status:
                errors.required(item.child("status"))
            elif condition.status not in allowed:
                errors.not_supported(item.child("status"), condition.status, allowed)
            if condition.type == APPROVED:
                approved = True
            if condition.type == DENIED:
                denied = True
            if condition.type in (APPROVED, DENIED) and approved and denied:
                errors.invalid(
                    item.child("type"),
                    condition.type,
                    "Approved and Denied conditions are mutually exclusive",
                )
            if condition.type in seen:
                errors.duplicate(item.child("type"), condition.type)
            seen.add(condition.type or "")
        if self.certificate is not None:
            problem = certificate_problem(self.certificate)
            if problem:
                errors.invalid(path.child("certificate"), "<certificate data>", problem)


def _condition_cell(o: CertificateSigningRequest, now: datetime.datetime) -> str:
    types = {c.type for c in (o.status.conditions if o.status else None) or ()}
    text = DENIED if DENIED in types else APPROVED if APPROVED in types else "Pending"
    if FAILED in types:
        text += ",Failed"
    if o.status is not None and o.status.certificate:
        text += ",Issued"
    return text


def _requested_duration(o: CertificateSigningRequest, now: datetime.datetime) -> str:
    seconds = o.spec.expiration_seconds if o.spec else None
    return "<none>" if seconds is None else human_duration(datetime.timedelta(seconds=seconds))


@kind(
    group="certificates.k8s.io",
    version="v1",
    plural="certificatesigningrequests",
    namespaced=False,
    short_names=("csr",),
    subresources=("status", "approval"),
    columns=(
        NAME_COLUMN,
        AGE_COLUMN,
        Column(
            "SignerName",
            lambda o, now: (o.spec and o.spec.signer_name) or "<none>",
            description="The signer the request asks for.",
        ),
        Column(
            "Requestor",
            lambda o, now: (o.spec and o.spec.username) or "",
            description="The user who created the request.",
        ),
        Column(
            "RequestedDuration",
            _requested_duration,
            description="The validity period the request asks for.",
        ),
        Column(
            "Condition", _condition_cell, description="Pending, Approved or Denied, and Issued."
        ),
    ),
    field_selectors={"spec.signerName": lambda o: o.spec.signer_name if o.spec else None},
    name_format=PATH_SEGMENT,
)
class CertificateSigningRequest(Resource):
    """A request for a certificate from a named signer, approved or denied, then signed."""

    spec: Annotated[
        CertificateSigningRequestSpec | None, meta(required=True, doc="What is asked for.", proto=2)
    ] = None
    status: Annotated[
        CertificateSigningRequestStatus | None,
        meta(doc="Approval and the issued certificate.", proto=3),
    ] = None

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        new_status = self.status or CertificateSigningRequestStatus()
        old_status = old.status or CertificateSigningRequestStatus()
        for condition_type in (APPROVED, DENIED, FAILED):
            if _count(new_status, condition_type) < _count(old_status, condition_type):
                errors.forbidden(
                    ROOT.child("status").child("conditions"),
                    f"updates may not remove a condition of type {json.dumps(condition_type)}",
                )
        if old_status.certificate and new_status.certificate != old_status.certificate:
            errors.forbidden(
                ROOT.child("status").child("certificate"),
                "updates may not modify existing certificate content",
            )


def _count(status: CertificateSigningRequestStatus, condition_type: str) -> int:
    return sum(1 for c in status.conditions or () if c.type == condition_type)
