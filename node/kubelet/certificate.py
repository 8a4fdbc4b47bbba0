"""The kubelet's certificates: TLS bootstrapping of its client certificate, and one manager
that obtains and rotates both its client and its serving certificate through the
CertificateSigningRequest API, as upstream's ``pkg/kubelet/certificate`` and client-go's
``util/certificate`` manager.

**Bootstrap.**  Started with ``--bootstrap-kubeconfig`` and a ``--kubeconfig`` that does not
exist yet (or whose certificate has expired), the kubelet authenticates with the bootstrap
token and asks for a certificate through the API: a CertificateSigningRequest for the
``kubernetes.io/kube-apiserver-client-kubelet`` signer, subject ``CN=system:node:<name>``,
``O=system:nodes``, usages digital signature and client auth.  The csrapproving controller
approves it (the token's group may create ``certificatesigningrequests/nodeclient``), csrsigning
signs it, and the kubelet writes ``--kubeconfig`` with the certificate and key embedded (one
file, replaced whole, so a crash never pairs a new certificate with an old key), then starts as
``system:node:<name>``.  The private key is kept in ``<cert-dir>/kubelet-client.key.tmp``
while the request is pending, so a kubelet restarted meanwhile asks again with the same key.

**Rotation.**  ``CertificateManager`` renews a certificate at a random point between 70% and
90% of its lifetime (jitter, so nodes that joined together do not all renew at once), and at
once when there is none or it no longer matches what would be asked for (``Template``: the
serving certificate's names follow the Node's addresses).  A failed request is retried with
backoff.  The two kinds differ only in their ``Template`` and ``Store``:

- client (``client_manager``): signer ``kubernetes.io/kube-apiserver-client-kubelet``, usages
  digital signature and client auth, no names; authenticated by the certificate itself
  (``selfnodeclient``, approved for ``system:nodes``); stored in the kubeconfig, and the
  running client presents the new one on its next connections.  Only a kubeconfig holding this
  node's own identity is renewed (``is_node_identity``): a kubelet run with a shared
  kubeconfig, such as an admin's, never rewrites it.  Expiring unrenewed ends the kubelet.
- serving (``serving_manager``, ``--rotate-server-certificates``): signer
  ``kubernetes.io/kubelet-serving``, usages digital signature and server auth (no key
  encipherment: the key is ECDSA, as upstream asks for non-RSA keys), the Node's hostnames and
  DNS names as DNS names and its IPs as IP addresses, taken from the Node status the kubelet
  last sent (no request before it has addresses); stored in
  ``<cert-dir>/kubelet-server-current.pem`` (certificate and key in one file, replaced whole),
  and the server presents it to new connections.  Nobody approves these by default upstream;
  here csrapproving does with ``--approve-kubelet-serving-certificates`` (see there).

Waiting for the certificate polls the one CSR (a get per second), which a bootstrapper may do
as ``system:node-bootstrapper`` allows get; a Denied or Failed request ends the wait with an
error that says why.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kube.api.kinds.certificates_v1 import (
    DENIED,
    FAILED,
    CertificateSigningRequest,
    CertificateSigningRequestSpec,
)
from kube.api.kinds.core_v1.node import NodeAddress
from kube.api.meta_v1 import ObjectMeta
from kube.client import kubeconfig
from kube.client.errors import ApiError, ClientError
from kube.client.interface import ApiClient
from kube.client.rest import Client
from kube.clock import Clock
from kube.pki import (
    KeyPair,
    certificate_request,
    generate_key,
    identity,
    key_pem,
    write_file,
)

log = logging.getLogger(__name__)

SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
USAGES = ["digital signature", "client auth"]
SERVING_SIGNER = "kubernetes.io/kubelet-serving"
SERVING_USAGES = ["digital signature", "server auth"]
SERVING_FILE = "kubelet-server-current.pem"
PENDING_KEY = "kubelet-client.key.tmp"
ROTATE_FROM, ROTATE_TO = 0.7, 0.9
RETRY_MIN, RETRY_MAX = 1.0, 300.0
RECHECK = 60.0
"""How often a manager waiting for its rotation deadline looks at its template again."""
DNS_ADDRESSES = ("Hostname", "InternalDNS", "ExternalDNS")
IP_ADDRESSES = ("InternalIP", "ExternalIP")


class CertificateRequestError(Exception):
    """The request was denied or failed, or no certificate came in time."""


@dataclass(frozen=True)
class Paths:
    """Where the kubelet keeps its client credentials."""

    kubeconfig: Path
    cert_dir: Path

    @property
    def pending_key(self) -> Path:
        return self.cert_dir / PENDING_KEY


def usable(path: Path, now: datetime.datetime) -> bool:
    """Whether the kubeconfig at ``path`` exists and its client certificate is still valid."""
    try:
        config = kubeconfig.load(path)
    except (kubeconfig.KubeconfigError, OSError):
        return False
    if config.cert_pem is None:
        return config.token is not None  # credentials other than a certificate: trusted as is
    try:
        cert = x509.load_pem_x509_certificate(config.cert_pem)
    except ValueError:
        return False
    return cert.not_valid_before_utc <= now < cert.not_valid_after_utc


def is_node_identity(config: kubeconfig.ClientConfig, node_name: str) -> bool:
    """Whether ``config`` authenticates with this node's own certificate (the only one the
    kubelet renews: a kubeconfig shared with others, such as an admin's, is left alone)."""
    if config.cert_pem is None:
        return False
    user, groups = identity(x509.load_pem_x509_certificate(config.cert_pem))
    return user == f"system:node:{node_name}" and "system:nodes" in groups


