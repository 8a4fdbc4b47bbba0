"""The cluster's PKI: a CA and the certificates it issues to servers and clients.

Kubernetes identifies clients by certificate: the subject's common name is the user, its
organizations are the groups (``system:masters`` for the admin).  The API server's serving
certificate names every address clients use (loopback, node addresses, the ``kubernetes``
Service names and its ClusterIP).  ECDSA P-256 keys keep generation instant, which matters when
a lab issues a dozen identities at start; kubectl, the Python client and the Go TLS stack all
accept them.

Files are written as PEM with private keys readable only by their owner, and written whole
(temporary file, then rename), so a crash never leaves half a key behind.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 365


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def write_file(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` whole: a temporary file, then an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, as PEM."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, name: str) -> tuple[Path, Path]:
        """Write ``name.crt`` and ``name.key`` into ``directory``; return their paths."""
        cert, key = directory / f"{name}.crt", directory / f"{name}.key"
        write_file(cert, self.cert_pem)
        write_file(key, self.key_pem, 0o600)
        return cert, key

    @classmethod
    def read(cls, directory: Path, name: str) -> KeyPair:
        return cls(
            (directory / f"{name}.crt").read_bytes(), (directory / f"{name}.key").read_bytes()
        )

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)


class CertificateAuthority:
    """A CA that issues server and client certificates."""

    def __init__(self, pair: KeyPair) -> None:
        self.pair = pair
        self._cert = pair.certificate
        key = serialization.load_pem_private_key(pair.key_pem, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        self._key = key

    @classmethod
    def create(cls, common_name: str = "kubelab-ca") -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        return cls(KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)))

    @classmethod
    def load_or_create(
        cls, directory: Path, name: str = "ca", common_name: str = "kubelab-ca"
    ) -> CertificateAuthority:
        """The CA kept in ``directory``, created there on first use."""
        if (directory / f"{name}.crt").exists() and (directory / f"{name}.key").exists():
            return cls(KeyPair.read(directory, name))
        ca = cls.create(common_name)
        ca.pair.write(directory, name)
        return ca

    @property
    def cert_pem(self) -> bytes:
        return self.pair.cert_pem

    def issue(
        self,
        common_name: str,
        *,
        organizations: Sequence[str] = (),
        server: bool = False,
        client: bool = False,
        dns_names: Sequence[str] = (),
        ip_addresses: Sequence[str] = (),
        days: int = LEAF_DAYS,
    ) -> KeyPair:
        """A new key and a certificate for it, signed by this CA."""
        key = generate_key()
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        cert = self._sign(
            _name(common_name, organizations),
            key.public_key(),
            usages,
            _alt_names(dns_names, ip_addresses),
            datetime.timedelta(days=days),
        )
        return KeyPair(cert, _key_pem(key))

    def sign_request(
        self,
        request: x509.CertificateSigningRequest,
        usages: Sequence[x509.ObjectIdentifier],
        lifetime: datetime.timedelta,
    ) -> bytes:
        """A certificate (PEM) for the subject, key and names of a verified request.

        Only the subject, public key and subject alternative names come from the request;
        usages and lifetime are the signer's decision, as with upstream's CSR signer."""
        if not request.is_signature_valid:
            raise ValueError("the request's signature does not verify")
        try:
            requested = request.extensions.get_extension_for_class(x509.SubjectAlternativeName)
            sans = list(requested.value)
        except x509.ExtensionNotFound:
            sans = []
        return self._sign(request.subject, request.public_key(), usages, sans, lifetime)

    def _sign(
        self,
        subject: x509.Name,
        public_key: object,
        usages: Sequence[x509.ObjectIdentifier],
        sans: Sequence[x509.GeneralName],
        lifetime: datetime.timedelta,
    ) -> bytes:
        now = datetime.datetime.now(datetime.UTC)
        # Never past the CA's own expiry: a leaf outliving its issuer would not verify.
        not_after = min(now + lifetime, self._cert.not_valid_after_utc)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._cert.subject)
            .public_key(public_key)  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM)


def generate_key() -> ec.EllipticCurvePrivateKey:
    """A new ECDSA P-256 private key (see the module docstring for why P-256)."""
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """``key`` as unencrypted PKCS#8 PEM."""
    return _key_pem(key)


def _alt_names(dns_names: Sequence[str], ip_addresses: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    return names + [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]


def certificate_request(
    key: ec.EllipticCurvePrivateKey,
    common_name: str,
    organizations: Sequence[str] = (),
    *,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
) -> bytes:
    """A PEM PKCS#10 request for ``key`` naming the subject ``common_name``/``organizations``
    and these subject alternative names (what a kubelet sends in a CertificateSigningRequest)."""
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        _name(common_name, organizations)
    )
    if names := _alt_names(dns_names, ip_addresses):
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    request = builder.sign(key, hashes.SHA256())
    return request.public_bytes(serialization.Encoding.PEM)


def identity(cert: x509.Certificate) -> tuple[str, list[str]]:
    """(user, groups) of a client certificate: its common name and organizations."""
    subject = cert.subject
    names = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return (str(names[0].value) if names else "", [str(o.value) for o in orgs])


def client_ssl_context(
    ca_pem: bytes | None,
    cert_pem: bytes | None = None,
    key_pem: bytes | None = None,
    *,
    verify: bool = True,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A TLS client context trusting ``ca_pem`` (the system CAs if None) and presenting the
    client certificate, if given.  ``ssl`` only loads key material from files, so it passes
    through a private temporary directory that is gone before this returns."""
    context = ssl.create_default_context(cadata=ca_pem.decode() if ca_pem else None)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context.check_hostname = check_hostname
    if cert_pem is not None and key_pem is not None:
        load_certificate(context, cert_pem, key_pem)
    return context


def load_certificate(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Make ``context`` present this certificate and key (replacing any it had)."""
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp) / "client.crt", Path(tmp) / "client.key"
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        context.load_cert_chain(cert, key)
