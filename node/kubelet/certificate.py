"""The kubelet's client certificate: TLS bootstrapping and rotation, as upstream's
``pkg/kubelet/certificate/bootstrap`` and client-go's ``util/certificate`` manager.

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

**Rotation.**  ``CertificateRotator`` renews the certificate at a random point between 70% and
90% of its lifetime (jitter, so nodes that joined together do not all renew at once), this
time authenticated by the certificate itself (``selfnodeclient``, approved for
``system:nodes``); the new pair replaces the kubeconfig, and the running client
presents it on its next connections.  A failed renewal is retried with backoff.  Only a
kubeconfig holding this node's own identity is renewed (``is_node_identity``): a kubelet run
with a shared kubeconfig, such as an admin's, never rewrites it.

Waiting for the certificate polls the one CSR (a get per second), which a bootstrapper may do
as ``system:node-bootstrapper`` allows get; a Denied or Failed request ends the wait with an
error that says why.
"""

from __future__ import annotations

import datetime
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubelab.api.kinds.certificates_v1 import (
    DENIED,
    FAILED,
    CertificateSigningRequest,
    CertificateSigningRequestSpec,
)
from kubelab.api.meta_v1 import ObjectMeta
from kubelab.client import kubeconfig
from kubelab.client.errors import ApiError, ClientError
from kubelab.client.rest import Client
from kubelab.clock import Clock
from kubelab.pki import (
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
PENDING_KEY = "kubelet-client.key.tmp"
ROTATE_FROM, ROTATE_TO = 0.7, 0.9
RETRY_MIN, RETRY_MAX = 1.0, 300.0


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


async def request_certificate(
    client: Client,
    node_name: str,
    key: ec.EllipticCurvePrivateKey,
    clock: Clock,
    *,
    within: float = 3600.0,
    poll: float = 1.0,
) -> bytes:
    """Ask for a client certificate for ``key`` as ``system:node:<node_name>``; its PEM."""
    csr = CertificateSigningRequest(
        metadata=ObjectMeta(generate_name="csr-"),
        spec=CertificateSigningRequestSpec(
            request=certificate_request(key, f"system:node:{node_name}", ["system:nodes"]),
            signer_name=SIGNER,
            usages=list(USAGES),
        ),
    )
    created = await client.create(csr)
    name = created.metadata.name or ""
    log.info("requested a client certificate: certificatesigningrequest %s", name)
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


class CertificateRotator:
    """Renews the kubelet's client certificate before it expires (see the module docstring)."""

    def __init__(self, client: Client, paths: Paths, node_name: str, clock: Clock) -> None:
        self.client = client
        self.paths = paths
        self.node_name = node_name
        self.clock = clock

    def _current(self) -> x509.Certificate:
        config = kubeconfig.load(self.paths.kubeconfig)
        if config.cert_pem is None:
            raise CertificateRequestError(f"{self.paths.kubeconfig} holds no client certificate")
        return x509.load_pem_x509_certificate(config.cert_pem)

    async def rotate(self) -> None:
        """Get a new certificate now and switch to it."""
        key = generate_key()
        cert = await request_certificate(self.client, self.node_name, key, self.clock)
        pair = KeyPair(cert, key_pem(key))
        _write(self.paths, kubeconfig.load(self.paths.kubeconfig), pair, self.node_name)
        self.client.reload_client_certificate(pair.cert_pem, pair.key_pem)
        log.info(
            "rotated the client certificate (valid until %s)", pair.certificate.not_valid_after_utc
        )

    async def run(self) -> None:
        """Rotate whenever the deadline of the current certificate comes; forever.

        Raises CertificateRequestError once the certificate expired without a renewal: the
        kubelet then exits, as upstream's does, and starting again bootstraps anew."""
        while True:
            current = self._current()
            deadline = rotation_deadline(current)
            wait = (deadline - self.clock.now()).total_seconds()
            log.info("client certificate rotation at %s", deadline.isoformat())
            await self.clock.sleep(max(wait, 0.0))
            delay = RETRY_MIN
            while True:
                try:
                    await self.rotate()
                    break
                except (ApiError, ClientError, CertificateRequestError) as error:
                    if self.clock.now() >= current.not_valid_after_utc:
                        raise CertificateRequestError(
                            f"the client certificate expired without a renewal: {error}"
                        ) from error
                    log.warning("rotating the client certificate: %s; retrying", error)
                    await self.clock.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX)
