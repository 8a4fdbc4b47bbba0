"""The NetworkPolicy agent of one node: informers in, one ``nft -f`` transaction out.

:class:`NetworkPolicyAgent` watches Pods, Namespaces and NetworkPolicies through the shared
informers; every event only wakes its sync loop, which recompiles the node's whole table
(:func:`~node.netpol.compiler.compile_ruleset`) from the informers' caches and, when the
commands differ from the last ones applied, replaces the table in one transaction.  Syncs are
at most one per ``min_sync_period`` (changes in between coalesce; 0.1 s by default, so a
relabelled pod or namespace is enforced well within a second), and the table is rewritten
every ``sync_period`` even when nothing changed, which repairs a table someone else flushed.

Restarts keep enforcement: the agent never flushes at start, and its first sync replaces the
previous process's table atomically.  A failed apply is logged with nft's message and retried
at the next sync; a policy the compiler cannot read is logged once (while it stays unreadable)
and left out, never raised.  ``/healthz`` answers 200 while the last sync succeeded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Sequence

from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.networking_v1 import NetworkPolicy
from kube.client.informers import SharedInformerFactory
from kube.clock import Clock
from node.netpol.compiler import Ruleset, compile_ruleset
from node.nftables import Nftables, NftablesError

log = logging.getLogger(__name__)


class NetworkPolicyAgent:
    """See the module docstring.  ``healthy`` is False until a sync succeeds and after one
    fails; ``syncs`` counts the transactions applied."""

    def __init__(
        self,
        nftables: Nftables,
        node_name: str,
        clock: Clock,
        *,
        min_sync_period: float = 0.1,
        sync_period: float = 30.0,
    ) -> None:
        self.nftables = nftables
        self.node_name = node_name
        self.clock = clock
        self.min_sync_period = min_sync_period
        self.sync_period = sync_period
        self.healthy = False
        self.syncs = 0
        self._applied: list[str] = []
        self._last_apply = -math.inf
        self._reported: set[str] = set()
        self._wake = asyncio.Event()
        self._pods: Callable[[], Sequence[Pod]] = list
        self._namespaces: Callable[[], Sequence[Namespace]] = list
        self._policies: Callable[[], Sequence[NetworkPolicy]] = list

    def bind(self, informers: SharedInformerFactory) -> None:
        """Watch Pods, Namespaces and NetworkPolicies through ``informers``."""
        pods = informers.informer_for(Pod)
        namespaces = informers.informer_for(Namespace)
        policies = informers.informer_for(NetworkPolicy)
        self.set_listers(pods.lister.list, namespaces.lister.list, policies.lister.list)
        pods.add_change_handler(self.changed)
        namespaces.add_change_handler(self.changed)
        policies.add_change_handler(self.changed)

    def set_listers(
        self,
        pods: Callable[[], Sequence[Pod]],
        namespaces: Callable[[], Sequence[Namespace]],
        policies: Callable[[], Sequence[NetworkPolicy]],
    ) -> None:
        """Read the cluster from these (``bind`` sets the informers' listers; tests set theirs)."""
        self._pods, self._namespaces, self._policies = pods, namespaces, policies

    def changed(self, _: object = None) -> None:
        """Something the table depends on changed: sync soon."""
        self._wake.set()

    def ruleset(self) -> Ruleset:
        """The table the cluster's current state asks for on this node."""
        return compile_ruleset(self.node_name, self._pods(), self._namespaces(), self._policies())

    async def sync(self) -> None:
        """Compile, and apply when the commands changed or ``sync_period`` passed since the last
        apply.  Never raises for a bad object or a refused transaction (logged; retried)."""
        ruleset = self.ruleset()
        for problem in ruleset.problems:
            if problem not in self._reported:
                log.warning("NetworkPolicy left out: %s", problem)
        self._reported = set(ruleset.problems)
        commands = ruleset.commands()
        due = self._last_apply + self.sync_period <= self.clock.monotonic()
        if commands == self._applied and self.healthy and not due:
            return
        try:
            await asyncio.to_thread(self.nftables.run, commands)
        except NftablesError as error:
            log.error("applying the table failed (retried at the next sync): %s", error)
            self.healthy = False
            self._applied = []
            return
        self._applied = commands
        self._last_apply = self.clock.monotonic()
        self.healthy = True
        self.syncs += 1

    async def run(self) -> None:
        """Sync until cancelled: at once, then on changes (those that come within
        ``min_sync_period`` of a sync coalesce into the next one), every ``sync_period``, and
        a second after a failure."""
        while True:
            self._wake.clear()
            await self.sync()
            await self.clock.sleep(self.min_sync_period if self.healthy else 1.0)
            if self.healthy:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.sync_period)
