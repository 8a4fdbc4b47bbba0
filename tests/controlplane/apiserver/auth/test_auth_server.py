"""Authentication and authorization end to end: a ``kubelab apiserver`` with
``--authorization-mode Node,RBAC`` and a static token file, asked by the pinned kubectl and by
plain HTTPS requests with service-account tokens, static tokens, node certificates and no
credentials at all."""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kube.client import kubeconfig
from kube.pki import CertificateAuthority
from tests.controlplane.apiserver.proxy_backends import Backend, create, serve_web
from tests.controlplane.storage.etcd_server import EtcdServer
from tests.servers import BARE_APISERVER, Kubectl, ServerProcess, start_server, stop_server

ALICE_TOKEN = "alice-static-token-0123456789"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("secured")
    tokens = base / "tokens.csv"
    tokens.write_text(f'{ALICE_TOKEN},alice,1001,"devs,ops"\n')
    data_dir = base / "data"
    data_dir.mkdir()
    server = start_server(
        data_dir,
        *BARE_APISERVER,
        *("--authorization-mode", "Node,RBAC", "--token-auth-file", str(tokens)),
    )
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture
def admin(secured: ServerProcess, tmp_path: Path) -> Kubectl:
    kubectl = Kubectl(secured.kubeconfig, tmp_path / "admin-cache", f"t-{uuid.uuid4().hex[:8]}")
    kubectl.run("create", "namespace", kubectl.namespace, namespaced=False)
    return kubectl


def _as_token(server: ServerProcess, admin: Kubectl, token: str, tmp_path: Path) -> Kubectl:
    path = tmp_path / f"{uuid.uuid4().hex[:6]}.kubeconfig"
    ca = (server.data_dir / "pki" / "ca.crt").read_bytes()
    kubeconfig.write(path, kubeconfig.render(server.url, ca, "token-user", token=token))
    return Kubectl(path, tmp_path / "token-cache", admin.namespace)


def _call(
    server: ServerProcess,
    method: str,
    path: str,
    token: str | None = None,
    body: dict[str, Any] | None = None,
    cert: tuple[Path, Path] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    context = ssl.create_default_context(cafile=str(server.data_dir / "pki" / "ca.crt"))
    if cert is not None:
        context.load_cert_chain(*cert)
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)
    sent = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    try:
        connection.request(method, path, json.dumps(body) if body else None, sent)
        response = connection.getresponse()
        text = response.read().decode()
    finally:
        connection.close()
    return response.status, json.loads(text) if text.startswith("{") else {"text": text}


def _eventually(check: Callable[[], bool], what: str) -> None:
    """Bindings reach the authorizer through a watch cache: a few milliseconds later."""
    deadline = time.monotonic() + 10
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.05)


def _robot(admin: Kubectl) -> str:
    """A service account allowed to read pods in the test namespace, and a token of it."""
    admin.run("create", "serviceaccount", "robot")
    admin.run("create", "role", "pod-reader", "--verb=get,list", "--resource=pods")
    admin.run(
        "create",
        "rolebinding",
        "robot-reads-pods",
        "--role=pod-reader",
        f"--serviceaccount={admin.namespace}:robot",
    )
    return admin.run("create", "token", "robot").stdout.strip()


def test_bad_credentials_get_401_and_anonymous_only_public_paths(
    secured: ServerProcess, admin: Kubectl
) -> None:
    for token in ("garbage", "a.b.c", "abcdef.0123456789abcdef", ALICE_TOKEN + "x"):
        status, body = _call(secured, "GET", "/api/v1/namespaces", token=token)
        assert (status, body) == (
            401,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "code": 401,
            },
        ), token
    status, body = _call(secured, "GET", "/api/v1/namespaces")
    assert status == 403
    assert body["message"] == (
        'namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" '
        'in API group "" at the cluster scope'
    )
    assert _call(secured, "GET", "/healthz")[0] == 200
    assert _call(secured, "GET", "/version")[0] == 200
    assert _call(secured, "GET", "/api")[0] == 403, "discovery is for authenticated users"


