"""node.doctor's checks on a fake node: a healthy one passes every check; each check, given
the node broken the way it looks for, names the problem with its evidence, and the safe
repairs make it pass again.  No root: the node is node.doctor.access.FakeHost and the API
FakeCluster."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kube.api.kinds.coordination_v1 import Lease, LeaseSpec
from kube.api.kinds.core_v1.node import Node, NodeAddress, NodeSpec, NodeStatus
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.meta_v1 import ObjectMeta
from kube.api.struct import micro_time
from node.doctor.access import FakeCluster, FakeHost, Link, Route, sysctl_path
from node.doctor.check import Config, Context, Finding, Result, Status, diagnose, repair
from node.doctor.command import CHECKS, as_json, render
from node.doctor.system import KERNEL_OPTIONS
from node.nftables import FakeTable
from node.proxy import names

NOW = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC)
CONFIG = Config(
    node_name="node1",
    kubeconfig=Path("/node/kubelet.kubeconfig"),
    cert_dir=Path("/node/pki"),
    cni_conf_dir=Path("/node/cni/net.d"),
    cni_bin_dir=Path("/node/cni/bin"),
    containerd_config=Path("/node/containerd/config.toml"),
    runtime_socket=Path("/node/containerd/containerd.sock"),
    resolv_conf=Path("/node/resolv.conf"),
    cluster_dns=("10.96.0.10",),
)
CONFLIST = "/node/cni/net.d/10-kubelab.conflist"
API_HOST = "10.240.0.10"
PEER_POD = "10.244.1.1"
SERVICE_CHAIN = names.service_chain("default/kubernetes:https", "TCP")
ENDPOINT_CHAIN = names.endpoint_chain("default/kubernetes:https", "TCP", "10.240.0.2:6443")
STALE_CHAIN = names.service_chain("gone/web:http", "TCP")
CONTAINERD_CONFIG = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
SystemdCgroup = false
"""


def certificate(start: datetime.datetime, end: datetime.datetime) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "system:node:node1")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(start)
        .not_valid_after(end)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def node(name: str, cidr: str, ip: str) -> Node:
    return Node(
        metadata=ObjectMeta(name=name),
        spec=NodeSpec(pod_cidr=cidr),
        status=NodeStatus(addresses=[NodeAddress(type="InternalIP", address=ip)]),
    )


