"""certificates.k8s.io, authentication.k8s.io and authorization.k8s.io v1 kinds.

Review kinds (TokenReview, *SubjectAccessReview, ...) must arrive with empty metadata, as
upstream requires, so they are checked with ``walk.validate_struct``: ``walk.validate`` would
also apply the metadata rules of stored objects (a name is required) to them.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import NameOID

from kube.api import walk
from kube.api.errors import ErrorType
from kube.api.kinds.authentication_v1 import (
    SelfSubjectReview,
    TokenRequest,
    TokenReview,
)
from kube.api.kinds.authorization_v1 import (
    LocalSubjectAccessReview,
    SelfSubjectAccessReview,
    SelfSubjectRulesReview,
    SubjectAccessReview,
)
from kube.api.kinds.certificates_v1 import CertificateSigningRequest
from kube.api.meta_v1 import Resource
from kube.api.scheme import CREATE_ONLY, NOT_SERVED
from tests.kube.api.kinds.helpers import (
    CREATED,
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    NOW,
    REQUIRED,
    Problem,
    decode,
    merge,
    ordered,
    problems,
)


def review_problems(obj: Resource) -> list[Problem]:
    return ordered((e.field, e.type) for e in walk.validate_struct(obj))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# certificates.k8s.io/v1

_KEY = ed25519.Ed25519PrivateKey.generate()
_SUBJECT = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "jane")])
_CSR = x509.CertificateSigningRequestBuilder().subject_name(_SUBJECT).sign(_KEY, None)
CSR_PEM = _CSR.public_bytes(serialization.Encoding.PEM)
_CSR_DER = _CSR.public_bytes(serialization.Encoding.DER)
TAMPERED_PEM = (
    b"-----BEGIN CERTIFICATE REQUEST-----\n"
    + base64.encodebytes(_CSR_DER[:-1] + bytes([_CSR_DER[-1] ^ 1]))
    + b"-----END CERTIFICATE REQUEST-----\n"
)
GARBAGE_PEM = b"-----BEGIN CERTIFICATE REQUEST-----\naGVsbG8=\n-----END CERTIFICATE REQUEST-----\n"
CERT_PEM = (
    x509.CertificateBuilder()
    .subject_name(_SUBJECT)
    .issuer_name(_SUBJECT)
    .public_key(_KEY.public_key())
    .serial_number(1)
    .not_valid_before(NOW)
    .not_valid_after(NOW + datetime.timedelta(days=1))
    .sign(_KEY, None)
    .public_bytes(serialization.Encoding.PEM)
)

CSR = {
    "apiVersion": "certificates.k8s.io/v1",
    "kind": "CertificateSigningRequest",
    "metadata": {"name": "jane", "creationTimestamp": CREATED},
    "spec": {
        "request": b64(CSR_PEM),
        "signerName": "kubernetes.io/kube-apiserver-client",
        "usages": ["client auth"],
        "username": "jane",
    },
}


def conditions(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": t, "status": s} for t, s in pairs]}}


CSR_VALIDATION = [
    ("valid", CSR, []),
    ("name-any-path-segment", merge(CSR, {"metadata": {"name": "Node:A_1"}}), []),
    ("no-request", merge(CSR, {"spec": {"request": None}}), [("spec.request", REQUIRED)]),
    ("request-not-pem", merge(CSR, {"spec": {"request": b64(b"hello")}}),
     [("spec.request", INVALID)]),
    ("request-garbage", merge(CSR, {"spec": {"request": b64(GARBAGE_PEM)}}),
     [("spec.request", INVALID)]),
    ("request-bad-signature", merge(CSR, {"spec": {"request": b64(TAMPERED_PEM)}}),
     [("spec.request", INVALID)]),
    ("no-signer", merge(CSR, {"spec": {"signerName": None}}), [("spec.signerName", REQUIRED)]),
    ("signer-without-path", merge(CSR, {"spec": {"signerName": "example.com"}}),
     [("spec.signerName", INVALID)]),
    ("signer-one-label-domain", merge(CSR, {"spec": {"signerName": "example/signer"}}),
     [("spec.signerName", INVALID)]),
    ("signer-custom", merge(CSR, {"spec": {"signerName": "example.com/my-signer"}}), []),
    ("signer-legacy", merge(CSR, {"spec": {"signerName": "kubernetes.io/legacy-unknown"}}),
     [("spec.signerName", INVALID)]),
    ("no-usages", merge(CSR, {"spec": {"usages": None}}), [("spec.usages", REQUIRED)]),
    ("unknown-usage", merge(CSR, {"spec": {"usages": ["client auth", "flying"]}}),
     [("spec.usages[1]", NOT_SUPPORTED)]),
    ("duplicate-usage", merge(CSR, {"spec": {"usages": ["client auth", "client auth"]}}),
     [("spec.usages[1]", DUPLICATE)]),
    ("expiration-too-short", merge(CSR, {"spec": {"expirationSeconds": 599}}),
     [("spec.expirationSeconds", INVALID)]),
    ("expiration-ten-minutes", merge(CSR, {"spec": {"expirationSeconds": 600}}), []),
    ("approved", merge(CSR, conditions(("Approved", "True"))), []),
    ("approved-false", merge(CSR, conditions(("Approved", "False"))),
     [("status.conditions[0].status", NOT_SUPPORTED)]),
    ("custom-condition-false", merge(CSR, conditions(("Checked", "False"))), []),
    ("approved-and-denied", merge(CSR, conditions(("Approved", "True"), ("Denied", "True"))),
     [("status.conditions[1].type", INVALID)]),
    ("duplicate-condition", merge(CSR, conditions(("Failed", "True"), ("Failed", "True"))),
     [("status.conditions[1].type", DUPLICATE)]),
    ("condition-without-type-and-status", merge(CSR, {"status": {"conditions": [{}]}}),
     [("status.conditions[0].status", REQUIRED), ("status.conditions[0].type", REQUIRED)]),
    ("certificate", merge(CSR, {"status": {"certificate": b64(CERT_PEM)}}), []),
    ("certificate-not-pem", merge(CSR, {"status": {"certificate": b64(b"junk")}}),
     [("status.certificate", INVALID)]),
    ("certificate-wrong-block", merge(CSR, {"status": {"certificate": b64(CSR_PEM)}}),
     [("status.certificate", INVALID)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in CSR_VALIDATION], ids=[c[0] for c in CSR_VALIDATION]
)
def test_csr_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, CertificateSigningRequest)) == sorted(expected)


CSR_MESSAGES = [
    ("request-not-pem", {"request": b64(b"hello")}, "PEM block type must be CERTIFICATE REQUEST"),
    ("request-garbage", {"request": b64(GARBAGE_PEM)}, "x509: malformed certificate request"),
    ("bad-signature", {"request": b64(TAMPERED_PEM)}, "x509: Ed25519 verification failure"),
    ("signer", {"signerName": "example.com"},
     "must be a fully qualified domain and path of the form 'example.com/signer-name'"),
    ("expiration", {"expirationSeconds": 60},
     "may not specify a duration less than 600 seconds (10 minutes)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "detail"), [c[1:] for c in CSR_MESSAGES], ids=[c[0] for c in CSR_MESSAGES]
)
def test_csr_messages(spec: dict[str, Any], detail: str) -> None:
    errors = walk.validate(decode(merge(CSR, {"spec": spec}), CertificateSigningRequest))
    assert [e.detail for e in errors] == [detail]


CSR_UPDATES = [
    ("add-approval", conditions(), conditions(("Approved", "True")), []),
    ("remove-approval", conditions(("Approved", "True")), conditions(),
     [("status.conditions", FORBIDDEN)]),
    ("issue", {}, {"status": {"certificate": b64(CERT_PEM)}}, []),
    ("replace-certificate", {"status": {"certificate": b64(CERT_PEM)}},
     {"status": {"certificate": b64(CERT_PEM + CERT_PEM)}}, [("status.certificate", FORBIDDEN)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "expected"), [c[1:] for c in CSR_UPDATES], ids=[c[0] for c in CSR_UPDATES]
)
def test_csr_updates(
    old: dict[str, Any], new: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    errors = walk.validate_update(
        decode(merge(CSR, new), CertificateSigningRequest),
        decode(merge(CSR, old), CertificateSigningRequest),
    )
    assert sorted((e.field, e.type) for e in errors) == expected


CSR_PRINTING = [
    ("pending", CSR, ["jane", "5m", "kubernetes.io/kube-apiserver-client", "jane", "<none>",
                      "Pending"]),
    ("approved-issued", merge(CSR, merge(conditions(("Approved", "True")), {
        "status": {"certificate": b64(CERT_PEM)}, "spec": {"expirationSeconds": 3600}})),
     ["jane", "5m", "kubernetes.io/kube-apiserver-client", "jane", "60m", "Approved,Issued"]),
    ("denied", merge(CSR, conditions(("Denied", "True"))),
     ["jane", "5m", "kubernetes.io/kube-apiserver-client", "jane", "<none>", "Denied"]),
    ("approved-failed", merge(CSR, merge(conditions(("Approved", "True"), ("Failed", "True")), {
        "spec": {"expirationSeconds": 86400}})),
     ["jane", "5m", "kubernetes.io/kube-apiserver-client", "jane", "24h", "Approved,Failed"]),
    ("no-signer", merge(CSR, {"spec": {"signerName": None, "username": None}}),
     ["jane", "5m", "<none>", "", "<none>", "Pending"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in CSR_PRINTING], ids=[c[0] for c in CSR_PRINTING]
)
def test_csr_printer_cells(raw: dict[str, Any], expected: list[Any]) -> None:
    csr = decode(raw, CertificateSigningRequest)
    assert [c.cell(csr, NOW) for c in csr.kind_info.columns] == expected


def test_csr_registration_and_field_selector() -> None:
    info = CertificateSigningRequest.kind_info
    assert (info.short_names, info.subresources, info.namespaced) == (
        ("csr",),
        ("status", "approval"),
        False,
    )
    assert [c.name for c in info.columns] == [
        "Name",
        "Age",
        "SignerName",
        "Requestor",
        "RequestedDuration",
        "Condition",
    ]
    csr = decode(CSR, CertificateSigningRequest)
    assert info.selectable_fields(csr) == {
        "metadata.name": "jane",
        "spec.signerName": "kubernetes.io/kube-apiserver-client",
    }


def test_csr_request_round_trips_as_base64() -> None:
    csr = decode(CSR, CertificateSigningRequest)
    assert isinstance(csr, CertificateSigningRequest) and csr.spec is not None
    assert csr.spec.request == CSR_PEM


# authentication.k8s.io/v1

TOKEN_REQUEST = {
    "apiVersion": "authentication.k8s.io/v1",
    "kind": "TokenRequest",
    "metadata": {"name": "builder", "namespace": "ci"},
}

TOKEN_REQUESTS = [
    ("defaulted", TOKEN_REQUEST, 3600, []),
    ("audiences-kept", merge(TOKEN_REQUEST, {"spec": {"audiences": ["vault"]}}), 3600, []),
    ("ten-minutes", merge(TOKEN_REQUEST, {"spec": {"expirationSeconds": 600}}), 600, []),
    ("too-short", merge(TOKEN_REQUEST, {"spec": {"expirationSeconds": 599}}), 599,
     [("spec.expirationSeconds", INVALID)]),
    ("too-long", merge(TOKEN_REQUEST, {"spec": {"expirationSeconds": 2**32 + 1}}), 2**32 + 1,
     [("spec.expirationSeconds", INVALID)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "seconds", "expected"),
    [c[1:] for c in TOKEN_REQUESTS],
    ids=[c[0] for c in TOKEN_REQUESTS],
)
def test_token_request(
    raw: dict[str, Any], seconds: int, expected: list[tuple[str, ErrorType]]
) -> None:
    request = decode(raw, TokenRequest)
    assert isinstance(request, TokenRequest) and request.spec is not None
    assert request.spec.expiration_seconds == seconds
    assert problems(request) == expected


def test_authentication_kinds_are_create_only_or_not_served() -> None:
    assert TokenReview.kind_info.verbs == CREATE_ONLY
    assert SelfSubjectReview.kind_info.verbs == CREATE_ONLY
    assert TokenRequest.kind_info.verbs == NOT_SERVED
    assert TokenRequest.kind_info.namespaced
    assert not TokenReview.kind_info.namespaced


def test_token_review_answer_decodes() -> None:
    raw = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "abc", "audiences": ["api"]},
        "status": {
            "authenticated": True,
            "user": {"username": "jane", "groups": ["devs"], "extra": {"scopes": ["a", "b"]}},
        },
    }
    review = decode(raw, TokenReview)
    assert isinstance(review, TokenReview)
    assert review_problems(review) == []
    assert review.status is not None and review.status.user is not None
    assert review.status.user.extra == {"scopes": ["a", "b"]}


# authorization.k8s.io/v1

SAR = {
    "apiVersion": "authorization.k8s.io/v1",
    "kind": "SubjectAccessReview",
    "spec": {"user": "jane", "resourceAttributes": {"verb": "get", "resource": "pods"}},
}
SSAR = {
    "apiVersion": "authorization.k8s.io/v1",
    "kind": "SelfSubjectAccessReview",
    "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}},
}
LSAR = merge(
    SAR,
    {
        "kind": "LocalSubjectAccessReview",
        "metadata": {"namespace": "team-a"},
        "spec": {"resourceAttributes": {"namespace": "team-a"}},
    },
)
NON_RESOURCE = {"path": "/healthz", "verb": "get"}

REVIEWS = [
    ("sar-valid", SubjectAccessReview, SAR, []),
    ("sar-groups-only", SubjectAccessReview, merge(SAR, {"spec": {"user": None,
                                                                  "groups": ["devs"]}}), []),
    ("sar-no-subject", SubjectAccessReview, merge(SAR, {"spec": {"user": None}}),
     [("spec.user", INVALID)]),
    ("sar-no-attributes", SubjectAccessReview, merge(SAR, {"spec": {"resourceAttributes": None}}),
     [("spec.resourceAttributes", INVALID)]),
    ("sar-both-attributes", SubjectAccessReview,
     merge(SAR, {"spec": {"nonResourceAttributes": NON_RESOURCE}}),
     [("spec.nonResourceAttributes", INVALID)]),
    ("sar-named", SubjectAccessReview, merge(SAR, {"metadata": {"name": "x"}}),
     [("metadata", INVALID)]),
    ("sar-empty-field-selector", SubjectAccessReview,
     merge(SAR, {"spec": {"resourceAttributes": {"fieldSelector": {}}}}),
     [("spec.resourceAttributes.fieldSelector.requirements", REQUIRED)]),
    ("sar-raw-and-requirements", SubjectAccessReview,
     merge(SAR, {"spec": {"resourceAttributes": {"labelSelector": {
         "rawSelector": "a=b", "requirements": [{"key": "a", "operator": "Exists"}]}}}}),
     [("spec.resourceAttributes.labelSelector.rawSelector", INVALID)]),
    ("sar-field-requirement-without-key", SubjectAccessReview,
     merge(SAR, {"spec": {"resourceAttributes": {"fieldSelector": {
         "requirements": [{"operator": "In"}]}}}}),
     [("spec.resourceAttributes.fieldSelector.requirements[0].key", REQUIRED),
      ("spec.resourceAttributes.fieldSelector.requirements[0].values", REQUIRED)]),
    ("sar-field-unknown-operator-allowed", SubjectAccessReview,
     merge(SAR, {"spec": {"resourceAttributes": {"fieldSelector": {
         "requirements": [{"key": "spec.nodeName", "operator": "Gt", "values": ["1"]}]}}}}), []),
    ("sar-label-exists-with-values", SubjectAccessReview,
     merge(SAR, {"spec": {"resourceAttributes": {"labelSelector": {
         "requirements": [{"key": "app", "operator": "Exists", "values": ["x"]}]}}}}),
     [("spec.resourceAttributes.labelSelector.requirements[0].values", FORBIDDEN)]),
    ("ssar-valid", SelfSubjectAccessReview, SSAR, []),
    ("ssar-no-attributes", SelfSubjectAccessReview, merge(SSAR, {"spec": {
        "nonResourceAttributes": None}}), [("spec.resourceAttributes", INVALID)]),
    ("lsar-valid", LocalSubjectAccessReview, LSAR, []),
    ("lsar-other-namespace", LocalSubjectAccessReview,
     merge(LSAR, {"spec": {"resourceAttributes": {"namespace": "team-b"}}}),
     [("spec.resourceAttributes.namespace", INVALID)]),
    ("lsar-non-resource", LocalSubjectAccessReview,
     merge(LSAR, {"spec": {"resourceAttributes": None, "nonResourceAttributes": NON_RESOURCE}}),
     [("spec.nonResourceAttributes", INVALID)]),
    ("lsar-named", LocalSubjectAccessReview, merge(LSAR, {"metadata": {"name": "x"}}),
     [("metadata", INVALID)]),
    ("ssrr-valid", SelfSubjectRulesReview, {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": "default"}}, []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("cls", "raw", "expected"), [c[1:] for c in REVIEWS], ids=[c[0] for c in REVIEWS]
)
def test_review_validation(
    cls: type[Resource], raw: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert review_problems(decode(raw, cls)) == sorted(expected)


def test_review_messages() -> None:
    raw = merge(SAR, {"spec": {"resourceAttributes": {"fieldSelector": {}}}})
    [error] = walk.validate_struct(decode(raw, SubjectAccessReview))
    assert error.detail == (
        "when spec.resourceAttributes.fieldSelector is specified, requirements or rawSelector "
        "is required"
    )
    [error] = walk.validate_struct(
        decode(merge(SAR, {"metadata": {"name": "x"}}), SubjectAccessReview)
    )
    assert error.detail == "must be empty"


def test_authorization_kinds_are_create_only() -> None:
    for cls in (SubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview):
        assert cls.kind_info.verbs == CREATE_ONLY
        assert not cls.kind_info.namespaced
    assert LocalSubjectAccessReview.kind_info.namespaced