def test_a_token_stops_working_when_its_service_account_is_deleted(
    secured: ServerProcess, admin: Kubectl
) -> None:
    token = _robot(admin)
    pods = f"/api/v1/namespaces/{admin.namespace}/pods"
    _eventually(lambda: _call(secured, "GET", pods, token=token)[0] == 200, "robot lists pods")
    admin.run("delete", "serviceaccount", "robot")
    _eventually(lambda: _call(secured, "GET", pods, token=token)[0] == 401, "token refused")


def test_a_pod_bound_token_dies_with_its_pod(secured: ServerProcess, admin: Kubectl) -> None:
    """What the kubelet mounts into a pod: a token bound to the pod, refused once the pod is
    gone or replaced by another of the same name."""
    _robot(admin)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bound"},
        "spec": {"serviceAccountName": "robot", "containers": [{"name": "c", "image": "busybox"}]},
    }
    admin.run("create", "-f", "-", input=json.dumps(pod))
    token = admin.run(
        "create", "token", "robot", "--bound-object-kind=Pod", "--bound-object-name=bound"
    ).stdout.strip()
    pods = f"/api/v1/namespaces/{admin.namespace}/pods"
    _eventually(lambda: _call(secured, "GET", pods, token=token)[0] == 200, "token accepted")
    admin.run("delete", "pod", "bound", "--wait=false")
    _eventually(lambda: _call(secured, "GET", pods, token=token)[0] == 401, "token refused")
    admin.run("create", "-f", "-", input=json.dumps(pod))
    assert _call(secured, "GET", pods, token=token)[0] == 401, "a new pod has another uid"


def test_a_service_account_token_does_exactly_what_its_binding_grants(
    secured: ServerProcess, admin: Kubectl, tmp_path: Path
) -> None:
    robot = _as_token(secured, admin, _robot(admin), tmp_path)
    _eventually(lambda: robot.run("get", "pods", check=False).returncode == 0, "robot lists pods")
    admin.run("create", "configmap", "settings", "--from-literal=a=b")
    denied = {
        ("get", "secrets"): 'list resource "secrets" in API group "" in the namespace',
        ("get", "configmap", "settings"): 'configmaps "settings" is forbidden',
        ("delete", "pod", "web"): 'delete resource "pods"',
        ("get", "deployments"): 'list resource "deployments" in API group "apps"',
    }
    for args, message in denied.items():
        result = robot.run(*args, check=False)
        assert result.returncode != 0, args
        assert "Error from server (Forbidden)" in result.stderr and message in result.stderr, (
            result.stderr
        )
        user = f'User "system:serviceaccount:{admin.namespace}:robot"'
        assert user in result.stderr
    elsewhere = robot.run("get", "pods", "-n", "default", check=False)
    assert 'cannot list resource "pods" in API group "" in the namespace "default"' in (
        elsewhere.stderr
    )


def test_kubectl_auth_can_i(secured: ServerProcess, admin: Kubectl, tmp_path: Path) -> None:
    robot = _as_token(secured, admin, _robot(admin), tmp_path)
    _eventually(
        lambda: robot.run("auth", "can-i", "list", "pods", check=False).stdout.strip() == "yes",
        "robot may list pods",
    )
    denied = robot.run("auth", "can-i", "delete", "pods", check=False)
    assert (denied.returncode, denied.stdout.strip()) == (1, "no")
    assert (
        robot.run("auth", "can-i", "get", "pods", "--subresource=log", check=False).stdout.strip()
        == "no"
    )
    listing = robot.run("auth", "can-i", "--list").stdout
    rows = {line.split()[0]: line for line in listing.splitlines()[1:] if line.strip()}
    assert "[get list]" in rows["pods"]
    assert "selfsubjectaccessreviews.authorization.k8s.io" in rows
    assert "secrets" not in rows
    assert admin.run("auth", "can-i", "*", "*").stdout.strip() == "yes"
    alice = _as_token(secured, admin, ALICE_TOKEN, tmp_path)
    assert alice.run("auth", "can-i", "list", "pods", check=False).stdout.strip() == "no"
    whoami = json.loads(alice.run("auth", "whoami", "-o", "json").stdout)
    assert whoami["status"]["userInfo"]["username"] == "alice"
    assert whoami["status"]["userInfo"]["groups"] == ["devs", "ops", "system:authenticated"]


