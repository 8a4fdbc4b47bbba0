"""Protobuf request bodies: real bytes from the pinned kubectl, and malformed ones.

The capture server below is just enough of an API server for kubectl's generator commands:
aggregated discovery for the resources they name, and a JSON echo for every POST, which it
records.  Each case runs the real command against it and checks the decoded body twice: against
the object written out here, and against what the same command prints with
``--dry-run=client -o json`` (kubectl's own JSON of the object it would send).  The server runs
in a thread of the test process on 127.0.0.1, every kubectl call has a timeout, and the server
is shut down at the end of the module.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any

import pytest
from msgspec import inspect as mi

from controlplane.apiserver import protobuf
from controlplane.apiserver.protobuf import (
    SCALARS,
    SPECIALS,
    ProtobufError,
    decode_body,
    encode_body,
    tables,
)
from kube.api import codec
from kube.api import struct as declare
from kube.api.meta_v1 import (
    ResourceList,
)
from kube.api.scheme import SCHEME
from kube.api.struct import Struct
from kube.api.typeinfo import type_tree

KUBECTL = Path(sys.executable).parent / "kubectl"
PROTOBUF = "application/vnd.kubernetes.protobuf"
DISCOVERY_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

# (group, version, resource, kind, namespaced, subresources)
RESOURCES = [
    ("", "v1", "namespaces", "Namespace", False, ()),
    ("", "v1", "configmaps", "ConfigMap", True, ()),
    ("", "v1", "secrets", "Secret", True, ()),
    ("", "v1", "serviceaccounts", "ServiceAccount", True, ("token",)),
    ("", "v1", "services", "Service", True, ()),
    ("", "v1", "resourcequotas", "ResourceQuota", True, ()),
    ("", "v1", "pods", "Pod", True, ()),
    ("apps", "v1", "deployments", "Deployment", True, ()),
    ("batch", "v1", "jobs", "Job", True, ()),
    ("batch", "v1", "cronjobs", "CronJob", True, ()),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, ()),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, ()),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, ()),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, ()),
    ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ()),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ()),
    ("networking.k8s.io", "v1", "ingresses", "Ingress", True, ()),
    (
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        (),
    ),
    ("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False, ()),
    ("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False, ()),
]


def _discovery(core: bool) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for group, version, resource, kind, namespaced, subresources in RESOURCES:
        if (group == "") != core:
            continue
        groups.setdefault(group, []).append(
            {
                "resource": resource,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "scope": "Namespaced" if namespaced else "Cluster",
                "singularResource": kind.lower(),
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                "subresources": [
                    {
                        "subresource": name,
                        "responseKind": {
                            "group": "authentication.k8s.io",
                            "version": "v1",
                            "kind": "TokenRequest",
                        },
                        "verbs": ["create"],
                    }
                    for name in subresources
                ],
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": [
            {
                "metadata": {"name": group},
                "versions": [{"version": "v1", "resources": resources, "freshness": "Current"}],
            }
            for group, resources in groups.items()
        ],
    }


@dataclass
class Post:
    path: str
    content_type: str
    body: bytes


@dataclass
class Capture:
    url: str
    cache_dir: Path
    posts: list[Post] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [
            str(KUBECTL),
            "--server",
            self.url,
            "--cache-dir",
            str(self.cache_dir),
            "-n",
            "default",
            *args,
        ]
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "KUBECONFIG": os.devnull},
        )

    def posts_of(self, *args: str) -> list[Post]:
        """The POSTs one kubectl command makes; it must succeed."""
        with self.lock:
            self.posts.clear()
        result = self.kubectl(*args)
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        with self.lock:
            return list(self.posts)


def _echo(path: str, content_type: str, body: bytes) -> dict[str, Any]:
    """A plausible reply: the object sent back, with the status kubectl looks for."""
    try:
        sent = decode_body(body) if content_type == PROTOBUF else json.loads(body)
    except (ProtobufError, ValueError):
        sent = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    reply = {
        "kind": sent.get("kind"),
        "apiVersion": sent.get("apiVersion"),
        "metadata": sent.get("metadata", {}),
        "spec": sent.get("spec", {}),
    }
    if path.endswith("/token"):
        reply["status"] = {"token": "captured-token", "expirationTimestamp": "2030-01-01T00:00:00Z"}
    elif "selfsubjectaccessreviews" in path:
        reply["status"] = {"allowed": True}
    elif "selfsubjectrulesreviews" in path:
        reply["status"] = {"resourceRules": [], "nonResourceRules": [], "incomplete": False}
    elif "selfsubjectreviews" in path:
        reply["status"] = {"userInfo": {"username": "captured"}}
    return reply


def _handler(capture: Capture) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = 30

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, code: int, body: dict[str, Any], content_type: str) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path in ("/api", "/apis"):
                self._send(200, _discovery(path == "/api"), DISCOVERY_TYPE)
                return
            self._send(
                404,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "reason": "NotFound",
                    "code": 404,
                    "message": f"{path} not found",
                },
                "application/json",
            )

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            content_type = self.headers.get("Content-Type") or ""
            path = self.path.split("?")[0]
            with capture.lock:
                capture.posts.append(Post(path, content_type, body))
            self._send(201, _echo(path, content_type, body), "application/json")

    return Handler


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Capture]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.daemon_threads = True
    capture = Capture(
        f"http://127.0.0.1:{server.server_address[1]}", tmp_path_factory.mktemp("kube-cache")
    )
    server.RequestHandlerClass = _handler(capture)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield capture
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _labels(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": "default", "labels": {"app": name}}


# (id, command, POST path, decoded body; None: only compared with kubectl's own JSON)
CASES: list[tuple[str, list[str], str, dict[str, Any] | None]] = [
    (
        "namespace",
        ["create", "namespace", "demo"],
        "/api/v1/namespaces",
        {
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {"name": "demo"},
            "spec": {},
            "status": {},
        },
    ),
    (
        "configmap",
        ["create", "configmap", "c", "--from-literal=a=b"],
        "/api/v1/namespaces/default/configmaps",
        {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": "c", "namespace": "default"},
            "data": {"a": "b"},
        },
    ),
    (
        "secret-generic",
        ["create", "secret", "generic", "s", "--from-literal=p=q"],
        "/api/v1/namespaces/default/secrets",
        {
            "kind": "Secret",
            "apiVersion": "v1",
            "metadata": {"name": "s", "namespace": "default"},
            "data": {"p": "cQ=="},
        },
    ),
    (
        "deployment",
        ["create", "deployment", "web", "--image=nginx", "--replicas=2", "--port=80"],
        "/apis/apps/v1/namespaces/default/deployments",
        {
            "kind": "Deployment",
            "apiVersion": "apps/v1",
            "metadata": _labels("web"),
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "nginx",
                                "image": "nginx",
                                "ports": [{"containerPort": 80}],
                                "resources": {},
                            }
                        ]
                    },
                },
                "strategy": {},
            },
            "status": {},
        },
    ),
    (
        "service-clusterip",
        ["create", "service", "clusterip", "web", "--tcp=80:8080"],
        "/api/v1/namespaces/default/services",
        {
            "kind": "Service",
            "apiVersion": "v1",
            "metadata": _labels("web"),
            "spec": {
                "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                "selector": {"app": "web"},
                "type": "ClusterIP",
            },
            "status": {"loadBalancer": {}},
        },
    ),
    (
        "job",
        ["create", "job", "j", "--image=busybox"],
        "/apis/batch/v1/namespaces/default/jobs",
        {
            "kind": "Job",
            "apiVersion": "batch/v1",
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {
                "template": {
                    "metadata": {},
                    "spec": {
                        "containers": [{"name": "j", "image": "busybox", "resources": {}}],
                        "restartPolicy": "Never",
                    },
                }
            },
            "status": {},
        },
    ),
    (
        "role",
        ["create", "role", "r", "--verb=get", "--resource=pods"],
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        {
            "kind": "Role",
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "metadata": {"name": "r", "namespace": "default"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
        },
    ),
    (
        "token",
        ["create", "token", "default"],
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {},
            "spec": {},
            "status": {"token": "", "expirationTimestamp": None},
        },
    ),
    (
        "can-i",
        ["auth", "can-i", "get", "pods"],
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {},
            "spec": {
                "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}
            },
            "status": {"allowed": False},
        },
    ),
    (
        "can-i-list",
        ["auth", "can-i", "--list"],
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        {
            "kind": "SelfSubjectRulesReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {},
            "spec": {"namespace": "default"},
            "status": {"incomplete": False},
        },
    ),
    (
        "whoami",
        ["auth", "whoami"],
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {
            "kind": "SelfSubjectReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {},
            "status": {"userInfo": {}},
        },
    ),
    (
        "cronjob",
        [
            "create",
            "cronjob",
            "cj",
            "--image=busybox",
            "--schedule=*/5 * * * *",
            "--restart=OnFailure",
            "--",
            "date",
        ],
        "/apis/batch/v1/namespaces/default/cronjobs",
        None,
    ),
    (
        "serviceaccount",
        ["create", "serviceaccount", "sa"],
        "/api/v1/namespaces/default/serviceaccounts",
        None,
    ),
    (
        "service-nodeport",
        ["create", "service", "nodeport", "np", "--tcp=80:http", "--node-port=30080"],
        "/api/v1/namespaces/default/services",
        None,
    ),
    (
        "service-loadbalancer",
        ["create", "service", "loadbalancer", "lb", "--tcp=443"],
        "/api/v1/namespaces/default/services",
        None,
    ),
    (
        "service-externalname",
        ["create", "service", "externalname", "ex", "--external-name=example.com"],
        "/api/v1/namespaces/default/services",
        None,
    ),
    (
        "secret-docker-registry",
        [
            "create",
            "secret",
            "docker-registry",
            "dr",
            "--docker-server=s",
            "--docker-username=u",
            "--docker-password=p",
        ],
        "/api/v1/namespaces/default/secrets",
        None,
    ),
    (
        "clusterrole",
        [
            "create",
            "clusterrole",
            "cr",
            "--verb=get",
            "--resource=deployments.apps,pods/log",
            "--resource-name=a",
            "--non-resource-url=/healthz",
        ],
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        None,
    ),
    (
        "clusterrole-aggregated",
        ["create", "clusterrole", "agg", "--aggregation-rule=a=b"],
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        None,
    ),
    (
        "rolebinding",
        [
            "create",
            "rolebinding",
            "rb",
            "--role=r",
            "--user=u",
            "--group=g",
            "--serviceaccount=default:sa",
        ],
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        None,
    ),
    (
        "clusterrolebinding",
        ["create", "clusterrolebinding", "crb", "--clusterrole=cr", "--user=u"],
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        None,
    ),
    (
        "quota",
        ["create", "quota", "q", "--hard=cpu=1500m,memory=1Gi,pods=2", "--scopes=BestEffort"],
        "/api/v1/namespaces/default/resourcequotas",
        None,
    ),
    (
        "priorityclass",
        [
            "create",
            "priorityclass",
            "low",
            "--value=-5",
            "--preemption-policy=Never",
            "--description=d",
        ],
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        None,
    ),
    (
        "poddisruptionbudget",
        ["create", "poddisruptionbudget", "pdb", "--selector=app=web", "--max-unavailable=50%"],
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        None,
    ),
    (
        "ingress",
        [
            "create",
            "ingress",
            "ing",
            "--class=nginx",
            "--rule=foo.com/bar*=svc1:8080,tls=cert",
            "--default-backend=svc2:http",
        ],
        "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
        None,
    ),
]


def _dry_run_json(capture: Capture, command: list[str]) -> dict[str, Any]:
    """kubectl's own JSON of the object, with the nulls of empty lists left out.

    An empty repeated field is simply absent on the wire, so the decoder cannot tell Go's
    ``"rules": null`` from no field at all.
    """
    at = command.index("--") if "--" in command else len(command)
    result = capture.kubectl(*command[:at], "--dry-run=client", "-o", "json", *command[at:])
    assert result.returncode == 0, result.stderr

    def without_nulls(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: without_nulls(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [without_nulls(v) for v in value]
        return value

    loaded: dict[str, Any] = without_nulls(json.loads(result.stdout))
    return loaded


@pytest.mark.parametrize(
    ("command", "path", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_kubectl_generator_bodies(
    capture: Capture, command: list[str], path: str, expected: dict[str, Any] | None
) -> None:
    posts = capture.posts_of(*command)
    assert [(post.path, post.content_type) for post in posts] == [(path, PROTOBUF)]
    decoded = decode_body(posts[0].body)
    if expected is not None:
        assert decoded == expected
    if command[0] == "create" and command[1] != "token":
        assert decoded == _dry_run_json(capture, command)


@pytest.mark.parametrize("case", [case[0] for case in CASES])
def test_encoding_gives_kubectl_bytes(capture: Capture, case: str) -> None:
    """The encoder writes what Go writes: kubectl's body decoded and encoded again is the same
    bytes (fields in number order, zero value fields included, map entries by key)."""
    command = next(c[1] for c in CASES if c[0] == case)
    (post,) = capture.posts_of(*command)
    assert encode_body(decode_body(post.body)) == post.body


def test_kubectl_run_posts_json(capture: Capture) -> None:
    """Not every creating command is a generator: ``run`` sends JSON."""
    posts = capture.posts_of("run", "p", "--image=nginx")
    assert [(post.path, post.content_type) for post in posts] == [
        ("/api/v1/namespaces/default/pods", "application/json")
    ]
    assert json.loads(posts[0].body)["kind"] == "Pod"


# --- hand-built bodies -------------------------------------------------------------------------


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def vint(number: int, value: int) -> bytes:
    return tag(number, 0) + varint(value)


def ld(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return tag(number, 2) + varint(len(data)) + data


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return ld(number, ld(1, key) + ld(2, value))


def body(api_version: str, kind: str, raw: bytes, *extra: bytes) -> bytes:
    return b"k8s\x00" + ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw) + b"".join(extra)


def meta(name: str, *more: bytes) -> bytes:
    return ld(1, ld(1, name) + b"".join(more))


def pod_spec(*fields: bytes) -> bytes:
    """A Deployment whose pod template spec has ``fields``."""
    return body("apps/v1", "Deployment", meta("d") + ld(2, ld(3, ld(2, b"".join(fields)))))


def template_spec(decoded: dict[str, Any]) -> Any:
    return decoded["spec"]["template"]["spec"]


MICRO_TIME = vint(1, 1704067200) + vint(2, 123456789)
"""A MicroTime on the wire: its nanoseconds are cut to microseconds, as Go's JSON has them."""
MICRO_TIME_JSON = "2024-01-01T00:00:00.123456Z"


