"""The kubelet's API secured as in the lab, against a real API server under ``Node,RBAC`` with
the real csrapproving (``approve_kubelet_serving``) and csrsigning controllers:

- the kubelet obtains its serving certificate through a ``kubernetes.io/kubelet-serving``
  request for its Node's addresses, and serves with it;
- requests are authenticated (client certificates, bearer tokens by TokenReview, no anonymous)
  and authorized by SubjectAccessReview: a service account granted only ``nodes/log`` reads
  the node's logs, but gets 403 on exec; no credentials or a bad token get 401;
- the API server, as ``kube-apiserver-kubelet-client`` (``system:kubelet-api-admin``), relays
  ``pods/log`` after verifying the kubelet against ``--kubelet-certificate-authority``, and
  refuses a kubelet whose certificate another CA signed with a 503 Status saying so."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import aiohttp
import pytest

from kube.api.kinds.authentication_v1 import TokenRequest, TokenRequestSpec
from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.api.kinds.core_v1.node import (
    DaemonEndpoint,
    Node,
    NodeAddress,
    NodeDaemonEndpoints,
    NodeStatus,
)
from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec
from kube.api.kinds.rbac_v1 import ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject
from kube.api.meta_v1 import ObjectMeta
from kube.client import kubeconfig
from kube.client.errors import ApiError
from kube.client.rest import Client
from kube.clock import RealClock
from kube.pki import CertificateAuthority, KeyPair, client_ssl_context, identity
from node.cri.pb import api_pb2 as pb
from node.kubelet import certificate
from node.kubelet.auth import AuthOptions, KubeletAuth
from node.kubelet.server import KubeletServer
from tests.node.kubelet.certificate_servers import cluster
from tests.node.kubelet.test_kubelet_server import Lookup, Runtime, StreamingServer
from tests.node.kubelet.test_streams import FakeStreamingServer

NODE = "node-a"
ADDRESSES = [
    NodeAddress(type="InternalIP", address="127.0.0.1"),
    NodeAddress(type="Hostname", address=NODE),
]


async def request(
    url: str, tls: ssl.SSLContext, method: str = "GET", token: str | None = None
) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls)) as session,
        session.request(method, url, headers=headers) as response,
    ):
        return response.status, await response.text()


async def test_the_kubelet_api_is_authenticated_authorized_and_verified(tmp_path: Path) -> None:
    async with cluster(tmp_path, kubelet_serving=True) as running:
        data_dir = running.server.config.data_dir
        ca = CertificateAuthority(KeyPair.read(data_dir / "pki", "ca"))
        own = ca.issue(f"system:node:{NODE}", organizations=["system:nodes"], client=True)
        node_kubeconfig = tmp_path / "kubelet.kubeconfig"
        kubeconfig.write(
            node_kubeconfig,
            kubeconfig.render(
                f"https://127.0.0.1:{running.port}", ca.cert_pem, f"system:node:{NODE}", own
            ),
        )
        system_logs = tmp_path / "var-log"
        system_logs.mkdir()
        (system_logs / "syslog").write_text("booted\n")
        container_log = tmp_path / "app.log"
        container_log.write_text("2026-01-01T00:00:00.000000000Z stdout F hello\n")
        clock = RealClock()
        streaming, spdy = StreamingServer(), FakeStreamingServer()
        runtime = Runtime(streaming, spdy)
        runtime.statuses["cid-app"] = pb.ContainerStatus(
            id="cid-app", state=pb.CONTAINER_EXITED, log_path=str(container_log)
        )
        async with (
            Client.from_kubeconfig(data_dir / "admin.kubeconfig") as admin,
            Client.from_kubeconfig(node_kubeconfig) as kubelet,
        ):
            options = AuthOptions(anonymous=False, token_webhook=True, webhook_authorization=True)
            server = KubeletServer(
                Lookup(),
                runtime,
                address="127.0.0.1",
                port=0,
                certificate=None,
                client_ca=data_dir / "pki" / "ca.crt",
                auth=KubeletAuth(options, kubelet, NODE, clock),
                system_log_dir=system_logs,
            )
            port = await server.start()
            try:
                await kubelet.create(Node(metadata=ObjectMeta(name=NODE)))
                registered = await kubelet.get(Node, NODE)
                registered.status = NodeStatus(
                    addresses=ADDRESSES,
                    daemon_endpoints=NodeDaemonEndpoints(
                        kubelet_endpoint=DaemonEndpoint(port=port)
                    ),
                )
                await kubelet.update_status(registered)

                # The serving certificate, through the CSR API.
                manager = certificate.serving_manager(
                    kubelet,
                    tmp_path / "pki",
                    NODE,
                    clock,
                    lambda: ADDRESSES,
                    server.use_certificate,
                )
                await asyncio.wait_for(manager.rotate(), 30)
                stored = certificate.PemStore(tmp_path / "pki" / certificate.SERVING_FILE).current()
                assert stored is not None
                assert identity(stored) == (f"system:node:{NODE}", ["system:nodes"])
                template = certificate.serving_template(ADDRESSES)
                assert template is not None and template.satisfied_by(stored)

                url = f"https://127.0.0.1:{port}"
                verified = client_ssl_context(ca.cert_pem)  # the serving certificate verifies

                # Who may do what on the kubelet.
                await admin.create(
                    ServiceAccount(metadata=ObjectMeta(name="reader", namespace="default"))
                )
                await admin.create(
                    ClusterRole(
                        metadata=ObjectMeta(name="node-log-reader"),
                        rules=[PolicyRule(verbs=["get"], api_groups=[""], resources=["nodes/log"])],
                    )
                )
                await admin.create(
                    ClusterRoleBinding(
                        metadata=ObjectMeta(name="node-log-reader"),
                        role_ref=RoleRef(
                            api_group="rbac.authorization.k8s.io",
                            kind="ClusterRole",
                            name="node-log-reader",
                        ),
                        subjects=[
                            Subject(kind="ServiceAccount", name="reader", namespace="default")
                        ],
                    )
                )
                issued = await admin.create_subresource(
                    ServiceAccount,
                    "reader",
                    "default",
                    "token",
                    TokenRequest(spec=TokenRequestSpec()),
                )
                token = issued["status"]["token"]
                assert await request(f"{url}/logs/syslog", verified, token=token) == (
                    200,
                    "booted\n",
                )
                status, body = await request(
                    f"{url}/exec/default/web/app?command=ls&stdout=true", verified, "POST", token
                )
                assert (status, body) == (
                    403,
                    "Forbidden (user=system:serviceaccount:default:reader, verb=create, "
                    "resource=nodes, subresource(s)=[proxy])\n",
                )
                status, _ = await request(
                    f"{url}/containerLogs/default/web/app", verified, token=token
                )
                assert status == 403  # container logs are nodes/proxy, as upstream
                assert await request(f"{url}/pods", verified) == (401, "Unauthorized\n")
                assert await request(f"{url}/pods", verified, token="not-a-token") == (
                    401,
                    "Unauthorized\n",
                )
                assert await request(f"{url}/healthz", verified) == (200, "ok")

                # The API server's own way in: kubectl logs.
                await admin.create(
                    ServiceAccount(metadata=ObjectMeta(name="default", namespace="default"))
                )
                await admin.create(
                    Pod(
                        metadata=ObjectMeta(name="web", namespace="default"),
                        spec=PodSpec(
                            node_name=NODE, containers=[Container(name="app", image="busybox")]
                        ),
                    )
                )
                log_path = "/api/v1/namespaces/default/pods/web/log"
                assert await admin.request("GET", log_path) == b"hello\n"

                # A kubelet the API server cannot verify is refused, with a Status saying why.
                stranger = CertificateAuthority.create("stranger")
                server.use_certificate(
                    stranger.issue("kubelet", server=True, ip_addresses=["127.0.0.1"])
                )
                with pytest.raises(ApiError) as refused:
                    await admin.request("GET", log_path)
                assert refused.value.code == 503
                assert refused.value.message.startswith(
                    f'the kubelet of node "{NODE}" is not trusted: its serving certificate does '
                    "not verify against --kubelet-certificate-authority"
                ), refused.value.message
            finally:
                await server.stop()
