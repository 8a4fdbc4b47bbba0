"""API aggregation against real processes: a ``kubelab apiserver`` with endpoint routing and a
real HTTPS extension server (tests/controlplane/apiserver/extension_server.py) serving
``wardle.example.com/v1alpha1`` Flunders behind a Service, registered with an APIService made
through kubectl.

The module's server and extension server are shared; the tests that stop the extension server
start it again (on the same port) before they end.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes
import pytest
import requests
from kubernetes import client as k8s
from kubernetes import utils as k8s_utils

from kube.pki import CertificateAuthority
from tests.controlplane.apiserver.corpus import CORPUS, columns, create, refused_document
from tests.controlplane.apiserver.extensions import (
    Extension,
    apiservice,
    available,
    endpoint_slice,
    expose,
    register,
    until,
)
from tests.servers import (
    BARE_APISERVER,
    Kubectl,
    ServerProcess,
    host_address,
    start_server,
    stop_server,
)

GROUP, VERSION = "wardle.example.com", "v1alpha1"
NAME = f"{VERSION}.{GROUP}"
NAMESPACE = "wardle"


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("aggregator") / "data"
    data_dir.mkdir()
    server = start_server(data_dir, *BARE_APISERVER, "--enable-aggregator-routing=true")
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture(scope="module")
def admin(apiserver: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(apiserver.kubeconfig, tmp_path_factory.mktemp("kube-cache"), NAMESPACE)


def _available(kubectl: Kubectl) -> dict[str, Any]:
    return available(kubectl, NAME)


@pytest.fixture(scope="module")
def wardle(
    apiserver: ServerProcess, admin: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Extension]:
    """The extension server up behind Service wardle/api and registered as available."""
    work = tmp_path_factory.mktemp("wardle")
    ca = CertificateAuthority.create("wardle-ca")
    serving = ca.issue("api.wardle.svc", server=True, dns_names=["api.wardle.svc"])
    cert, key = serving.write(work, "serving")
    extension = Extension(
        [
            sys.executable,
            "-m",
            "tests.controlplane.apiserver.extension_server",
            "--kubeconfig",
            str(apiserver.kubeconfig),
            "--cert",
            str(cert),
            "--key",
            str(key),
            "--record",
            str(work / "requests.jsonl"),
        ],
        work / "requests.jsonl",
        host_address(),
    )
    extension.start()
    try:
        admin.run("create", "namespace", NAMESPACE, namespaced=False)
        expose(admin, extension)
        register(admin, NAME, GROUP, VERSION, ca.cert_pem)
        yield extension
    finally:
        extension.stop()


def test_local_apiservices_for_every_builtin_group(admin: Kubectl) -> None:
    table = columns(admin.run("get", "apiservices", namespaced=False).stdout)
    assert table[0] == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    rows = {row[0]: row[1:3] for row in table[1:]}
    for name in ("v1.", "v1.apps", "v2.autoscaling", "v1.rbac.authorization.k8s.io"):
        assert rows[name] == ["Local", "True"]
    apps = admin.json("get", "apiservice", "v1.apps")
    assert apps["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
    assert apps["spec"] == {
        "group": "apps",
        "version": "v1",
        "groupPriorityMinimum": 17800,
        "versionPriority": 15,
    }
    assert _condition(apps) == ("True", "Local", "Local APIServices are always available")


def _condition(apiservice: dict[str, Any]) -> tuple[str, str, str]:
    found = next(c for c in apiservice["status"]["conditions"] if c["type"] == "Available")
    return found["status"], found["reason"], found["message"]


def test_kubectl_reaches_the_extension_server(admin: Kubectl, wardle: Extension) -> None:
    """get and list go through the aggregator; the extension server sees the kubectl user in
    X-Remote-User (never its credentials) and authorizes it with a SubjectAccessReview."""
    table = columns(admin.run("get", "flunders").stdout)
    assert [row[0] for row in table] == ["NAME", "alpha", "beta"]
    alpha = admin.json("get", "flunder", "alpha")
    assert alpha["spec"] == {"reference": "alpha"}
    assert admin.run("get", "fl", "beta", "-o", "name").stdout.strip() == (f"flunder.{GROUP}/beta")
    missing = admin.run("get", "flunder", "gamma", check=False)
    assert f'flunders.{GROUP} "gamma" not found' in missing.stderr
    seen = [r for r in wardle.requests() if "/flunders" in r["path"]]
    assert seen
    assert {(r["user"], r["authorization"]) for r in seen} == {("kubernetes-admin", None)}
    assert "system:masters" in seen[-1]["groups"]
    row = admin.run("get", "apiservice", NAME, namespaced=False).stdout.splitlines()[1].split()
    assert row[:3] == [NAME, f"{NAMESPACE}/api", "True"]


def test_api_resources_and_discovery_list_the_extension(
    apiserver: ServerProcess, admin: Kubectl, wardle: Extension
) -> None:
    resources = admin.run(
        "api-resources", f"--api-group={GROUP}", "-o", "wide", namespaced=False
    ).stdout
    assert columns(resources)[1] == [
        "flunders",
        "fl",
        f"{GROUP}/{VERSION}",
        "true",
        "Flunder",
        "get,list,watch",
        "wardle",
    ]
    client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        groups = k8s.ApisApi(client).get_api_versions().groups
        names = [g.name for g in groups]
        # Highest groupPriorityMinimum first: apiregistration (20001), apps (17800), ...
        assert names[0] == "apiregistration.k8s.io"
        assert names.index("apps") < names.index("batch") < names.index(GROUP)
        wardle_group = next(g for g in groups if g.name == GROUP)
        assert wardle_group.preferred_version.group_version == f"{GROUP}/{VERSION}"
        one = client.call_api(
            f"/apis/{GROUP}",
            "GET",
            response_types_map={200: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
        assert one["versions"] == [{"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}]
    finally:
        client.close()


def test_watch_streams_through(apiserver: ServerProcess, wardle: Extension) -> None:
    client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        response = client.call_api(
            f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/flunders",
            "GET",
            query_params=[("watch", "true")],
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=10,
        )
        received = b""
        for chunk in response.stream(amt=None):
            received += chunk
            if received.count(b"\n") >= 2:
                break
        lines = [json.loads(line) for line in received.splitlines()]
        response.release_conn()
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [
            ("ADDED", "alpha"),
            ("ADDED", "beta"),
        ]
    finally:
        client.close()


def test_availability_follows_the_extension_server(admin: Kubectl, wardle: Extension) -> None:
    """Stopped: FailedDiscoveryCheck and 503s; without endpoints: MissingEndpoints; back:
    Passed."""
    wardle.stop()
    try:
        until(
            lambda: _available(admin).get("reason") == "FailedDiscoveryCheck",
            "FailedDiscoveryCheck",
        )
        condition = _available(admin)
        assert condition["status"] == "False"
        assert condition["message"].startswith("failing or missing response from https://")
        refused = admin.run("get", "flunders", check=False)
        assert refused.returncode == 1
        assert "ServiceUnavailable" in refused.stderr or "unable to handle" in refused.stderr
        admin.run("delete", "endpointslice", "api-1")
        until(lambda: _available(admin).get("reason") == "MissingEndpoints", "MissingEndpoints")
        assert _available(admin)["message"] == (
            'endpoints for service/api in "wardle" have no addresses with port name ""'
        )
        row = admin.run("get", "apiservice", NAME, namespaced=False).stdout.splitlines()[1]
        assert "False (MissingEndpoints)" in row
    finally:
        wardle.start()
        existing = admin.run("get", "endpointslice", "api-1", check=False)
        if existing.returncode != 0:
            create(admin, endpoint_slice(wardle.address, wardle.port))
    until(lambda: _available(admin).get("status") == "True", "the APIService to be back")
    assert _available(admin)["reason"] == "Passed"
    assert _available(admin)["message"] == "all checks passed"
    assert [r[0] for r in columns(admin.run("get", "flunders").stdout)] == [
        "NAME",
        "alpha",
        "beta",
    ]


def test_missing_service_and_wrong_port(admin: Kubectl, wardle: Extension) -> None:
    for name, service, reason, message in (
        (
            "v1.nowhere.example.com",
            {"namespace": NAMESPACE, "name": "nothing"},
            "ServiceNotFound",
            'service/nothing in "wardle" is not present',
        ),
        (
            "v1.wrongport.example.com",
            {"namespace": NAMESPACE, "name": "api", "port": 8443},
            "ServicePortError",
            'service/api in "wardle" is not listening on port 8443',
        ),
    ):
        group = name.removeprefix("v1.")
        document = apiservice(
            name,
            {
                "group": group,
                "version": "v1",
                "groupPriorityMinimum": 100,
                "versionPriority": 10,
                "service": service,
                "insecureSkipTLSVerify": True,
            },
        )
        admin.run("create", "-f", "-", input=json.dumps(document), namespaced=False)
        try:

            def reached(name: str = name, reason: str = reason) -> bool:
                got = admin.json("get", "apiservice", name).get("status", {}).get("conditions")
                return bool(got) and got[0].get("reason") == reason

            until(reached, reason)
            got = admin.json("get", "apiservice", name)
            assert _condition(got) == ("False", reason, message)
            unavailable = admin.run("get", "--raw", f"/apis/{group}/v1", check=False)
            assert unavailable.returncode == 1
            assert "ServiceUnavailable" in unavailable.stderr or "503" in unavailable.stderr
        finally:
            admin.run("delete", "apiservice", name, namespaced=False)


@pytest.mark.parametrize(
    ("spec", "name", "message"),
    [
        pytest.param(
            {"group": GROUP, "version": VERSION},
            "v1.wardle.example.com",
            'The APIService "v1.wardle.example.com" is invalid: metadata.name: Invalid value: '
            '"v1.wardle.example.com": must be `spec.version+"."+spec.group`: '
            '"v1alpha1.wardle.example.com"',
            id="name",
        ),
        pytest.param(
            {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 20001},
            NAME,
            "spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000",
            id="group-priority",
        ),
        pytest.param(
            {"group": GROUP, "version": VERSION, "versionPriority": 0},
            NAME,
            "spec.versionPriority: Invalid value: 0: must be positive and less than 1000",
            id="version-priority",
        ),
        pytest.param(
            {"group": GROUP, "version": VERSION, "service": None, "caBundle": "YWJj"},
            NAME,
            'spec.caBundle: Invalid value: "3 bytes": local APIServices may not have a caBundle',
            id="local-ca-bundle",
        ),
        pytest.param(
            {"group": GROUP, "version": VERSION, "insecureSkipTLSVerify": True, "caBundle": "YQ=="},
            NAME,
            "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is "
            "present",
            id="insecure-and-ca-bundle",
        ),
        pytest.param(
            {"group": GROUP, "version": VERSION, "service": {"namespace": NAMESPACE}},
            NAME,
            "spec.service.name: Required value",
            id="service-name",
        ),
    ],
)
def test_invalid_apiservices_are_refused(
    admin: Kubectl, spec: dict[str, Any], name: str, message: str
) -> None:
    base = {
        "groupPriorityMinimum": 100,
        "versionPriority": 10,
        "service": {"namespace": NAMESPACE, "name": "api"},
    }
    document = apiservice(name, {**base, **spec})
    assert message in refused_document(admin, document)


def test_python_client_apiregistration(apiserver: ServerProcess, tmp_path: Path) -> None:
    """ApiregistrationV1Api create/list/delete, and the client's own e2e test's manifest
    created twice with create_from_yaml: the second is refused with upstream's bytes."""
    client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    registration = k8s.ApiregistrationV1Api(client)
    try:
        body = k8s.V1APIService(
            metadata=k8s.V1ObjectMeta(name="v1beta1.client.example.com"),
            spec=k8s.V1APIServiceSpec(
                group="client.example.com",
                version="v1beta1",
                group_priority_minimum=500,
                version_priority=5,
                insecure_skip_tls_verify=True,
                service=k8s.ApiregistrationV1ServiceReference(namespace="x", name="y"),
            ),
        )
        created = registration.create_api_service(body)
        assert created.spec.service.port == 443
        listed = [s.metadata.name for s in registration.list_api_service().items]
        assert "v1beta1.client.example.com" in listed and "v1.apps" in listed
        registration.delete_api_service("v1beta1.client.example.com")
        manifest = tmp_path / "api-service.yaml"
        manifest.write_text(
            "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n"
            "  name: v1alpha1.wardle.k8s.io\nspec:\n  insecureSkipTLSVerify: true\n"
            "  group: wardle.k8s.io\n  groupPriorityMinimum: 1000\n  versionPriority: 15\n"
            "  service:\n    name: api\n    namespace: wardle\n  version: v1alpha1\n"
        )
        k8s_utils.create_from_yaml(client, str(manifest))
        read = registration.read_api_service(name="v1alpha1.wardle.k8s.io")
        assert (read.spec.group, read.spec.version) == ("wardle.k8s.io", "v1alpha1")
        with pytest.raises(k8s_utils.FailToCreateError) as conflict:
            k8s_utils.create_from_yaml(client, str(manifest))
        assert str(conflict.value) == (
            "Error from server (Conflict): "
            '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            '"message":"apiservices.apiregistration.k8s.io \\"v1alpha1.wardle.k8s.io\\" '
            'already exists","reason":"AlreadyExists",'
            '"details":{"name":"v1alpha1.wardle.k8s.io","group":"apiregistration.k8s.io",'
            '"kind":"apiservices"},"code":409}\n'
        )
        registration.delete_api_service(name="v1alpha1.wardle.k8s.io", body={})
    finally:
        client.close()