KIND_BODIES = [
    pytest.param(
        body(
            "v1",
            "Node",
            meta("n")
            + ld(
                2,
                ld(1, "10.0.0.0/24")
                + ld(5, ld(1, "k") + ld(3, "NoSchedule") + ld(4, vint(1, 1704067200)))
                + ld(7, "10.0.0.0/24"),
            )
            + ld(
                3,
                entry(1, "cpu", ld(1, "4"))
                + ld(5, ld(1, "InternalIP") + ld(2, "10.0.0.5"))
                + ld(7, ld(7, "v1.36.0") + ld(9, "linux")),
            ),
        ),
        {
            "metadata": {"name": "n"},
            "spec": {
                "podCIDR": "10.0.0.0/24",
                "taints": [
                    {"key": "k", "effect": "NoSchedule", "timeAdded": "2024-01-01T00:00:00Z"}
                ],
                "podCIDRs": ["10.0.0.0/24"],
            },
            "status": {
                "capacity": {"cpu": "4"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                "nodeInfo": {"kubeletVersion": "v1.36.0", "operatingSystem": "linux"},
            },
        },
        id="node-taints-at-5-addresses-at-5-node-info-at-7",
    ),
    pytest.param(
        body(
            "v1",
            "PersistentVolume",
            meta("pv")
            + ld(
                2,
                entry(1, "storage", ld(1, "10Gi"))
                + ld(2, ld(3, ld(1, "/mnt/data")))
                + ld(3, "ReadWriteOnce")
                + ld(4, ld(2, "ns") + ld(3, "claim"))
                + ld(6, "manual"),
            )
            + ld(3, ld(1, "Bound")),
        ),
        {
            "metadata": {"name": "pv"},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "hostPath": {"path": "/mnt/data"},
                "accessModes": ["ReadWriteOnce"],
                "claimRef": {"namespace": "ns", "name": "claim"},
                "storageClassName": "manual",
            },
            "status": {"phase": "Bound"},
        },
        id="persistent-volume-source-inlined-at-2",
    ),
    pytest.param(
        body(
            "v1",
            "PersistentVolumeClaim",
            meta("c")
            + ld(
                2,
                ld(1, "ReadWriteOnce") + ld(2, entry(2, "storage", ld(1, "3Gi"))) + ld(5, "manual"),
            )
            + ld(3, ld(1, "Bound") + entry(3, "storage", ld(1, "3Gi"))),
        ),
        {
            "metadata": {"name": "c"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "3Gi"}},
                "storageClassName": "manual",
            },
            "status": {"phase": "Bound", "capacity": {"storage": "3Gi"}},
        },
        id="claim-requests-at-2-capacity-at-3",
    ),
    pytest.param(
        body("v1", "PodTemplate", meta("t") + ld(2, ld(2, ld(2, ld(1, "c") + ld(2, "nginx"))))),
        {
            "metadata": {"name": "t"},
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
        id="pod-template-at-2",
    ),
    pytest.param(
        body(
            "v1",
            "ReplicationController",
            meta("rc")
            + ld(2, vint(1, 3) + entry(2, "app", "web") + vint(4, 5))
            + ld(3, vint(1, 2) + vint(3, 1 << 33)),
        ),
        {
            "metadata": {"name": "rc"},
            "spec": {"replicas": 3, "selector": {"app": "web"}, "minReadySeconds": 5},
            "status": {"replicas": 2, "observedGeneration": 1 << 33},
        },
        id="rc-min-ready-at-4-int64-generation-at-3",
    ),
    pytest.param(
        body("v1", "Binding", meta("p") + ld(2, ld(1, "Node") + ld(3, "node-1"))),
        {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "node-1"}},
        id="binding-target-at-2",
    ),
    pytest.param(
        body(
            "v1",
            "Event",
            meta("e")
            + ld(2, ld(1, "Pod") + ld(3, "p"))
            + ld(3, "Started")
            + ld(5, ld(1, "kubelet") + ld(2, "node-1"))
            + vint(8, 2)
            + ld(10, MICRO_TIME)
            + ld(11, vint(1, 2) + ld(2, MICRO_TIME))
            + ld(14, "kubelet"),
        ),
        {
            "metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Started",
            "source": {"component": "kubelet", "host": "node-1"},
            "count": 2,
            "eventTime": MICRO_TIME_JSON,
            "series": {"count": 2, "lastObservedTime": MICRO_TIME_JSON},
            "reportingComponent": "kubelet",
        },
        id="core-event-micro-times-at-10-and-in-series",
    ),
    pytest.param(
        body(
            "v1",
            "LimitRange",
            meta("l")
            + ld(
                2,
                ld(
                    1,
                    ld(1, "Container")
                    + entry(4, "memory", ld(1, "512Mi"))
                    + entry(5, "cpu", ld(1, "250m")),
                ),
            ),
        ),
        {
            "metadata": {"name": "l"},
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "default": {"memory": "512Mi"},
                        "defaultRequest": {"cpu": "250m"},
                    }
                ]
            },
        },
        id="limit-range-default-at-4-default-request-at-5",
    ),
    pytest.param(
        body(
            "v1",
            "Endpoints",
            meta("s")
            + ld(
                2,
                ld(1, ld(1, "10.1.0.5") + ld(4, "node-1"))
                + ld(2, ld(1, "10.1.0.6"))
                + ld(3, ld(1, "http") + vint(2, 8080) + ld(3, "TCP")),
            ),
        ),
        {
            "metadata": {"name": "s"},
            "subsets": [
                {
                    "addresses": [{"ip": "10.1.0.5", "nodeName": "node-1"}],
                    "notReadyAddresses": [{"ip": "10.1.0.6"}],
                    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                }
            ],
        },
        id="endpoints-port-at-2-protocol-at-3",
    ),
    pytest.param(
        body(
            "discovery.k8s.io/v1",
            "EndpointSlice",
            meta("s-1")
            + ld(2, ld(1, "10.1.0.5") + ld(2, vint(1, 1)) + ld(6, "node-1") + ld(7, "z1"))
            + ld(3, ld(1, "http") + ld(2, "TCP") + vint(3, 8080))
            + ld(4, "IPv4"),
        ),
        {
            "metadata": {"name": "s-1"},
            "addressType": "IPv4",
            "endpoints": [
                {
                    "addresses": ["10.1.0.5"],
                    "conditions": {"ready": True},
                    "nodeName": "node-1",
                    "zone": "z1",
                }
            ],
            "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        },
        id="endpoint-slice-protocol-at-2-port-at-3",
    ),
    pytest.param(
        body(
            "events.k8s.io/v1",
            "Event",
            meta("e")
            + ld(2, MICRO_TIME)
            + ld(4, "kubelet")
            + ld(5, "kubelet-node-1")
            + ld(6, "Pulling")
            + ld(7, "Pulled")
            + ld(8, ld(1, "Pod") + ld(3, "p"))
            + ld(10, "pulled")
            + ld(11, "Normal"),
        ),
        {
            "metadata": {"name": "e"},
            "eventTime": MICRO_TIME_JSON,
            "reportingController": "kubelet",
            "reportingInstance": "kubelet-node-1",
            "action": "Pulling",
            "reason": "Pulled",
            "regarding": {"kind": "Pod", "name": "p"},
            "note": "pulled",
            "type": "Normal",
        },
        id="events-event-regarding-at-8-note-at-10",
    ),
    pytest.param(
        body(
            "apps/v1",
            "ReplicaSet",
            meta("rs")
            + ld(2, vint(1, 2) + ld(2, entry(1, "app", "web")) + vint(4, 10))
            + ld(
                3,
                vint(1, 2)
                + vint(3, 1 << 33)
                + ld(6, ld(1, "ReplicaFailure") + ld(2, "True") + ld(4, "FailedCreate")),
            ),
        ),
        {
            "metadata": {"name": "rs"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "minReadySeconds": 10,
            },
            "status": {
                "replicas": 2,
                "observedGeneration": 1 << 33,
                "conditions": [
                    {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate"}
                ],
            },
        },
        id="replica-set-conditions-at-6",
    ),
    pytest.param(
        body(
            "apps/v1",
            "DaemonSet",
            meta("ds")
            + ld(
                2,
                ld(3, ld(1, "RollingUpdate") + ld(2, ld(1, vint(1, 1) + ld(3, "10%"))))
                + vint(6, 5),
            ),
        ),
        {
            "metadata": {"name": "ds"},
            "spec": {
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "10%"},
                },
                "revisionHistoryLimit": 5,
            },
        },
        id="daemon-set-update-strategy-at-3-history-at-6",
    ),
    pytest.param(
        body(
            "apps/v1",
            "StatefulSet",
            meta("web")
            + ld(
                2,
                ld(4, meta("www") + ld(2, ld(1, "ReadWriteOnce")))
                + ld(5, "nginx")
                + ld(6, "Parallel")
                + ld(10, ld(1, "Delete") + ld(2, "Retain"))
                + ld(11, vint(1, 3)),
            ),
        ),
        {
            "metadata": {"name": "web"},
            "spec": {
                "volumeClaimTemplates": [
                    {"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
                ],
                "serviceName": "nginx",
                "podManagementPolicy": "Parallel",
                "persistentVolumeClaimRetentionPolicy": {
                    "whenDeleted": "Delete",
                    "whenScaled": "Retain",
                },
                "ordinals": {"start": 3},
            },
        },
        id="stateful-set-claim-templates-at-4-ordinals-at-11",
    ),
    pytest.param(
        body(
            "apps/v1",
            "ControllerRevision",
            meta("r") + ld(2, ld(1, b'{"spec":{"template":{}}}')) + vint(3, 1 << 40),
        ),
        {"metadata": {"name": "r"}, "data": {"spec": {"template": {}}}, "revision": 1 << 40},
        id="controller-revision-raw-data-at-2-int64-revision",
    ),
    pytest.param(
        body(
            "coordination.k8s.io/v1",
            "Lease",
            meta("l") + ld(2, ld(1, "node-1") + vint(2, 40) + ld(4, MICRO_TIME) + vint(5, 3)),
        ),
        {
            "metadata": {"name": "l"},
            "spec": {
                "holderIdentity": "node-1",
                "leaseDurationSeconds": 40,
                "renewTime": MICRO_TIME_JSON,
                "leaseTransitions": 3,
            },
        },
        id="lease-renew-time-at-4",
    ),
    pytest.param(
        body(
            "storage.k8s.io/v1",
            "StorageClass",
            meta("standard")
            + ld(2, "kubernetes.io/no-provisioner")
            + entry(3, "type", "pd-ssd")
            + ld(4, "Retain")
            + vint(6, 1)
            + ld(7, "WaitForFirstConsumer")
            + ld(8, ld(1, ld(1, "topology.kubernetes.io/zone") + ld(2, "us-central-1a"))),
        ),
        {
            "metadata": {"name": "standard"},
            "provisioner": "kubernetes.io/no-provisioner",
            "parameters": {"type": "pd-ssd"},
            "reclaimPolicy": "Retain",
            "allowVolumeExpansion": True,
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [
                {
                    "matchLabelExpressions": [
                        {"key": "topology.kubernetes.io/zone", "values": ["us-central-1a"]}
                    ]
                }
            ],
        },
        id="storage-class-allowed-topologies-at-8",
    ),
    pytest.param(
        body(
            "storage.k8s.io/v1",
            "VolumeAttachment",
            meta("va")
            + ld(
                2,
                ld(1, "csi.example.com")
                + ld(
                    2,
                    ld(
                        2,
                        ld(2, ld(22, ld(1, "csi.example.com") + ld(2, "vol-1")))
                        + ld(3, "ReadWriteOnce"),
                    ),
                )
                + ld(3, "node-1"),
            )
            + ld(3, vint(1, 1) + entry(2, "devicePath", "/dev/xvdb")),
        ),
        {
            "metadata": {"name": "va"},
            "spec": {
                "attacher": "csi.example.com",
                "source": {
                    "inlineVolumeSpec": {
                        "csi": {"driver": "csi.example.com", "volumeHandle": "vol-1"},
                        "accessModes": ["ReadWriteOnce"],
                    }
                },
                "nodeName": "node-1",
            },
            "status": {"attached": True, "attachmentMetadata": {"devicePath": "/dev/xvdb"}},
        },
        id="volume-attachment-inline-volume-spec-at-2",
    ),
    pytest.param(
        body(
            "resource.k8s.io/v1",
            "ResourceSlice",
            meta("s")
            + ld(
                2,
                ld(1, "gpu.example.com")
                + ld(2, ld(1, "pool") + vint(2, 1) + vint(3, 1))
                + ld(3, "node-1")
                + ld(
                    6,
                    ld(1, "gpu-0")
                    + entry(2, "cores", vint(6, 2) + vint(6, 4))
                    + entry(13, "memory", ld(1, "cap") + ld(2, ld(1, "2Gi"))),
                ),
            ),
        ),
        {
            "metadata": {"name": "s"},
            "spec": {
                "driver": "gpu.example.com",
                "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 1},
                "nodeName": "node-1",
                "devices": [
                    {
                        "name": "gpu-0",
                        "attributes": {"cores": {"ints": [2, 4]}},
                        "nodeAllocatableResourceMappings": {
                            "memory": {"capacityKey": "cap", "allocationMultiplier": "2Gi"}
                        },
                    }
                ],
            },
        },
        id="resource-slice-ints-at-6-allocatable-mappings-at-13",
    ),
    pytest.param(
        body(
            "autoscaling/v1",
            "Scale",
            meta("web") + ld(2, vint(1, 3)) + ld(3, vint(1, 2) + ld(2, "app=web")),
        ),
        {
            "metadata": {"name": "web"},
            "spec": {"replicas": 3},
            "status": {"replicas": 2, "selector": "app=web"},
        },
        id="scale-spec-at-2-status-selector-at-2",
    ),
    pytest.param(
        body(
            "policy/v1",
            "Eviction",
            meta("p") + ld(2, vint(1, 5) + ld(2, ld(1, "u")) + ld(5, "All")),
        ),
        {
            "metadata": {"name": "p"},
            "deleteOptions": {
                "gracePeriodSeconds": 5,
                "preconditions": {"uid": "u"},
                "dryRun": ["All"],
            },
        },
        id="eviction-delete-options-at-2",
    ),
]
"""A nested field of each kind at upstream's number: a wrong number fails to decode or
decodes into another field."""