def _review(admin: Kubectl, review: dict[str, Any]) -> dict[str, Any]:
    """POST a review (``--validate=false``: the server's OpenAPI v2 fallback, which kubectl
    uses for create-only kinds, fails on JSONSchemaProps' ``$ref`` property)."""
    out = admin.run("create", "--validate=false", "-o", "json", "-f", "-", input=json.dumps(review))
    loaded: dict[str, Any] = json.loads(out.stdout)
    return loaded


def test_subject_and_token_reviews(secured: ServerProcess, admin: Kubectl) -> None:
    user = f"system:serviceaccount:{admin.namespace}:robot"

    def token_review(token: str) -> dict[str, Any]:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview"}
        status: dict[str, Any] = _review(admin, {**body, "spec": {"token": token}})["status"]
        return status

    token = _robot(admin)
    _eventually(lambda: token_review(token).get("authenticated") is True, "the token is accepted")
    found = token_review(token)
    assert found["user"]["username"] == user
    assert "system:serviceaccounts" in found["user"]["groups"]
    assert found["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
    bad = token_review("garbage")
    # As upstream answers: Go's JSON omits a false ``authenticated`` and keeps the empty user.
    assert "authenticated" not in bad and bad["user"] == {} and bad["error"]

    def allowed(verb: str) -> bool:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {
                    "namespace": admin.namespace,
                    "verb": verb,
                    "resource": "pods",
                },
            },
        }
        return bool(_review(admin, review)["status"].get("allowed"))

    _eventually(lambda: allowed("list"), "the SubjectAccessReview allows list")
    assert not allowed("delete")
    local = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "LocalSubjectAccessReview",
        "metadata": {"namespace": admin.namespace},
        "spec": {"user": user, "resourceAttributes": {"verb": "get", "resource": "pods"}},
    }
    assert _review(admin, local)["status"]["allowed"] is True


def test_impersonation(secured: ServerProcess, admin: Kubectl, tmp_path: Path) -> None:
    robot_name = f"system:serviceaccount:{admin.namespace}:robot"
    robot_token = _robot(admin)
    robot = _as_token(secured, admin, robot_token, tmp_path)
    _eventually(
        lambda: admin.run("get", "pods", f"--as={robot_name}", check=False).returncode == 0,
        "the admin reads pods as the robot",
    )
    as_robot = admin.run("get", "secrets", f"--as={robot_name}", check=False)
    assert f'User "{robot_name}" cannot list resource "secrets"' in as_robot.stderr
    refused = robot.run("get", "pods", "--as=kubernetes-admin", check=False)
    assert "Error from server (Forbidden)" in refused.stderr
    status, body = _call(
        secured,
        "GET",
        f"/api/v1/namespaces/{admin.namespace}/pods",
        token=robot_token,
        headers={"Impersonate-User": "kubernetes-admin"},
    )
    assert status == 403
    assert body["message"] == (
        f'users "kubernetes-admin" is forbidden: User "{robot_name}" cannot impersonate '
        'resource "users" in API group "" at the cluster scope'
    )
    admin.run("create", "role", "impersonator", "--verb=impersonate", "--resource=serviceaccounts")
    admin.run(
        "create",
        "rolebinding",
        "robot-impersonates",
        "--role=impersonator",
        f"--serviceaccount={admin.namespace}:robot",
    )
    admin.run("create", "serviceaccount", "helper")
    admin.run(
        "create",
        "rolebinding",
        "helper-reads",
        "--role=pod-reader",
        f"--serviceaccount={admin.namespace}:helper",
    )
    _eventually(
        lambda: (
            robot.run(
                "get", "pods", f"--as=system:serviceaccount:{admin.namespace}:helper", check=False
            ).returncode
            == 0
        ),
        "the robot acts as the helper",
    )


