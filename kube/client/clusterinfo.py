"""``kube-public/cluster-info``: what a new node learns about the cluster from a token alone.

The control plane publishes a kubeconfig there holding the API server's URL and the cluster CA,
and nothing else (no credentials): anyone may read it, anonymously.  The bootstrap-signer
controller adds ``jws-kubeconfig-<token id>``, a detached JWS of that kubeconfig (``jws``), for
every bootstrap token allowed to sign.  This is kubeadm's token discovery
(``kubeadm join --token ... --discovery-token-ca-cert-hash sha256:...``):

1. read cluster-info without trusting the server (nothing to trust it with yet);
2. ``verify``: the signature made with the token proves the kubeconfig comes from someone
   who knows the token; the hash of the CA's public key, given out of band like the token,
   proves the CA is the cluster's (the token alone would let anyone holding it, a
   compromised node for instance, stand in for the control plane);
3. read cluster-info again, now over TLS verified with that CA, and require the same kubeconfig.

``verify`` is pure (data in, trusted configuration or ``DiscoveryError`` out), so every
refusal is tested without a server; ``discover`` adds the two reads.  ``kubeconfig`` renders
what the control plane publishes, so both sides share one format.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping, Sequence

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kube.api.bootstraptoken import TOKEN
from kube.client import jws
from kube.client.kubeconfig import ClientConfig

NAMESPACE = "kube-public"
NAME = "cluster-info"
KUBECONFIG_KEY = "kubeconfig"
SIGNATURE_PREFIX = "jws-kubeconfig-"
"""Followed by a token id: the key of that token's signature in cluster-info."""
HASH_PREFIX = "sha256:"


class DiscoveryError(Exception):
    """cluster-info cannot be trusted with the token and hashes given; the message says why."""


def kubeconfig(server: str, ca_pem: bytes) -> str:
    """The kubeconfig cluster-info carries: one unnamed cluster, as kubeadm writes it."""
    document: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "",
                "cluster": {
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                    "server": server,
                },
            }
        ],
        "contexts": None,
        "current-context": "",
        "preferences": {},
        "users": None,
    }
    return yaml.safe_dump(document)


def ca_cert_hash(ca_pem: bytes) -> str:
    """kubeadm's pin of a CA: ``sha256:`` and the hex SHA-256 of its SubjectPublicKeyInfo
    (of the first certificate in ``ca_pem``)."""
    return _hashes(ca_pem)[0]


def _hashes(ca_pem: bytes) -> list[str]:
    try:
        certificates = x509.load_pem_x509_certificates(ca_pem)
    except ValueError as error:
        raise DiscoveryError(f"the CA in cluster-info is not a PEM certificate: {error}") from None
    return [
        HASH_PREFIX
        + hashlib.sha256(
            certificate.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        ).hexdigest()
        for certificate in certificates
    ]


def _cluster(text: str) -> tuple[str, bytes]:
    """The server and CA of the one cluster in cluster-info's kubeconfig."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise DiscoveryError(f"the kubeconfig in cluster-info is not YAML: {error}") from None
    clusters = document.get("clusters") if isinstance(document, dict) else None
    entry = clusters[0] if isinstance(clusters, list) and clusters else None
    cluster = entry.get("cluster") if isinstance(entry, dict) else None
    if not isinstance(cluster, dict):
        raise DiscoveryError("the kubeconfig in cluster-info names no cluster")
    server, ca_data = cluster.get("server"), cluster.get("certificate-authority-data")
    if not isinstance(server, str) or not server or not isinstance(ca_data, str):
        raise DiscoveryError("the cluster in cluster-info lacks a server or a CA")
    try:
        return server, base64.b64decode(ca_data, validate=True)
    except binascii.Error:
        raise DiscoveryError("the CA in cluster-info is not valid base64") from None


def verify(
    data: Mapping[str, str],
    token: str,
    ca_cert_hashes: Sequence[str],
    *,
    unsafe_skip_ca_verification: bool = False,
) -> ClientConfig:
    """The cluster's server and CA, with ``token`` as credentials, from cluster-info's ``data``
    once its signature and CA check out; ``DiscoveryError`` otherwise.

    Without ``ca_cert_hashes`` the CA is trusted on the token alone only if
    ``unsafe_skip_ca_verification`` says so (kubeadm's
    ``--discovery-token-unsafe-skip-ca-verification``).
    """
    match = TOKEN.match(token)
    if match is None:
        raise DiscoveryError("the token is not of the form [a-z0-9]{6}.[a-z0-9]{16}")
    token_id, token_secret = match.groups()
    for pin in ca_cert_hashes:
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", pin.lower()):
            raise DiscoveryError(f"{pin!r} is not a CA hash of the form sha256:<64 hex digits>")
    if not ca_cert_hashes and not unsafe_skip_ca_verification:
        raise DiscoveryError(
            "no CA hash given: pass the cluster CA's sha256:<hex> hash, or skip CA "
            "verification explicitly (unsafe)"
        )
    content = data.get(KUBECONFIG_KEY)
    if content is None:
        raise DiscoveryError(f"cluster-info has no {KUBECONFIG_KEY!r} key")
    signature = data.get(SIGNATURE_PREFIX + token_id)
    if signature is None:
        raise DiscoveryError(
            f"cluster-info holds no signature for token id {token_id!r}: the token is unknown "
            "to this cluster, has expired, or the bootstrap-signer has not signed it yet"
        )
    if not jws.signature_valid(signature, content, token_id, token_secret):
        raise DiscoveryError(f"cluster-info's signature for token id {token_id!r} is not valid")
    server, ca_pem = _cluster(content)
    if ca_cert_hashes:
        wanted = {pin.lower() for pin in ca_cert_hashes}
        if not wanted.intersection(_hashes(ca_pem)):
            raise DiscoveryError("the CA in cluster-info matches none of the CA hashes given")
    return ClientConfig(server=server, ca_pem=ca_pem, token=token)


async def discover(
    server: str,
    token: str,
    ca_cert_hashes: Sequence[str],
    *,
    unsafe_skip_ca_verification: bool = False,
) -> ClientConfig:
    """Read cluster-info from ``server`` (``https://host:port``) and return the trusted
    configuration ``verify`` gives, after reading it again over TLS verified with that CA."""
    from kube.api.kinds.core_v1.cluster import ConfigMap
    from kube.client.rest import Client

    untrusted = ClientConfig(server=server, insecure_skip_tls_verify=True)
    async with Client(untrusted, user_agent="kubelab-discovery", qps=0) as client:
        first = await client.get(ConfigMap, NAME, NAMESPACE)
    data = first.data or {}
    trusted = verify(
        data, token, ca_cert_hashes, unsafe_skip_ca_verification=unsafe_skip_ca_verification
    )
    verified = ClientConfig(server=server, ca_pem=trusted.ca_pem)
    async with Client(verified, user_agent="kubelab-discovery", qps=0) as client:
        second = await client.get(ConfigMap, NAME, NAMESPACE)
    if (second.data or {}).get(KUBECONFIG_KEY) != data[KUBECONFIG_KEY]:
        raise DiscoveryError("cluster-info changed between the untrusted and the trusted read")
    return trusted