def double(number: int, value: float) -> bytes:
    return tag(number, 1) + struct.pack("<d", value)


ADMISSION = "admissionregistration.k8s.io/v1"
RULE = ld(1, "CREATE") + ld(2, ld(1, "apps") + ld(2, "v1") + ld(3, "deployments") + ld(4, "*"))
"""A RuleWithOperations: operations at 1, then upstream's inlined Rule at 2."""
RULE_JSON = {
    "operations": ["CREATE"],
    "apiGroups": ["apps"],
    "apiVersions": ["v1"],
    "resources": ["deployments"],
    "scope": "*",
}
WEBHOOK = (
    ld(1, "w.example.com")
    + ld(2, ld(1, ld(1, "ns") + ld(2, "svc") + ld(3, "/hook") + vint(4, 8443)) + ld(2, b"\x01\x02"))
    + ld(3, RULE)
    + ld(4, "Ignore")
    + ld(5, entry(1, "team", "a"))
    + ld(6, "None")
    + vint(7, 5)
    + ld(8, "v1")
    + ld(9, "Exact")
)
WEBHOOK_JSON = {
    "name": "w.example.com",
    "clientConfig": {
        "service": {"namespace": "ns", "name": "svc", "path": "/hook", "port": 8443},
        "caBundle": "AQI=",
    },
    "rules": [RULE_JSON],
    "failurePolicy": "Ignore",
    "namespaceSelector": {"matchLabels": {"team": "a"}},
    "sideEffects": "None",
    "timeoutSeconds": 5,
    "admissionReviewVersions": ["v1"],
    "matchPolicy": "Exact",
}
NAMED_RULE = ld(1, "web") + ld(2, RULE)
"""A NamedRuleWithOperations: resourceNames at 1, the RuleWithOperations inlined at 2."""
MATCH = ld(1, b"") + ld(2, entry(1, "app", "web")) + ld(3, NAMED_RULE) + ld(7, "Equivalent")
MATCH_JSON = {
    "namespaceSelector": {},
    "objectSelector": {"matchLabels": {"app": "web"}},
    "resourceRules": [{"resourceNames": ["web"], **RULE_JSON}],
    "matchPolicy": "Equivalent",
}
CONDITION = ld(1, "c") + ld(2, "true")
SCHEMA = (
    ld(5, "object")
    + ld(30, vint(1, 1) + ld(2, ld(5, "string")))
    + entry(
        29, "replicas", ld(5, "integer") + double(9, 10.0) + double(19, 0.5) + ld(8, ld(1, "1"))
    )
    + entry(
        29,
        "tags",
        ld(5, "array") + ld(24, ld(1, ld(5, "string") + ld(20, ld(1, '"a"')) + vint(13, 63))),
    )
    + entry(29, "pair", ld(5, "array") + ld(24, ld(2, ld(5, "string")) + ld(2, ld(5, "integer"))))
    + entry(29, "open", ld(5, "object") + ld(30, vint(1, 0)))
    + entry(32, "tags", ld(2, "replicas"))
    + ld(44, ld(1, "self.replicas >= 0") + ld(4, "FieldValueInvalid"))
)
"""A schema through each of upstream's JSONSchemaProps unions: OrBool (additionalProperties at
30, ``allows`` at 1 beside a schema at 2), OrArray (items at 24: one schema at 1, a tuple at 2)
and OrStringArray (dependencies at 32); JSON values (default at 8, enum at 20) as raw bytes;
doubles (maximum at 9, multipleOf at 19), a whole one read as an int."""
SCHEMA_JSON = {
    "type": "object",
    "additionalProperties": {"type": "string"},
    "properties": {
        "replicas": {"type": "integer", "maximum": 10, "multipleOf": 0.5, "default": 1},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a"], "maxLength": 63}},
        "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
        "open": {"type": "object", "additionalProperties": False},
    },
    "dependencies": {"tags": ["replicas"]},
    "x-kubernetes-validations": [{"rule": "self.replicas >= 0", "reason": "FieldValueInvalid"}],
}


