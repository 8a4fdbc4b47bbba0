"""The serviceaccount controller: every active namespace has a ``default`` ServiceAccount.

Keys are namespaces.  A namespace is (re)synced when it appears and when a ServiceAccount
named ``default`` is deleted, so removing the account brings it back.  Terminating
namespaces are left alone: the namespace controller is emptying them.
"""

from __future__ import annotations

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from kube.api.kinds.core_v1.cluster import Namespace, ServiceAccount
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError

NAME = "serviceaccount"
ACCOUNTS = ("default",)


class ServiceAccountController(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.namespaces = ctx.informers.informer_for(Namespace)
        self.accounts = ctx.informers.informer_for(ServiceAccount)
        self.namespaces.add_event_handler(self.enqueue, self.enqueue_update)
        self.accounts.add_event_handler(on_delete=self._account_deleted)

    def _account_deleted(self, obj: object) -> None:
        account = unwrap(obj)
        if account.metadata.name in ACCOUNTS:
            self.queue.add(account.metadata.namespace or "")

    async def sync_key(self, key: str) -> None:
        namespace = self.namespaces.lister.get(key)
        if namespace is None or namespace.metadata.deletion_timestamp is not None:
            return
        if namespace.status is not None and namespace.status.phase == "Terminating":
            return
        for name in ACCOUNTS:
            if self.accounts.lister.get(f"{key}/{name}") is not None:
                continue
            account = ServiceAccount(metadata=ObjectMeta(name=name, namespace=key))
            try:
                await self.ctx.client.create(account)
            except ApiError as error:
                if not error.already_exists:
                    raise


def new(ctx: ControllerContext) -> ServiceAccountController:
    return ServiceAccountController(ctx)
