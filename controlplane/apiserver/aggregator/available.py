"""The ``Available`` condition of every APIService, as upstream's AvailableConditionController.

A local APIService is always available (reason ``Local``).  For one backed by a Service the
checks run in upstream's order, the first that fails giving the condition: the Service exists
(``ServiceNotFound``), a ClusterIP Service listens on the APIService's port
(``ServicePortError``), it has a ready endpoint behind that port (``MissingEndpoints``), and the
extension server answers its discovery document (``FailedDiscoveryCheck``); otherwise
``Passed``.  Messages are upstream's.  A discovery answer is kept (``Aggregator.discovered``)
for merged discovery; a failed check forgets it.

All APIServices are checked again every ``interval`` seconds (a server that stopped answering
changes no object) and at once whenever an APIService, Service, EndpointSlice or Endpoints
object changes.  Status is written only when the condition changed, with the transition time
kept while the status stays the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging

from controlplane.apiserver import errors
from controlplane.apiserver.aggregator.proxy import Aggregator, Unreachable
from controlplane.apiserver.crd import conversion
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api.kinds.apiregistration_v1 import (
    AVAILABLE,
    APIService,
    APIServiceCondition,
    APIServiceStatus,
    available_condition,
)
from kube.api.kinds.core_v1.service import Service
from kube.clock import Clock

log = logging.getLogger(__name__)

WATCHED = (
    ("apiregistration.k8s.io", "v1", "apiservices"),
    conversion.SERVICES,
    conversion.ENDPOINT_SLICES,
    conversion.ENDPOINTS,
)


def _condition(status: str, reason: str, message: str) -> APIServiceCondition:
    return APIServiceCondition(type=AVAILABLE, status=status, reason=reason, message=message)


async def check(aggregator: Aggregator, service: APIService) -> APIServiceCondition:
    """The ``Available`` condition ``service`` has now (without a transition time)."""
    spec = service.spec
    ref = spec.service if spec is not None else None
    if spec is None or ref is None:
        return _condition("True", "Local", "Local APIServices are always available")
    name, namespace, port = ref.name or "", ref.namespace or "", ref.port or 443
    where = f'service/{name} in "{namespace}"'
    try:
        found = await aggregator.stores[conversion.SERVICES].get(namespace, name)
    except errors.ApiError as error:
        if error.code != 404:
            return _condition(
                "Unknown",
                "ServiceAccessError",
                f"{where} cannot be checked due to: {error.message}",
            )
        return _condition("False", "ServiceNotFound", f"{where} is not present")
    assert isinstance(found, Service)
    kind = (found.spec.type if found.spec else None) or "ClusterIP"
    if kind == "ClusterIP":
        ports = [p for p in (found.spec.ports if found.spec else None) or () if p.port == port]
        if not ports:
            return _condition(
                "False", "ServicePortError", f"{where} is not listening on port {port}"
            )
        try:
            await conversion.resolve_service(aggregator.stores, namespace, name, port)
        except conversion.ConversionError:
            return _condition(
                "False",
                "MissingEndpoints",
                f'endpoints for {where} have no addresses with port name "{ports[0].name or ""}"',
            )
    try:
        document = await aggregator.discover(service)
    except Unreachable as error:
        aggregator.discovered.pop((spec.group or "", spec.version or ""), None)
        return _condition(
            "False", "FailedDiscoveryCheck", f"failing or missing response from {error}"
        )
    aggregator.discovered[(spec.group or "", spec.version or "")] = document
    return _condition("True", "Passed", "all checks passed")


class AvailableConditionController:
    """Keeps every APIService's ``Available`` condition (module docstring)."""

    def __init__(
        self,
        aggregator: Aggregator,
        stores: dict[tuple[str, str, str], ResourceStore],
        clock: Clock,
        interval: float,
    ) -> None:
        self.aggregator = aggregator
        self.stores = stores
        self.clock = clock
        self.interval = interval
        self._changed = asyncio.Event()

    async def run(self) -> None:
        followers = [asyncio.create_task(self._follow(self.stores[key])) for key in WATCHED]
        try:
            while True:
                self._changed.clear()
                await self.sync_all()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.interval):
                        await self._changed.wait()
        finally:
            for task in followers:
                task.cancel()

    async def sync_all(self) -> None:
        """Check every APIService once; one that fails to update is tried at the next pass."""
        store = self.stores[WATCHED[0]]
        listed = await store.list()
        names = {o.metadata.name for o in listed.items}
        for gone in [gv for gv in self.aggregator.discovered if f"{gv[1]}.{gv[0]}" not in names]:
            del self.aggregator.discovered[gone]
        checks = [self.sync(store, o) for o in listed.items if isinstance(o, APIService)]
        for outcome in await asyncio.gather(*checks, return_exceptions=True):
            if isinstance(outcome, Exception):
                log.warning("APIService status not updated: %s", outcome)

    async def sync(self, store: ResourceStore, service: APIService) -> None:
        condition = await check(self.aggregator, service)
        before = available_condition(service)
        if before is not None and (before.status, before.reason, before.message) == (
            condition.status,
            condition.reason,
            condition.message,
        ):
            return
        condition.last_transition_time = (
            before.last_transition_time
            if before is not None and before.status == condition.status
            else self.clock.now().replace(microsecond=0)
        )
        updated = copy.deepcopy(service)
        others = [
            c
            for c in (updated.status.conditions if updated.status else None) or ()
            if c.type != AVAILABLE
        ]
        updated.status = APIServiceStatus(conditions=[*others, condition])
        system = RequestContext(
            user="system:apiserver", groups=("system:masters",), subresource="status"
        )
        await store.update("", service.metadata.name or "", updated, system, subresource="status")

    async def _follow(self, store: ResourceStore) -> None:
        """Wake the loop whenever an object of ``store`` changes (watching again after an
        error: the periodic pass covers the gap)."""
        while True:
            try:
                revision = await store.store.current_revision()
                async for _ in store.watch(send_initial=False, resource_version=str(revision)):
                    self._changed.set()
            except Exception as error:
                log.warning("watching %s for APIService checks: %s", store.info.plural, error)
            await self.clock.sleep(1.0)
