"""Kubeconfig files: written for each identity the cluster issues, read by every client.

The format is kubectl's: clusters, users and contexts by name, certificates embedded as
base64 ``*-data`` fields or referenced by path (relative paths are relative to the file, as
kubectl resolves them).  ``ClientConfig`` is what a client needs after the indirection is
resolved: where the server is, how to trust it, and how to prove who it is.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kube.pki import KeyPair, write_file


class KubeconfigError(ValueError):
    """A kubeconfig that is missing, malformed or names something it does not define."""


@dataclass(frozen=True)
class ClientConfig:
    """Server address, trust and credentials, with every indirection resolved."""

    server: str
    ca_pem: bytes | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    token: str | None = None
    insecure_skip_tls_verify: bool = False
    token_file: Path | None = None
    """A bearer token re-read whenever the file changes (bound service-account tokens rotate);
    it wins over ``token``, as in client-go."""
    namespace: str | None = None
    """The namespace the credentials belong to, when the configuration says (in-cluster)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def render(
    server: str,
    ca_pem: bytes,
    user: str,
    credentials: KeyPair | None = None,
    token: str | None = None,
    cluster: str = "kubelab",
) -> str:
    """A kubeconfig with one cluster, one user and one current context."""
    user_entry: dict[str, str] = {}
    if credentials is not None:
        user_entry["client-certificate-data"] = _b64(credentials.cert_pem)
        user_entry["client-key-data"] = _b64(credentials.key_pem)
    if token is not None:
        user_entry["token"] = token
    context = f"{user}@{cluster}"
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    return yaml.safe_dump(document, sort_keys=False)


def write(path: Path, text: str) -> None:
    """Write a kubeconfig readable only by its owner (it holds a private key)."""
    write_file(path, text.encode(), 0o600)


def _by_name(document: dict[str, Any], section: str, name: str) -> dict[str, Any]:
    for entry in document.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(section[:-1])
            if isinstance(body, dict):
                return body
    raise KubeconfigError(f"{section[:-1]} {name!r} is not defined")


def _data(entry: dict[str, Any], field: str, base: Path) -> bytes | None:
    if entry.get(f"{field}-data"):
        try:
            return base64.b64decode(entry[f"{field}-data"], validate=True)
        except ValueError as error:
            raise KubeconfigError(f"{field}-data is not valid base64: {error}") from None
    if entry.get(field):
        path = Path(entry[field])
        return (path if path.is_absolute() else base / path).read_bytes()
    return None


def load(path: Path, context: str | None = None) -> ClientConfig:
    """The client configuration of ``context`` (the current one by default) in ``path``."""
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as error:
        raise KubeconfigError(f"cannot read {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise KubeconfigError(f"{path} is not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise KubeconfigError(f"{path} is not a kubeconfig")
    name = context or document.get("current-context")
    if not name:
        raise KubeconfigError(f"{path} has no current context")
    ctx = _by_name(document, "contexts", name)
    cluster = _by_name(document, "clusters", ctx.get("cluster", ""))
    user = _by_name(document, "users", ctx.get("user", "")) if ctx.get("user") else {}
    if not cluster.get("server"):
        raise KubeconfigError(f"cluster {ctx.get('cluster')!r} has no server")
    base = path.parent
    return ClientConfig(
        server=str(cluster["server"]),
        ca_pem=_data(cluster, "certificate-authority", base),
        cert_pem=_data(user, "client-certificate", base),
        key_pem=_data(user, "client-key", base),
        token=user.get("token"),
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify")),
        token_file=_path(user.get("tokenFile"), base),
        namespace=ctx.get("namespace") or None,
    )


def _path(value: object, base: Path) -> Path | None:
    if not value:
        return None
    path = Path(str(value))
    return path if path.is_absolute() else base / path
