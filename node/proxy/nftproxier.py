"""The nftables-mode kube-proxy: informers in, one ``nft -f`` transaction per sync out.

Shape of upstream's pkg/proxy/nftables/proxier.go, over the same base as the iptables mode:

* The informers, the change tracking and the sync loop's timing are
  :class:`~node.proxy.base.Proxier`'s; this class implements what one sync writes, in its own
  table (``ip kube-proxy``, :mod:`node.proxy.nftrules`), so iptables-nft rules of other
  components on the node are neither read nor changed.
* A **full** sync (at start, after a failure, every ``sync_period``) lists the table's chains
  and sets, then rewrites the top of the table, every service port's chains, and every map and
  set element (the maps are flushed and refilled in the same transaction: packets see the old
  table or the new one), and deletes the per-service chains and affinity sets nothing uses.
* A **partial** sync rewrites only the changed service ports' chains (flush and re-add in the
  transaction) and changes only the map and set elements that differ from the last sync's
  (``delete element`` / ``add element``); the chains and sets of removed service ports are
  flushed and deleted after the elements that pointed at them.  Its cost follows the change,
  not the table: nftables transactions change objects in place, where a legacy
  ``iptables-restore`` rewrites the whole table.
* The rules of each service port are rendered once per change and cached; a sync joins them.
* A failed transaction (nothing of it applied) logs the script lines around the failing one,
  and the next sync is full.
* UDP flows to endpoints that went away are deleted from conntrack, and the health check node
  ports of externalTrafficPolicy Local Services are served, as in the iptables mode.
* Stale chains are flushed in the transaction that stops referring to them and deleted in a
  second one right after it: kernels before 6.2 (Debian 12's 6.1) release a chain that a
  deleted map element pointed to only some time after the transaction, so there that second
  transaction fails and the chains are deleted at a later sync, as upstream does (it always
  waits a second); later kernels delete them at once.

nft is reached only through :class:`node.nftables.Nftables`, from a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from node.iptables import RulesError
from node.nftables import Nftables
from node.proxy import names
from node.proxy.base import Applied
from node.proxy.model import Changes, EndpointInfo, ServicePortInfo
from node.proxy.nftrules import (
    TABLE,
    TOP_CHAINS,
    NftServiceRules,
    delete_chains,
    merged_elements,
    render_service,
    setup,
    transaction,
)
from node.proxy.proxier import CONNTRACK_SYSCTLS, RulesProxier, set_sysctls

log = logging.getLogger(__name__)


class NftablesProxier(RulesProxier[Nftables, NftServiceRules]):
    """Programs Services into nftables; see the module docstring.

    NodePorts answer on every local address but 127.0.0.0/8 (as upstream's nftables mode:
    no ``route_localnet``), or on the local addresses inside ``nodeport_cidrs``.
    """

    _base_chains_recreated = False
    _elements: Mapping[str, Mapping[str, str]] = {}
    """The map and set elements after the last successful sync."""
    _emptied: frozenset[str] = frozenset()
    """Stale chains flushed by a successful sync and not deleted yet."""

    @property
    def nftables(self) -> Nftables:
        return self.writer

    def render(self, port: ServicePortInfo, endpoints: Sequence[EndpointInfo]) -> NftServiceRules:
        return render_service(port, endpoints, self.config)

    def ensure_sysctls(self) -> None:
        set_sysctls(self.sysctl, CONNTRACK_SYSCTLS)

    async def apply(self, changes: Changes, full: bool) -> Applied | None:
        """Render the changed service ports, then run one transaction: the whole table (full)
        or the changed ports' chains and the element differences (partial)."""
        self.take(changes)
        if not full and not changes.changed:
            return None
        desired = merged_elements(self.rules)
        config, top, programmed = self.applied_config, [], self._elements
        if full:
            config, programmed = replace(self.config, node_ips=await self.node_ips()), {}
            top = setup(config, recreate_base_chains=not self._base_chains_recreated)
            chains = await asyncio.to_thread(self.nftables.list_names, "chains")
            sets = await asyncio.to_thread(self.nftables.list_names, "sets")
            written = list(self.rules.values())
        else:
            before = self.before(changes)
            chains = [c for r in before for c in r.chains]
            sets = [s for r in before for s in r.affinity_sets]
            written = self.after(changes)
        stale_chains = _stale(chains, (r.chains for r in written))
        script = transaction(
            self.rules,
            top=top,
            programmed=programmed,
            desired=desired,
            changed=None if full else changes.changed,
            stale_chains=stale_chains,
            stale_sets=_stale(sets, (r.affinity_sets for r in written)),
        )
        await asyncio.to_thread(self.nftables.run, script)
        self._base_chains_recreated = True
        self._elements = desired
        self._emptied |= stale_chains
        await self.applied(changes, full, config)
        await self._delete_emptied()
        return Applied(
            rules={TABLE: sum(len(c) for r in self.rules.values() for c in r.chains.values())},
            chains={TABLE: len(TOP_CHAINS) + sum(len(r.chains) for r in self.rules.values())},
        )

    async def _delete_emptied(self) -> None:
        """Delete the stale chains emptied by earlier syncs that no service port uses again;
        those the kernel does not release yet wait for the next sync."""
        active = {c for r in self.rules.values() for c in r.chains}
        emptied = self._emptied - active
        if not emptied:
            self._emptied = frozenset()
            return
        try:
            await asyncio.to_thread(self.nftables.run, delete_chains(emptied))
        except RulesError as e:
            log.info(
                "%d emptied chains not deleted yet, retried at the next sync: %s", len(emptied), e
            )
            self._emptied = frozenset(emptied)
        else:
            self._emptied = frozenset()


def _stale(existing: Sequence[str], active: Iterable[Iterable[str]]) -> set[str]:
    """The per-service names in ``existing`` that none of the ``active`` groups holds."""
    wanted = {name for group in active for name in group}
    return {name for name in existing if names.is_nft_per_service(name)} - wanted