def healthy() -> tuple[FakeHost, FakeCluster]:
    """A worker as the lab makes one, with a peer, one Service and its rules."""
    files = {
        sysctl_path("net.ipv4.ip_forward"): "1\n",
        sysctl_path("net.bridge.bridge-nf-call-iptables"): "1\n",
        sysctl_path("net.ipv4.conf.all.route_localnet"): "1\n",
        sysctl_path("net.netfilter.nf_conntrack_count"): "12\n",
        sysctl_path("net.netfilter.nf_conntrack_max"): "262144\n",
        "/proc/swaps": "Filename\tType\tSize\tUsed\tPriority\n",
        "/proc/cgroups": "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
        + "".join(f"{c}\t1\t8\t1\n" for c in ("cpuset", "cpu", "cpuacct", "memory", "pids")),
        CONFLIST: json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "kubelab",
                "plugins": [{"type": "kubelab-cni", "bridge": "cni0", "mtu": 1500}],
            }
        ),
        "/node/cni/bin/kubelab-cni": "",
        "/node/cni/bin/loopback": "",
        "/node/containerd/config.toml": CONTAINERD_CONFIG,
        "/node/resolv.conf": "nameserver 10.240.0.1\n",
        "/node/pki/kubelet.pem": certificate(
            NOW - datetime.timedelta(days=1), NOW + datetime.timedelta(days=364)
        ),
    }
    for interface in ("all", "default", "eth0", "lo"):
        files[f"/proc/sys/net/ipv4/conf/{interface}/rp_filter"] = "0\n"
    host = FakeHost(
        files=files,
        commands={
            "conntrack",
            "ip",
            "iptables",
            "mount",
            "nsenter",
            "containerd",
            "runc",
            "ebtables",
            "ethtool",
            "socat",
            "tc",
            "touch",
        },
        routes={
            PEER_POD: Route("unicast", "eth0", "10.240.0.1"),
            API_HOST: Route("unicast", "eth0", None),
        },
        link_list=[
            Link("lo", 65536, None),
            Link("eth0", 1500, None),
            Link("cni0", 1500, None),
            Link("veth1", 1500, "cni0"),
        ],
        sockets={str(CONFIG.runtime_socket)},
        http={
            CONFIG.proxy_healthz: (
                200,
                json.dumps({"lastUpdated": (NOW - datetime.timedelta(seconds=3)).isoformat()}),
            )
        },
        kernel="".join(f"CONFIG_{option}=y\n" for option in KERNEL_OPTIONS),
        clock=NOW,
    )
    host.tables["nft"].restore(
        "nat",
        [
            ":KUBE-SERVICES - [0:0]",
            f":{SERVICE_CHAIN} - [0:0]",
            f":{ENDPOINT_CHAIN} - [0:0]",
            "-A OUTPUT -j KUBE-SERVICES",
            f"-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp --dport 443 -j {SERVICE_CHAIN}",
            f"-A {SERVICE_CHAIN} -j {ENDPOINT_CHAIN}",
            f"-A {ENDPOINT_CHAIN} -p tcp -j DNAT --to-destination 10.240.0.2:6443",
        ],
    )
    cluster = FakeCluster(
        node_list=[
            node("node1", "10.244.2.0/24", "10.240.0.11"),
            node("node2", "10.244.1.0/24", "10.240.0.12"),
        ],
        leases={
            "node1": Lease(
                metadata=ObjectMeta(name="node1", namespace="kube-node-lease"),
                spec=LeaseSpec(
                    renew_time=micro_time(NOW - datetime.timedelta(seconds=5)),
                    lease_duration_seconds=40,
                ),
            )
        },
        service_list=[
            Service(
                metadata=ObjectMeta(namespace="default", name="kubernetes"),
                spec=ServiceSpec(
                    type="ClusterIP",
                    cluster_ip="10.96.0.1",
                    ports=[ServicePort(name="https", protocol="TCP", port=443)],
                ),
            )
        ],
        time=NOW,
    )
    return host, cluster


async def check_all(host: FakeHost, cluster: FakeCluster) -> dict[str, Result]:
    context = Context(host, cluster, CONFIG, api_host=API_HOST)
    return {r.check.name: r for r in await diagnose(CHECKS, context)}


async def test_a_healthy_node_passes_every_check() -> None:
    results = await check_all(*healthy())
    assert {n: r.finding.evidence for n, r in results.items() if r.finding.status != "pass"} == {}
    assert len(results) == len(CHECKS) == len({c.name for c in CHECKS})
    assert (
        "10.244.1.0/24 (node2) via 10.240.0.1 dev eth0"
        in results["pod-cidr-routes"].finding.evidence
    )


def set_file(path: str, text: str) -> Callable[[FakeHost, FakeCluster], None]:
    def breaks(host: FakeHost, _: FakeCluster) -> None:
        host.files[path] = text

    return breaks


def drop_file(path: str) -> Callable[[FakeHost, FakeCluster], None]:
    def breaks(host: FakeHost, _: FakeCluster) -> None:
        del host.files[path]

    return breaks


def leftover_chain(host: FakeHost, _: FakeCluster) -> None:
    host.tables["nft"].restore(
        "nat",
        [f":{STALE_CHAIN} - [0:0]", f"-A KUBE-SERVICES -d 10.96.9.9/32 -j {STALE_CHAIN}"],
    )


def legacy_rules_too(host: FakeHost, _: FakeCluster) -> None:
    host.tables["legacy"].restore("filter", ["-A FORWARD -j ACCEPT"])


def no_route(host: FakeHost, _: FakeCluster) -> None:
    del host.routes[PEER_POD]


def blackhole(host: FakeHost, _: FakeCluster) -> None:
    host.routes[PEER_POD] = Route("blackhole", "", None)


