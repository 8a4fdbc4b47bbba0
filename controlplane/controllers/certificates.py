"""What the CSR approver and signer share: reading a request and upstream's kubelet CSR rules.

A CertificateSigningRequest carries a PKCS#10 request (subject, key, names) and, beside it,
the usages and signer asked for.  Upstream's ``pkg/apis/certificates/helpers.go`` decides
whether such a request is a kubelet's: for ``kubernetes.io/kube-apiserver-client-kubelet``
the subject is exactly ``O=system:nodes`` with ``CN=system:node:<name>``, there are no
subject alternative names, and the usages are digital signature and client auth (key
encipherment allowed too); for ``kubernetes.io/kubelet-serving`` the same subject, at least
one DNS name or IP address and no e-mail or URI, and server auth instead of client auth.
Each check returns the reason a request fails, or None, so the signer can put it in a
Failed condition and tests can assert on it.
"""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import NameOID

from kube.api.kinds.certificates_v1 import (
    APPROVED,
    DENIED,
    FAILED,
    CertificateSigningRequest,
)

KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
KUBE_APISERVER_CLIENT_KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"

DIGITAL_SIGNATURE, KEY_ENCIPHERMENT = "digital signature", "key encipherment"
CLIENT_AUTH, SERVER_AUTH = "client auth", "server auth"


def parse_request(csr: CertificateSigningRequest) -> x509.CertificateSigningRequest:
    """The PKCS#10 request inside ``csr``; ValueError when there is none or it is malformed."""
    pem = csr.spec.request if csr.spec is not None else None
    if not pem:
        raise ValueError("the request holds no PKCS#10 certificate request")
    return x509.load_pem_x509_csr(pem)


def _has(csr: CertificateSigningRequest, condition_type: str) -> bool:
    conditions = csr.status.conditions if csr.status is not None else None
    return any(c.type == condition_type and c.status == "True" for c in conditions or ())


def is_approved(csr: CertificateSigningRequest) -> bool:
    return _has(csr, APPROVED) and not _has(csr, DENIED)


def is_decided(csr: CertificateSigningRequest) -> bool:
    """Approved or denied already (nothing for an approver to do)."""
    return _has(csr, APPROVED) or _has(csr, DENIED)


def has_failed(csr: CertificateSigningRequest) -> bool:
    return _has(csr, FAILED)


def is_issued(csr: CertificateSigningRequest) -> bool:
    return csr.status is not None and bool(csr.status.certificate)


def _subject(request: x509.CertificateSigningRequest) -> tuple[str, list[str]]:
    names = request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return (str(names[0].value) if names else "", [str(o.value) for o in orgs])


def _sans(request: x509.CertificateSigningRequest) -> x509.SubjectAlternativeName | None:
    try:
        return request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None


def _usages_problem(usages: list[str], required: set[str]) -> str | None:
    allowed = required | {KEY_ENCIPHERMENT}
    if not required <= set(usages) or not set(usages) <= allowed:
        return f"usages must be {', '.join(sorted(required))} (and optionally {KEY_ENCIPHERMENT})"
    return None


def _node_subject_problem(request: x509.CertificateSigningRequest) -> str | None:
    common_name, organizations = _subject(request)
    if organizations != [NODES_GROUP]:
        return f'subject organization must be exactly "{NODES_GROUP}"'
    if not common_name.startswith(NODE_USER_PREFIX) or common_name == NODE_USER_PREFIX:
        return f'subject common name must begin with "{NODE_USER_PREFIX}"'
    return None


def kubelet_client_problem(
    request: x509.CertificateSigningRequest, usages: list[str]
) -> str | None:
    """Why this is not a kubelet client certificate request (None when it is one)."""
    problem = _node_subject_problem(request)
    if problem:
        return problem
    if _sans(request) is not None:
        return "subject alternative names are not allowed"
    return _usages_problem(usages, {DIGITAL_SIGNATURE, CLIENT_AUTH})


def kubelet_serving_problem(
    request: x509.CertificateSigningRequest, usages: list[str]
) -> str | None:
    """Why this is not a kubelet serving certificate request (None when it is one)."""
    problem = _node_subject_problem(request)
    if problem:
        return problem
    sans = _sans(request)
    dns = sans.get_values_for_type(x509.DNSName) if sans else []
    ips = sans.get_values_for_type(x509.IPAddress) if sans else []
    if not dns and not ips:
        return "at least one DNS name or IP address is required"
    if sans and (
        sans.get_values_for_type(x509.RFC822Name)
        or sans.get_values_for_type(x509.UniformResourceIdentifier)
    ):
        return "e-mail and URI subject alternative names are not allowed"
    return _usages_problem(usages, {DIGITAL_SIGNATURE, SERVER_AUTH})


def client_problem(request: x509.CertificateSigningRequest, usages: list[str]) -> str | None:
    """Why this is not an API client certificate request (``kube-apiserver-client``)."""
    if CLIENT_AUTH not in usages:
        return f"usages must include {CLIENT_AUTH}"
    if not set(usages) <= {DIGITAL_SIGNATURE, KEY_ENCIPHERMENT, CLIENT_AUTH}:
        return f"usages may only be {DIGITAL_SIGNATURE}, {KEY_ENCIPHERMENT} and {CLIENT_AUTH}"
    if "system:masters" in _subject(request)[1]:
        return 'the "system:masters" group is not allowed'
    return None


def common_name(request: x509.CertificateSigningRequest) -> str:
    return _subject(request)[0]
