"""The policy→rules compiler on its own: which pods are isolated, which sets hold which
addresses, which rules each policy's chain gets; every ruleset is also applied to the fake
nftables, which refuses a rule naming a set or chain the table does not define."""

from __future__ import annotations

import pytest

from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.networking_v1 import NetworkPolicy
from node.netpol.compiler import FAMILY, TABLE, Ruleset, compile_ruleset, object_name
from node.nftables import FakeNftables
from tests.node.netpol.cluster import namespace, pod, policy

PODS = [
    pod("x", "a", "10.244.1.2", labels={"pod": "a"}, ports=[("serve-80", 80, "TCP")]),
    pod("x", "b", "10.244.1.3", labels={"pod": "b"}, ports=[("serve-80", 8080, "TCP")]),
    pod("y", "a", "10.244.1.4", labels={"pod": "a"}),
    pod("y", "b", "10.244.2.2", node="node2", labels={"pod": "b"}, ports=[("dns", 53, "UDP")]),
    pod("z", "c", "10.244.2.3", node="node2", labels={"pod": "c"}),
]
NAMESPACES = [namespace("x"), namespace("y", {"team": "blue"}), namespace("z")]


def compiled(*policies: NetworkPolicy, pods: list[Pod] = PODS) -> Ruleset:
    ruleset = compile_ruleset("node1", pods, NAMESPACES, policies)
    nft = FakeNftables(FAMILY, TABLE)
    nft.run(ruleset.commands())
    nft.run(ruleset.commands())  # a second sync replaces the table the first one wrote
    assert sorted(nft.current.sets) == sorted(s.name for s in ruleset.sets)
    assert nft.current.base_chains == {"ingress", "egress-forward", "egress-input"}
    return ruleset


def deny_all(ns: str = "x", types: str = "") -> NetworkPolicy:
    return policy(f"""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: deny, namespace: {ns}}}
spec:
  podSelector: {{}}
  {types}
""")


def test_without_policies_nothing_is_isolated_and_everything_passes() -> None:
    ruleset = compiled()
    assert ruleset.set("ingress-isolated").elements == ()
    assert ruleset.set("egress-isolated").elements == ()
    assert ruleset.chain("ingress").rules == (
        "ct state established,related accept",
        "ip daddr != @ingress-isolated accept",
        "counter drop",
    )
    assert ruleset.chain("ingress").hook == "forward"
    assert ruleset.chain("egress-forward").hook == "forward"
    assert ruleset.chain("egress-input").hook == "input"


def test_default_deny_ingress_isolates_the_local_pods_of_its_namespace_only() -> None:
    ruleset = compiled(deny_all())
    assert ruleset.set("ingress-isolated").elements == ("10.244.1.2", "10.244.1.3")
    assert ruleset.set("egress-isolated").elements == ()
    assert ruleset.set("pods/x/deny").elements == ("10.244.1.2", "10.244.1.3")
    assert ruleset.chain("ingress/x/deny").rules == ()
    assert "ip daddr @pods/x/deny jump ingress/x/deny" in ruleset.chain("ingress").rules
    with pytest.raises(KeyError):
        ruleset.chain("egress/x/deny")


def test_a_policy_selecting_only_other_nodes_pods_adds_nothing_here() -> None:
    ruleset = compiled(deny_all("z"))
    assert ruleset.set("ingress-isolated").elements == ()
    with pytest.raises(KeyError):
        ruleset.set("pods/z/deny")


def test_policy_types_egress_only_and_the_default_with_egress_rules() -> None:
    egress_only = compiled(deny_all(types="policyTypes: [Egress]"))
    assert egress_only.set("egress-isolated").elements == ("10.244.1.2", "10.244.1.3")
    assert egress_only.set("ingress-isolated").elements == ()
    both = compiled(deny_all(types="egress: [{}]"))
    assert both.set("egress-isolated").elements == ("10.244.1.2", "10.244.1.3")
    assert both.set("ingress-isolated").elements == ("10.244.1.2", "10.244.1.3")
    assert both.chain("egress/x/deny").rules == ("accept",)
    assert both.chain("ingress/x/deny").rules == ()


