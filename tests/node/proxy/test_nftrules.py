"""The nftables rules of single service ports, rendered: upstream's names and layout, every
traffic policy, affinity, source ranges, and the element differences a partial sync writes."""

from __future__ import annotations

from fractions import Fraction

import pytest

from node.proxy import names, nftrules
from node.proxy.model import EndpointInfo, ServicePortInfo, ServicePortName
from node.proxy.nftrules import NftServiceRules, element_changes, render_service, setup
from node.proxy.ruleset import ProxyConfig

NAME = ServicePortName("ns1", "svc1", "p80", "TCP")
CONFIG = ProxyConfig(cluster_cidr="10.244.0.0/16")
SVC = "service-ULMVA6XW-ns1/svc1/tcp/p80"
EXT = "external-ULMVA6XW-ns1/svc1/tcp/p80"
EP1 = "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"


def port(**fields: object) -> ServicePortInfo:
    return ServicePortInfo(NAME, "172.30.0.41", 80, **fields)  # type: ignore[arg-type]


def endpoint(ip: str, local: bool = True, ready: bool = True) -> EndpointInfo:
    return EndpointInfo(ip, 80, ready=ready, serving=ready, local=local)


def bodies(rules: NftServiceRules, chain: str) -> list[str]:
    prefix = f"add rule ip kube-proxy {chain} "
    return [line.removeprefix(prefix) for line in rules.chains[chain]]


def test_names_are_upstreams() -> None:
    # The examples in upstream's servicePortChainNameBase and servicePortEndpointChainNameBase.
    assert names.nft_service_base(NAME) == "ULMVA6XW-ns1/svc1/tcp/p80"
    assert names.nft_endpoint_base(NAME, "10.180.0.1", 80) == EP1.removeprefix("endpoint-")
    assert names.is_nft_per_service(SVC) and not names.is_nft_per_service("services")


def test_a_cluster_ip_spreads_over_its_endpoints_with_numgen() -> None:
    rules = render_service(port(), [endpoint("10.180.0.1"), endpoint("10.180.0.2")], CONFIG)
    assert rules.elements["cluster-ips"] == {"172.30.0.41": ""}
    assert rules.elements["service-ips"] == {"172.30.0.41 . tcp . 80": f"goto {SVC}"}
    ep2 = "endpoint-" + names.nft_endpoint_base(NAME, "10.180.0.2", 80)
    assert bodies(rules, SVC) == [
        "ip daddr 172.30.0.41 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade",
        f"numgen random mod 2 0 goto {EP1}",
        f"goto {ep2}",
    ]
    assert bodies(rules, EP1) == [
        "ip saddr 10.180.0.1 jump mark-for-masquerade",
        "meta l4proto tcp dnat to 10.180.0.1:80",
    ]
    assert "no-endpoint-services" not in rules.elements


@pytest.mark.parametrize("count", [1, 2, 3, 10, 64])
def test_each_endpoint_is_chosen_with_the_same_probability(count: int) -> None:
    endpoints = [endpoint(f"10.180.0.{i + 1}") for i in range(count)]
    rules = bodies(render_service(port(), endpoints, CONFIG), SVC)[1:]
    chosen: dict[str, Fraction] = {}
    reached = Fraction(1)  # the chance that no rule before this one matched
    for rule in rules:
        *condition, _, target = rule.split()
        # "numgen random mod K 0": a fresh draw in every rule, 0 with probability 1/K
        matches = Fraction(1, int(condition[3])) if condition else Fraction(1)
        chosen[target] = chosen.get(target, Fraction(0)) + reached * matches
        reached *= 1 - matches
    assert reached == 0
    assert chosen == {
        "endpoint-" + names.nft_endpoint_base(NAME, e.ip, 80): Fraction(1, count) for e in endpoints
    }
    assert not rules[-1].startswith("numgen")
    assert not [rule for rule in rules if "vmap" in rule]  # no set per Service


def test_masquerade_all_marks_every_cluster_ip_connection() -> None:
    rules = render_service(port(), [endpoint("10.180.0.1")], ProxyConfig(masquerade_all=True))
    assert bodies(rules, SVC)[0] == "ip daddr 172.30.0.41 tcp dport 80 jump mark-for-masquerade"


def test_without_endpoints_every_address_is_rejected() -> None:
    rules = render_service(
        port(node_port=30080, external_ips=("192.168.99.11",)),
        [endpoint("10.1.0.1", ready=False)],
        CONFIG,
    )
    assert rules.chains == {}
    assert rules.elements["no-endpoint-services"] == {
        "172.30.0.41 . tcp . 80": "goto reject-chain",
        "192.168.99.11 . tcp . 80": "goto reject-chain",
    }
    assert rules.elements["no-endpoint-nodeports"] == {"tcp . 30080": "goto reject-chain"}
    assert "service-ips" not in rules.elements and "service-nodeports" not in rules.elements


