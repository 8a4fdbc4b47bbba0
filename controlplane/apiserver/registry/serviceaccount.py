"""``serviceaccounts/token``: a signed token for an existing service account (``kubectl
create token``), optionally bound to a Pod or Secret that must exist with the uid named.
Signing and the claims are ``auth.tokens``'; this is the REST object that serves them."""

from __future__ import annotations

from controlplane.apiserver import errors
from controlplane.apiserver.auth import tokens
from controlplane.apiserver.registry.rest import Backends
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api import walk
from kube.api.errors import ROOT
from kube.api.kinds.authentication_v1 import TokenRequest, TokenRequestSpec
from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.api.meta_v1 import Resource


class TokenREST:
    """A Creater taking a TokenRequest; answers it with the token in its status."""

    body = TokenRequest.kind_info

    def __init__(self, store: ResourceStore, backends: Backends) -> None:
        self.store = store
        self.backends = backends

    async def create(
        self, namespace: str, name: str, obj: Resource, ctx: RequestContext
    ) -> TokenRequest:
        issuer = self.backends.token_issuer()
        assert isinstance(obj, TokenRequest)
        account = await self.store.get(namespace, name)
        assert isinstance(account, ServiceAccount)
        walk.set_defaults(obj)
        spec = obj.spec = obj.spec or TokenRequestSpec()
        problems = walk.validate_struct(spec, ROOT.child("spec"))
        if problems:
            raise errors.invalid(obj.kind_info, name, problems)
        ref = spec.bound_object_ref
        bound = None
        if ref is not None and ref.kind in tokens.BINDABLE:
            plural = "pods" if ref.kind == "Pod" else "secrets"
            try:
                bound = await self.backends.store("", "v1", plural).get(namespace, ref.name or "")
            except errors.ApiError as error:
                if error.code != 404:
                    raise
        obj.metadata.name, obj.metadata.namespace = name, namespace
        for stage in self.store.admission:  # a subresource create: NodeRestriction checks the pod
            await stage("CREATE", self.store.info, obj, None, ctx)
        tokens.check_binding(obj, bound)
        return issuer.issue(account, obj, bound, self.store.clock.now())
