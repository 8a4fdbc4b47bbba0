"""The csrapproving controller: approves kubelets' client certificate requests, as upstream's
``pkg/controller/certificates/approver/sarapprove.go``.

A pending request (not approved, denied or issued) for the
``kubernetes.io/kube-apiserver-client-kubelet`` signer that is shaped like a kubelet client
request (``certificates``) is approved when its requester is allowed to ask for it, as a
SubjectAccessReview for the requester recorded in the CSR (user, groups, uid, extra) says:

- renewal: the requester is the node the certificate names (``spec.username`` equals the
  subject's common name) and may ``create`` ``certificatesigningrequests/selfnodeclient``
  (kubeadm-style clusters bind that to ``system:nodes``);
- bootstrap: the requester may ``create`` ``certificatesigningrequests/nodeclient`` (bound to
  the group of the bootstrap tokens).

Anything else is left pending for a person (``kubectl certificate approve``), never denied:
the approver does not judge requests it does not recognise.  Approval goes through the
``approval`` subresource with an ``Approved`` condition of reason ``AutoApproved``.
"""

from __future__ import annotations

import copy
import logging

from controlplane.controllers import certificates
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller
from kubelab.api.kinds.authorization_v1 import (
    ResourceAttributes,
    SubjectAccessReview,
    SubjectAccessReviewSpec,
)
from kubelab.api.kinds.certificates_v1 import (
    APPROVED,
    CertificateSigningRequest,
    CertificateSigningRequestCondition,
    CertificateSigningRequestStatus,
)
from kubelab.client.errors import ApiError

NAME = "csrapproving"

log = logging.getLogger("kubelab.controllers.csrapproving")

SELF_NODE_CLIENT = (
    "selfnodeclient",
    "Auto approving self kubelet client certificate after SubjectAccessReview.",
)
NODE_CLIENT = (
    "nodeclient",
    "Auto approving kubelet client certificate after SubjectAccessReview.",
)


def recognized(csr: CertificateSigningRequest) -> list[tuple[str, str]]:
    """The (subresource, message) permissions that would let this request be approved, in the
    order they are tried; empty when it is not a kubelet client request."""
    spec = csr.spec
    if spec is None or spec.signer_name != certificates.KUBE_APISERVER_CLIENT_KUBELET:
        return []
    try:
        request = certificates.parse_request(csr)
    except ValueError:
        return []
    if certificates.kubelet_client_problem(request, list(spec.usages or ())) is not None:
        return []
    found = []
    if spec.username == certificates.common_name(request):
        found.append(SELF_NODE_CLIENT)
    found.append(NODE_CLIENT)
    return found


class CSRApprovingController(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.requests = ctx.informers.informer_for(CertificateSigningRequest)
        self.requests.add_event_handler(self.enqueue, self.enqueue_update)

    async def sync_key(self, key: str) -> None:
        csr = self.requests.lister.get(key)
        if csr is None or certificates.is_decided(csr) or certificates.is_issued(csr):
            return
        for subresource, message in recognized(csr):
            if await self._allowed(csr, subresource):
                await self._approve(csr, message)
                return

    async def _allowed(self, csr: CertificateSigningRequest, subresource: str) -> bool:
        spec = csr.spec
        assert spec is not None
        review = SubjectAccessReview(
            spec=SubjectAccessReviewSpec(
                user=spec.username,
                groups=spec.groups,
                uid=spec.uid,
                extra=spec.extra,
                resource_attributes=ResourceAttributes(
                    group="certificates.k8s.io",
                    resource="certificatesigningrequests",
                    subresource=subresource,
                    verb="create",
                ),
            )
        )
        answer = await self.ctx.client.create(review)
        return bool(answer.status is not None and answer.status.allowed)

    async def _approve(self, csr: CertificateSigningRequest, message: str) -> None:
        approved = copy.deepcopy(csr)
        approved.status = approved.status or CertificateSigningRequestStatus()
        approved.status.conditions = [
            *(approved.status.conditions or ()),
            CertificateSigningRequestCondition(
                type=APPROVED,
                status="True",
                reason="AutoApproved",
                message=message,
                last_update_time=self.ctx.clock.now(),
            ),
        ]
        try:
            await self.ctx.client.update(approved, subresource="approval")
        except ApiError as error:
            if not error.not_found:
                raise
        log.info("approved %s: %s", csr.metadata.name, message)


def new(ctx: ControllerContext) -> CSRApprovingController:
    return CSRApprovingController(ctx)
