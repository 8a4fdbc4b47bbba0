"""Pod DNS: policies, the cluster search path, dnsConfig merging and resolver limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from kube.api.kinds.core_v1.pod import Pod
from node.kubelet.runtime.dns import dns_config, parse_resolv_conf
from node.kubelet.runtime.options import NodeRuntimeOptions

HOST_RESOLV = """\
# the node's
nameserver 192.0.2.53
nameserver 192.0.2.54 ; comment
search corp.example. lab.example .
options timeout:2 attempts:3 timeout:1
"""
CLUSTER_SEARCH = ["ns.svc.cluster.local", "svc.cluster.local", "cluster.local"]
HOST_SEARCH = ["corp.example", "lab.example"]


def make_pod(**spec: Any) -> Pod:
    data = {"metadata": {"name": "web", "namespace": "ns", "uid": "u1"}, "spec": spec}
    return msgspec.convert(data, Pod)


@pytest.fixture
def resolv(tmp_path: Path) -> Path:
    path = tmp_path / "resolv.conf"
    path.write_text(HOST_RESOLV)
    return path


def options(resolv: Path, **fields: Any) -> NodeRuntimeOptions:
    base: dict[str, Any] = {"cluster_dns": ("10.96.0.10",), "resolv_conf": resolv}
    return NodeRuntimeOptions(node_name="n", node_ips=(), root_dir=Path("/r"), **base | fields)


def as_tuple(config: Any) -> tuple[list[str], list[str], list[str]]:
    return list(config.servers), list(config.searches), list(config.options)


def test_parse_resolv_conf() -> None:
    assert parse_resolv_conf(HOST_RESOLV) == (
        ["192.0.2.53", "192.0.2.54"],
        HOST_SEARCH,
        ["timeout:1", "attempts:3"],
    )


CLUSTER = (["10.96.0.10"], [*CLUSTER_SEARCH, *HOST_SEARCH], ["ndots:5"])
HOST = (["192.0.2.53", "192.0.2.54"], HOST_SEARCH, ["timeout:1", "attempts:3"])


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, CLUSTER, id="default-is-cluster-first"),
        pytest.param({"dnsPolicy": "ClusterFirst"}, CLUSTER, id="cluster-first"),
        pytest.param(
            {"dnsPolicy": "ClusterFirst", "hostNetwork": True}, HOST, id="cluster-first-host-net"
        ),
        pytest.param(
            {"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": True},
            CLUSTER,
            id="with-host-net",
        ),
        pytest.param({"dnsPolicy": "Default"}, HOST, id="default"),
        pytest.param(
            {"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"]}},
            (["1.1.1.1"], [], []),
            id="none",
        ),
        pytest.param(
            {
                "dnsConfig": {
                    "nameservers": ["10.96.0.10", "1.1.1.1"],
                    "searches": ["cluster.local", "extra.example"],
                    "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}],
                }
            },
            (
                ["10.96.0.10", "1.1.1.1"],
                [*CLUSTER_SEARCH, *HOST_SEARCH, "extra.example"],
                ["ndots:2", "edns0"],
            ),
            id="dns-config-merged",
        ),
        pytest.param(
            {"dnsPolicy": "Default", "dnsConfig": {"options": [{"name": "timeout"}]}},
            (HOST[0], HOST_SEARCH, ["timeout", "attempts:3"]),
            id="option-without-value-replaces",
        ),
    ],
)
def test_policies(resolv: Path, spec: dict[str, Any], expected: Any) -> None:
    config, warning = dns_config(make_pod(**spec), options(resolv))
    assert as_tuple(config) == expected
    assert warning is None


def test_no_cluster_dns_falls_back_to_default(resolv: Path) -> None:
    config, warning = dns_config(make_pod(), options(resolv, cluster_dns=()))
    assert as_tuple(config) == HOST
    assert warning == (
        "pod: web_ns(u1). kubelet does not have ClusterDNS IP configured and cannot create Pod "
        'using "ClusterFirst" policy. Falling back to "Default" policy.'
    )


def test_empty_cluster_domain_keeps_host_search(resolv: Path) -> None:
    config, _ = dns_config(make_pod(), options(resolv, cluster_domain=""))
    assert list(config.searches) == HOST_SEARCH


def test_missing_resolv_conf_reads_as_empty(tmp_path: Path) -> None:
    config, warning = dns_config(make_pod(dnsPolicy="Default"), options(tmp_path / "absent"))
    assert as_tuple(config) == ([], [], [])
    assert warning is None


@pytest.mark.parametrize(
    ("dns", "servers", "searches", "warning"),
    [
        pytest.param(
            {"nameservers": ["1.1.1.1", "1.1.1.2", "1.1.1.3"]},
            ["10.96.0.10", "1.1.1.1", "1.1.1.2"],
            [*CLUSTER_SEARCH, *HOST_SEARCH],
            "Nameserver limits were exceeded, some nameservers have been omitted, the applied "
            "nameserver line is: 10.96.0.10 1.1.1.1 1.1.1.2",
            id="nameservers",
        ),
        pytest.param(
            {"searches": [f"d{i}.example" for i in range(30)]},
            ["10.96.0.10"],
            [*CLUSTER_SEARCH, *HOST_SEARCH, *(f"d{i}.example" for i in range(27))],
            "Search Line limits were exceeded, some search paths have been omitted, the applied "
            "search line is: "
            + " ".join([*CLUSTER_SEARCH, *HOST_SEARCH, *(f"d{i}.example" for i in range(27))]),
            id="32-search-paths",
        ),
        pytest.param(
            {"searches": ["a" * 254, *(f"{c * 241}.example" for c in "bcdefghij")]},
            ["10.96.0.10"],
            [*CLUSTER_SEARCH, *HOST_SEARCH, *(f"{c * 241}.example" for c in "bcdefgh")],
            None,
            id="long-path-dropped-and-line-cut",
        ),
    ],
)
def test_limits(
    resolv: Path, dns: dict[str, Any], servers: list[str], searches: list[str], warning: str | None
) -> None:
    config, message = dns_config(make_pod(dnsConfig=dns), options(resolv))
    assert list(config.servers) == servers
    assert list(config.searches) == searches
    assert len(" ".join(config.searches)) <= 2048
    if warning is not None:
        assert message == warning
    else:
        assert message is not None and message.startswith("Search Line limits were exceeded")
