"""The API server's serving PKI under ``<data-dir>/pki``: the cluster CA, the serving
certificate and the server's client certificate towards kubelets; and, as kubeadm makes them,
the front-proxy CA and the front-proxy client certificate (CN ``front-proxy-client``) the
aggregator presents to extension API servers.

Created once and kept across restarts; the serving certificate is issued again only when the
names it must carry change (an address added with ``--advertise-address`` or
``--tls-san``-like extra names), so clients that trusted it keep trusting it.  It names every
address clients use: loopback, the advertised and bound addresses, the ``kubernetes``
Service's ClusterIP and DNS names, and the host name.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from controlplane.apiserver.certs import identities
from kube.pki import CertificateAuthority, KeyPair

SERVICE_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)

FRONT_PROXY_CA = "front-proxy-ca"
FRONT_PROXY_CLIENT = "front-proxy-client"


@dataclass
class PKI:
    """The files the server keeps under ``<data-dir>/pki``."""

    ca: CertificateAuthority
    serving: KeyPair
    serving_cert: Path
    serving_key: Path
    ca_cert: Path
    kubelet_client: KeyPair
    front_proxy_ca: Path
    front_proxy_client: KeyPair

    def server_context(self, *client_cas: Path) -> ssl.SSLContext:
        """TLS for the server: its serving certificate; client certificates of the CA (and of
        ``client_cas``: the requestheader CA) are asked for, not required (tokens and
        anonymous requests come without)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.serving_cert, self.serving_key)
        for ca in (self.ca_cert, *client_cas):
            context.load_verify_locations(cafile=str(ca))
        context.verify_mode = ssl.CERT_OPTIONAL
        return context


def ensure(pki_dir: Path, addresses: Iterable[str]) -> PKI:
    """Create (once) the CA, the serving certificate for ``addresses`` (IPs and DNS names,
    beside loopback, the Service's names and the host name) and the kubelet client
    certificate."""
    addresses = list(addresses)
    ca = CertificateAuthority.load_or_create(pki_dir)
    ips = sorted({"127.0.0.1", *(a for a in addresses if is_ip(a))})
    dns = sorted(
        {"localhost", *SERVICE_NAMES, socket.gethostname(), *(a for a in addresses if not is_ip(a))}
    )
    serving_cert, serving_key = pki_dir / "apiserver.crt", pki_dir / "apiserver.key"
    serving = (
        KeyPair.read(pki_dir, "apiserver")
        if serving_cert.exists() and _names(KeyPair.read(pki_dir, "apiserver")) == (dns, ips)
        else None
    )
    if serving is None:
        serving = ca.issue("kube-apiserver", server=True, dns_names=dns, ip_addresses=ips)
        serving.write(pki_dir, "apiserver")
    kubelet_client = identities.ensure(ca, pki_dir, identities.KUBELET_CLIENT)
    front_proxy_client = ensure_front_proxy(pki_dir)
    return PKI(
        ca,
        serving,
        serving_cert,
        serving_key,
        pki_dir / "ca.crt",
        kubelet_client,
        pki_dir / f"{FRONT_PROXY_CA}.crt",
        front_proxy_client,
    )


def ensure_front_proxy(pki_dir: Path) -> KeyPair:
    """The front-proxy CA (``front-proxy-ca.crt``) and its client certificate, created once
    (the HA lab makes them before any server starts, so every server shares them)."""
    ca = CertificateAuthority.load_or_create(pki_dir, FRONT_PROXY_CA, FRONT_PROXY_CA)
    if (pki_dir / f"{FRONT_PROXY_CLIENT}.crt").exists():
        return KeyPair.read(pki_dir, FRONT_PROXY_CLIENT)
    client = ca.issue(FRONT_PROXY_CLIENT, client=True)
    client.write(pki_dir, FRONT_PROXY_CLIENT)
    return client


def is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _names(pair: KeyPair) -> tuple[list[str], list[str]]:
    try:
        sans = pair.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return [], []
    dns = sorted(sans.value.get_values_for_type(x509.DNSName))
    ips = sorted(str(ip) for ip in sans.value.get_values_for_type(x509.IPAddress))
    return dns, ips
