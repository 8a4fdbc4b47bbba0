"""The csrsigning controller: signs approved requests with the cluster CA, as upstream's
``pkg/controller/certificates/signer``.

It handles the signers whose certificates the API server and kubelets trust through the
cluster CA: ``kubernetes.io/kube-apiserver-client-kubelet`` (kubelets' client certificates),
``kubernetes.io/kubelet-serving`` (their serving certificates) and
``kubernetes.io/kube-apiserver-client`` (other API clients).  A request is signed once it is
approved, not failed and not yet issued; one that does not meet its signer's rules
(``certificates``) gets a ``Failed`` condition (reason ``SignerValidationFailure``) instead,
so the requester sees why rather than waiting forever.

The certificate's subject, key and names come from the request; its usages from
``spec.usages``; its lifetime is ``spec.expirationSeconds`` capped at
``--cluster-signing-duration`` (upstream's default: a year).  Other signers' requests are
left to their own signers.
"""

from __future__ import annotations

import copy
import datetime
import logging
from collections.abc import Callable

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from controlplane.controllers import certificates
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller
from controlplane.controllers.manager import NotStarted
from kube.api.kinds.certificates_v1 import (
    FAILED,
    CertificateSigningRequest,
    CertificateSigningRequestCondition,
    CertificateSigningRequestStatus,
)
from kube.client.errors import ApiError
from kube.pki import CertificateAuthority, KeyPair

NAME = "csrsigning"

log = logging.getLogger("kubelab.controllers.csrsigning")

RULES: dict[str, Callable[[x509.CertificateSigningRequest, list[str]], str | None]] = {
    certificates.KUBE_APISERVER_CLIENT_KUBELET: certificates.kubelet_client_problem,
    certificates.KUBELET_SERVING: certificates.kubelet_serving_problem,
    certificates.KUBE_APISERVER_CLIENT: certificates.client_problem,
}
"""Each signer this controller acts for, and its rule for requests."""

EXTENDED_USAGES = {
    certificates.CLIENT_AUTH: ExtendedKeyUsageOID.CLIENT_AUTH,
    certificates.SERVER_AUTH: ExtendedKeyUsageOID.SERVER_AUTH,
}


def lifetime(csr: CertificateSigningRequest, maximum: float) -> datetime.timedelta:
    """How long the certificate for ``csr`` is valid: what it asks for, at most ``maximum``
    seconds."""
    asked = csr.spec.expiration_seconds if csr.spec is not None else None
    seconds = maximum if asked is None else min(float(asked), maximum)
    return datetime.timedelta(seconds=seconds)


class CSRSigningController(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext, ca: CertificateAuthority) -> None:
        super().__init__(ctx)
        self.ca = ca
        self.requests = ctx.informers.informer_for(CertificateSigningRequest)
        self.requests.add_event_handler(self.enqueue, self.enqueue_update)

    async def sync_key(self, key: str) -> None:
        csr = self.requests.lister.get(key)
        if (
            csr is None
            or csr.spec is None
            or csr.spec.signer_name not in RULES
            or not certificates.is_approved(csr)
            or certificates.has_failed(csr)
            or certificates.is_issued(csr)
        ):
            return
        usages = list(csr.spec.usages or ())
        try:
            request = certificates.parse_request(csr)
            problem = RULES[csr.spec.signer_name](request, usages)
        except ValueError as error:
            problem = f"the request cannot be parsed: {error}"
        signed = copy.deepcopy(csr)
        signed.status = signed.status or CertificateSigningRequestStatus()
        if problem is not None:
            signed.status.conditions = [
                *(signed.status.conditions or ()),
                CertificateSigningRequestCondition(
                    type=FAILED,
                    status="True",
                    reason="SignerValidationFailure",
                    message=problem,
                    last_update_time=self.ctx.clock.now(),
                ),
            ]
        else:
            signed.status.certificate = self.ca.sign_request(
                request,
                [EXTENDED_USAGES[u] for u in usages if u in EXTENDED_USAGES],
                lifetime(csr, self.ctx.options.cluster_signing_duration),
            )
        try:
            await self.ctx.client.update_status(signed)
        except ApiError as error:
            if not error.not_found:
                raise
        if problem is None:
            log.info("signed %s for %s", csr.metadata.name, certificates.common_name(request))
        else:
            log.info("not signing %s: %s", csr.metadata.name, problem)


def new(ctx: ControllerContext) -> CSRSigningController:
    """The signer over the CA in ``--cluster-signing-cert-file``/``-key-file`` (the
    controller-manager leaves it out when they are not set, as upstream does)."""
    options = ctx.options
    if options.cluster_signing_cert_file is None or options.cluster_signing_key_file is None:
        raise NotStarted("--cluster-signing-cert-file and -key-file not set")
    pair = KeyPair(
        options.cluster_signing_cert_file.read_bytes(),
        options.cluster_signing_key_file.read_bytes(),
    )
    return CSRSigningController(ctx, CertificateAuthority(pair))
