"""The csrapproving controller: approves kubelets' client certificate requests, as upstream's
``pkg/controller/certificates/approver/sarapprove.go``, and, when asked, their serving
certificate requests.

A pending request (not approved, denied or issued) for the
``kubernetes.io/kube-apiserver-client-kubelet`` signer that is shaped like a kubelet client
request (``certificates``) is approved when its requester is allowed to ask for it, as a
SubjectAccessReview for the requester recorded in the CSR (user, groups, uid, extra) says:

- renewal: the requester is the node the certificate names (``spec.username`` equals the
  subject's common name) and may ``create`` ``certificatesigningrequests/selfnodeclient``
  (kubeadm-style clusters bind that to ``system:nodes``);
- bootstrap: the requester may ``create`` ``certificatesigningrequests/nodeclient`` (bound to
  the group of the bootstrap tokens).

**Serving certificates** (``kubernetes.io/kubelet-serving``, the kubelet's
``--rotate-server-certificates``) are left alone upstream: an admin or a third-party approver
decides, because a serving certificate vouches for names and addresses, which only someone who
knows the node can check.  With ``--approve-kubelet-serving-certificates`` (on in the lab) this
controller is that approver, with the checks of the community ``kubelet-csr-approver``
(``serving_problem``): the request has the kubelet-serving shape (``CN=system:node:<name>``,
``O=system:nodes``, usages digital signature and server auth, key encipherment allowed), it was
made by that node itself (``spec.username`` is the common name and ``spec.groups`` has
``system:nodes``), and every DNS name and IP address it asks for is one of that Node object's
``status.addresses`` (DNS names against Hostname/InternalDNS/ExternalDNS, IPs against
InternalIP/ExternalIP).  No SubjectAccessReview: there is no upstream permission to ask about,
and the requester is checked directly.  A request failing a check stays pending (the reason is
logged); it is looked at again whenever that Node changes, since a kubelet asks for the
addresses it has just reported and this controller's copy of the Node may lag behind.

Anything else is left pending for a person (``kubectl certificate approve``), never denied:
the approver does not judge requests it does not recognise.  Approval goes through the
``approval`` subresource with an ``Approved`` condition of reason ``AutoApproved``.
"""

from __future__ import annotations

import copy
import ipaddress
import logging

from cryptography import x509

from controlplane.controllers import certificates
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller
from kube.api.kinds.authorization_v1 import (
    ResourceAttributes,
    SubjectAccessReview,
    SubjectAccessReviewSpec,
)
from kube.api.kinds.certificates_v1 import (
    APPROVED,
    CertificateSigningRequest,
    CertificateSigningRequestCondition,
    CertificateSigningRequestStatus,
)
from kube.api.kinds.core_v1.node import Node
from kube.client.errors import ApiError

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


DNS_ADDRESSES = ("Hostname", "InternalDNS", "ExternalDNS")
IP_ADDRESSES = ("InternalIP", "ExternalIP")


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def serving_problem(csr: CertificateSigningRequest, node: Node | None) -> str | None:
    """Why this kubelet-serving request is not to be approved for ``node`` (the Node its
    subject names, None when there is none); None when it is (see the module docstring)."""
    spec = csr.spec
    if spec is None or spec.signer_name != certificates.KUBELET_SERVING:
        return f"the signer is not {certificates.KUBELET_SERVING}"
    try:
        request = certificates.parse_request(csr)
    except ValueError as error:
        return f"the request cannot be parsed: {error}"
    problem = certificates.kubelet_serving_problem(request, list(spec.usages or ()))
    if problem is not None:
        return problem
    subject = certificates.common_name(request)
    if spec.username != subject or certificates.NODES_GROUP not in (spec.groups or ()):
        return f'requested by "{spec.username}", not by the node "{subject}" itself'
    name = subject.removeprefix(certificates.NODE_USER_PREFIX)
    if node is None:
        return f'node "{name}" not found'
    addresses = node.status.addresses if node.status is not None else None
    dns = {a.address for a in addresses or () if a.type in DNS_ADDRESSES}
    ips = {_ip(a.address or "") for a in addresses or () if a.type in IP_ADDRESSES}
    sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    for asked in sans.get_values_for_type(x509.DNSName):
        if asked not in dns:
            return f'DNS name "{asked}" is not an address of node "{name}"'
    for ip in sans.get_values_for_type(x509.IPAddress):
        if ip not in ips:
            return f'IP address "{ip}" is not an address of node "{name}"'
    return None


SERVING = "Auto approving kubelet serving certificate: the node's own request for its addresses."


class CSRApprovingController(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.requests = ctx.informers.informer_for(CertificateSigningRequest)
        self.requests.add_event_handler(self.enqueue, self.enqueue_update)
        self.nodes = (
            ctx.informers.informer_for(Node) if ctx.options.approve_kubelet_serving else None
        )
        if self.nodes is not None:
            self.nodes.add_event_handler(self._node_changed, self._node_updated)

    def _node_changed(self, node: Node) -> None:
        """Look again at the pending serving requests of ``node``."""
        user = certificates.NODE_USER_PREFIX + (node.metadata.name or "")
        for csr in self.requests.lister.list():
            spec = csr.spec
            if (
                spec is not None
                and spec.signer_name == certificates.KUBELET_SERVING
                and spec.username == user
                and not certificates.is_decided(csr)
            ):
                self.enqueue(csr)

    def _node_updated(self, old: Node, new: Node) -> None:
        if (old.status and old.status.addresses) != (new.status and new.status.addresses):
            self._node_changed(new)

    async def sync_key(self, key: str) -> None:
        csr = self.requests.lister.get(key)
        if csr is None or certificates.is_decided(csr) or certificates.is_issued(csr):
            return
        if (
            self.nodes is not None
            and csr.spec
            and csr.spec.signer_name == certificates.KUBELET_SERVING
        ):
            requester = csr.spec.username or ""
            node = (
                self.nodes.lister.get(requester.removeprefix(certificates.NODE_USER_PREFIX))
                if requester.startswith(certificates.NODE_USER_PREFIX)
                else None
            )
            problem = serving_problem(csr, node)
            if problem is None:
                await self._approve(csr, SERVING)
            else:
                log.info("not approving %s: %s", csr.metadata.name, problem)
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