def crd_schema(schema: bytes) -> bytes:
    """A CustomResourceDefinition whose one version has the schema ``schema``."""
    versions = ld(7, ld(4, ld(1, schema)))
    return body("apiextensions.k8s.io/v1", "CustomResourceDefinition", meta("c") + ld(2, versions))


def nested_schema(depth: int) -> bytes:
    """A schema ``not`` (field 28) within itself ``depth`` times."""
    schema = ld(5, "string")
    for _ in range(depth):
        schema = ld(28, schema)
    return schema


CRD_VERSION = (
    ld(1, "v1")
    + vint(2, 1)
    + vint(3, 1)
    + ld(4, ld(1, SCHEMA))
    + ld(5, ld(1, b"") + ld(2, ld(1, ".spec.replicas") + ld(2, ".status.replicas")))
    + ld(6, ld(1, "Replicas") + ld(2, "integer") + vint(5, 1) + ld(6, ".spec.replicas"))
    + vint(7, 1)
    + ld(8, "use v2")
    + ld(9, ld(1, ".spec.replicas"))
)
CRD_VERSION_JSON = {
    "name": "v1",
    "served": True,
    "storage": True,
    "schema": {"openAPIV3Schema": SCHEMA_JSON},
    "subresources": {
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
    },
    "additionalPrinterColumns": [
        {"name": "Replicas", "type": "integer", "priority": 1, "jsonPath": ".spec.replicas"}
    ],
    "deprecated": True,
    "deprecationWarning": "use v2",
    "selectableFields": [{"jsonPath": ".spec.replicas"}],
}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            body("v1", "Namespace", meta("n", ld(8, b""), ld(9, b""))),
            {"metadata": {"name": "n", "deletionTimestamp": None}},
        ),
        (
            body("v1", "Namespace", meta("n", ld(8, vint(1, 1704067200)))),
            {"metadata": {"name": "n", "creationTimestamp": "2024-01-01T00:00:00Z"}},
        ),
        (
            body("v1", "Namespace", meta("n", ld(9, vint(1, 0) + vint(2, 5)))),
            {"metadata": {"name": "n", "deletionTimestamp": "1970-01-01T00:00:00Z"}},
        ),
        (
            body("v1", "Namespace", meta("n", vint(7, 0), ld(2, ""), vint(10, 0))),
            {"metadata": {"name": "n", "deletionGracePeriodSeconds": 0}},
        ),
        (
            body(
                "v1",
                "Namespace",
                meta("n") + ld(1, entry(11, "a", "b")) + ld(2, ld(1, "kubernetes") + ld(1, "x")),
            ),
            {
                "metadata": {"name": "n", "labels": {"a": "b"}},
                "spec": {"finalizers": ["kubernetes", "x"]},
            },
        ),
        (
            body(
                "v1",
                "Secret",
                meta("s")
                + entry(2, "bin", b"\x00\xff")
                + entry(2, "empty", b"")
                + ld(2, ld(1, "nokey")),
            ),
            {"metadata": {"name": "s"}, "data": {"bin": "AP8=", "empty": "", "nokey": ""}},
        ),
        (
            body("scheduling.k8s.io/v1", "PriorityClass", meta("p") + vint(2, -5) + vint(3, 1)),
            {"metadata": {"name": "p"}, "value": -5, "globalDefault": True},
        ),
        (
            body(
                "v1",
                "ResourceQuota",
                meta("q") + ld(2, entry(1, "cpu", ld(1, "1500m")) + entry(1, "pods", b"")),
            ),
            {"metadata": {"name": "q"}, "spec": {"hard": {"cpu": "1500m", "pods": "0"}}},
        ),
        (
            body(
                "policy/v1",
                "PodDisruptionBudget",
                meta("b") + ld(2, ld(1, vint(1, 1) + ld(3, "50%")) + ld(3, vint(2, 0))),
            ),
            {"metadata": {"name": "b"}, "spec": {"minAvailable": "50%", "maxUnavailable": 0}},
        ),
        (
            body(
                "v1",
                "ConfigMap",
                meta("c", ld(17, ld(1, "m") + ld(7, ld(1, b'{"f:data":{}}')) + ld(4, b""))),
            ),
            {
                "metadata": {
                    "name": "c",
                    "managedFields": [{"manager": "m", "fieldsV1": {"f:data": {}}, "time": None}],
                }
            },
        ),
        (
            body(
                "authentication.k8s.io/v1",
                "SelfSubjectReview",
                meta("") + ld(2, ld(1, entry(4, "scopes", ld(1, "a") + ld(1, "b")))),
            ),
            {"metadata": {}, "status": {"userInfo": {"extra": {"scopes": ["a", "b"]}}}},
        ),
        (
            body(
                "flowcontrol.apiserver.k8s.io/v1",
                "FlowSchema",
                meta("f")
                + ld(
                    2,
                    ld(1, ld(1, "pl"))
                    + vint(2, 50)
                    + ld(
                        4,
                        ld(1, ld(1, "Group") + ld(3, ld(1, "g")))
                        + ld(3, ld(1, "get") + ld(6, "/x")),
                    ),
                ),
            ),
            {
                "metadata": {"name": "f"},
                "spec": {
                    "priorityLevelConfiguration": {"name": "pl"},
                    "matchingPrecedence": 50,
                    "rules": [
                        {
                            "subjects": [{"kind": "Group", "group": {"name": "g"}}],
                            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}],
                        }
                    ],
                },
            },
        ),
        *KIND_BODIES,
        (
            body(
                ADMISSION,
                "ValidatingWebhookConfiguration",
                meta("v") + ld(2, WEBHOOK + ld(10, entry(1, "a", "b")) + ld(11, CONDITION)),
            ),
            {
                "metadata": {"name": "v"},
                "webhooks": [
                    {
                        **WEBHOOK_JSON,
                        "objectSelector": {"matchLabels": {"a": "b"}},
                        "matchConditions": [{"name": "c", "expression": "true"}],
                    }
                ],
            },
        ),
        (
            body(
                ADMISSION,
                "MutatingWebhookConfiguration",
                meta("m")
                + ld(
                    2, WEBHOOK + ld(10, "IfNeeded") + ld(11, entry(1, "a", "b")) + ld(12, CONDITION)
                ),
            ),
            {
                "metadata": {"name": "m"},
                "webhooks": [
                    {
                        **WEBHOOK_JSON,
                        "reinvocationPolicy": "IfNeeded",
                        "objectSelector": {"matchLabels": {"a": "b"}},
                        "matchConditions": [{"name": "c", "expression": "true"}],
                    }
                ],
            },
        ),
        (
            body(
                ADMISSION,
                "ValidatingAdmissionPolicy",
                meta("p")
                + ld(
                    2,
                    ld(1, ld(1, "v1") + ld(2, "ConfigMap"))
                    + ld(2, MATCH)
                    + ld(
                        3,
                        ld(1, "object.spec.replicas <= 5")
                        + ld(2, "")
                        + ld(3, "Invalid")
                        + ld(4, "'too many'"),
                    )
                    + ld(4, "Fail")
                    + ld(5, ld(1, "k") + ld(2, "'v'"))
                    + ld(6, CONDITION)
                    + ld(7, ld(1, "x") + ld(2, "1")),
                )
                + ld(3, vint(1, 2) + ld(2, ld(1, ld(2, "spec.validations[0]") + ld(3, "w")))),
            ),
            {
                "metadata": {"name": "p"},
                "spec": {
                    "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                    "matchConstraints": MATCH_JSON,
                    "validations": [
                        {
                            "expression": "object.spec.replicas <= 5",
                            "reason": "Invalid",
                            "messageExpression": "'too many'",
                        }
                    ],
                    "failurePolicy": "Fail",
                    "auditAnnotations": [{"key": "k", "valueExpression": "'v'"}],
                    "matchConditions": [{"name": "c", "expression": "true"}],
                    "variables": [{"name": "x", "expression": "1"}],
                },
                "status": {
                    "observedGeneration": 2,
                    "typeChecking": {
                        "expressionWarnings": [{"fieldRef": "spec.validations[0]", "warning": "w"}]
                    },
                },
            },
        ),
        (
            body(
                ADMISSION,
                "ValidatingAdmissionPolicyBinding",
                meta("b")
                + ld(
                    2,
                    ld(1, "p")
                    + ld(2, ld(1, "cm") + ld(2, "ns") + ld(4, "Deny"))
                    + ld(3, MATCH)
                    + ld(4, "Deny")
                    + ld(4, "Audit"),
                ),
            ),
            {
                "metadata": {"name": "b"},
                "spec": {
                    "policyName": "p",
                    "paramRef": {
                        "name": "cm",
                        "namespace": "ns",
                        "parameterNotFoundAction": "Deny",
                    },
                    "matchResources": MATCH_JSON,
                    "validationActions": ["Deny", "Audit"],
                },
            },
        ),
        (
            body(
                ADMISSION,
                "MutatingAdmissionPolicy",
                meta("p")
                + ld(
                    2,
                    ld(2, MATCH)
                    + ld(3, ld(1, "x") + ld(2, "1"))
                    + ld(4, ld(2, "ApplyConfiguration") + ld(3, ld(1, "Object{}")))
                    + ld(4, ld(2, "JSONPatch") + ld(4, ld(1, "[]")))
                    + ld(5, "Ignore")
                    + ld(6, CONDITION)
                    + ld(7, "IfNeeded"),
                ),
            ),
            {
                "metadata": {"name": "p"},
                "spec": {
                    "matchConstraints": MATCH_JSON,
                    "variables": [{"name": "x", "expression": "1"}],
                    "mutations": [
                        {
                            "patchType": "ApplyConfiguration",
                            "applyConfiguration": {"expression": "Object{}"},
                        },
                        {"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}},
                    ],
                    "failurePolicy": "Ignore",
                    "matchConditions": [{"name": "c", "expression": "true"}],
                    "reinvocationPolicy": "IfNeeded",
                },
            },
        ),
        (
            body(
                ADMISSION,
                "MutatingAdmissionPolicyBinding",
                meta("b")
                + ld(
                    2,
                    ld(1, "p")
                    + ld(2, ld(3, entry(1, "k", "v")) + ld(4, "Allow"))
                    + ld(3, ld(4, NAMED_RULE)),
                ),
            ),
            {
                "metadata": {"name": "b"},
                "spec": {
                    "policyName": "p",
                    "paramRef": {
                        "selector": {"matchLabels": {"k": "v"}},
                        "parameterNotFoundAction": "Allow",
                    },
                    "matchResources": {
                        "excludeResourceRules": [{"resourceNames": ["web"], **RULE_JSON}]
                    },
                },
            },
        ),
        (
            body(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                meta("crontabs.example.com")
                + ld(
                    2,
                    ld(1, "example.com")
                    + ld(3, ld(1, "crontabs") + ld(2, "crontab") + ld(3, "ct") + ld(4, "CronTab"))
                    + ld(4, "Namespaced")
                    + ld(7, CRD_VERSION)
                    + ld(
                        9,
                        ld(1, "Webhook")
                        + ld(2, ld(2, ld(3, "https://c.example.com")) + ld(3, "v1")),
                    )
                    + vint(10, 0),
                )
                + ld(3, ld(2, ld(1, "crontabs") + ld(4, "CronTab")) + ld(3, "v1") + vint(4, 3)),
            ),
            {
                "metadata": {"name": "crontabs.example.com"},
                "spec": {
                    "group": "example.com",
                    "names": {
                        "plural": "crontabs",
                        "singular": "crontab",
                        "shortNames": ["ct"],
                        "kind": "CronTab",
                    },
                    "scope": "Namespaced",
                    "versions": [CRD_VERSION_JSON],
                    "conversion": {
                        "strategy": "Webhook",
                        "webhook": {
                            "clientConfig": {"url": "https://c.example.com"},
                            "conversionReviewVersions": ["v1"],
                        },
                    },
                },
                "status": {
                    "acceptedNames": {"plural": "crontabs", "kind": "CronTab"},
                    "storedVersions": ["v1"],
                    "observedGeneration": 3,
                },
            },
        ),
        (
            body(
                "authentication.k8s.io/v1",
                "TokenReview",
                meta("")
                + ld(2, ld(1, "t0k3n") + ld(2, "api"))
                + ld(
                    3, vint(1, 1) + ld(2, ld(1, "alice") + ld(3, "devs")) + ld(3, "") + ld(4, "api")
                ),
            ),
            {
                "metadata": {},
                "spec": {"token": "t0k3n", "audiences": ["api"]},
                "status": {
                    "authenticated": True,
                    "user": {"username": "alice", "groups": ["devs"]},
                    "audiences": ["api"],
                },
            },
        ),
        (
            body(
                "authorization.k8s.io/v1",
                "SubjectAccessReview",
                meta("")
                + ld(
                    2,
                    ld(1, ld(1, "ns") + ld(2, "get") + ld(5, "pods"))
                    + ld(3, "alice")
                    + ld(4, "devs")
                    + entry(5, "scopes", ld(1, "a"))
                    + ld(6, "u1"),
                )
                + ld(3, vint(1, 0) + ld(2, "no rule") + vint(4, 1)),
            ),
            {
                "metadata": {},
                "spec": {
                    "resourceAttributes": {"namespace": "ns", "verb": "get", "resource": "pods"},
                    "user": "alice",
                    "groups": ["devs"],
                    "extra": {"scopes": ["a"]},
                    "uid": "u1",
                },
                "status": {"allowed": False, "reason": "no rule", "denied": True},
            },
        ),
        (
            body(
                "authorization.k8s.io/v1",
                "LocalSubjectAccessReview",
                meta("", ld(3, "ns"))
                + ld(2, ld(2, ld(1, "/healthz") + ld(2, "get")) + ld(3, "bob")),
            ),
            {
                "metadata": {"namespace": "ns"},
                "spec": {
                    "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
                    "user": "bob",
                },
            },
        ),
    ],
    ids=[
        "zero-times",
        "creation-time",
        "epoch-time-nanos-ignored",
        "omitempty-vs-pointer",
        "merged-metadata-and-lists",
        "bytes-map-and-missing-value",
        "negative-int32-and-bool",
        "quantities",
        "int-or-string",
        "managed-fields",
        "extra-values",
        "flowschema-non-resource-urls-at-6",
        *(param.id for param in KIND_BODIES),
        "validating-webhook-selector-at-10",
        "mutating-webhook-selector-at-11",
        "validating-policy-nested-inline-rules",
        "validating-binding",
        "mutating-policy-mutations-at-4",
        "mutating-binding",
        "crd-schema-unions",
        "token-review",
        "subject-access-review",
        "local-subject-access-review",
    ],
)
def test_hand_built(data: bytes, expected: dict[str, Any]) -> None:
    decoded = decode_body(data)
    assert {k: v for k, v in decoded.items() if k not in ("kind", "apiVersion")} == expected


