"""Deterministic chain names of the kube-proxy, spelled as upstream's proxiers do.

iptables mode: a chain name is a fixed prefix and the first 16 characters of
base32(sha256(key)), where the key is the service port name (``namespace/name:port``, or
``namespace/name`` for an unnamed port) and the lower-case protocol, plus ``ip:port`` for an
endpoint.  Hashing keeps every name within iptables' 28-character limit; determinism lets a
restarted proxy find and reuse the chains it wrote before, and recognise the stale ones by
prefix.

nftables mode (its own table, so no ``KUBE-`` prefix; names up to 256 characters): a prefix
(``service-``, ``local-``, ``external-``, ``firewall-``, ``endpoint-``, ``affinity-``) and a
readable base, ``HASH-namespace/name/protocol/port`` or, for an endpoint,
``HASH-namespace/name/protocol/port__ip/port``, where HASH is the first 8 characters of the
same base32(sha256) of the rest (names that differ in one digit stay easy to tell apart).
Only these names contain ``/``, which is how stale ones are recognised.
"""

from __future__ import annotations

import base64
import hashlib

from node.proxy.model import ServicePortName

SERVICES = "KUBE-SERVICES"
EXTERNAL_SERVICES = "KUBE-EXTERNAL-SERVICES"
NODEPORTS = "KUBE-NODEPORTS"
POSTROUTING = "KUBE-POSTROUTING"
MARK_MASQ = "KUBE-MARK-MASQ"
FORWARD = "KUBE-FORWARD"
PROXY_FIREWALL = "KUBE-PROXY-FIREWALL"

SERVICE_PREFIX = "KUBE-SVC-"
LOCAL_PREFIX = "KUBE-SVL-"
EXTERNAL_PREFIX = "KUBE-EXT-"
FIREWALL_PREFIX = "KUBE-FW-"
ENDPOINT_PREFIX = "KUBE-SEP-"
PER_SERVICE_PREFIXES = (
    SERVICE_PREFIX,
    LOCAL_PREFIX,
    EXTERNAL_PREFIX,
    FIREWALL_PREFIX,
    ENDPOINT_PREFIX,
)
"""Prefixes of the chains the proxier owns per service port and endpoint."""


def port_proto_hash(service_port_name: str, protocol: str) -> str:
    """The 16-character hash of a service port name and its protocol."""
    return _hash(service_port_name + protocol.lower())


def service_chain(service_port_name: str, protocol: str) -> str:
    """KUBE-SVC-*: every usable endpoint (the Cluster traffic policy)."""
    return SERVICE_PREFIX + port_proto_hash(service_port_name, protocol)


def local_chain(service_port_name: str, protocol: str) -> str:
    """KUBE-SVL-*: the node's own endpoints (the Local traffic policy)."""
    return LOCAL_PREFIX + port_proto_hash(service_port_name, protocol)


def external_chain(service_port_name: str, protocol: str) -> str:
    """KUBE-EXT-*: traffic to NodePorts, external IPs and load-balancer IPs."""
    return EXTERNAL_PREFIX + port_proto_hash(service_port_name, protocol)


def firewall_chain(service_port_name: str, protocol: str) -> str:
    """KUBE-FW-*: load-balancer traffic checked against loadBalancerSourceRanges."""
    return FIREWALL_PREFIX + port_proto_hash(service_port_name, protocol)


def endpoint_chain(service_port_name: str, protocol: str, endpoint: str) -> str:
    """KUBE-SEP-*: DNAT to one endpoint (``ip:port``) of a service port."""
    return ENDPOINT_PREFIX + _hash(service_port_name + protocol.lower() + endpoint)


NFT_SERVICE_PREFIX = "service-"
NFT_LOCAL_PREFIX = "local-"
NFT_EXTERNAL_PREFIX = "external-"
NFT_FIREWALL_PREFIX = "firewall-"
NFT_ENDPOINT_PREFIX = "endpoint-"
NFT_AFFINITY_PREFIX = "affinity-"
NFT_BASE_MAX = 256 - 16
"""nftables names are at most 256 characters; prefixes at most 16."""


def nft_service_base(service_port_name: ServicePortName) -> str:
    """``HASH-namespace/name/protocol/port``: the base of a service port's chain names."""
    name = service_port_name
    return _nft_base(f"{name.namespace}/{name.name}/{name.protocol.lower()}/{name.port}")


def nft_endpoint_base(service_port_name: ServicePortName, ip: str, port: int) -> str:
    """``HASH-namespace/name/protocol/port__ip/port``: an endpoint chain's (and its
    affinity set's) base."""
    name = service_port_name
    service = f"{name.namespace}/{name.name}/{name.protocol.lower()}/{name.port}"
    return _nft_base(f"{service}__{ip}/{port}")


def is_nft_per_service(name: str) -> bool:
    """Whether ``name`` is an nftables chain or set the proxier writes per service port."""
    return "/" in name


def _nft_base(name: str) -> str:
    based = f"{_hash(name)[:8]}-{name}"
    return based if len(based) <= NFT_BASE_MAX else based[: NFT_BASE_MAX - 3] + "..."


def is_per_service(chain: str) -> bool:
    """Whether ``chain`` is one the proxier writes per service port or endpoint."""
    return chain.startswith(PER_SERVICE_PREFIXES)


def _hash(key: str) -> str:
    # 10 bytes are exactly 16 base32 characters: the same prefix, a third of the encoding.
    digest = hashlib.sha256(key.encode()).digest()
    return base64.b32encode(digest[:10]).decode()
