"""The CNI protocol layer over a fake network and fake iptables: no root needed."""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from node.cni.network import (
    MASQ_CHAIN,
    Attached,
    Attachment,
    Link,
    NatRules,
    NetworkError,
    hostport_chain,
)
from node.cni.plugin import Plugin, Reply
from node.iptables import FakeIptables

CID = "0123456789abcdef"
NETNS = "/run/netns/pod-a"


class FakeNetwork:
    def __init__(self) -> None:
        self.attached: dict[tuple[str, str], Attachment] = {}
        self.fail_attach = False

    def attach(self, attachment: Attachment) -> Attached:
        if self.fail_attach:
            raise NetworkError("veth add: boom")
        self.attached[(attachment.container_id, attachment.ifname)] = attachment
        return Attached(
            bridge=Link(attachment.bridge, "aa:00:00:00:00:01"),
            host=Link("veth0123456789a", "aa:00:00:00:00:02"),
            pod=Link(attachment.ifname, "aa:00:00:00:00:03", sandbox=attachment.netns),
        )

    def detach(self, container_id: str, ifname: str) -> None:
        self.attached.pop((container_id, ifname), None)

    def check(self, attachment: Attachment) -> None:
        if self.attached.get((attachment.container_id, attachment.ifname)) != attachment:
            raise NetworkError("not attached")


@pytest.fixture
def network() -> FakeNetwork:
    return FakeNetwork()


@pytest.fixture
def iptables() -> FakeIptables:
    return FakeIptables()


@pytest.fixture
def plugin(network: FakeNetwork, iptables: FakeIptables) -> Plugin:
    return Plugin(network, NatRules(iptables))


def conf(tmp_path: Path, version: str = "1.0.0", **extra: Any) -> dict[str, Any]:
    return {
        "cniVersion": version,
        "name": "kubelab",
        "type": "kubelab",
        "dataDir": str(tmp_path),
        "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.1.0/24"}]]},
        **extra,
    }


def call(plugin: Plugin, command: str, config: dict[str, Any], **env: str) -> Reply:
    environ = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": CID,
        "CNI_NETNS": NETNS,
        "CNI_IFNAME": "eth0",
        "CNI_PATH": "/opt/cni/bin",
        **env,
    }
    return plugin.run(environ, json.dumps(config).encode())