def test_a_node_reaches_only_its_own_pods_and_their_secrets(
    secured: ServerProcess, admin: Kubectl, tmp_path: Path
) -> None:
    ca = CertificateAuthority.load_or_create(secured.data_dir / "pki")
    cert = ca.issue("system:node:n1", organizations=["system:nodes"], client=True).write(
        tmp_path, "n1"
    )
    ns = admin.namespace
    for node in ("n1", "n2"):
        admin.run("create", "secret", "generic", f"secret-{node}", "--from-literal=k=v")
        admin.run(
            "create",
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"pod-{node}"},
                    "spec": {
                        "nodeName": node,
                        "containers": [{"name": "c", "image": "busybox"}],
                        "volumes": [{"name": "s", "secret": {"secretName": f"secret-{node}"}}],
                    },
                }
            ),
        )
        admin.run(
            "create",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}),
            namespaced=False,
        )

    def status(method: str, path: str, body: dict[str, Any] | None = None) -> int:
        return _call(secured, method, path, cert=cert, body=body)[0]

    _eventually(
        lambda: status("GET", f"/api/v1/namespaces/{ns}/secrets/secret-n1") == 200,
        "n1 reads its pod's secret",
    )
    assert status("GET", f"/api/v1/namespaces/{ns}/secrets/secret-n2") == 403
    assert status("GET", f"/api/v1/namespaces/{ns}/pods/pod-n1") == 200
    assert status("GET", f"/api/v1/namespaces/{ns}/pods/pod-n2") == 403
    assert status("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1") == 200
    assert status("GET", "/api/v1/pods") == 403
    assert status("GET", "/api/v1/nodes/n1") == 200
    labels = {"metadata": {"labels": {"touched": "yes"}}}
    assert status("PATCH", "/api/v1/nodes/n2", labels) == 403
    assert status("DELETE", "/api/v1/nodes/n2") == 403
    for node in ("n1", "n2"):
        admin.run("delete", "node", node, namespaced=False)