def stale_lease(_: FakeHost, cluster: FakeCluster) -> None:
    spec = cluster.leases["node1"].spec
    assert spec is not None
    spec.renew_time = micro_time(NOW - datetime.timedelta(seconds=90))


def no_lease(_: FakeHost, cluster: FakeCluster) -> None:
    cluster.leases.clear()


def skewed(host: FakeHost, _: FakeCluster) -> None:
    host.clock = NOW + datetime.timedelta(seconds=45)


def proxy_stuck(host: FakeHost, _: FakeCluster) -> None:
    host.http[CONFIG.proxy_healthz] = (503, json.dumps({"lastUpdated": None}))


def proxy_down(host: FakeHost, _: FakeCluster) -> None:
    host.http.clear()


def missing_commands(host: FakeHost, _: FakeCluster) -> None:
    host.commands -= {"conntrack", "socat"}


def runtime_down(host: FakeHost, _: FakeCluster) -> None:
    host.sockets.clear()


def no_kernel_option(host: FakeHost, _: FakeCluster) -> None:
    host.kernel = (host.kernel or "").replace(
        "CONFIG_BRIDGE_NETFILTER=y", "# CONFIG_BRIDGE_NETFILTER is not set"
    )


def big_mtu(host: FakeHost, _: FakeCluster) -> None:
    host.files[CONFLIST] = host.files[CONFLIST].replace('"mtu": 1500', '"mtu": 9000')


def odd_veth(host: FakeHost, _: FakeCluster) -> None:
    host.link_list[-1] = Link("veth1", 1450, "cni0")


def plugin_missing(host: FakeHost, _: FakeCluster) -> None:
    del host.files["/node/cni/bin/kubelab-cni"]


def cert(start_days: float, end_days: float) -> Callable[[FakeHost, FakeCluster], None]:
    day = datetime.timedelta(days=1)
    return set_file(
        "/node/pki/kubelet.pem", certificate(NOW + start_days * day, NOW + end_days * day)
    )