def _pending_key(paths: Paths) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(paths.pending_key.read_bytes(), password=None)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            return key
    except (OSError, ValueError):
        pass
    key = generate_key()
    write_file(paths.pending_key, key_pem(key), 0o600)
    return key


@dataclass(frozen=True)
class Template:
    """What a request asks for beside the node's subject: signer, usages and names."""

    signer: str
    usages: tuple[str, ...]
    dns_names: frozenset[str] = frozenset()
    ip_addresses: frozenset[str] = frozenset()

    def satisfied_by(self, cert: x509.Certificate) -> bool:
        """Whether ``cert`` names exactly what this template asks for."""
        try:
            sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return not self.dns_names and not self.ip_addresses
        ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
        return set(sans.get_values_for_type(x509.DNSName)) == self.dns_names and ips == {
            str(ipaddress.ip_address(a)) for a in self.ip_addresses
        }


CLIENT = Template(SIGNER, tuple(USAGES))


def serving_template(addresses: Sequence[NodeAddress]) -> Template | None:
    """The serving certificate for a Node with these status addresses (None: none yet)."""
    dns = frozenset(a.address for a in addresses if a.type in DNS_ADDRESSES and a.address)
    ips = frozenset(a.address for a in addresses if a.type in IP_ADDRESSES and a.address)
    if not dns and not ips:
        return None
    return Template(SERVING_SIGNER, tuple(SERVING_USAGES), dns, ips)


async def request_certificate(
    client: ApiClient,
    node_name: str,
    key: ec.EllipticCurvePrivateKey,
    clock: Clock,
    template: Template = CLIENT,
    *,
    within: float = 3600.0,
    poll: float = 1.0,
) -> bytes:
    """Ask for a certificate for ``key`` as ``system:node:<node_name>``; its PEM."""
    csr = CertificateSigningRequest(
        metadata=ObjectMeta(generate_name="csr-"),
        spec=CertificateSigningRequestSpec(
            request=certificate_request(
                key,
                f"system:node:{node_name}",
                ["system:nodes"],
                dns_names=sorted(template.dns_names),
                ip_addresses=sorted(template.ip_addresses),
            ),
            signer_name=template.signer,
            usages=list(template.usages),
        ),
    )
    created = await client.create(csr)
    name = created.metadata.name or ""
    log.info("requested a %s certificate: certificatesigningrequest %s", template.signer, name)
    deadline = clock.monotonic() + within
    while clock.monotonic() < deadline:
        current = await client.get(CertificateSigningRequest, name)
        status = current.status
        for condition in (status.conditions if status is not None else None) or ():
            if condition.type in (DENIED, FAILED) and condition.status == "True":
                raise CertificateRequestError(
                    f"certificatesigningrequest {name} {condition.type.lower()}: "
                    f"{condition.reason or ''} {condition.message or ''}".rstrip()
                )
        if status is not None and status.certificate:
            return status.certificate
        await clock.sleep(poll)
    raise CertificateRequestError(f"no certificate for certificatesigningrequest {name} in time")