def test_micro_time_travels_to_the_microsecond() -> None:
    """Go writes a MicroTime as Time's message with its nanoseconds; a Time is whole seconds,
    as in JSON, so its nanos are 0."""
    lease = {
        "kind": "Lease",
        "apiVersion": "coordination.k8s.io/v1",
        "metadata": {"name": "l", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"renewTime": MICRO_TIME_JSON},
    }
    data = encode_body(lease)
    assert ld(8, vint(1, 1704067200) + vint(2, 0)) in data
    assert ld(2, ld(4, vint(1, 1704067200) + vint(2, 123456000))) in data
    assert decode_body(data) == lease
    # Nanos outside a second carry into the seconds, as Go's time.Unix has them.
    before = body(
        "coordination.k8s.io/v1", "Lease", meta("l") + ld(2, ld(4, vint(1, 10) + vint(2, -1)))
    )
    assert decode_body(before)["spec"] == {"renewTime": "1970-01-01T00:00:09.999999Z"}


def test_inline_fields_and_packed_repeated() -> None:
    volume = ld(1, ld(1, "v") + ld(2, ld(19, ld(1, ld(1, "cm")) + vint(3, 0o644))))
    probe = ld(10, ld(1, ld(2, ld(2, vint(1, 0) + vint(2, 8080)) + ld(1, "/healthz"))) + vint(2, 3))
    container = ld(2, ld(1, "c") + probe)
    groups = ld(14, ld(4, varint(1) + varint(2)) + vint(4, 3))
    decoded = decode_body(pod_spec(volume, container, groups))
    assert template_spec(decoded) == {
        "volumes": [{"name": "v", "configMap": {"name": "cm", "defaultMode": 0o644}}],
        "containers": [
            {
                "name": "c",
                "livenessProbe": {
                    "httpGet": {"port": 8080, "path": "/healthz"},
                    "initialDelaySeconds": 3,
                },
            }
        ],
        "securityContext": {"supplementalGroups": [1, 2, 3]},
    }


