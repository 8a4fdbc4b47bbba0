"""The rendered ruleset for sets of service ports and endpoints, against the expected rules.

Chain names are upstream's for the same keys (``ns1/svc1:p80`` tcp is KUBE-SVC-XPGD46QRK7WJZT7O
in upstream's own proxier tests too), so the expectations read like upstream's.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from node.iptables import FakeIptables
from node.proxy.model import EndpointInfo, ServicePortInfo, ServicePortName
from node.proxy.names import endpoint_chain
from node.proxy.ruleset import (
    JUMPS,
    ProxyConfig,
    Ruleset,
    assemble,
    missing_jumps,
    owned_chains,
    probability,
    render_service,
)

NAME = ServicePortName("ns1", "svc1", "p80", "TCP")
SVC = "KUBE-SVC-XPGD46QRK7WJZT7O"
SVL = "KUBE-SVL-XPGD46QRK7WJZT7O"
EXT = "KUBE-EXT-XPGD46QRK7WJZT7O"
FW = "KUBE-FW-XPGD46QRK7WJZT7O"
VIP = "172.30.0.41"
CIDR = "10.0.0.0/8"
CONFIG = ProxyConfig(cluster_cidr=CIDR)
PORT = ServicePortInfo(NAME, VIP, 80)
MATCH = f"-m tcp -p tcp -d {VIP} --dport 80"
CLUSTER_IP = f'-m comment --comment "ns1/svc1:p80 cluster IP" {MATCH}'
MASQ_RULE = f"-A {SVC} {CLUSTER_IP} ! -s {CIDR} -j KUBE-MARK-MASQ"


def ep(
    n: int, *, local: bool = False, ready: bool = True, terminating: bool = False
) -> EndpointInfo:
    return EndpointInfo(
        f"10.180.0.{n}", 80, ready=ready, serving=True, terminating=terminating, local=local
    )


def sep(n: int) -> str:
    return endpoint_chain("ns1/svc1:p80", "TCP", f"10.180.0.{n}:80")


def sep_rules(n: int, affinity: bool = False) -> list[str]:
    recent = f" -m recent --name {sep(n)} --set" if affinity else ""
    return [
        f"-A {sep(n)} -m comment --comment ns1/svc1:p80 -s 10.180.0.{n} -j KUBE-MARK-MASQ",
        f"-A {sep(n)} -m comment --comment ns1/svc1:p80{recent} -m tcp -p tcp "
        f"-j DNAT --to-destination 10.180.0.{n}:80",
    ]


def jump(chain: str, n: int, p: str | None = None) -> str:
    statistic = f" -m statistic --mode random --probability {p}" if p else ""
    return (
        f'-A {chain} -m comment --comment "ns1/svc1:p80 -> 10.180.0.{n}:80"{statistic} -j {sep(n)}'
    )


def render(
    port: ServicePortInfo, *endpoints: EndpointInfo, config: ProxyConfig = CONFIG
) -> Ruleset:
    return assemble({port.name: render_service(port, endpoints, config)}, config)


def chain(ruleset: Ruleset, name: str) -> list[str]:
    return [line for line in ruleset.nat if line.startswith(f"-A {name} ")]


def filter_chain(ruleset: Ruleset, name: str) -> list[str]:
    return [line for line in ruleset.filter if line.startswith(f"-A {name} ")]


def declared(ruleset: Ruleset) -> list[str]:
    return [line[1:].split()[0] for line in ruleset.nat if line.startswith(":")]


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        pytest.param(1, [jump(SVC, 1)], id="one-endpoint"),
        pytest.param(2, [jump(SVC, 1, "0.5000000000"), jump(SVC, 2)], id="two-endpoints"),
        pytest.param(
            3,
            [jump(SVC, 1, "0.3333333333"), jump(SVC, 2, "0.5000000000"), jump(SVC, 3)],
            id="three-endpoints",
        ),
    ],
)
def test_cluster_ip_spreads_with_exact_probabilities(count: int, expected: list[str]) -> None:
    ruleset = render(PORT, *(ep(n) for n in range(1, count + 1)))
    assert chain(ruleset, "KUBE-SERVICES") == [
        f"-A KUBE-SERVICES {CLUSTER_IP} -j {SVC}",
        '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must '
        'be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
    ]
    assert chain(ruleset, SVC) == [MASQ_RULE, *expected]
    for n in range(1, count + 1):
        assert chain(ruleset, sep(n)) == sep_rules(n)
    assert filter_chain(ruleset, "KUBE-SERVICES") == []


def test_probability_format() -> None:
    assert [probability(n) for n in (4, 3, 2)] == ["0.2500000000", "0.3333333333", "0.5000000000"]


def test_session_affinity_checks_recent_before_spreading() -> None:
    ruleset = render(replace(PORT, affinity_seconds=10800), ep(1), ep(2))
    recent = [
        f'-A {SVC} -m comment --comment "ns1/svc1:p80 -> 10.180.0.{n}:80" -m recent '
        f"--name {sep(n)} --rcheck --seconds 10800 --reap -j {sep(n)}"
        for n in (1, 2)
    ]
    assert chain(ruleset, SVC) == [MASQ_RULE, *recent, jump(SVC, 1, "0.5000000000"), jump(SVC, 2)]
    assert chain(ruleset, sep(1)) == sep_rules(1, affinity=True)


def test_hairpin_traffic_is_masqueraded_in_the_endpoint_chain() -> None:
    assert chain(render(PORT, ep(7)), sep(7))[0] == (
        f"-A {sep(7)} -m comment --comment ns1/svc1:p80 -s 10.180.0.7 -j KUBE-MARK-MASQ"
    )


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param(CONFIG, [MASQ_RULE], id="outside-cluster-cidr"),
        pytest.param(
            ProxyConfig(cluster_cidr=CIDR, masquerade_all=True),
            [f"-A {SVC} {CLUSTER_IP} -j KUBE-MARK-MASQ"],
            id="masquerade-all",
        ),
        pytest.param(ProxyConfig(), [], id="no-cluster-cidr"),
    ],
)
def test_cluster_ip_masquerade(config: ProxyConfig, expected: list[str]) -> None:
    assert chain(render(PORT, ep(1), config=config), SVC)[:-1] == expected


def test_no_endpoints_rejects_in_filter() -> None:
    ruleset = render(replace(PORT, node_port=30080, external_ips=("192.0.2.10",)))
    assert filter_chain(ruleset, "KUBE-SERVICES") == [
        f'-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" {MATCH} -j REJECT'
    ]
    assert filter_chain(ruleset, "KUBE-EXTERNAL-SERVICES") == [
        '-A KUBE-EXTERNAL-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" '
        "-m tcp -p tcp -d 192.0.2.10 --dport 80 -j REJECT",
        '-A KUBE-EXTERNAL-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" '
        "-m addrtype --dst-type LOCAL -m tcp -p tcp --dport 30080 -j REJECT",
    ]
    assert [c for c in declared(ruleset) if c.startswith("KUBE-S")] == ["KUBE-SERVICES"]
    assert chain(ruleset, "KUBE-NODEPORTS") == []


def test_node_port_cluster_policy_masquerades_in_ext_chain() -> None:
    ruleset = render(replace(PORT, node_port=30080), ep(1))
    assert chain(ruleset, "KUBE-NODEPORTS") == [
        f"-A KUBE-NODEPORTS -m comment --comment ns1/svc1:p80 -m tcp -p tcp --dport 30080 -j {EXT}"
    ]
    assert chain(ruleset, EXT) == [
        f'-A {EXT} -m comment --comment "masquerade traffic for ns1/svc1:p80 external '
        f'destinations" -j KUBE-MARK-MASQ',
        f"-A {EXT} -j {SVC}",
    ]


@pytest.mark.parametrize(
    ("node_ips", "expected"),
    [
        pytest.param(None, ["-m addrtype --dst-type LOCAL"], id="all-local-addresses"),
        pytest.param(("127.0.0.1", "192.0.2.1"), ["-d 127.0.0.1", "-d 192.0.2.1"], id="listed"),
    ],
)
def test_nodeports_jump_is_last_in_services(
    node_ips: tuple[str, ...] | None, expected: list[str]
) -> None:
    ruleset = render(
        replace(PORT, node_port=30080), ep(1), config=replace(CONFIG, node_ips=node_ips)
    )
    last = chain(ruleset, "KUBE-SERVICES")[-len(expected) :]
    assert [line.split('chain" ')[1].rsplit(" -j", 1)[0] for line in last] == expected


def test_external_ips_and_load_balancer_go_through_ext_chain() -> None:
    port = replace(PORT, external_ips=("192.0.2.10",), load_balancer_ips=("198.51.100.5",))
    services = chain(render(port, ep(1)), "KUBE-SERVICES")
    assert services[1:3] == [
        '-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 external IP" '
        f"-m tcp -p tcp -d 192.0.2.10 --dport 80 -j {EXT}",
        '-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 loadbalancer IP" '
        f"-m tcp -p tcp -d 198.51.100.5 --dport 80 -j {EXT}",
    ]


def test_load_balancer_source_ranges_use_fw_chain_and_firewall() -> None:
    port = replace(PORT, load_balancer_ips=("198.51.100.5",), source_ranges=("203.0.113.0/24",))
    ruleset = render(port, ep(1))
    assert f"-j {FW}" in chain(ruleset, "KUBE-SERVICES")[1]
    assert chain(ruleset, FW) == [
        f'-A {FW} -m comment --comment "ns1/svc1:p80 loadbalancer IP" -s 203.0.113.0/24 -j {EXT}'
    ]
    assert filter_chain(ruleset, "KUBE-PROXY-FIREWALL") == [
        f'-A KUBE-PROXY-FIREWALL -m comment --comment "ns1/svc1:p80 traffic not accepted by {FW}"'
        " -m tcp -p tcp -d 198.51.100.5 --dport 80 -j DROP"
    ]


LOCAL_EXT = [
    f'-A {EXT} -m comment --comment "pod traffic for ns1/svc1:p80 external destinations" '
    f"-s {CIDR} -j {SVC}",
    f'-A {EXT} -m comment --comment "masquerade LOCAL traffic for ns1/svc1:p80 external '
    'destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ',
    f'-A {EXT} -m comment --comment "route LOCAL traffic for ns1/svc1:p80 external '
    f'destinations" -m addrtype --src-type LOCAL -j {SVC}',
]


def test_external_traffic_policy_local_uses_only_local_endpoints_without_masquerade() -> None:
    port = replace(PORT, node_port=30080, external_policy_local=True, health_check_node_port=32000)
    ruleset = render(port, ep(1, local=True), ep(2))
    assert chain(ruleset, EXT) == [*LOCAL_EXT, f"-A {EXT} -j {SVL}"]
    assert chain(ruleset, SVL) == [jump(SVL, 1)]
    assert chain(ruleset, SVC) == [MASQ_RULE, jump(SVC, 1, "0.5000000000"), jump(SVC, 2)]
    assert filter_chain(ruleset, "KUBE-NODEPORTS") == [
        '-A KUBE-NODEPORTS -m comment --comment "ns1/svc1:p80 health check node port" '
        "-m tcp -p tcp --dport 32000 -j ACCEPT"
    ]


def test_external_traffic_policy_local_without_local_endpoints_drops_external_traffic() -> None:
    port = replace(PORT, node_port=30080, external_policy_local=True)
    ruleset = render(port, ep(2))
    assert chain(ruleset, EXT) == LOCAL_EXT
    assert SVL not in declared(ruleset)
    assert filter_chain(ruleset, "KUBE-EXTERNAL-SERVICES") == [
        '-A KUBE-EXTERNAL-SERVICES -m comment --comment "ns1/svc1:p80 has no local endpoints" '
        "-m addrtype --dst-type LOCAL -m tcp -p tcp --dport 30080 -j DROP"
    ]


def test_internal_traffic_policy_local() -> None:
    port = replace(PORT, internal_policy_local=True)
    ruleset = render(port, ep(1, local=True), ep(2))
    assert chain(ruleset, "KUBE-SERVICES")[0] == f"-A KUBE-SERVICES {CLUSTER_IP} -j {SVL}"
    assert chain(ruleset, SVL) == [
        f"-A {SVL} {CLUSTER_IP} ! -s {CIDR} -j KUBE-MARK-MASQ",
        jump(SVL, 1),
    ]
    assert SVC not in declared(ruleset)
    only_remote = render(port, ep(2))
    assert filter_chain(only_remote, "KUBE-SERVICES") == [
        f'-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 has no local endpoints" '
        f"{MATCH} -j DROP"
    ]


@pytest.mark.parametrize(
    ("endpoints", "used"),
    [
        pytest.param([ep(1), ep(2, ready=False, terminating=True)], [1], id="ready-wins"),
        pytest.param(
            [ep(1, ready=False, terminating=True), ep(2, ready=False, terminating=True)],
            [1, 2],
            id="terminating-fallback",
        ),
        pytest.param([ep(1, ready=False)], [], id="not-ready-not-terminating"),
    ],
)
def test_terminating_endpoints_only_when_no_ready_ones(
    endpoints: list[EndpointInfo], used: list[int]
) -> None:
    ruleset = render(PORT, *endpoints)
    assert [c for c in declared(ruleset) if c.startswith("KUBE-SEP-")] == [sep(n) for n in used]


def test_udp_uses_udp_matches() -> None:
    name = ServicePortName("ns1", "dns", "", "UDP")
    ruleset = render(ServicePortInfo(name, "172.30.0.10", 53), replace(ep(1), port=53))
    assert (
        '--comment "ns1/dns cluster IP" -m udp -p udp -d 172.30.0.10 --dport 53'
        in (chain(ruleset, "KUBE-SERVICES")[0])
    )


def other(n: int) -> ServicePortInfo:
    return ServicePortInfo(ServicePortName("ns2", f"svc{n}", "", "TCP"), f"172.30.1.{n}", 80)


def test_partial_sync_declares_only_changed_service_chains() -> None:
    ports = [PORT, other(1), other(2)]
    rules = {p.name: render_service(p, [ep(i + 1)], CONFIG) for i, p in enumerate(ports)}
    full = assemble(rules, CONFIG)
    partial = assemble(rules, CONFIG, changed={other(1).name})
    changed_chains = set(rules[other(1).name].chains)
    assert set(declared(partial)) == {
        "KUBE-SERVICES",
        "KUBE-NODEPORTS",
        "KUBE-POSTROUTING",
        "KUBE-MARK-MASQ",
        *changed_chains,
    }
    # The top-level chains are whole in both.
    assert chain(partial, "KUBE-SERVICES") == chain(full, "KUBE-SERVICES")
    assert [
        line for line in partial.nat if line.startswith("-A KUBE-S") and "SERVICES" not in line
    ] == [line for line in full.nat if any(line.startswith(f"-A {c} ") for c in changed_chains)]


def test_stale_chains_are_flushed_and_deleted_after_references_go() -> None:
    fake = FakeIptables()
    first = assemble({PORT.name: render_service(PORT, [ep(1), ep(2)], CONFIG)}, CONFIG)
    fake.restore("nat", first.nat)
    rules = {PORT.name: render_service(PORT, [ep(1)], CONFIG)}
    second = assemble(rules, CONFIG, changed={PORT.name}, stale_chains=[sep(2)])
    assert second.nat[-1] == f"-X {sep(2)}"
    assert f":{sep(2)} - [0:0]" in second.nat
    fake.restore("nat", second.nat)
    assert sep(2) not in fake.tables["nat"]
    assert owned_chains(fake.save("nat")) == {SVC, sep(1)}


def test_whole_ruleset_applies_to_fake_iptables_with_jumps_once() -> None:
    fake = FakeIptables()
    port = replace(
        PORT,
        node_port=30080,
        external_ips=("192.0.2.10",),
        load_balancer_ips=("198.51.100.5",),
        source_ranges=("203.0.113.0/24",),
        external_policy_local=True,
    )
    ruleset = render(port, ep(1, local=True), ep(2))
    for _ in range(2):
        for table, lines in (("filter", ruleset.filter), ("nat", ruleset.nat)):
            fake.restore(table, lines + missing_jumps(table, fake.save(table)))
    assert fake.rules("nat", "PREROUTING") == [
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'
    ]
    builtin = {(j.table, j.parent) for j in JUMPS}
    assert sum(len(fake.rules(table, parent)) for table, parent in builtin) == len(JUMPS)
    assert missing_jumps("filter", fake.save("filter")) == []
    assert missing_jumps("nat", fake.save("nat")) == []