def _write(paths: Paths, config: kubeconfig.ClientConfig, pair: KeyPair, node_name: str) -> None:
    if config.ca_pem is None:
        raise CertificateRequestError("the bootstrap kubeconfig names no certificate authority")
    kubeconfig.write(
        paths.kubeconfig,
        kubeconfig.render(config.server, config.ca_pem, f"system:node:{node_name}", pair),
    )


async def bootstrap(
    paths: Paths,
    bootstrap_kubeconfig: Path,
    node_name: str,
    clock: Clock,
    *,
    within: float = 3600.0,
) -> bool:
    """Obtain the kubelet's client certificate with the bootstrap kubeconfig unless
    ``paths.kubeconfig`` is usable already; whether it had to."""
    if usable(paths.kubeconfig, clock.now()):
        return False
    config = kubeconfig.load(bootstrap_kubeconfig)
    key = _pending_key(paths)
    async with Client(config, user_agent="kubelet-bootstrap", clock=clock) as client:
        cert = await request_certificate(client, node_name, key, clock, within=within)
    _write(paths, config, KeyPair(cert, key_pem(key)), node_name)
    paths.pending_key.unlink(missing_ok=True)
    log.info("client certificate issued; wrote %s", paths.kubeconfig)
    return True


def rotation_deadline(
    cert: x509.Certificate, uniform: Callable[[float, float], float] = random.uniform
) -> datetime.datetime:
    """When to renew ``cert``: a random point between 70% and 90% of its lifetime."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * uniform(ROTATE_FROM, ROTATE_TO)


class Store(Protocol):
    """Where a manager keeps its certificate, and who learns of a new one."""

    def current(self) -> x509.Certificate | None: ...

    def save(self, pair: KeyPair) -> None:
        """Keep ``pair`` (replacing the previous one whole) and put it to use."""
        ...


class KubeconfigStore:
    """The client certificate, embedded in ``--kubeconfig`` and presented by ``client``."""

    def __init__(self, client: ApiClient, paths: Paths, node_name: str) -> None:
        self.client = client
        self.paths = paths
        self.node_name = node_name

    def current(self) -> x509.Certificate | None:
        config = kubeconfig.load(self.paths.kubeconfig)
        return x509.load_pem_x509_certificate(config.cert_pem) if config.cert_pem else None

    def save(self, pair: KeyPair) -> None:
        _write(self.paths, kubeconfig.load(self.paths.kubeconfig), pair, self.node_name)
        self.client.reload_client_certificate(pair.cert_pem, pair.key_pem)


class PemStore:
    """The serving certificate: certificate and key in one PEM file; ``use`` is called with
    every pair saved (the kubelet server's ``use_certificate``)."""

    def __init__(self, path: Path, use: Callable[[KeyPair], None] | None = None) -> None:
        self.path = path
        self.use = use

    def pair(self) -> KeyPair | None:
        """The stored pair, if there is a readable one."""
        try:
            pem = self.path.read_bytes()
            cert = x509.load_pem_x509_certificate(pem)
            key = serialization.load_pem_private_key(pem, password=None)
        except (OSError, ValueError):
            return None
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            return None
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem(key))

    def current(self) -> x509.Certificate | None:
        pair = self.pair()
        return pair.certificate if pair is not None else None

    def save(self, pair: KeyPair) -> None:
        write_file(self.path, pair.cert_pem + pair.key_pem, 0o600)
        if self.use is not None:
            self.use(pair)


