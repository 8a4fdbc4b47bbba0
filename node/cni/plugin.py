"""The CNI protocol of ``kubelab-cni``: environment + stdin in, result or error JSON out.

The runtime runs the executable once per operation with ``CNI_COMMAND`` (ADD, DEL, CHECK,
VERSION), ``CNI_CONTAINERID``, ``CNI_NETNS``, ``CNI_IFNAME`` (``CNI_ARGS`` and ``CNI_PATH`` are
accepted and unused: this plugin delegates to no other) and the network config on stdin, e.g.::

    {"cniVersion": "1.0.0", "name": "kubelab", "type": "kubelab", "bridge": "cni0",
     "mtu": 1500, "hairpinMode": true, "dataDir": "/var/lib/kubelab/cni",
     "clusterCIDR": "10.244.0.0/16",
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.1.0/24"}]]}}

The podCIDR comes from ``ipam.ranges[0][0].subnet`` (so the same file also drives the
reference ``bridge`` + ``host-local`` plugins), or from a top-level ``subnet`` or ``podCIDR``.
``clusterCIDR`` turns on masquerade of traffic leaving it; ``runtimeConfig.portMappings`` (the
``portMappings`` capability) adds hostPort DNAT, and is removed on DEL when the runtime passes
it again (containerd does).

Results follow spec 1.0.0 or 0.4.0, whichever the config's ``cniVersion`` names: interfaces
bridge, host veth, pod ``eth0`` carrying ``sandbox`` (containerd reads the pod IP through
``ips[].interface`` pointing at it), one IPv4 address with the bridge as gateway, a default
route.  Errors are ``{"cniVersion", "code", "msg", "details"}`` with the spec's codes, on
stdout with exit code 1.

Semantics the runtime relies on: ADD is idempotent per (container id, ifname) — the same
address, the pair rebuilt; a failed ADD releases what it took; DEL is idempotent, needs no
netns and is safe when the netns or link is already gone, and frees the address last so that a
failed DEL is retried rather than leaking.
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, TypeVar

from node.cni.ipam import HostLocalIPAM, IPAMError, RangeExhausted
from node.cni.network import (
    Attached,
    Attachment,
    NatRules,
    NetworkError,
    PodNetwork,
    PortMapping,
    Pyroute2Network,
)
from node.iptables import RestoreIptables

T = TypeVar("T")

SUPPORTED_VERSIONS = ("0.4.0", "1.0.0")
DEFAULT_VERSION = "1.0.0"
DEFAULT_BRIDGE = "cni0"
DEFAULT_MTU = 1500
DEFAULT_DATA_DIR = "/var/lib/kubelab/cni"

# Error codes of the CNI spec (1-99 are the spec's; 100 and up are this plugin's).
ERR_INCOMPATIBLE_VERSION = 1
ERR_INVALID_ENVIRONMENT = 4
ERR_IO = 5
ERR_DECODE = 6
ERR_INVALID_CONFIG = 7
ERR_TRY_AGAIN_LATER = 11
ERR_NETWORK = 100

REQUIRED_ENV = {
    "ADD": ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"),
    "CHECK": ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"),
    "DEL": ("CNI_CONTAINERID", "CNI_IFNAME"),
    "VERSION": (),
}


class CniError(Exception):
    """An error the plugin reports to the runtime with a spec error code."""

    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.code = code
        self.msg = msg
        self.details = details


@dataclass(frozen=True)
class NetConf:
    """The parts of the network config this plugin reads."""

    cni_version: str
    name: str
    subnet: ipaddress.IPv4Network
    gateway: ipaddress.IPv4Address
    bridge: str = DEFAULT_BRIDGE
    mtu: int = DEFAULT_MTU
    hairpin: bool = True
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    cluster_cidr: ipaddress.IPv4Network | None = None
    port_mappings: tuple[PortMapping, ...] = ()
    prev_result: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Invocation:
    """The CNI environment variables of one call."""

    command: str
    container_id: str = ""
    netns: str = ""
    ifname: str = ""


class Reply(NamedTuple):
    """What the executable prints and the exit code it ends with."""

    exit_code: int
    stdout: str

    def output(self) -> bytes:
        """The bytes the executable writes to stdout: the JSON and a newline, or nothing."""
        return (self.stdout + "\n").encode() if self.stdout else b""


def parse_invocation(env: Mapping[str, str]) -> Invocation:
    """The call's environment; CniError(4) when a variable its command needs is missing."""
    command = env.get("CNI_COMMAND", "")
    if command not in REQUIRED_ENV:
        raise CniError(ERR_INVALID_ENVIRONMENT, f"unknown CNI_COMMAND {command!r}")
    missing = [name for name in REQUIRED_ENV[command] if not env.get(name)]
    if missing:
        raise CniError(ERR_INVALID_ENVIRONMENT, f"{command} needs {', '.join(missing)}")
    return Invocation(
        command=command,
        container_id=env.get("CNI_CONTAINERID", ""),
        netns=env.get("CNI_NETNS", ""),
        ifname=env.get("CNI_IFNAME", ""),
    )