RP_ALL = "/proc/sys/net/ipv4/conf/all/rp_filter"
CASES = [
    (
        "ip-forward",
        set_file(sysctl_path("net.ipv4.ip_forward"), "0\n"),
        Status.FAIL,
        "net.ipv4.ip_forward = 0",
        True,
    ),
    (
        "bridge-nf-call-iptables",
        set_file(sysctl_path("net.bridge.bridge-nf-call-iptables"), "0\n"),
        Status.FAIL,
        "skips iptables",
        True,
    ),
    (
        "bridge-nf-call-iptables",
        drop_file(sysctl_path("net.bridge.bridge-nf-call-iptables")),
        Status.FAIL,
        "does not exist",
        False,
    ),
    (
        "route-localnet",
        set_file(sysctl_path("net.ipv4.conf.all.route_localnet"), "0\n"),
        Status.WARN,
        "127.0.0.1",
        True,
    ),
    (
        "swap",
        set_file("/proc/swaps", "Filename\tType\n/swapfile file 1024 0 -2\n"),
        Status.WARN,
        "/swapfile",
        False,
    ),
    ("commands", missing_commands, Status.FAIL, "not in PATH: conntrack", False),
    (
        "cgroups",
        set_file(
            "/proc/cgroups",
            "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t8\t1\nmemory\t4\t8\t0\n",
        ),
        Status.FAIL,
        "cpuacct, cpuset, memory, pids",
        False,
    ),
    ("kernel-config", no_kernel_option, Status.FAIL, "CONFIG_BRIDGE_NETFILTER", False),
    ("container-runtime", runtime_down, Status.FAIL, "does not answer", False),
    (
        "cgroup-driver",
        set_file("/node/containerd/config.toml", CONTAINERD_CONFIG.replace("false", "true")),
        Status.FAIL,
        "runc use the systemd cgroup driver",
        False,
    ),
    (
        "cgroup-driver",
        set_file("/node/containerd/config.toml", "version = = 2"),
        Status.FAIL,
        "not valid TOML",
        False,
    ),
    (
        "cni-config",
        drop_file(CONFLIST),
        Status.FAIL,
        "no CNI configuration in /node/cni/net.d",
        False,
    ),
    ("cni-config", set_file(CONFLIST, "{not json"), Status.FAIL, "is not JSON", False),
    (
        "cni-config",
        plugin_missing,
        Status.FAIL,
        "names plugins not in /node/cni/bin: kubelab-cni",
        False,
    ),
    (
        "resolv-conf",
        set_file("/node/resolv.conf", "nameserver 127.0.0.53\n"),
        Status.FAIL,
        "127.0.0.53",
        False,
    ),
    (
        "resolv-conf",
        set_file("/node/resolv.conf", "nameserver 10.96.0.10\n"),
        Status.FAIL,
        "10.96.0.10",
        False,
    ),
    (
        "resolv-conf",
        set_file("/node/resolv.conf", "# none\n"),
        Status.WARN,
        "names no nameserver",
        False,
    ),
    ("certificates", cert(-400, -1), Status.FAIL, "not valid now", False),
    ("certificates", cert(1, 300), Status.FAIL, "not valid now", False),
    ("certificates", cert(-300, 10), Status.WARN, "near the end of their lifetime", False),
    (
        "rp-filter",
        set_file(RP_ALL, "1\n"),
        Status.WARN,
        "strict rp_filter on all, default, eth0, lo",
        True,
    ),
    (
        "rp-filter",
        set_file("/proc/sys/net/ipv4/conf/eth0/rp_filter", "1\n"),
        Status.WARN,
        "strict rp_filter on eth0",
        True,
    ),
    ("iptables-backends", legacy_rules_too, Status.FAIL, "nft: 4 rules, legacy: 1 rules", False),
    (
        "conntrack",
        set_file(sysctl_path("net.netfilter.nf_conntrack_count"), "262144\n"),
        Status.FAIL,
        "262144 of 262144",
        False,
    ),
    (
        "conntrack",
        set_file(sysctl_path("net.netfilter.nf_conntrack_count"), "240000\n"),
        Status.WARN,
        "240000 of 262144",
        False,
    ),
    (
        "conntrack",
        set_file(sysctl_path("net.netfilter.nf_conntrack_max"), "65536\n"),
        Status.WARN,
        "minimum 131072",
        False,
    ),
    (
        "conntrack",
        drop_file(sysctl_path("net.netfilter.nf_conntrack_max")),
        Status.FAIL,
        "no conntrack table",
        False,
    ),
    (
        "pod-cidr-routes",
        no_route,
        Status.FAIL,
        "10.244.1.0/24 (node2): RTNETLINK answers: Network is unreachable",
        False,
    ),
    ("pod-cidr-routes", blackhole, Status.FAIL, "10.244.1.0/24 (node2): blackhole route", False),
    ("mtu", big_mtu, Status.FAIL, "mtu 9000", False),
    ("mtu", odd_veth, Status.WARN, "1450, 1500", False),
    (
        "leftover-service-rules",
        leftover_chain,
        Status.WARN,
        f"iptables-nft nat: {STALE_CHAIN}",
        True,
    ),
    ("clock-skew", skewed, Status.FAIL, "45.0s ahead of", False),
    ("node-lease", stale_lease, Status.FAIL, "renewed 90s ago", False),
    ("node-lease", no_lease, Status.FAIL, "no Lease kube-node-lease/node1", False),
    ("kube-proxy-sync", proxy_stuck, Status.FAIL, "503, no sync yet", False),
    ("kube-proxy-sync", proxy_down, Status.FAIL, "kube-proxy does not answer", False),
]


@pytest.mark.parametrize(
    ("name", "breaks", "status", "evidence", "safe"),
    CASES,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(CASES)],
)
async def test_a_broken_node_is_named_and_safe_fixes_repair_it(
    name: str,
    breaks: Callable[[FakeHost, FakeCluster], None],
    status: Status,
    evidence: str,
    safe: bool,
) -> None:
    host, cluster = healthy()
    breaks(host, cluster)
    results = await check_all(host, cluster)
    finding = results[name].finding
    assert (finding.status, finding.fix != "") == (status, True), finding
    assert evidence in finding.evidence
    assert {n for n, r in results.items() if r.finding.status != "pass"} == {name}
    assert (finding.repair is not None) == safe
    if safe:
        assert [(r.check.name, error) for r, error in repair(list(results.values()))] == [
            (name, None)
        ]
        assert (await check_all(host, cluster))[name].finding.status == "pass"


