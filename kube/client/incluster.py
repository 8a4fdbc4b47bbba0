"""In-cluster configuration: how a component running in a pod finds and trusts the API server.

What client-go's ``rest.InClusterConfig`` reads, and nothing else: the kubelet gives every
pod the ``KUBERNETES_SERVICE_HOST`` and ``KUBERNETES_SERVICE_PORT`` variables (the
``kubernetes`` Service in the default namespace) and mounts the pod's service-account
credentials under ``/var/run/secrets/kubernetes.io/serviceaccount``: ``token`` (a bound token
the kubelet replaces before it expires), ``ca.crt`` (the cluster's CA) and ``namespace``.

The token is therefore not read once: the configuration names the file (``token_file``) and
the client asks a ``TokenFile`` for the current token on every request.  ``TokenFile``
re-reads the file only when its identity or modification time changed (the kubelet swaps the
projected volume's ``..data`` symlink atomically, so each rotation is a new inode), and keeps
the last good token when a read fails, as client-go's cached token source does.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from kube.client.kubeconfig import ClientConfig, KubeconfigError

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
HOST_ENV = "KUBERNETES_SERVICE_HOST"
PORT_ENV = "KUBERNETES_SERVICE_PORT"


class InClusterError(KubeconfigError):
    """Not running in a pod, or the pod's service-account credentials are missing."""


def load(
    environ: Mapping[str, str] | None = None, directory: Path = SERVICE_ACCOUNT_DIR
) -> ClientConfig:
    """The configuration of a client running in a pod; InClusterError outside one.

    ``environ`` (default ``os.environ``) and ``directory`` are parameters for tests.
    """
    env = os.environ if environ is None else environ
    host, port = env.get(HOST_ENV, ""), env.get(PORT_ENV, "")
    if not host or not port:
        raise InClusterError(
            f"unable to load in-cluster configuration: {HOST_ENV} and {PORT_ENV} must be defined"
        )
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InClusterError(f"{PORT_ENV} is not a port number: {port!r}")
    token_file = directory / "token"
    # Read once now so a pod without a token fails at start, not at its first request.
    TokenFile(token_file).current()
    try:
        ca_pem = (directory / "ca.crt").read_bytes()
    except OSError as error:
        raise InClusterError(f"cannot read {directory / 'ca.crt'}: {error.strerror}") from None
    try:
        namespace = (directory / "namespace").read_text().strip() or None
    except FileNotFoundError:
        namespace = None
    except OSError as error:
        raise InClusterError(f"cannot read {directory / 'namespace'}: {error.strerror}") from None
    return ClientConfig(
        server=f"https://{_host(host)}:{port}",
        ca_pem=ca_pem,
        token_file=token_file,
        namespace=namespace,
    )


def _host(host: str) -> str:
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


class TokenFile:
    """The bearer token in a file, re-read when the file changes; see the module docstring.

    ``current()`` costs one ``stat`` when nothing changed.  It raises InClusterError only when
    no token was ever read; afterwards a failed read keeps the token it had.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._token: str | None = None
        self._identity: tuple[int, int, int, int] | None = None

    def current(self) -> str:
        try:
            return self._read()
        except InClusterError as error:
            if self._token is None:
                raise
            log.warning("keeping the previous token: %s", error)
            return self._token

    def _read(self) -> str:
        try:
            stat = os.stat(self.path)
            identity = (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)
            if identity == self._identity and self._token is not None:
                return self._token
            token = self.path.read_text().strip()
        except OSError as error:
            raise InClusterError(f"cannot read token {self.path}: {error.strerror}") from None
        if not token:
            raise InClusterError(f"token {self.path} is empty")
        self._token, self._identity = token, identity
        return token