def test_ephemeral_containers_inline_the_container() -> None:
    ephemeral = ld(34, ld(1, ld(1, "debug") + ld(2, "busybox")) + ld(2, "app"))
    assert template_spec(decode_body(pod_spec(ephemeral))) == {
        "ephemeralContainers": [{"name": "debug", "image": "busybox", "targetContainerName": "app"}]
    }


def test_device_configurations_nest_the_device_configuration() -> None:
    """Upstream inlines DeviceConfiguration in DeviceClassConfiguration at field 1 and in
    DeviceClaimConfiguration at field 2 (after ``requests``); opaque parameters are a
    RawExtension (the JSON bytes in field 1)."""
    opaque = ld(1, "gpu.io") + ld(2, ld(1, b'{"n":1}'))
    expected = {"opaque": {"driver": "gpu.io", "parameters": {"n": 1}}}
    spec = ld(2, ld(1, ld(1, opaque)))
    decoded = decode_body(body("resource.k8s.io/v1", "DeviceClass", meta("c") + ld(2, spec)))
    assert decoded["spec"] == {"config": [expected]}
    claim_config = ld(1, "gpu") + ld(2, ld(1, opaque))
    spec = ld(1, ld(3, claim_config))
    decoded = decode_body(body("resource.k8s.io/v1", "ResourceClaim", meta("c") + ld(2, spec)))
    assert decoded["spec"] == {"devices": {"config": [{"requests": ["gpu"], **expected}]}}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "does not start with"),
        (b'{"kind":"Namespace"}', "does not start with"),
        (b"k8s\x01" + ld(2, b""), "does not start with"),
        (b"k8s\x00\x0a", "Unknown field 1: truncated varint"),
        (b"k8s\x00\x80", "Unknown: truncated varint"),
        (b"k8s\x00" + b"\xff" * 11, "longer than 10 bytes"),
        (b"k8s\x00\x0a\x05ab", "length 5 runs past the end"),
        (b"k8s\x00\x11\x00\x00", "truncated 64-bit value"),
        (b"k8s\x00\x0b", "groups are not supported"),
        (b"k8s\x00\x0e", "invalid wire type 6"),
        (b"k8s\x00\x00", "field number 0"),
        (b"k8s\x00" + vint(1, 1), "Unknown field 1: wire type 0"),
        (b"k8s\x00" + ld(9, b""), "Unknown: unknown field number 9"),
        (body("v1", "Namespace", b"", ld(3, "gzip")), "contentEncoding b'gzip'"),
        (body("v1", "Gadget", b""), "no protobuf schema for kind 'Gadget' in apiVersion 'v1'"),
        (body("example.com/v1", "Namespace", b""), "apiVersion 'example.com/v1'"),
        (body("v1", "Namespace", meta("n", ld(99, "x"))), "ObjectMeta: unknown field number 99"),
        (
            body("v1", "Namespace", meta("n", vint(1, 3))),
            "ObjectMeta.name: wire type 0 cannot carry string",
        ),
        (
            body("v1", "Namespace", vint(1, 3)),
            "Namespace.metadata: wire type 0 cannot carry ObjectMeta",
        ),
        (body("v1", "Namespace", meta("n", ld(11, vint(1, 1)))), "ObjectMeta.labels key"),
        (body("v1", "Namespace", meta("n", ld(11, ld(3, "")))), "field number 3 in a map entry"),
        (body("v1", "Namespace", ld(1, ld(1, b"\xff"))), "ObjectMeta.name: string is not UTF-8"),
        (body("v1", "Namespace", meta("n", ld(8, ld(1, "x")))), "wire type 2 cannot carry int64"),
        (body("v1", "Namespace", meta("n", ld(8, vint(3, 1)))), "field number 3 in Time"),
        (body("v1", "Namespace", meta("n", ld(8, vint(1, 1 << 62)))), "out of range"),
        (body("scheduling.k8s.io/v1", "PriorityClass", vint(2, 1 << 40)), "out of range for int32"),
        (body("policy/v1", "PodDisruptionBudget", ld(2, ld(1, vint(1, 2)))), "IntOrString type 2"),
        (body("v1", "ConfigMap", meta("c", ld(17, ld(7, ld(1, b"{"))))), "FieldsV1 is not JSON"),
        (pod_spec(ld(14, ld(4, b"\x80"))), "truncated varint"),
        (crd_schema(ld(30, ld(3, "x"))), "unknown field number 3 in either<bool,JSONSchemaProps>"),
        (crd_schema(ld(30, ld(1, "x"))), "wire type 2 cannot carry bool"),
        (crd_schema(ld(24, vint(2, 1))), "wire type 0 cannot carry JSONSchemaProps"),
        (crd_schema(nested_schema(5000)), "object nested too deeply"),
    ],
    ids=[
        "empty",
        "json",
        "bad-magic",
        "truncated-length",
        "truncated-key",
        "overlong-varint",
        "length-past-end",
        "truncated-fixed64",
        "group",
        "wire-type-6",
        "field-zero",
        "envelope-wire-type",
        "envelope-unknown-field",
        "content-encoding",
        "unknown-kind",
        "unknown-api-version",
        "unknown-field",
        "scalar-wire-type",
        "message-wire-type",
        "map-key-wire-type",
        "map-entry-field",
        "bad-utf8",
        "time-wire-type",
        "time-field",
        "time-range",
        "int32-range",
        "int-or-string-type",
        "fields-v1",
        "packed-truncated",
        "union-unknown-alternative",
        "union-bool-as-bytes",
        "union-list-item-as-varint",
        "recursive-schema-too-deep",
    ],
)
def test_malformed(data: bytes, message: str) -> None:
    with pytest.raises(ProtobufError) as raised:
        decode_body(data)
    assert message in str(raised.value)
    assert isinstance(raised.value, ValueError)