def test_peers_pod_selector_namespace_selector_both_and_ip_block_with_except() -> None:
    ruleset = compiled(
        policy("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: peers, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from: [{podSelector: {matchLabels: {pod: b}}}]
  - from: [{namespaceSelector: {matchLabels: {team: blue}}}]
  - from: [{namespaceSelector: {}, podSelector: {matchLabels: {pod: c}}}]
  - from: [{ipBlock: {cidr: 10.244.0.0/16, except: [10.244.1.0/24, 10.244.2.3/32]}}]
""")
    )
    assert ruleset.set("pods/x/peers").elements == ("10.244.1.2",)
    assert ruleset.set("ingress/x/peers/0").elements == ("10.244.1.3",)
    assert ruleset.set("ingress/x/peers/1").elements == ("10.244.1.4", "10.244.2.2")
    assert ruleset.set("ingress/x/peers/2").elements == ("10.244.2.3",)
    assert ruleset.set("ingress/x/peers/3").interval
    blocks = ruleset.set("ingress/x/peers/3").elements
    assert "10.244.0.0/24" in blocks and "10.244.2.2/32" not in blocks
    assert "10.244.2.2" in blocks and "10.244.2.3" not in blocks
    assert not any(b.startswith("10.244.1.") for b in blocks)
    assert ruleset.chain("ingress/x/peers").rules == tuple(
        f"ip saddr @ingress/x/peers/{i} accept" for i in range(4)
    )


def test_ports_numbers_ranges_protocols_and_named_ports_resolved_per_pod() -> None:
    ruleset = compiled(
        policy("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: ports, namespace: x}
spec:
  podSelector: {}
  ingress:
  - ports:
    - {port: 80}
    - {protocol: UDP, port: 5000, endPort: 5100}
    - {protocol: SCTP}
    - {port: serve-80}
    - {port: serve-80, protocol: UDP}
  egress:
  - to: [{namespaceSelector: {}}]
    ports: [{port: dns, protocol: UDP}]
""")
    )
    assert ruleset.chain("ingress/x/ports").rules == (
        "tcp dport 80 accept",
        "udp dport 5000-5100 accept",
        "meta l4proto sctp accept",
        "ip daddr . tcp dport { 10.244.1.2 . 80, 10.244.1.3 . 8080 } accept",
    )
    assert ruleset.chain("egress/x/ports").rules == (
        "ip daddr @egress/x/ports/0 ip daddr . udp dport { 10.244.2.2 . 53 } accept",
    )


def test_several_policies_are_a_union_and_each_keeps_its_own_chain() -> None:
    allow = policy("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}]}]
""")
    ruleset = compiled(deny_all(), allow)
    assert ruleset.chain("ingress").rules[2:] == (
        "ip daddr @pods/x/allow-b jump ingress/x/allow-b",
        "ip daddr @pods/x/deny jump ingress/x/deny",
        "counter drop",
    )


def test_pods_without_an_ipv4_address_on_the_host_network_or_finished_are_ignored() -> None:
    pods = [
        pod("x", "pending", None),
        pod("x", "v6", "fd00::2"),
        pod("x", "host", "10.240.0.11", host_network=True),
        pod("x", "done", "10.244.1.9", phase="Succeeded"),
        pod("x", "live", "10.244.1.2"),
    ]
    assert compiled(deny_all(), pods=pods).set("pods/x/deny").elements == ("10.244.1.2",)


def test_an_unreadable_policy_is_reported_and_the_others_still_apply() -> None:
    bad = policy("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bad, namespace: x}
spec:
  podSelector: {matchExpressions: [{key: pod, operator: Near, values: [a]}]}
""")
    ruleset = compiled(bad, deny_all())
    assert len(ruleset.problems) == 1 and ruleset.problems[0].startswith("x/bad: ")
    assert ruleset.set("pods/x/deny").elements == ("10.244.1.2", "10.244.1.3")


def test_names_too_long_for_nftables_are_hashed_and_stay_distinct() -> None:
    long = "p" * 253
    first, second = object_name("ingress", "x", long, "0"), object_name("ingress", "x", long, "1")
    assert len(first) <= 255 and first != second and first.startswith("ingress/x/")
    assert object_name("ingress", "x", "short", "0") == "ingress/x/short/0"


def test_the_commands_replace_the_table_in_one_transaction() -> None:
    commands = compiled(deny_all()).commands()
    assert commands[:3] == [
        f"add table {FAMILY} {TABLE}",
        f"delete table {FAMILY} {TABLE}",
        f"add table {FAMILY} {TABLE}",
    ]
    assert f"add element {FAMILY} {TABLE} pods/x/deny {{ 10.244.1.2, 10.244.1.3 }}" in commands


def test_namespaces_are_matched_by_their_labels() -> None:
    relabelled: list[Namespace] = [namespace("x"), namespace("y"), namespace("z", {"team": "blue"})]
    allow = policy("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: blue, namespace: x}
spec:
  podSelector: {}
  ingress: [{from: [{namespaceSelector: {matchLabels: {team: blue}}}]}]
""")
    ruleset = compile_ruleset("node1", PODS, relabelled, [allow])
    assert ruleset.set("ingress/x/blue/0").elements == ("10.244.2.3",)
