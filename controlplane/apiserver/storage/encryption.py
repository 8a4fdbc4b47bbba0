"""Encryption at rest: ``--encryption-provider-config``, upstream's EncryptionConfiguration.

The configuration (``apiserver.config.k8s.io/v1``, kind ``EncryptionConfiguration``) lists
groups of resources, each with providers in order: ``identity``, ``aescbc``, ``aesgcm`` and
``secretbox``, the three ciphers with named keys.  The first key of the first provider
encrypts every write; every key of every provider may decrypt, which is how keys rotate: put a
new key first, restart, rewrite the objects (``kubectl get secrets -A -o json | kubectl
replace -f -``), then drop the old key.  ``identity`` first writes plaintext and still reads
what the ciphers wrote (how one migrates away from encryption).

The envelope around a value (the object's JSON here) is upstream's, byte for byte:
``k8s:enc:<provider>:v1:<key name>:`` and then
- aescbc: a random 16-byte IV, then AES-CBC of the value with PKCS#7 padding;
- aesgcm: a random 12-byte nonce, then AES-GCM of the value (with its tag), the storage key as
  authenticated data, so a value copied under another key does not decrypt;
- secretbox: a random 24-byte nonce, then NaCl secretbox (XSalsa20-Poly1305) of the value.

``EncryptedStore`` sits between the registry and the backend (SQLite or etcd), so reads,
lists and watches decrypt and writes encrypt whichever backend holds the bytes, and nothing
above it changes.  A value read with other than the writing key is marked ``stale`` so that
an unchanged update still rewrites it (upstream's GuaranteedUpdate does the same).  A value
no configured key decrypts is an internal error (HTTP 500, as upstream) that names the key and
the provider that wrote it, never a crash.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from nacl.exceptions import CryptoError
from nacl.secret import SecretBox

from controlplane.apiserver import errors
from controlplane.storage.interface import Event, KeyValue, ListResult, Progress, Store
from kube.api.scheme import SCHEME

API_VERSION = "apiserver.config.k8s.io/v1"
KIND = "EncryptionConfiguration"
ENCRYPTED = b"k8s:enc:"
"""What every encrypted value starts with."""


class ConfigError(ValueError):
    """The encryption configuration file is not one the server can use."""


class TransformError(Exception):
    """A stored value that a provider cannot turn back into plaintext."""


class Provider(Protocol):
    """One key of one provider: values it wrote start with ``prefix``."""

    @property
    def prefix(self) -> bytes: ...

    def encrypt(self, plain: bytes, context: bytes) -> bytes:
        """The sealed value (without the prefix); ``context`` is the storage key."""
        ...

    def decrypt(self, sealed: bytes, context: bytes) -> bytes:
        """The plaintext of a value (without the prefix); ``TransformError`` if it is not
        this key's."""
        ...


class Identity:
    """Plaintext; refuses to pass encrypted values on as if they were objects."""

    @property
    def prefix(self) -> bytes:
        return b""

    def encrypt(self, plain: bytes, context: bytes) -> bytes:
        return plain

    def decrypt(self, sealed: bytes, context: bytes) -> bytes:
        if sealed.startswith(ENCRYPTED):
            raise TransformError("identity transformer tried to read encrypted data")
        return sealed


@dataclass(frozen=True)
class AESCBC:
    name: str
    key: bytes

    @property
    def prefix(self) -> bytes:
        return f"k8s:enc:aescbc:v1:{self.name}:".encode()

    def encrypt(self, plain: bytes, context: bytes) -> bytes:
        iv = os.urandom(16)
        padder = padding.PKCS7(128).padder()
        padded = padder.update(plain) + padder.finalize()
        encryptor = Cipher(algorithms.AES(self.key), modes.CBC(iv)).encryptor()
        return iv + encryptor.update(padded) + encryptor.finalize()

    def decrypt(self, sealed: bytes, context: bytes) -> bytes:
        if len(sealed) < 32 or len(sealed) % 16:
            raise TransformError("the stored data is not a whole number of AES blocks")
        decryptor = Cipher(algorithms.AES(self.key), modes.CBC(sealed[:16])).decryptor()
        padded = decryptor.update(sealed[16:]) + decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        try:
            return unpadder.update(padded) + unpadder.finalize()
        except ValueError:
            raise TransformError("invalid PKCS7 data (empty or not padded)") from None


