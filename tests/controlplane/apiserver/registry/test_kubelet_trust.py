"""The API server's kubelet client: a kubelet's serving certificate is checked only against
``--kubelet-certificate-authority`` (unset: not checked, as upstream), an untrusted kubelet
is a 503 Status that says why, and a kubelet's refusal of ``pods/log`` reaches kubectl as a
Status carrying the kubelet's words."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from controlplane.apiserver import errors
from controlplane.apiserver.registry.proxy import KubeletConnector
from kube.api.kinds.core_v1.node import (
    DaemonEndpoint,
    Node,
    NodeAddress,
    NodeDaemonEndpoints,
    NodeStatus,
)
from kube.api.meta_v1 import ObjectMeta
from kube.pki import CertificateAuthority

CLUSTER = CertificateAuthority.create("cluster")
API_SERVER = CLUSTER.issue("kube-apiserver-kubelet-client", client=True)


async def _serve(app: web.Application, context: ssl.SSLContext | None) -> web.AppRunner:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    return runner


@pytest.fixture
async def kubelet(tmp_path: Path) -> AsyncIterator[int]:
    """A kubelet whose serving certificate a CA other than the cluster's signed; it refuses
    ``/containerLogs/ns/denied/app`` with upstream's plain-text 403."""
    cert, key = (
        CertificateAuthority.create("stranger")
        .issue("kubelet", server=True, ip_addresses=["127.0.0.1"])
        .write(tmp_path, "kubelet")
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def logs(request: web.Request) -> web.Response:
        if request.match_info["pod"] == "denied":
            return web.Response(status=403, text="Forbidden (user=x, verb=get, resource=nodes)\n")
        return web.Response(text="hello\n")

    app = web.Application()
    app.router.add_get("/containerLogs/ns/{pod}/app", logs)
    runner = await _serve(app, context)
    try:
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


async def _get(connector: KubeletConnector, port: int, pod: str) -> tuple[int, str]:
    """What the API server answers for ``pods/log`` of ``pod`` on that kubelet."""
    node = Node(
        metadata=ObjectMeta(name="n1"),
        status=NodeStatus(
            addresses=[NodeAddress(type="InternalIP", address="127.0.0.1")],
            daemon_endpoints=NodeDaemonEndpoints(kubelet_endpoint=DaemonEndpoint(port=port)),
        ),
    )

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            return await connector.relay_get(
                request, node, f"/containerLogs/ns/{pod}/app", {}, status_errors=True
            )
        except errors.ApiError as error:
            return web.Response(status=error.code, text=f"{error.reason}: {error.message}")

    app = web.Application()
    app.router.add_get("/", handler)
    runner = await _serve(app, None)
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{runner.addresses[0][1]}/") as answer,
        ):
            return answer.status, await answer.text()
    finally:
        await runner.cleanup()


async def test_without_a_kubelet_ca_the_certificate_is_not_checked(kubelet: int) -> None:
    assert await _get(KubeletConnector(None, API_SERVER), kubelet, "web") == (200, "hello\n")


async def test_a_kubelet_the_ca_did_not_sign_is_refused_with_a_reason(kubelet: int) -> None:
    status, text = await _get(KubeletConnector(CLUSTER.cert_pem, API_SERVER), kubelet, "web")
    assert status == 503
    assert text.startswith(
        'ServiceUnavailable: the kubelet of node "n1" is not trusted: its serving certificate '
        "does not verify against --kubelet-certificate-authority ("
    ), text
    assert "certificate verify failed" in text


async def test_a_kubelet_refusal_is_a_status_with_its_words(kubelet: int) -> None:
    assert await _get(KubeletConnector(None, API_SERVER), kubelet, "denied") == (
        403,
        "Forbidden: Forbidden (user=x, verb=get, resource=nodes)",
    )