class CertificateManager:
    """Obtains and renews one certificate of the kubelet (see the module docstring)."""

    def __init__(
        self,
        client: ApiClient,
        node_name: str,
        clock: Clock,
        store: Store,
        template: Callable[[], Template | None],
        *,
        kind: str,
        fatal_expiry: bool = False,
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.clock = clock
        self.store = store
        self.template = template
        self.kind = kind
        self.fatal_expiry = fatal_expiry
        self._deadlines: dict[int, datetime.datetime] = {}

    async def rotate(self, template: Template | None = None) -> None:
        """Get a new certificate now and switch to it."""
        template = template or self.template()
        if template is None:
            raise CertificateRequestError(f"nothing to ask a {self.kind} certificate for yet")
        key = generate_key()
        cert = await request_certificate(self.client, self.node_name, key, self.clock, template)
        pair = KeyPair(cert, key_pem(key))
        self.store.save(pair)
        log.info(
            "new %s certificate (valid until %s)", self.kind, pair.certificate.not_valid_after_utc
        )

    def _deadline(self, cert: x509.Certificate) -> datetime.datetime:
        if cert.serial_number not in self._deadlines:
            self._deadlines = {cert.serial_number: rotation_deadline(cert)}
            log.info(
                "%s certificate rotation at %s", self.kind, self._deadlines[cert.serial_number]
            )
        return self._deadlines[cert.serial_number]

    async def run(self) -> None:
        """Keep a current certificate; forever.

        With ``fatal_expiry`` (the client certificate) raises CertificateRequestError once the
        certificate expired without a renewal: the kubelet then exits, as upstream's does, and
        starting again bootstraps anew."""
        delay = RETRY_MIN
        while True:
            template = self.template()
            current = self.store.current()
            if template is None:
                await self.clock.sleep(RETRY_MIN)
                continue
            if current is not None and template.satisfied_by(current):
                wait = (self._deadline(current) - self.clock.now()).total_seconds()
                if wait > 0:
                    await self.clock.sleep(min(wait, RECHECK))
                    continue
            try:
                await self.rotate(template)
            except (ApiError, ClientError, CertificateRequestError) as error:
                expired = current is None or self.clock.now() >= current.not_valid_after_utc
                if self.fatal_expiry and expired:
                    raise CertificateRequestError(
                        f"the {self.kind} certificate expired without a renewal: {error}"
                    ) from error
                log.warning("requesting a %s certificate: %s; retrying", self.kind, error)
            else:
                renewed = self.store.current()
                if renewed is None or self._deadline(renewed) > self.clock.now():
                    delay = RETRY_MIN
                    continue
                log.warning(
                    "the new %s certificate is due for renewal already (a short lifetime, or "
                    "clocks apart?); asking again in %.0f s",
                    self.kind,
                    delay,
                )
            await self.clock.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)


def client_manager(
    client: ApiClient, paths: Paths, node_name: str, clock: Clock
) -> CertificateManager:
    """Rotates the client certificate in ``paths.kubeconfig`` (obtained by ``bootstrap``)."""
    return CertificateManager(
        client,
        node_name,
        clock,
        KubeconfigStore(client, paths, node_name),
        lambda: CLIENT,
        kind="client",
        fatal_expiry=True,
    )


def serving_manager(
    client: ApiClient,
    cert_dir: Path,
    node_name: str,
    clock: Clock,
    addresses: Callable[[], Sequence[NodeAddress]],
    use: Callable[[KeyPair], None] | None = None,
) -> CertificateManager:
    """Obtains and rotates the serving certificate for the Node's current ``addresses``;
    ``use`` gets the one stored by an earlier run at once, then every new one."""
    store = PemStore(cert_dir / SERVING_FILE, use)
    if use is not None and (stored := store.pair()) is not None:
        use(stored)
    return CertificateManager(
        client,
        node_name,
        clock,
        store,
        lambda: serving_template(addresses()),
        kind="serving",
    )
