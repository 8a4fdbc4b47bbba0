"""What the API server enforces on CertificateSigningRequests, as upstream does.

- **The requester** (upstream's CSR strategy, ``PrepareForCreate``): on create the server
  records who asked in ``spec.username`` and ``spec.groups``, whatever the client sent; the
  spec never changes afterwards (``PrepareForUpdate``).
  Approvers trust these fields (csrapproving asks a SubjectAccessReview for exactly that user),
  so a client must never be able to choose them.
- **CertificateSubjectRestriction**: a request to the ``kubernetes.io/kube-apiserver-client``
  signer may not ask for the ``system:masters`` group, which no authorizer could take back.
- **CertificateApproval**: adding an ``Approved`` or ``Denied`` condition (the ``approval``
  subresource) needs the ``approve`` verb on ``signers`` named for the request's signer (or
  ``<domain>/*``) in ``certificates.k8s.io``.
- **CertificateSigning**: setting or changing ``status.certificate`` (the ``status``
  subresource) needs the ``sign`` verb on the signer, likewise.
"""

from __future__ import annotations

from collections.abc import Callable

from cryptography import x509
from cryptography.x509.oid import NameOID

from controlplane.apiserver import errors
from controlplane.apiserver.auth import User
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from controlplane.apiserver.registry.store import Admission, RequestContext
from kube.api.kinds.certificates_v1 import APPROVED, DENIED, CertificateSigningRequest
from kube.api.meta_v1 import Resource
from kube.api.scheme import KindInfo

GROUP = "certificates.k8s.io"
KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"


def _decisions(csr: CertificateSigningRequest | None) -> list[tuple[str, str]]:
    conditions = csr.status.conditions if csr is not None and csr.status is not None else None
    return [
        (c.type or "", c.status or "") for c in conditions or () if c.type in (APPROVED, DENIED)
    ]


def _certificate(csr: CertificateSigningRequest | None) -> bytes | None:
    return csr.status.certificate if csr is not None and csr.status is not None else None


def _requested_groups(csr: CertificateSigningRequest) -> list[str]:
    pem = csr.spec.request if csr.spec is not None else None
    if not pem:
        return []
    try:
        request = x509.load_pem_x509_csr(pem)
    except ValueError:
        return []  # validation reports the malformed request
    return [str(o.value) for o in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def certificate_requests(authorize: Callable[[User, RequestInfo], bool]) -> Admission:
    def may(user: User, verb: str, signer: str) -> bool:
        domain = signer.split("/", 1)[0]
        return any(
            authorize(
                user,
                RequestInfo(
                    path="",
                    verb=verb,
                    is_resource_request=True,
                    group=GROUP,
                    resource="signers",
                    name=name,
                ),
            )
            for name in (signer, f"{domain}/*")
        )

    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if not isinstance(obj, CertificateSigningRequest) or obj.spec is None:
            return
        signer = obj.spec.signer_name or ""
        name = obj.metadata.name or ""
        if operation == "CREATE":
            obj.spec.username = ctx.user
            obj.spec.groups = list(ctx.groups)
            obj.spec.uid = None
            obj.spec.extra = None
            if signer == KUBE_APISERVER_CLIENT and "system:masters" in _requested_groups(obj):
                raise errors.forbidden(
                    info,
                    name,
                    f'certificatesigningrequests.{GROUP} "{name}" is forbidden: use of '
                    f"{signer} signer with system:masters group is not allowed",
                )
            return
        if operation != "UPDATE" or not isinstance(old, CertificateSigningRequest):
            return
        obj.spec = old.spec  # immutable, the requester above all
        user = User(ctx.user, ctx.groups)
        if _decisions(obj) != _decisions(old) and not may(user, "approve", signer):
            raise errors.forbidden(
                info,
                name,
                f'certificatesigningrequests.{GROUP} "{name}" is forbidden: user not permitted '
                f"to approve requests with signerName {signer!r}",
            )
        if _certificate(obj) != _certificate(old) and not may(user, "sign", signer):
            raise errors.forbidden(
                info,
                name,
                f'certificatesigningrequests.{GROUP} "{name}" is forbidden: user not permitted '
                f"to sign requests with signerName {signer!r}",
            )

    return admit