@dataclass(frozen=True)
class AESGCMProvider:
    name: str
    key: bytes

    @property
    def prefix(self) -> bytes:
        return f"k8s:enc:aesgcm:v1:{self.name}:".encode()

    def encrypt(self, plain: bytes, context: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + AESGCM(self.key).encrypt(nonce, plain, context)

    def decrypt(self, sealed: bytes, context: bytes) -> bytes:
        if len(sealed) < 12 + 16:
            raise TransformError("the stored data was shorter than the required size")
        try:
            return AESGCM(self.key).decrypt(sealed[:12], sealed[12:], context)
        except InvalidTag:
            raise TransformError("cipher: message authentication failed") from None


@dataclass(frozen=True)
class Secretbox:
    name: str
    key: bytes

    @property
    def prefix(self) -> bytes:
        return f"k8s:enc:secretbox:v1:{self.name}:".encode()

    def encrypt(self, plain: bytes, context: bytes) -> bytes:
        box = SecretBox(self.key)
        return bytes(box.encrypt(plain, os.urandom(SecretBox.NONCE_SIZE)))

    def decrypt(self, sealed: bytes, context: bytes) -> bytes:
        if len(sealed) < SecretBox.NONCE_SIZE + SecretBox.MACBYTES:
            raise TransformError("the stored data was shorter than the required size")
        try:
            return SecretBox(self.key).decrypt(sealed)
        except CryptoError:
            raise TransformError("secretbox: message authentication failed") from None


_CIPHERS: dict[str, tuple[type[AESCBC] | type[AESGCMProvider] | type[Secretbox], tuple[int, ...]]]
_CIPHERS = {
    "aescbc": (AESCBC, (16, 24, 32)),
    "aesgcm": (AESGCMProvider, (16, 24, 32)),
    "secretbox": (Secretbox, (32,)),
}


@dataclass(frozen=True)
class Providers:
    """One resource group's providers in order: the first writes, each may read."""

    providers: Sequence[Provider]

    def write(self, plain: bytes, key: str) -> bytes:
        first = self.providers[0]
        return first.prefix + first.encrypt(plain, key.encode())

    def read(self, value: bytes, key: str) -> tuple[bytes, bool]:
        """The plaintext, and whether it was written by other than the writing provider."""
        failures: list[str] = []
        for index, provider in enumerate(self.providers):
            if not value.startswith(provider.prefix):
                continue
            try:
                plain = provider.decrypt(value[len(provider.prefix) :], key.encode())
            except TransformError as error:
                if provider.prefix:
                    failures.append(f"{_describe(provider.prefix)}: {error}")
                continue
            return plain, index != 0
        if failures:
            raise TransformError("; ".join(failures))
        if value.startswith(ENCRYPTED):
            written = _describe(value[: value.find(b":", value.find(b":v1:") + 4) + 1])
            raise TransformError(
                f"no matching prefix found: the value was written with {written}, "
                "which the encryption configuration does not name"
            )
        raise TransformError("no matching prefix found")


def _describe(prefix: bytes) -> str:
    """``provider aescbc, key "key1"`` for ``k8s:enc:aescbc:v1:key1:``."""
    parts = prefix.decode(errors="replace").split(":")
    if len(parts) >= 5:
        return f'provider {parts[2]}, key "{parts[4]}"'
    return repr(prefix[:40])


PLAINTEXT = Providers([Identity()])
"""Resources the configuration does not name: stored as they are."""


@dataclass(frozen=True)
class EncryptionConfig:
    """Resource patterns (``secrets``, ``deployments.apps``, ``*.apps``, ``*.``, ``*.*``) in
    file order, each with its providers; the first pattern that matches a resource wins."""

    rules: Sequence[tuple[Sequence[str], Providers]]

    def providers_for(self, group: str, resource: str) -> Providers:
        qualified = f"{resource}.{group}" if group else resource
        for patterns, providers in self.rules:
            for pattern in patterns:
                if pattern in (qualified, "*.*", f"*.{group}"):
                    return providers
        return PLAINTEXT


def load(path: Path) -> EncryptionConfig:
    """Read and check an EncryptionConfiguration file (``ConfigError`` says what is wrong)."""
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a mapping")
    if (document.get("apiVersion"), document.get("kind")) != (API_VERSION, KIND):
        raise ConfigError(f"{path}: expected apiVersion {API_VERSION}, kind {KIND}")
    rules: list[tuple[Sequence[str], Providers]] = []
    seen: set[str] = set()
    for index, entry in enumerate(_list(document.get("resources"), "resources")):
        where = f"resources[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected a mapping")
        patterns = [str(p) for p in _list(entry.get("resources"), f"{where}.resources")]
        for pattern in patterns:
            if pattern in seen:
                raise ConfigError(f"{where}.resources: {pattern!r} is listed more than once")
            if pattern == "*" or ("*" in pattern and not pattern.startswith("*.")):
                raise ConfigError(f"{where}.resources: {pattern!r} is not a valid resource")
            seen.add(pattern)
        providers = [
            provider
            for i, item in enumerate(_list(entry.get("providers"), f"{where}.providers"))
            for provider in _provider(item, f"{where}.providers[{i}]")
        ]
        rules.append((patterns, Providers(providers)))
    return EncryptionConfig(rules)


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: expected a non-empty list")
    return value


