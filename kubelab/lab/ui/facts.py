"""What ``kubelab lab ui`` reads from the lab's namespaces, behind one narrow interface.

``Facts`` is all the page's server asks of the machine: a namespace's bridges, veths and
routes (``ip -j``), the host end of a pod's veth, and a node's proxy rules for one Service
(``iptables-save -t nat``, ``iptables-legacy-save`` for the libiptc backend, or ``nft list
table ip kube-proxy`` in nftables mode).  ``LabFacts`` runs those commands inside the lab's
namespaces (``kubelab.lab.processes.run``, under ``nsenter --net``), in worker threads;
tests hand the server a fake.  The parsers are pure functions of the commands' output.

A Service's rules as a picture (``chain_graph``): the proxy's shared chains (``KUBE-SERVICES``,
the ``service-ips`` map...) contribute only the rules and elements that name the Service
(``NS/NAME`` in a comment or a chain name), each chain reached from those by jumps and gotos
(the Service's own, its endpoints', the masquerade mark) contributes all its rules, and every
jump is an edge; iptables-save and nft listings are
both read as named blocks of lines, so one graph serves both modes.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import Any, Protocol

from kube.api.kinds.core_v1.pod import Pod
from kubelab.lab.processes import CommandError, run
from kubelab.lab.topology import Lab, Node
from kubelab.lab.trace import TraceError, pod_netns
from kubelab.lab.ui.model import NodeNetwork, Route, Veth
from node.cni.network import host_veth_name
from node.proxy import names

_JUMP = re.compile(r"(?:-[jg] |\b(?:jump|goto) |vmap @)\"?([^\s\",}]+)")
_NFT_BLOCK = re.compile(r"^\s*(?:chain|map|set) \"?([^\s\"]+)\"? \{$")


class Facts(Protocol):
    async def network(self, node: Node) -> NodeNetwork:
        """The namespace's bridges, veths and routes (an error inside, never raised)."""
        ...

    async def pod_veth(self, pod: Pod) -> str:
        """The host end of the pod's veth ("" when unknown or host network)."""
        ...

    async def proxy_rules(self, node: Node) -> str:
        """The node's proxy rules as its proxy mode lists them (CommandError if unreadable)."""
        ...


class LabFacts:
    """``Facts`` read from a running lab."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    async def network(self, node: Node) -> NodeNetwork:
        try:
            links, routes = await asyncio.gather(
                asyncio.to_thread(run, "ip", "-j", "-d", "addr", "show", netns=node.netns_path),
                asyncio.to_thread(run, "ip", "-j", "route", "show", netns=node.netns_path),
            )
        except CommandError as error:
            return NodeNetwork(error=str(error))
        return parse_network(links, routes)

    async def pod_veth(self, pod: Pod) -> str:
        node_name = pod.spec.node_name if pod.spec else None
        if not node_name or (pod.spec is not None and pod.spec.host_network):
            return ""
        try:
            node = self.lab.node(node_name)
            _, sandbox = await asyncio.to_thread(pod_netns, node.cgroup_root, pod)
        except (TraceError, OSError, KeyError, ValueError):
            return ""
        return host_veth_name(sandbox, "eth0")

    async def proxy_rules(self, node: Node) -> str:
        spec = self.lab.spec
        if spec.proxy_mode == "nftables":
            command: tuple[str, ...] = ("nft", "list", "table", "ip", "kube-proxy")
        elif spec.iptables_backend == "libiptc":
            command = ("iptables-legacy-save", "-t", "nat")
        else:
            command = ("iptables-save", "-t", "nat")
        return await asyncio.to_thread(run, *command, netns=node.netns_path)


def parse_network(links_json: str, routes_json: str) -> NodeNetwork:
    """``ip -j -d addr show`` and ``ip -j route show`` output as a ``NodeNetwork``."""
    links: list[dict[str, Any]] = json.loads(links_json or "[]")
    routes: list[dict[str, Any]] = json.loads(routes_json or "[]")
    bridges: dict[str, str] = {}
    veths = []
    for link in links:
        kind = link.get("linkinfo", {}).get("info_kind", "")
        if kind == "bridge":
            address = next(
                (
                    f"{a['local']}/{a['prefixlen']}"
                    for a in link.get("addr_info", [])
                    if a.get("family") == "inet"
                ),
                "",
            )
            bridges[link["ifname"]] = address
        elif kind == "veth":
            up = link.get("operstate") == "UP" or "UP" in link.get("flags", [])
            veths.append(Veth(link["ifname"], up, link.get("master", "")))
    return NodeNetwork(
        bridges=bridges,
        veths=tuple(veths),
        routes=tuple(
            Route(r.get("dst", ""), r.get("gateway", ""), r.get("dev", "")) for r in routes
        ),
    )


def blocks(listing: str) -> dict[str, list[str]]:
    """An ``iptables-save`` table or an ``nft list table`` as named blocks of rule lines (a
    map's or set's elements are its lines, one element each)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_elements = False
    for raw in listing.splitlines():
        line = raw.strip()
        if line.startswith(":") and " " in line:
            found.setdefault(line[1:].split()[0], [])
        elif line.startswith("-A "):
            chain, _, rule = line[3:].partition(" ")
            found.setdefault(chain, []).append(rule)
        elif match := _NFT_BLOCK.match(raw):
            current = found.setdefault(match.group(1), [])
        elif current is None or not line:
            continue
        elif in_elements or line.startswith("elements = {"):
            listed = line.removeprefix("elements = {").removesuffix("}")
            current += [e.strip() for e in listed.split(",") if e.strip()]
            in_elements = not line.endswith("}")
        elif line == "}":
            current = None
        else:
            current.append(line)
    return found


def chain_graph(listing: str, namespace: str, name: str) -> dict[str, Any]:
    """The Service's part of the proxy's rules: chains (with the rules shown) and jumps."""
    named = blocks(listing)
    # After a space or quote (an iptables comment), or after an nft name's hash prefix.
    key = re.compile(
        rf'(?:(?<=[\s"])|(?<=-[A-Z2-7]{{8}}-)){re.escape(namespace)}/{re.escape(name)}(?=[:/" ]|$)'
    )

    def mentions(rule: str) -> bool:
        return key.search(rule) is not None

    def per_service(chain: str) -> bool:
        return names.is_per_service(chain) or names.is_nft_per_service(chain)

    shown: dict[str, list[str]] = {}
    pending = [c for c in named if per_service(c) and mentions(c)]
    for chain, rules in named.items():
        if not per_service(chain) and any(mentions(r) for r in rules):
            shown[chain] = [r for r in rules if mentions(r)]
    pending += [t for rules in shown.values() for r in rules for t in _targets(r, named)]
    while pending:
        chain = pending.pop()
        if chain in shown or chain not in named:
            continue
        shown[chain] = named[chain]
        pending += [t for r in named[chain] for t in _targets(r, named)]
    jumps = sorted(
        (
            {"from": chain, "to": target, "rule": rule}
            for chain, rules in shown.items()
            for rule in rules
            for target in _targets(rule, named)
            if target in shown
        ),
        key=lambda jump: (jump["from"], jump["to"]),
    )
    return {
        "chains": [{"name": c, "rules": rules} for c, rules in sorted(shown.items())],
        "jumps": jumps,
    }


def _targets(rule: str, named: Mapping[str, list[str]]) -> list[str]:
    return [t for t in _JUMP.findall(rule) if t in named]