def test_add_result_shape_1_0_0(plugin: Plugin, tmp_path: Path) -> None:
    reply = call(plugin, "ADD", conf(tmp_path))
    assert reply.exit_code == 0
    assert json.loads(reply.stdout) == {
        "cniVersion": "1.0.0",
        "interfaces": [
            {"name": "cni0", "mac": "aa:00:00:00:00:01"},
            {"name": "veth0123456789a", "mac": "aa:00:00:00:00:02"},
            {"name": "eth0", "mac": "aa:00:00:00:00:03", "sandbox": NETNS},
        ],
        "ips": [{"address": "10.244.1.2/24", "gateway": "10.244.1.1", "interface": 2}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.244.1.1"}],
        "dns": {},
    }


def test_add_result_shape_0_4_0_has_ip_version(plugin: Plugin, tmp_path: Path) -> None:
    result = json.loads(call(plugin, "ADD", conf(tmp_path, "0.4.0")).stdout)
    assert result["cniVersion"] == "0.4.0"
    assert result["ips"] == [
        {"version": "4", "address": "10.244.1.2/24", "gateway": "10.244.1.1", "interface": 2}
    ]


@pytest.mark.parametrize(
    ("extra", "bridge", "mtu", "hairpin", "gateway", "address"),
    [
        pytest.param({}, "cni0", 1500, True, "10.244.1.1/24", "10.244.1.2/24", id="defaults"),
        pytest.param(
            {"bridge": "br9", "mtu": 1400, "hairpinMode": False},
            "br9",
            1400,
            False,
            "10.244.1.1/24",
            "10.244.1.2/24",
            id="bridge-mtu-hairpin",
        ),
        pytest.param(
            {"ipam": {}, "subnet": "10.9.0.0/16"},
            "cni0",
            1500,
            True,
            "10.9.0.1/16",
            "10.9.0.2/16",
            id="subnet-key",
        ),
        pytest.param(
            {"ipam": {}, "podCIDR": "10.8.0.0/24", "gateway": "10.8.0.254"},
            "cni0",
            1500,
            True,
            "10.8.0.254/24",
            "10.8.0.1/24",
            id="podcidr-key-and-gateway",
        ),
    ],
)
def test_config_parsing(
    plugin: Plugin,
    network: FakeNetwork,
    tmp_path: Path,
    extra: dict[str, Any],
    bridge: str,
    mtu: int,
    hairpin: bool,
    gateway: str,
    address: str,
) -> None:
    assert call(plugin, "ADD", conf(tmp_path, **extra)).exit_code == 0
    attachment = network.attached[(CID, "eth0")]
    assert (attachment.bridge, attachment.mtu, attachment.hairpin) == (bridge, mtu, hairpin)
    assert (str(attachment.gateway), str(attachment.address)) == (gateway, address)


@pytest.mark.parametrize(
    ("stdin", "env", "code"),
    [
        pytest.param(b"{not json", {}, 6, id="not-json"),
        pytest.param(b"[1]", {}, 6, id="not-an-object"),
        pytest.param(b'{"cniVersion": "0.3.1", "name": "n"}', {}, 1, id="old-version"),
        pytest.param(b'{"name": "n"}', {}, 1, id="no-version"),
        pytest.param(b'{"cniVersion": "1.0.0", "name": "n"}', {}, 7, id="no-subnet"),
        pytest.param(
            b'{"cniVersion": "1.0.0", "name": "n", "subnet": "10.0.0.0/33"}', {}, 7, id="bad-cidr"
        ),
        pytest.param(
            b'{"cniVersion": "1.0.0", "name": "n", "subnet": "10.0.0.0/24", "mtu": 10}',
            {},
            7,
            id="bad-mtu",
        ),
        pytest.param(b'{"cniVersion": "1.0.0", "subnet": "10.0.0.0/24"}', {}, 7, id="no-name"),
        pytest.param(
            b'{"cniVersion": "1.0.0", "name": "n", "subnet": "10.0.0.0/31"}',
            {},
            7,
            id="range-too-small",
        ),
        pytest.param(b"{}", {"CNI_COMMAND": "FROB"}, 4, id="unknown-command"),
        pytest.param(b"{}", {"CNI_NETNS": ""}, 4, id="add-without-netns"),
    ],
)
def test_errors(plugin: Plugin, stdin: bytes, env: dict[str, str], code: int) -> None:
    environ = {
        "CNI_COMMAND": "ADD",
        "CNI_CONTAINERID": CID,
        "CNI_NETNS": NETNS,
        "CNI_IFNAME": "eth0",
        **env,
    }
    reply = plugin.run(environ, stdin)
    assert reply.exit_code == 1
    error = json.loads(reply.stdout)
    assert set(error) <= {"cniVersion", "code", "msg", "details"}
    assert error["code"] == code
    assert error["msg"]


def test_error_echoes_requested_version(plugin: Plugin) -> None:
    reply = plugin.run({"CNI_COMMAND": "ADD"}, b'{"cniVersion": "0.4.0"}')
    assert json.loads(reply.stdout)["cniVersion"] == "0.4.0"


@pytest.mark.parametrize(
    ("stdin", "version"),
    [
        pytest.param(b"", "1.0.0", id="empty-stdin"),
        pytest.param(b'{"cniVersion": "0.4.0"}', "0.4.0", id="echo"),
    ],
)
def test_version(plugin: Plugin, stdin: bytes, version: str) -> None:
    reply = plugin.run({"CNI_COMMAND": "VERSION"}, stdin)
    assert reply == Reply(
        0, json.dumps({"cniVersion": version, "supportedVersions": ["0.4.0", "1.0.0"]})
    )


def test_add_is_idempotent(plugin: Plugin, tmp_path: Path) -> None:
    first = call(plugin, "ADD", conf(tmp_path))
    assert call(plugin, "ADD", conf(tmp_path)) == first


def test_del_twice_and_without_netns_releases(
    plugin: Plugin, network: FakeNetwork, tmp_path: Path
) -> None:
    call(plugin, "ADD", conf(tmp_path))
    assert call(plugin, "DEL", conf(tmp_path)) == Reply(0, "")
    assert call(plugin, "DEL", conf(tmp_path), CNI_NETNS="") == Reply(0, "")
    assert network.attached == {}
    assert not list((tmp_path / "networks" / "kubelab").glob("10.*"))


def test_failed_add_releases_the_address(
    plugin: Plugin, network: FakeNetwork, tmp_path: Path
) -> None:
    network.fail_attach = True
    reply = call(plugin, "ADD", conf(tmp_path))
    assert json.loads(reply.stdout)["code"] == 100
    assert not list((tmp_path / "networks" / "kubelab").glob("10.*"))


def test_exhausted_range_is_try_again_later(plugin: Plugin, tmp_path: Path) -> None:
    config = conf(tmp_path, ipam={}, subnet="10.0.0.0/30")  # one pod address
    assert call(plugin, "ADD", config).exit_code == 0
    reply = call(plugin, "ADD", config, CNI_CONTAINERID="other")
    assert json.loads(reply.stdout)["code"] == 11


def test_check(plugin: Plugin, network: FakeNetwork, tmp_path: Path) -> None:
    result = json.loads(call(plugin, "ADD", conf(tmp_path)).stdout)
    assert call(plugin, "CHECK", conf(tmp_path, prevResult=result)) == Reply(0, "")
    network.attached.clear()
    assert (
        json.loads(call(plugin, "CHECK", conf(tmp_path, prevResult=result)).stdout)["code"] == 100
    )
    stale = {**result, "ips": [{"address": "10.244.1.9/24", "interface": 2}]}
    assert call(plugin, "CHECK", conf(tmp_path, prevResult=stale)).exit_code == 1


def test_masquerade_chain_is_rewritten_and_jumped_to_once(
    plugin: Plugin, iptables: FakeIptables, tmp_path: Path
) -> None:
    config = conf(tmp_path, clusterCIDR="10.244.0.0/16")
    call(plugin, "ADD", config)
    call(plugin, "ADD", config, CNI_CONTAINERID="other")
    assert iptables.rules("nat", "POSTROUTING") == ["-A POSTROUTING -j KUBELAB-CNI-MASQ"]
    assert iptables.rules("nat", "KUBELAB-CNI-MASQ") == [
        "-A KUBELAB-CNI-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE",
        "-A KUBELAB-CNI-MASQ -s 10.244.1.0/24 ! -d 10.244.0.0/16 -j MASQUERADE",
    ]


def test_no_nat_no_iptables(plugin: Plugin, iptables: FakeIptables, tmp_path: Path) -> None:
    call(plugin, "ADD", conf(tmp_path))
    call(plugin, "DEL", conf(tmp_path))
    assert iptables.restores == []


def test_host_ports_added_and_removed(
    plugin: Plugin, iptables: FakeIptables, tmp_path: Path
) -> None:
    mappings = [
        {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
        {"hostPort": 5353, "containerPort": 53, "protocol": "UDP", "hostIP": "192.0.2.1"},
    ]
    config = conf(tmp_path, runtimeConfig={"portMappings": mappings})
    chain = hostport_chain(CID, "eth0")
    assert len(chain) <= 28
    call(plugin, "ADD", config)
    call(plugin, "ADD", config)
    assert iptables.rules("nat", chain) == [
        f"-A {chain} -s 10.244.1.2/32 -j MARK --set-xmark 0x2000/0x2000",
        f"-A {chain} -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.244.1.2:80",
        f"-A {chain} -d 192.0.2.1 -p udp -m udp --dport 5353 "
        "-j DNAT --to-destination 10.244.1.2:53",
    ]
    for parent in ("PREROUTING", "OUTPUT"):
        assert iptables.rules("nat", parent) == [
            f"-A {parent} -m addrtype --dst-type LOCAL -j {chain}"
        ]
    call(plugin, "DEL", config)
    call(plugin, "DEL", config)
    assert chain not in iptables.tables["nat"]
    assert iptables.rules("nat", "PREROUTING") == iptables.rules("nat", "OUTPUT") == []


class SlowSave(FakeIptables):
    """Saves take a while, so two writers racing through save → decide → restore overlap."""

    def save(self, table: str) -> str:
        saved = super().save(table)
        time.sleep(0.05)
        return saved


def test_pods_set_up_at_once_add_the_masquerade_jump_once() -> None:
    iptables = SlowSave()
    rules = NatRules(iptables)
    cidr, cluster = ipaddress.IPv4Network("10.244.1.0/24"), ipaddress.IPv4Network("10.244.0.0/16")

    def add(n: int) -> None:
        rules.add(f"c{n}", "eth0", ipaddress.IPv4Address(f"10.244.1.{n}"), cidr, cluster, [])

    threads = [threading.Thread(target=add, args=(n,)) for n in (2, 3, 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert iptables.rules("nat", "POSTROUTING").count(f"-A POSTROUTING -j {MASQ_CHAIN}") == 1