def decode(stdin: bytes) -> dict[str, Any]:
    """The JSON object on stdin; CniError(6) when it is not one."""
    try:
        raw = json.loads(stdin or b"{}")
    except ValueError as e:
        raise CniError(ERR_DECODE, "network config is not JSON", str(e)) from e
    if not isinstance(raw, dict):
        raise CniError(ERR_DECODE, "network config is not a JSON object")
    return raw


def negotiate(raw: Mapping[str, Any]) -> str:
    """The config's cniVersion; CniError(1) unless this plugin speaks it."""
    version = raw.get("cniVersion", "")
    if version not in SUPPORTED_VERSIONS:
        raise CniError(
            ERR_INCOMPATIBLE_VERSION,
            f"incompatible CNI version {version!r}",
            f"supported versions: {', '.join(SUPPORTED_VERSIONS)}",
        )
    return str(version)


def parse_netconf(raw: Mapping[str, Any]) -> NetConf:
    """The network config; CniError(1) for a version, CniError(7) for anything invalid."""
    version = negotiate(raw)
    try:
        return _parse_netconf(version, raw)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise CniError(
            ERR_INVALID_CONFIG, "invalid network config", f"{type(e).__name__}: {e}"
        ) from e


def _parse_netconf(version: str, raw: Mapping[str, Any]) -> NetConf:
    name = raw["name"]
    if not isinstance(name, str) or not name:
        raise ValueError("name must be a non-empty string")
    ipam = raw.get("ipam") or {}
    first_range = ipam["ranges"][0][0] if ipam.get("ranges") else {}
    subnet_text = (
        first_range.get("subnet") or ipam.get("subnet") or raw.get("subnet") or raw["podCIDR"]
    )
    subnet = ipaddress.IPv4Network(subnet_text)
    gateway_text = first_range.get("gateway") or ipam.get("gateway") or raw.get("gateway")
    gateway = ipaddress.IPv4Address(gateway_text) if gateway_text else subnet.network_address + 1
    cluster_cidr = raw.get("clusterCIDR")
    mtu = int(raw.get("mtu", DEFAULT_MTU))
    if not 68 <= mtu <= 65535:
        raise ValueError(f"mtu {mtu} out of range")
    runtime_config = raw.get("runtimeConfig") or {}
    return NetConf(
        cni_version=version,
        name=name,
        subnet=subnet,
        gateway=gateway,
        bridge=str(raw.get("bridge", DEFAULT_BRIDGE)),
        mtu=mtu,
        hairpin=bool(raw.get("hairpinMode", True)),
        data_dir=Path(raw.get("dataDir") or ipam.get("dataDir") or DEFAULT_DATA_DIR),
        cluster_cidr=ipaddress.IPv4Network(cluster_cidr) if cluster_cidr else None,
        port_mappings=tuple(
            PortMapping(
                host_port=int(m["hostPort"]),
                container_port=int(m["containerPort"]),
                protocol=str(m.get("protocol") or "tcp"),
                host_ip=str(m.get("hostIP") or ""),
            )
            for m in runtime_config.get("portMappings") or ()
        ),
        prev_result=raw.get("prevResult") or {},
    )


def format_result(
    version: str, attached: Attached, address: ipaddress.IPv4Interface, gateway: str
) -> dict[str, Any]:
    """The ADD result in the shape of spec ``version`` (0.4.0 adds ``ips[].version``)."""
    interfaces = [
        {"name": link.name, "mac": link.mac, **({"sandbox": link.sandbox} if link.sandbox else {})}
        for link in (attached.bridge, attached.host, attached.pod)
    ]
    ip: dict[str, Any] = {"address": str(address), "gateway": gateway, "interface": 2}
    if version == "0.4.0":
        ip = {"version": "4", **ip}
    return {
        "cniVersion": version,
        "interfaces": interfaces,
        "ips": [ip],
        "routes": [{"dst": "0.0.0.0/0", "gw": gateway}],
        "dns": {},
    }


def format_error(version: str, error: CniError) -> dict[str, Any]:
    """The error JSON of the spec."""
    out: dict[str, Any] = {"cniVersion": version, "code": error.code, "msg": error.msg}
    if error.details:
        out["details"] = error.details
    return out