async def test_the_leftover_repair_removes_the_chain_and_the_jump_and_keeps_the_rest() -> None:
    host, cluster = healthy()
    leftover_chain(host, cluster)
    repair(list((await check_all(host, cluster)).values()))
    nat = host.tables["nft"].tables["nat"]
    assert STALE_CHAIN not in nat and not any(STALE_CHAIN in r for r in nat["KUBE-SERVICES"])
    assert {SERVICE_CHAIN, ENDPOINT_CHAIN} <= set(nat)


async def test_an_endpoint_chain_only_a_stale_service_chain_uses_is_stale_too() -> None:
    host, cluster = healthy()
    cluster.service_list.clear()
    finding = (await check_all(host, cluster))["leftover-service-rules"].finding
    assert f"{ENDPOINT_CHAIN}, {SERVICE_CHAIN}" in finding.evidence or (
        f"{SERVICE_CHAIN}, {ENDPOINT_CHAIN}" in finding.evidence
    )


async def test_nftables_chains_of_deleted_services_are_named_but_left_to_kube_proxy() -> None:
    host, cluster = healthy()
    base = "ABCDEFGH-gone/web/tcp/http"
    host.nft.tables["kube-proxy"] = FakeTable(chains={f"service-{base}": []})
    finding = (await check_all(host, cluster))["leftover-service-rules"].finding
    assert finding.status == "warn" and f"service-{base}" in finding.evidence
    assert finding.repair is None


async def test_a_node_name_that_is_no_dns_name_fails() -> None:
    host, cluster = healthy()
    context = Context(
        host, cluster, dataclasses.replace(CONFIG, node_name="Node_1"), api_host=API_HOST
    )
    results = {r.check.name: r.finding for r in await diagnose(CHECKS, context)}
    assert results["node-name"].status == "fail" and "'Node_1'" in results["node-name"].evidence


async def test_a_failed_read_is_the_checks_fail_and_hides_nothing_else() -> None:
    host, cluster = healthy()
    host.files[sysctl_path("net.ipv4.ip_forward")] = "0\n"

    async def unreachable() -> datetime.datetime:
        raise OSError("connection refused")

    cluster.server_time = unreachable  # type: ignore[method-assign]
    results = await check_all(host, cluster)
    assert results["clock-skew"].finding.status == "fail"
    assert (
        "could not read the API server's Date: connection refused"
        in results["clock-skew"].finding.evidence
    )
    assert results["ip-forward"].finding.status == "fail"


def test_the_table_and_json_say_each_finding_and_fix() -> None:
    results = [
        Result(
            CHECKS[0],
            Finding(Status.FAIL, "net.ipv4.ip_forward = 0: off", "sysctl -w x=1", lambda: None),
        ),
        Result(CHECKS[3], Finding(Status.PASS, "no swap in use")),
    ]
    lines = render("node1", results, [(results[0], None)])
    assert lines[0] == "fixed ip-forward"
    assert lines[1].split() == ["CHECK", "STATUS", "EVIDENCE"]
    assert lines[2].split()[:2] == ["ip-forward", "FAIL"]
    assert lines[3].strip() == "fix: sysctl -w x=1 (safe: --fix applies it)"
    assert lines[-1] == "node node1: 1 passed, 0 warnings, 1 failed"
    document = as_json("node1", results, [])
    assert document["checks"][0] == {
        "name": "ip-forward",
        "reads": "/proc/sys/net/ipv4/ip_forward",
        "status": "fail",
        "evidence": "net.ipv4.ip_forward = 0: off",
        "fix": "sysctl -w x=1",
        "safeFix": True,
    }