def _named(kind: str) -> list[str]:
    """The messages a field type names: itself, a map's values, a union's alternatives."""
    if kind.startswith("map<"):
        assert kind.startswith("map<string,") and kind.endswith(">")
        return _named(kind[len("map<string,") : -1])
    if kind.startswith("either<"):
        alternatives = kind[len("either<") : -1].split(",")
        assert len(alternatives) == 2 and set(alternatives) & SCALARS <= {"bool"}, kind
        return [
            name for a in alternatives for name in _named(a.removeprefix("[").removesuffix("]"))
        ]
    return [] if kind in SCALARS or kind in SPECIALS else [kind]


def test_tables_are_closed() -> None:
    """Every type named exists, every kind has a table, and every message is reached.  A
    message may contain itself (upstream's JSONSchemaProps does): decoding follows the data."""
    assert all(name in tables().messages for name in tables().kinds.values())
    reached: set[str] = set()

    def visit(name: str) -> None:
        assert name in tables().messages, name
        if name in reached:
            return
        reached.add(name)
        for json_name, kind, presence in tables().messages[name].values():
            assert presence in ("omit", "keep", "list")
            assert json_name or (presence == "keep" and _named(kind) == [kind]), (name, kind)
            for child in _named(kind):
                visit(child)

    for name in tables().kinds.values():
        visit(name)
    assert reached == set(tables().messages), "messages no kind reaches"


