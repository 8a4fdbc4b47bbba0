"""The pod's hostname and its managed /etc/hosts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from kube.api.kinds.core_v1.pod import Pod
from node.kubelet.runtime.hosts import pod_hostname, write_etc_hosts
from node.kubelet.runtime.options import NodeRuntimeOptions

HEADER = (
    "# Kubernetes-managed hosts file.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
OPTIONS = NodeRuntimeOptions(node_name="n", node_ips=(), root_dir=Path("/r"))


def make_pod(name: str = "web", **spec: Any) -> Pod:
    data = {"metadata": {"name": name, "namespace": "ns", "uid": "u1"}, "spec": spec}
    return msgspec.convert(data, Pod)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod(), ("web", ""), id="pod-name"),
        pytest.param(make_pod(hostname="db-0"), ("db-0", ""), id="spec-hostname"),
        pytest.param(
            make_pod(hostname="db-0", subdomain="db"),
            ("db-0", "db.ns.svc.cluster.local"),
            id="subdomain",
        ),
        pytest.param(make_pod("a" * 62 + "-b"), ("a" * 62, ""), id="truncated-to-63-trailing-dash"),
        pytest.param(make_pod("a" * 61 + "-.bcd"), ("a" * 61, ""), id="trailing-dash-and-dot"),
    ],
)
def test_pod_hostname(pod: Pod, expected: tuple[str, str]) -> None:
    assert pod_hostname(pod, OPTIONS) == expected


@pytest.mark.parametrize(
    ("pod", "ips", "body"),
    [
        pytest.param(make_pod(), ["10.244.1.5"], "10.244.1.5\tweb\n", id="plain"),
        pytest.param(
            make_pod(hostname="db-0", subdomain="db"),
            ["10.244.1.5", "fd00::5"],
            "10.244.1.5\tdb-0.db.ns.svc.cluster.local\tdb-0\n"
            "fd00::5\tdb-0.db.ns.svc.cluster.local\tdb-0\n",
            id="dual-stack-subdomain",
        ),
        pytest.param(
            make_pod(hostAliases=[{"ip": "1.2.3.4", "hostnames": ["a.example", "b.example"]}]),
            ["10.244.1.5"],
            "10.244.1.5\tweb\n\n# Entries added by HostAliases.\n1.2.3.4\ta.example\tb.example\n",
            id="host-aliases",
        ),
        pytest.param(make_pod(), [], "", id="no-ip-yet"),
    ],
)
def test_write_etc_hosts(tmp_path: Path, pod: Pod, ips: list[str], body: str) -> None:
    options = NodeRuntimeOptions(node_name="n", node_ips=(), root_dir=tmp_path)
    path = write_etc_hosts(pod, ips, options)
    assert path == tmp_path / "pods" / "u1" / "etc-hosts"
    assert path.read_text() == HEADER + body
    assert path.stat().st_mode & 0o777 == 0o644
    assert write_etc_hosts(pod, ips, options) == path  # rewriting is fine
    assert [p.name for p in path.parent.iterdir()] == ["etc-hosts"]


def test_host_network_gets_none(tmp_path: Path) -> None:
    options = NodeRuntimeOptions(node_name="n", node_ips=(), root_dir=tmp_path)
    assert write_etc_hosts(make_pod(hostNetwork=True), ["192.0.2.1"], options) is None
    assert not (tmp_path / "pods").exists()
