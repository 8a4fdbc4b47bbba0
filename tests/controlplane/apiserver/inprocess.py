"""An API server inside the test's event loop (``serve`` as ``kubelab apiserver`` runs it,
HTTPS and client certificates included) and an aiohttp session with the admin credentials:
for tests that send many requests (fuzzing) or look at the store underneath the server."""

from __future__ import annotations

import contextlib
import ssl
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from controlplane.apiserver.server import APIServer, Running, ServerConfig, serve
from controlplane.storage.interface import Store
from kube.client import kubeconfig


def admin_ssl(data_dir: Path) -> ssl.SSLContext:
    """Trust the server's CA and present the admin certificate of its kubeconfig."""
    config = kubeconfig.load(data_dir / "admin.kubeconfig")
    context = ssl.create_default_context(cadata=(config.ca_pem or b"").decode())
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp) / "c.pem", Path(tmp) / "k.pem"
        cert.write_bytes(config.cert_pem or b"")
        key.write_bytes(config.key_pem or b"")
        context.load_cert_chain(cert, key)
    return context


@contextlib.asynccontextmanager
async def serving(
    store: Store, data_dir: Path, **config: object
) -> AsyncIterator[tuple[Running, aiohttp.ClientSession]]:
    """A server over ``store`` on a free loopback port (``config`` sets ``ServerConfig``
    fields) and an admin session whose relative URLs go to it.  The store stays open."""
    settings = ServerConfig(data_dir=data_dir, secure_port=0, **config)  # type: ignore[arg-type]
    running = await serve(APIServer(store, settings))
    try:
        connector = aiohttp.TCPConnector(ssl=admin_ssl(data_dir))
        async with aiohttp.ClientSession(
            f"https://127.0.0.1:{running.port}", connector=connector
        ) as session:
            yield running, session
    finally:
        await running.stop()