def test_external_policy_cluster_masquerades_external_traffic() -> None:
    rules = render_service(
        port(node_port=30080, load_balancer_ips=("5.6.7.8",)), [endpoint("10.180.0.1")], CONFIG
    )
    assert rules.elements["service-nodeports"] == {"tcp . 30080": f"goto {EXT}"}
    assert rules.elements["service-ips"]["5.6.7.8 . tcp . 80"] == f"goto {EXT}"
    assert bodies(rules, EXT) == ["jump mark-for-masquerade", f"goto {SVC}"]


def test_external_policy_local_keeps_the_source_and_drops_without_local_endpoints() -> None:
    local = "local-ULMVA6XW-ns1/svc1/tcp/p80"
    remote_only = render_service(
        port(node_port=30080, external_policy_local=True),
        [endpoint("10.1.0.1", local=False)],
        CONFIG,
    )
    assert remote_only.elements["no-endpoint-nodeports"] == {"tcp . 30080": "drop"}
    assert bodies(remote_only, EXT) == [
        f'ip saddr 10.244.0.0/16 goto {SVC} comment "short-circuit pod traffic"',
        'fib saddr type local jump mark-for-masquerade comment "masquerade local traffic"',
        f'fib saddr type local goto {SVC} comment "short-circuit local traffic"',
    ]
    with_local = render_service(
        port(node_port=30080, external_policy_local=True),
        [endpoint("10.1.0.1", local=False), endpoint("10.180.0.1")],
        CONFIG,
    )
    assert bodies(with_local, EXT)[-1] == f"goto {local}"
    assert bodies(with_local, local)[-1] == f"goto {EP1}"
    assert "no-endpoint-nodeports" not in with_local.elements


def test_internal_policy_local_without_local_endpoints_drops_cluster_ip_traffic() -> None:
    rules = render_service(
        port(internal_policy_local=True), [endpoint("10.1.0.1", local=False)], CONFIG
    )
    assert rules.elements["no-endpoint-services"] == {"172.30.0.41 . tcp . 80": "drop"}


def test_client_ip_affinity_uses_sets_with_the_timeout() -> None:
    rules = render_service(port(affinity_seconds=10800), [endpoint("10.180.0.1")], CONFIG)
    affinity = "affinity-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"
    assert rules.affinity_sets == {affinity: 10800}
    assert bodies(rules, SVC)[1] == f"ip saddr @{affinity} goto {EP1}"
    assert bodies(rules, EP1)[1] == f"update @{affinity} {{ ip saddr }}"


def test_load_balancer_source_ranges_go_through_the_firewall_map() -> None:
    rules = render_service(
        port(load_balancer_ips=("5.6.7.8",), source_ranges=("203.0.113.0/25", "10.0.0.0/8")),
        [endpoint("10.180.0.1")],
        CONFIG,
    )
    fw = "firewall-ULMVA6XW-ns1/svc1/tcp/p80"
    assert rules.elements["firewall-ips"] == {"5.6.7.8 . tcp . 80": f"goto {fw}"}
    assert bodies(rules, fw) == ["ip saddr != { 203.0.113.0/25, 10.0.0.0/8 } drop"]


@pytest.mark.parametrize(
    ("node_ips", "expected"),
    [
        pytest.param(None, "fib daddr type local ip daddr != 127.0.0.0/8 ", id="every-address"),
        pytest.param(("127.0.0.1", "10.0.0.5"), "ip daddr @nodeport-ips ", id="nodeport-addresses"),
    ],
)
def test_node_ports_answer_on_local_addresses_but_never_loopback(
    node_ips: tuple[str, ...] | None, expected: str
) -> None:
    lines = setup(ProxyConfig(node_ips=node_ips), recreate_base_chains=False)
    services = [line for line in lines if line.startswith("add rule ip kube-proxy services ")]
    assert services[-1].endswith(f"{expected}meta l4proto . th dport vmap @service-nodeports")
    if node_ips:
        assert "add element ip kube-proxy nodeport-ips { 10.0.0.5 }" in lines
    else:
        assert "delete set ip kube-proxy nodeport-ips" in lines


def test_setup_recreates_base_chains_only_when_asked() -> None:
    first = setup(CONFIG, recreate_base_chains=True)
    later = setup(CONFIG, recreate_base_chains=False)
    assert "delete chain ip kube-proxy nat-output" in first
    assert not [line for line in later if line.startswith("delete chain")]
    assert "add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }" in later


def test_element_changes_delete_before_adding_a_changed_verdict() -> None:
    old = {"service-ips": {"a": "goto x", "b": "goto y"}, "cluster-ips": {"1.1.1.1": ""}}
    new = {"service-ips": {"a": "goto z", "c": "goto y"}, "cluster-ips": {"1.1.1.1": ""}}
    assert element_changes(old, new) == [
        "delete element ip kube-proxy service-ips { a, b }",
        "add element ip kube-proxy service-ips { a : goto z, c : goto y }",
    ]
    assert element_changes(new, new) == []


def test_cleanup_removes_the_table_whether_or_not_it_exists() -> None:
    assert nftrules.cleanup() == ["add table ip kube-proxy", "delete table ip kube-proxy"]