@pytest.fixture(params=["sqlite", pytest.param("etcd", marks=pytest.mark.etcd)])
def store_flags(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """The ``--store`` of a fresh backend, kept across the restarts of one test."""
    if request.param == "sqlite":
        yield []
        return
    etcd = EtcdServer(tmp_path / "etcd")
    etcd.start()
    try:
        yield ["--store", f"etcd://{etcd.endpoint}"]
    finally:
        etcd.stop()


def test_the_bootstrap_policy_is_reconciled_at_start(
    tmp_path: Path, store_flags: list[str]
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    flags = ["--authorization-mode", "RBAC", "--anonymous-auth=false", *store_flags]
    server = start_server(data_dir, *BARE_APISERVER, *flags)
    admin = Kubectl(data_dir / "admin.kubeconfig", tmp_path / "cache", "default")
    try:
        assert _call(server, "GET", "/healthz")[0] == 401, "anonymous requests are switched off"
        first = {
            r["metadata"]["name"]: r["metadata"]["resourceVersion"]
            for r in admin.json("get", "clusterroles")["items"]
        }
        assert {"cluster-admin", "view", "system:node", "system:kube-dns"} <= first.keys()
        role = admin.json("get", "clusterrole", "system:kube-dns")
        role["rules"] = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
        admin.run("replace", "-f", "-", input=json.dumps(role))
        admin.run("delete", "clusterrolebinding", "system:discovery")
    finally:
        stop_server(server)
    server = start_server(data_dir, *BARE_APISERVER, *flags)
    try:
        second = {
            r["metadata"]["name"]: r["metadata"]["resourceVersion"]
            for r in admin.json("get", "clusterroles")["items"]
        }
        changed = {name for name in first if first[name] != second[name]}
        assert changed == {"system:kube-dns"}, "only the edited role is written again"
        rules = admin.json("get", "clusterrole", "system:kube-dns")["rules"]
        assert rules[0] == {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}
        assert {
            "apiGroups": [""],
            "resources": ["endpoints", "services"],
            "verbs": ["list", "watch"],
        } in rules
        admin.run("get", "clusterrolebinding", "system:discovery")
    finally:
        stop_server(server)
    server = start_server(data_dir, *BARE_APISERVER, *flags)
    try:
        third = {
            r["metadata"]["name"]: r["metadata"]["resourceVersion"]
            for r in admin.json("get", "clusterroles")["items"]
        }
        assert third == second, "a start with nothing to do writes nothing"
    finally:
        stop_server(server)


def test_nobody_grants_permissions_they_do_not_hold(
    secured: ServerProcess, admin: Kubectl, tmp_path: Path
) -> None:
    admin.run(
        "create",
        "role",
        "role-manager",
        "--verb=create,update,get",
        "--resource=roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io",
    )
    admin.run("create", "rolebinding", "alice-manages", "--role=role-manager", "--user=alice")
    admin.run("create", "role", "pod-reader", "--verb=get,list", "--resource=pods")
    admin.run("create", "rolebinding", "alice-reads", "--role=pod-reader", "--user=alice")
    alice = _as_token(secured, admin, ALICE_TOKEN, tmp_path)
    _eventually(
        lambda: (
            alice.run(
                "create", "role", "mine", "--verb=get", "--resource=pods", check=False
            ).returncode
            == 0
        ),
        "alice creates a role with what she holds",
    )
    grab = alice.run("create", "role", "grab", "--verb=get", "--resource=secrets", check=False)
    assert grab.returncode != 0
    assert (
        'roles.rbac.authorization.k8s.io "grab" is forbidden: user "alice" '
        '(groups=["devs" "ops" "system:authenticated"]) is attempting to grant RBAC permissions '
        'not currently held:\n{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}'
    ) in grab.stderr
    escalate = alice.run(
        "create", "rolebinding", "me-admin", "--clusterrole=cluster-admin", "--user=alice",
        check=False,
    )  # fmt: skip
    assert "attempting to grant RBAC permissions not currently held" in escalate.stderr
    alice.run("create", "rolebinding", "bob-reads", "--role=pod-reader", "--user=bob")


async def test_who_may_proxy_is_rbac_on_the_subresource(
    secured: ServerProcess, backend: Backend, admin: Kubectl
) -> None:
    """``pods/proxy`` and ``services/proxy`` are authorized as subresources with the verb of
    the method (GET: get, POST: create...), as ``kubectl auth can-i VERB services
    --subresource=proxy`` asks (``services/proxy`` there would be the Service named proxy)."""
    await asyncio.to_thread(serve_web, admin, backend)
    user = f"--as=jane-{admin.namespace}"

    def can_i(*args: str) -> str:
        return admin.run("auth", "can-i", *args, user, check=False).stdout.strip()

    assert await asyncio.to_thread(can_i, "get", "pods", "--subresource=proxy") == "no"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "proxy-get"},
        "rules": [{"apiGroups": [""], "resources": ["services/proxy"], "verbs": ["get"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "proxy-get"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "proxy-get"},
        "subjects": [
            {"kind": "User", "name": user.removeprefix("--as=")},
            {"kind": "User", "name": "alice"},
        ],
    }
    await asyncio.to_thread(create, admin, role, binding)
    await asyncio.to_thread(
        _eventually,
        lambda: can_i("get", "services", "--subresource=proxy") == "yes",
        "jane may proxy",
    )
    assert await asyncio.to_thread(can_i, "create", "services", "--subresource=proxy") == "no"
    assert await asyncio.to_thread(can_i, "get", "pods", "--subresource=proxy") == "no"
    path = f"/api/v1/namespaces/{admin.namespace}/services/web/proxy/"
    got = await asyncio.to_thread(admin.run, "get", "--raw", path, user)
    seen = json.loads(got.stdout)
    assert seen["method"] == "GET"
    assert not [h for h in seen["headers"] if h.startswith("impersonate-")]
    # a bearer token is the API server's to check, never passed on to the backend
    status, seen = await asyncio.to_thread(_call, secured, "GET", path, ALICE_TOKEN)
    assert status == 200
    assert "authorization" not in seen["headers"]
    refused = await asyncio.to_thread(
        admin.run, "create", "--raw", path, "-f", "-", user, input="{}", check=False
    )
    assert refused.stderr.strip().splitlines()[-1] == (
        f'Error from server (Forbidden): services "web" is forbidden: User '
        f'"{user.removeprefix("--as=")}" cannot create resource "services/proxy" in API group '
        f'"" in the namespace "{admin.namespace}"'
    )