# --- every declared kind -----------------------------------------------------------------------

SAMPLES: dict[str, Any] = {
    "string": "text",
    "bytes": "AAEC/w==",
    "int32": -7,
    "int64": 1 << 40,
    "bool": True,
    "double": 2.5,
    "Time": "2024-02-03T04:05:06Z",
    "MicroTime": "2024-02-03T04:05:06.123456Z",
    "Quantity": "1536Mi",
    "FieldsV1": {"f:metadata": {"f:labels": {".": {}}}},
    "ExtraValue": ["a", "b"],
}
"""A value of each scalar and special type that survives the trip: nothing Go would omit."""


def _full(name: str, turn: int = 0, within: frozenset[str] = frozenset()) -> dict[str, Any]:
    """An object of message ``name`` with every field set (inlined messages merged in); a
    message within itself (JSONSchemaProps) is empty there."""
    obj: dict[str, Any] = {}
    if name in within:
        return obj
    for json_name, kind, presence in tables().messages[name].values():
        value_kind = kind[len("map<string,") : -1] if kind.startswith("map<") else kind
        if value_kind.startswith("either<"):
            # Each alternative in turn; a list of two, as a list field has.
            value_kind = value_kind[len("either<") : -1].split(",")[turn % 2]
        if value_kind == "IntOrString":
            value: Any = 8080 if turn % 2 else "http"
        elif value_kind.startswith("["):
            item = value_kind[1:-1]
            value = (
                [SAMPLES[item]] * 2
                if item in SAMPLES
                else [_full(item, turn + 1, within | {name})] * 2
            )
        elif value_kind in SAMPLES:
            value = SAMPLES[value_kind]
        else:
            value = _full(value_kind, turn + 1, within | {name})
        if not json_name:
            obj.update(value)
        elif kind.startswith("map<"):
            obj[json_name] = {"k": value, "": value}
        else:
            obj[json_name] = [value, value] if presence == "list" else value
    return obj


def _declared(api_version: str, kind: str) -> type[Any]:
    """The class of a kind with a message: a registered kind, its list, or meta/v1's."""
    info = SCHEME.by_kind(api_version, kind)
    if info is not None:
        return info.cls
    answers = {cls.KIND: cls for cls in protobuf.META_KINDS}
    if kind in answers:
        return answers[kind]
    item = SCHEME.by_kind(api_version, kind.removesuffix("List"))
    assert item is not None
    return ResourceList[item.cls]  # type: ignore[name-defined]  # a class known at run time


@pytest.mark.parametrize(("api_version", "kind"), sorted(tables().kinds), ids=lambda key: str(key))
def test_every_kind_round_trips(api_version: str, kind: str) -> None:
    """Every field of every kind travels: an object with all of them set comes back equal from
    its encoding, and is exactly an object of the declared class (no field unknown to it)."""
    obj = {"kind": kind, "apiVersion": api_version, **_full(tables().kinds[(api_version, kind)])}
    assert decode_body(encode_body(obj)) == obj
    decoded = codec.from_builtins(obj, _declared(api_version, kind))
    assert decoded.unknown_fields == []
    rebuilt = codec.to_builtins(decoded.obj)
    # A list's items and an Eviction's DeleteOptions carry TypeMeta in JSON, never on the wire.
    for typed in [*rebuilt.get("items", ()), rebuilt.get("deleteOptions", {})]:
        typed.pop("kind", None), typed.pop("apiVersion", None)
    assert rebuilt == obj


def test_every_served_kind_has_a_protobuf_message() -> None:
    """Upstream serves protobuf for every built-in kind, so every kind the API server serves
    (any verb) has a message; the assertion lists those still lacking one.  The aggregated
    metrics.k8s.io kinds are left out: the metrics-server answers them in JSON alone."""
    lacking = sorted(
        f"{info.cls.API_VERSION} {info.kind}"
        for info in SCHEME.served()
        if (info.cls.API_VERSION, info.kind) not in tables().kinds
    )
    assert not lacking, "no protobuf message for " + ", ".join(lacking)


def test_kubectl_generator_kinds_are_all_declared() -> None:
    """The tables come from the declarations of every kind kubectl's generators send."""
    assert {case[3]["kind"] for case in CASES if case[3] is not None} <= {
        k for _, k in tables().kinds
    }
    assert {kind for _, _, _, kind, _, _ in RESOURCES} <= {k for _, k in tables().kinds}
    assert tables().kinds[("v1", "Pod")] == "Pod"
    # Upstream's inlined messages keep their names, and their fields, in the tables.
    assert tables().messages["Probe"][1] == ("", "ProbeHandler", "keep")
    assert tables().messages["EphemeralContainerCommon"] == tables().messages["Container"]
    assert tables().messages["Volume"][2] == ("", "VolumeSource", "keep")
    assert tables().messages["SecretKeySelector"][1] == ("", "LocalObjectReference", "keep")


def test_encoding_an_undeclared_kind_is_refused() -> None:
    with pytest.raises(ProtobufError, match="no protobuf schema for kind 'Gadget'"):
        encode_body({"kind": "Gadget", "apiVersion": "v1", "metadata": {"name": "n"}})


class _Numbered(Struct):
    a: Annotated[str | None, declare.meta(proto=1)] = None


class _Unnumbered(Struct):
    a: Annotated[str | None, declare.meta(proto=1)] = None
    b: str | None = None


class _Twice(Struct):
    a: Annotated[str | None, declare.meta(proto=1)] = None
    b: Annotated[_Numbered | None, declare.meta(proto=1)] = None


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (_Unnumbered, "_Unnumbered.b has no protobuf field number"),
        (_Twice, "_Twice.b: field number 1 twice"),
    ],
    ids=["unnumbered", "twice"],
)
def test_a_declaration_the_codec_cannot_follow_fails_at_import(
    cls: type[Struct], message: str
) -> None:
    """Tables are derived when the module is imported: a struct a kind reaches with a field
    left unnumbered, or a number given twice, stops the import with the field's name."""
    tree = type_tree(cls)
    assert isinstance(tree, mi.StructType)
    with pytest.raises(TypeError, match=message):
        protobuf._Tables().message(tree)