def _provider(item: Any, where: str) -> list[Provider]:
    """A provider entry as one ``Provider`` per key, in order (each key its own prefix, as
    upstream: a value read with any but the very first is stale)."""
    if not isinstance(item, dict) or len(item) != 1:
        raise ConfigError(f"{where}: expected exactly one provider")
    ((kind, body),) = item.items()
    if kind == "identity":
        return [Identity()]
    if kind not in _CIPHERS:
        raise ConfigError(
            f"{where}: provider {kind!r} is not supported (identity, aescbc, aesgcm, secretbox)"
        )
    cls, sizes = _CIPHERS[kind]
    keys = _list((body or {}).get("keys") if isinstance(body, dict) else None, f"{where}.keys")
    built: list[Provider] = []
    for k, entry in enumerate(keys):
        name = entry.get("name") if isinstance(entry, dict) else None
        secret = entry.get("secret") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name or ":" in name:
            raise ConfigError(f"{where}.keys[{k}].name: a non-empty name without ':' is required")
        try:
            key = base64.b64decode(str(secret), validate=True)
        except binascii.Error:
            raise ConfigError(f"{where}.keys[{k}].secret: not valid base64") from None
        if len(key) not in sizes:
            raise ConfigError(
                f"{where}.keys[{k}].secret: a {kind} key is {' or '.join(map(str, sizes))} "
                f"bytes, got {len(key)}"
            )
        built.append(cls(name, key))
    return built


class EncryptedStore:
    """``Store`` that encrypts values on the way in and decrypts them on the way out (see the
    module docstring); keys, revisions and everything else pass through unchanged."""

    def __init__(self, store: Store, config: EncryptionConfig) -> None:
        self.inner = store
        self.config = config
        self._groups = {group for group, _ in SCHEME.group_versions() if group}
        self._by_root: dict[str, Providers] = {}

    def _providers(self, key: str) -> Providers:
        """The providers of the resource a key ``/registry/[<group>/]<resource>/...`` is of."""
        parts = key.removeprefix("/registry/").split("/")
        grouped = len(parts) > 2 and ("." in parts[0] or parts[0] in self._groups)
        group, resource = (parts[0], parts[1]) if grouped else ("", parts[0])
        root = f"{group}/{resource}"
        found = self._by_root.get(root)
        if found is None:
            found = self._by_root[root] = self.config.providers_for(group, resource)
        return found

    def _write(self, key: str, value: bytes) -> bytes:
        return self._providers(key).write(value, key)

    def _read(self, kv: KeyValue) -> KeyValue:
        try:
            plain, stale = self._providers(kv.key).read(kv.value, kv.key)
        except TransformError as error:
            raise errors.internal(f'unable to transform key "{kv.key}": {error}') from None
        return dataclasses.replace(kv, value=plain, stale=stale)

    async def create(self, key: str, value: bytes) -> KeyValue:
        return dataclasses.replace(
            await self.inner.create(key, self._write(key, value)), value=value
        )

    async def get(self, key: str) -> KeyValue:
        return self._read(await self.inner.get(key))

    async def list(
        self, prefix: str, *, limit: int = 0, start_after: str | None = None, revision: int = 0
    ) -> ListResult:
        page = await self.inner.list(
            prefix, limit=limit, start_after=start_after, revision=revision
        )
        return dataclasses.replace(page, items=[self._read(kv) for kv in page.items])

    async def count(self, prefix: str) -> int:
        return await self.inner.count(prefix)

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        written = await self.inner.update(key, self._write(key, value), expected_revision)
        return dataclasses.replace(written, value=value)

    async def delete(self, key: str, expected_revision: int = 0) -> KeyValue:
        return self._read(await self.inner.delete(key, expected_revision))

    async def watch(
        self, prefix: str, from_revision: int, *, progress_after: float | None = None
    ) -> AsyncGenerator[Event | Progress, None]:
        events = self.inner.watch(prefix, from_revision, progress_after=progress_after)
        try:
            async for event in events:
                if isinstance(event, Progress):
                    yield event
                    continue
                prev = self._read(event.prev) if event.prev is not None else None
                yield Event(event.type, self._read(event.kv), prev)
        finally:
            await events.aclose()

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def close(self) -> None:
        await self.inner.close()