class Plugin:
    """ADD/DEL/CHECK/VERSION over a :class:`PodNetwork` and :class:`NatRules`."""

    def __init__(self, network: PodNetwork, nat: NatRules) -> None:
        self.network = network
        self.nat = nat

    def run(self, env: Mapping[str, str], stdin: bytes) -> Reply:
        """One CNI call: never raises, every failure becomes an error reply."""
        version = DEFAULT_VERSION
        try:
            raw = decode(stdin)
            if isinstance(raw.get("cniVersion"), str) and raw["cniVersion"]:
                version = raw["cniVersion"]
            invocation = parse_invocation(env)
            if invocation.command == "VERSION":
                return self._reply(
                    {"cniVersion": version, "supportedVersions": list(SUPPORTED_VERSIONS)}
                )
            conf = parse_netconf(raw)
            handler = self._handlers()[invocation.command]
            return self._reply(handler(conf, invocation))
        except CniError as e:
            return Reply(1, json.dumps(format_error(version, e)))

    def add(self, conf: NetConf, invocation: Invocation) -> dict[str, Any]:
        ipam = self._ipam(conf)
        address = _ipam_call(lambda: ipam.allocate(invocation.container_id, invocation.ifname))
        try:
            attached = self.network.attach(self._attachment(conf, invocation, address))
            self.nat.add(
                invocation.container_id,
                invocation.ifname,
                address.ip,
                conf.subnet,
                conf.cluster_cidr,
                conf.port_mappings,
            )
        except NetworkError as e:
            self._teardown(conf, invocation, ipam)
            raise CniError(ERR_NETWORK, "pod network setup failed", str(e)) from e
        return format_result(conf.cni_version, attached, address, str(conf.gateway))

    def delete(self, conf: NetConf, invocation: Invocation) -> None:
        try:
            self._teardown(conf, invocation, self._ipam(conf))
        except NetworkError as e:
            raise CniError(ERR_NETWORK, "pod network teardown failed", str(e)) from e

    def check(self, conf: NetConf, invocation: Invocation) -> None:
        ipam = self._ipam(conf)
        address = _ipam_call(lambda: ipam.get(invocation.container_id, invocation.ifname))
        if address is None:
            raise CniError(ERR_NETWORK, f"no address allocated for {invocation.container_id}")
        reported = {ip.get("address") for ip in conf.prev_result.get("ips") or ()}
        if str(address) not in reported:
            raise CniError(ERR_NETWORK, f"prevResult does not report address {address}")
        try:
            self.network.check(self._attachment(conf, invocation, address))
        except NetworkError as e:
            raise CniError(ERR_NETWORK, "pod network check failed", str(e)) from e

    def _handlers(self) -> dict[str, Callable[[NetConf, Invocation], dict[str, Any] | None]]:
        return {"ADD": self.add, "DEL": self.delete, "CHECK": self.check}

    def _teardown(self, conf: NetConf, invocation: Invocation, ipam: HostLocalIPAM) -> None:
        if conf.port_mappings:
            self.nat.remove(invocation.container_id, invocation.ifname)
        self.network.detach(invocation.container_id, invocation.ifname)
        _ipam_call(lambda: ipam.release(invocation.container_id, invocation.ifname))

    @staticmethod
    def _ipam(conf: NetConf) -> HostLocalIPAM:
        return _ipam_call(
            lambda: HostLocalIPAM(conf.data_dir, conf.name, conf.subnet, conf.gateway)
        )

    @staticmethod
    def _attachment(
        conf: NetConf, invocation: Invocation, address: ipaddress.IPv4Interface
    ) -> Attachment:
        return Attachment(
            container_id=invocation.container_id,
            netns=invocation.netns,
            ifname=invocation.ifname,
            bridge=conf.bridge,
            gateway=ipaddress.IPv4Interface(f"{conf.gateway}/{conf.subnet.prefixlen}"),
            address=address,
            mtu=conf.mtu,
            hairpin=conf.hairpin,
        )

    @staticmethod
    def _reply(result: dict[str, Any] | None) -> Reply:
        return Reply(0, json.dumps(result) if result is not None else "")


def _ipam_call(call: Callable[[], T]) -> T:
    """Run an IPAM call, mapping its failures to CNI error codes."""
    try:
        return call()
    except RangeExhausted as e:
        raise CniError(ERR_TRY_AGAIN_LATER, "pod address range exhausted", str(e)) from e
    except IPAMError as e:
        raise CniError(ERR_INVALID_CONFIG, "invalid address range", str(e)) from e
    except OSError as e:
        raise CniError(ERR_IO, "IPAM state I/O failed", str(e)) from e


def node_plugin() -> Plugin:
    """The plugin over the real netlink and iptables of the current (node) netns."""
    return Plugin(Pyroute2Network(), NatRules(RestoreIptables()))


def main() -> NoReturn:
    """The plugin in-process, as one executable run (the shim's fallback does the same)."""
    reply = node_plugin().run(os.environ, sys.stdin.buffer.read())
    sys.stdout.buffer.write(reply.output())
    sys.stdout.flush()
    sys.exit(reply.exit_code)