def test_extension_apiserver_authentication_published(admin: Kubectl) -> None:
    shown = admin.run(
        "get",
        "configmap",
        "-n",
        "kube-system",
        "extension-apiserver-authentication",
        "-o",
        "json",
        namespaced=False,
    )
    data = json.loads(shown.stdout)["data"]
    assert sorted(data) == [
        "client-ca-file",
        "requestheader-allowed-names",
        "requestheader-client-ca-file",
        "requestheader-extra-headers-prefix",
        "requestheader-group-headers",
        "requestheader-uid-headers",
        "requestheader-username-headers",
    ]
    assert json.loads(data["requestheader-allowed-names"]) == ["front-proxy-client"]
    assert json.loads(data["requestheader-username-headers"]) == ["X-Remote-User"]
    assert data["client-ca-file"].startswith("-----BEGIN CERTIFICATE-----")


def test_custom_resource_groups_get_local_apiservices(admin: Kubectl) -> None:
    """The docs' CronTab definition: its group/version registered, and gone with it."""
    crd = CORPUS / "manifests" / "apiextensions-customresourcedefinition-crontab.yaml"
    admin.run("create", "-f", str(crd), namespaced=False)

    def registered() -> bool:
        shown = admin.run("get", "apiservice", "v1.stable.example.com", check=False)
        return shown.returncode == 0

    until(registered, "the custom resource's APIService")
    service = admin.json("get", "apiservice", "v1.stable.example.com")
    assert service["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "true"}
    assert (service["spec"]["groupPriorityMinimum"], service["spec"]["versionPriority"]) == (
        1000,
        100,
    )
    admin.run("delete", "crd", "crontabs.stable.example.com", namespaced=False)
    until(lambda: not registered(), "the custom resource's APIService to go")


def test_the_api_server_believes_its_front_proxy(apiserver: ServerProcess) -> None:
    """A request with the front-proxy client certificate is the user its X-Remote-* headers
    name (without them: anonymous); the same headers from an ordinary client are ignored."""
    pki = apiserver.data_dir / "pki"
    front_proxy = (str(pki / "front-proxy-client.crt"), str(pki / "front-proxy-client.key"))
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    url = f"{apiserver.url}/apis/authentication.k8s.io/v1/selfsubjectreviews"
    headers = {"X-Remote-User": "carol", "X-Remote-Group": "team", "X-Remote-Extra-Scopes": "a"}

    def who(cert: tuple[str, str], sent: dict[str, str]) -> dict[str, Any]:
        answer = requests.post(
            url, json=review, headers=sent, cert=cert, verify=str(pki / "ca.crt"), timeout=10
        )
        assert answer.status_code == 201, answer.text
        user: dict[str, Any] = answer.json()["status"]["userInfo"]
        return user

    assert who(front_proxy, headers) == {
        "username": "carol",
        "groups": ["team", "system:authenticated"],
        "extra": {"scopes": ["a"]},
    }
    admin = (str(pki / "admin.crt"), str(pki / "admin.key"))
    assert who(admin, headers)["username"] == "kubernetes-admin"
    anonymous = requests.get(
        f"{apiserver.url}/api/v1/namespaces",
        cert=front_proxy,
        verify=str(pki / "ca.crt"),
        timeout=10,
    )
    assert anonymous.status_code == 403
    assert '"system:anonymous"' in anonymous.json()["message"]


def test_websocket_upgrades_are_relayed(apiserver: ServerProcess, wardle: Extension) -> None:
    """An exec-like websocket (subprotocol v5.channel.k8s.io) through the API server to the
    extension server and back, frame by frame."""
    pki = apiserver.data_dir / "pki"
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
    url = f"{apiserver.url}/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/flunders/alpha/echo"

    async def converse() -> list[str | bytes]:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(url, protocols=["v5.channel.k8s.io"], ssl=context) as socket,
        ):
            assert socket.protocol == "v5.channel.k8s.io"
            connection = socket.get_extra_info("socket")
            got: list[str | bytes] = [(await socket.receive()).data]
            for frame in (b"\x01out", b"\x02err"):
                await socket.send_bytes(frame)
                got.append((await socket.receive()).data)
        # A TLS connection closes after the server answers its close_notify; the loop must
        # not end before that, or the socket is left open (a ResourceWarning in a later test).
        async with asyncio.timeout(10):
            while connection.fileno() != -1:  # noqa: ASYNC110 (the loop signals nothing)
                await asyncio.sleep(0.01)
        return got

    assert asyncio.run(converse()) == ["hello kubernetes-admin", b"\x01out", b"\x02err"]


def test_explain(admin: Kubectl) -> None:
    explained = admin.run("explain", "apiservice.spec", namespaced=False).stdout
    assert "GROUP:      apiregistration.k8s.io" in explained
    assert "caBundle\t<string>" in explained
    assert "groupPriorityMinimum\t<integer> -required-" in explained
    assert "service\t<ServiceReference>" in explained
