"""Removing the rules of the proxy modes not running, as upstream's kube-proxy does at start.

A node switched from one mode to another would otherwise keep both data paths: the iptables
mode's ``KUBE-SERVICES`` DNATs before the nftables table sees a packet, or the other way
round, and Services removed since would stay reachable through stale rules.  So the nftables
mode deletes the iptables (and userspace) modes' chains and the jumps to them from built-in
chains, and those modes delete the ``ip kube-proxy`` table.  Only what a proxy mode writes is
removed: ``KUBE-`` chains of ``nat`` and ``filter`` (the hint chains live in ``mangle``), never
other components' chains (the CNI plugin's ``KUBELAB-`` ones) nor other nftables tables.
Failures are logged, not fatal: the mode starting still works beside leftovers.
"""

from __future__ import annotations

import logging

from node.iptables import Iptables, RulesError, delete_chains
from node.nftables import Nftables
from node.proxy import nftrules

log = logging.getLogger(__name__)

CHAIN_PREFIX = "KUBE-"
TABLES = ("nat", "filter")


def iptables_cleanup(table: str, saved: str) -> list[str]:
    """Restore lines removing, from ``saved`` (an ``iptables-save`` of ``table``), the
    ``KUBE-`` chains and every jump to them (one transaction, so chains that refer to each
    other go together)."""
    chains = [
        line[1:].split()[0] for line in saved.splitlines() if line.startswith(f":{CHAIN_PREFIX}")
    ]
    return delete_chains(saved, chains)


def cleanup_iptables(iptables: Iptables) -> None:
    """Remove the iptables and userspace modes' rules from ``nat`` and ``filter``."""
    for table in TABLES:
        try:
            lines = iptables_cleanup(table, iptables.save(table))
            if lines:
                iptables.restore(table, lines)
                log.info("removed the iptables proxy rules of %s", table)
        except RulesError as e:
            log.error("cannot remove the iptables proxy rules of %s: %s", table, e)


def cleanup_nftables(nftables: Nftables) -> None:
    """Remove the nftables mode's table, if there is one."""
    try:
        nftables.run(nftrules.cleanup())
    except RulesError as e:
        log.error("cannot remove the nftables table %s: %s", nftrules.TABLE, e)
