"""Deterministic iptables chain names of the kube-proxy, spelled as upstream's proxier does.

A chain name is a fixed prefix and the first 16 characters of base32(sha256(key)), where the
key is the service port name (``namespace/name:port``, or ``namespace/name`` for an unnamed
port) and the lower-case protocol, plus ``ip:port`` for an endpoint.  Hashing keeps every name
within iptables' 28-character limit; determinism lets a restarted proxy find and reuse the
chains it wrote before, and recognise the stale ones by prefix.
"""

from __future__ import annotations

import base64
import hashlib

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


def is_per_service(chain: str) -> bool:
    """Whether ``chain`` is one the proxier writes per service port or endpoint."""
    return chain.startswith(PER_SERVICE_PREFIXES)


def _hash(key: str) -> str:
    # 10 bytes are exactly 16 base32 characters: the same prefix, a third of the encoding.
    digest = hashlib.sha256(key.encode()).digest()
    return base64.b32encode(digest[:10]).decode()
