"""Container environments: expansion, references, downward API, envFrom, service links."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Service
from node.kubelet.runtime.envvars import ConfigError, container_env, expand, service_env


def make_service(name: str, namespace: str, ip: str | None, ports: list[dict[str, Any]]) -> Service:
    data = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterIP": ip, "ports": ports},
    }
    return msgspec.convert(data, Service)


class Sources:
    """EnvSources over fixed objects."""

    def __init__(self) -> None:
        self.config_maps = {
            ("ns", "cfg"): msgspec.convert(
                {"metadata": {"name": "cfg"}, "data": {"A": "a", "B": "b", "1BAD": "x"}}, ConfigMap
            )
        }
        encoded = base64.b64encode(b"s3cret").decode()
        self.secrets = {
            ("ns", "sec"): msgspec.convert(
                {"metadata": {"name": "sec"}, "data": {"PASSWORD": encoded}}, Secret
            )
        }
        self.service_list = [
            make_service(
                "kubernetes",
                "default",
                "10.96.0.1",
                [{"name": "https", "port": 443, "protocol": "TCP"}],
            ),
            make_service("other", "default", "10.96.0.2", [{"port": 1, "protocol": "TCP"}]),
            make_service("my-db", "ns", "10.96.0.20", [{"port": 5432, "protocol": "TCP"}]),
            make_service("headless", "ns", "None", [{"port": 80, "protocol": "TCP"}]),
        ]
        self.lookups: list[tuple[str, str]] = []

    async def config_map(self, namespace: str, name: str) -> ConfigMap | None:
        self.lookups.append((namespace, name))
        return self.config_maps.get((namespace, name))

    async def secret(self, namespace: str, name: str) -> Secret | None:
        return self.secrets.get((namespace, name))

    def services(self, namespace: str) -> Sequence[Service]:
        return [s for s in self.service_list if s.metadata.namespace == namespace]


KUBERNETES_ENV = {
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    "KUBERNETES_SERVICE_PORT": "443",
    "KUBERNETES_SERVICE_PORT_HTTPS": "443",
    "KUBERNETES_PORT": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
    "KUBERNETES_PORT_443_TCP_PORT": "443",
    "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
}
MY_DB_ENV = {
    "MY_DB_SERVICE_HOST": "10.96.0.20",
    "MY_DB_SERVICE_PORT": "5432",
    "MY_DB_PORT": "tcp://10.96.0.20:5432",
    "MY_DB_PORT_5432_TCP": "tcp://10.96.0.20:5432",
    "MY_DB_PORT_5432_TCP_PROTO": "tcp",
    "MY_DB_PORT_5432_TCP_PORT": "5432",
    "MY_DB_PORT_5432_TCP_ADDR": "10.96.0.20",
}


def make_pod(container: dict[str, Any], namespace: str = "ns", **spec: Any) -> Pod:
    data = {
        "metadata": {
            "name": "web",
            "namespace": namespace,
            "uid": "u1",
            "labels": {"app": "web"},
            "annotations": {"team": "a"},
        },
        "spec": {
            "nodeName": "node-1",
            "serviceAccountName": "sa",
            "containers": [{"name": "app", "image": "busybox", **container}],
            **spec,
        },
    }
    return msgspec.convert(data, Pod)


async def env_of(pod: Pod, sources: Sources | None = None, **kwargs: Any) -> dict[str, str]:
    assert pod.spec is not None and pod.spec.containers
    arguments: dict[str, Any] = {
        "pod_ips": ["10.244.1.5", "fd00::5"],
        "host_ips": ["192.0.2.1"],
        "node_name": "node-1",
    }
    values = await container_env(
        pod, pod.spec.containers[0], sources or Sources(), **arguments | kwargs
    )
    return {kv.key: kv.value for kv in values}


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        pytest.param("$(A)-$(B)", {"A": "1", "B": "2"}, "1-2", id="two"),
        pytest.param("$(MISSING)", {}, "$(MISSING)", id="unknown-kept"),
        pytest.param("$$(A)", {"A": "1"}, "$(A)", id="escaped"),
        pytest.param("$$$(A)", {"A": "1"}, "$1", id="escape-then-ref"),
        pytest.param("a$b$", {}, "a$b$", id="lone-dollars"),
        pytest.param("$(A", {"A": "1"}, "$(A", id="unterminated"),
        pytest.param("$()", {"": "e"}, "e", id="empty-name"),
        pytest.param("x$(A)y$(A)", {"A": "$(B)"}, "x$(B)y$(B)", id="not-recursive"),
    ],
)
def test_expand(text: str, env: dict[str, str], expected: str) -> None:
    assert expand(text, env) == expected


def test_service_env_ipv6_and_named_ports() -> None:
    service = make_service(
        "dns",
        "ns",
        "fd00::10",
        [
            {"name": "dns", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
        ],
    )
    assert service_env([service]) == {
        "DNS_SERVICE_HOST": "fd00::10",
        "DNS_SERVICE_PORT": "53",
        "DNS_SERVICE_PORT_DNS": "53",
        "DNS_SERVICE_PORT_DNS_TCP": "53",
        "DNS_PORT": "udp://[fd00::10]:53",
        "DNS_PORT_53_UDP": "udp://[fd00::10]:53",
        "DNS_PORT_53_UDP_PROTO": "udp",
        "DNS_PORT_53_UDP_PORT": "53",
        "DNS_PORT_53_UDP_ADDR": "fd00::10",
        "DNS_PORT_53_TCP": "tcp://[fd00::10]:53",
        "DNS_PORT_53_TCP_PROTO": "tcp",
        "DNS_PORT_53_TCP_PORT": "53",
        "DNS_PORT_53_TCP_ADDR": "fd00::10",
    }


@pytest.mark.parametrize(
    ("namespace", "links", "expected"),
    [
        pytest.param("ns", None, {**KUBERNETES_ENV, **MY_DB_ENV}, id="links-default-on"),
        pytest.param("ns", False, KUBERNETES_ENV, id="links-off-keeps-kubernetes"),
        pytest.param(
            "default",
            True,
            {
                **KUBERNETES_ENV,
                "OTHER_SERVICE_HOST": "10.96.0.2",
                "OTHER_SERVICE_PORT": "1",
                "OTHER_PORT": "tcp://10.96.0.2:1",
                "OTHER_PORT_1_TCP": "tcp://10.96.0.2:1",
                "OTHER_PORT_1_TCP_PROTO": "tcp",
                "OTHER_PORT_1_TCP_PORT": "1",
                "OTHER_PORT_1_TCP_ADDR": "10.96.0.2",
            },
            id="default-namespace",
        ),
    ],
)
async def test_service_links(namespace: str, links: bool | None, expected: dict[str, str]) -> None:
    pod = make_pod({}, namespace=namespace, enableServiceLinks=links)
    assert await env_of(pod) == expected


async def test_order_and_precedence() -> None:
    pod = make_pod(
        {
            "envFrom": [
                {"configMapRef": {"name": "cfg"}, "prefix": "CFG_"},
                {"secretRef": {"name": "sec"}},
            ],
            "env": [
                {"name": "CFG_A", "value": "overridden"},
                {"name": "GREETING", "value": "$(CFG_B)/$(MY_DB_SERVICE_HOST)/$(LATER)/$$(X)"},
                {"name": "LATER", "value": "late"},
                {"name": "MY_DB_SERVICE_PORT", "value": "explicit"},
                {"name": "EMPTY"},
            ],
        }
    )
    sources = Sources()
    env = await env_of(pod, sources)
    assert list(env)[:7] == [
        "CFG_A",
        "CFG_B",
        "CFG_1BAD",
        "PASSWORD",
        "GREETING",
        "LATER",
        "MY_DB_SERVICE_PORT",
    ]
    assert env["CFG_A"] == "overridden"
    assert env["PASSWORD"] == "s3cret"
    assert env["GREETING"] == "b/10.96.0.20/$(LATER)/$(X)"
    assert env["MY_DB_SERVICE_PORT"] == "explicit"
    assert env["EMPTY"] == ""
    assert sources.lookups == [("ns", "cfg")]


async def test_invalid_env_from_keys_are_skipped() -> None:
    pod = make_pod(
        {
            "envFrom": [
                {"configMapRef": {"name": "cfg"}},
                {"secretRef": {"name": "sec"}, "prefix": "1"},
            ]
        },
        enableServiceLinks=False,
    )
    warnings: list[str] = []
    env = await env_of(pod, warnings=warnings)
    assert {k: v for k, v in env.items() if k not in KUBERNETES_ENV} == {"A": "a", "B": "b"}
    assert warnings == [
        "Keys [1BAD] from the EnvFrom configMap ns/cfg were skipped since they are considered "
        "invalid environment variable names.",
        "Keys [1PASSWORD] from the EnvFrom secret ns/sec were skipped since they are considered "
        "invalid environment variable names.",
    ]


def ref(kind: str, name: str, key: str, optional: bool | None = None) -> dict[str, Any]:
    return {"name": "V", "valueFrom": {kind: {"name": name, "key": key, "optional": optional}}}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param([ref("configMapKeyRef", "cfg", "A")], "a", id="configmap-key"),
        pytest.param([ref("secretKeyRef", "sec", "PASSWORD")], "s3cret", id="secret-key"),
        pytest.param(
            [ref("configMapKeyRef", "nope", "A", True)], None, id="optional-missing-configmap"
        ),
        pytest.param([ref("configMapKeyRef", "cfg", "Z", True)], None, id="optional-missing-key"),
        pytest.param([ref("secretKeyRef", "nope", "A", True)], None, id="optional-missing-secret"),
        pytest.param(
            [{"name": "V", "value": "keep"}, ref("secretKeyRef", "sec", "Z", True)],
            "keep",
            id="optional-missing-leaves-earlier-value",
        ),
    ],
)
async def test_key_refs(env: list[dict[str, Any]], expected: str | None) -> None:
    values = await env_of(make_pod({"env": env}, enableServiceLinks=False))
    assert values.get("V") == expected


def field(path: str) -> dict[str, Any]:
    return {"name": "V", "valueFrom": {"fieldRef": {"fieldPath": path}}}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("metadata.name", "web"),
        ("metadata.namespace", "ns"),
        ("metadata.uid", "u1"),
        ("metadata.labels['app']", "web"),
        ("metadata.annotations['team']", "a"),
        ("metadata.labels['absent']", ""),
        ("spec.nodeName", "node-1"),
        ("spec.serviceAccountName", "sa"),
        ("status.hostIP", "192.0.2.1"),
        ("status.hostIPs", "192.0.2.1"),
        ("status.podIP", "10.244.1.5"),
        ("status.podIPs", "10.244.1.5,fd00::5"),
    ],
    ids=lambda v: str(v),
)
async def test_field_refs(path: str, expected: str) -> None:
    values = await env_of(make_pod({"env": [field(path)]}, enableServiceLinks=False))
    assert values["V"] == expected


async def test_node_name_when_pod_has_none() -> None:
    pod = make_pod({"env": [field("spec.nodeName")]}, nodeName=None, enableServiceLinks=False)
    assert (await env_of(pod, node_name="static-node"))["V"] == "static-node"


def resource(name: str, divisor: str | None = None) -> dict[str, Any]:
    selector = {"resource": name, "divisor": divisor}
    return {"name": "V", "valueFrom": {"resourceFieldRef": selector}}


RESOURCES = {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}


@pytest.mark.parametrize(
    ("name", "divisor", "expected"),
    [
        pytest.param("requests.cpu", None, "1", id="cpu-rounded-up"),
        pytest.param("requests.cpu", "1m", "250", id="cpu-millis"),
        pytest.param("limits.memory", "1Mi", "128", id="memory-limit"),
        pytest.param("limits.cpu", None, "4", id="cpu-limit-from-allocatable"),
        pytest.param("limits.ephemeral-storage", "1Gi", "10", id="storage-from-allocatable"),
        pytest.param("requests.memory", None, str(64 * 2**20), id="memory-request"),
    ],
)
async def test_resource_refs(name: str, divisor: str | None, expected: str) -> None:
    pod = make_pod(
        {"resources": RESOURCES, "env": [resource(name, divisor)]}, enableServiceLinks=False
    )
    allocatable = {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "10Gi"}
    assert (await env_of(pod, node_allocatable=allocatable))["V"] == expected


@pytest.mark.parametrize(
    ("container", "message"),
    [
        pytest.param(
            {"env": [ref("configMapKeyRef", "nope", "A")]},
            'configmap "nope" not found',
            id="configmap",
        ),
        pytest.param(
            {"env": [ref("secretKeyRef", "nope", "A")]}, 'secret "nope" not found', id="secret"
        ),
        pytest.param(
            {"env": [ref("configMapKeyRef", "cfg", "Z")]},
            "couldn't find key Z in ConfigMap ns/cfg",
            id="configmap-key",
        ),
        pytest.param(
            {"env": [ref("secretKeyRef", "sec", "Z")]},
            "couldn't find key Z in Secret ns/sec",
            id="secret-key",
        ),
        pytest.param(
            {"envFrom": [{"configMapRef": {"name": "nope"}}]},
            'configmap "nope" not found',
            id="env-from",
        ),
        pytest.param(
            {"envFrom": [{"secretRef": {"name": "nope"}}]},
            'secret "nope" not found',
            id="env-from-secret",
        ),
        pytest.param(
            {"env": [field("spec.bogus")]}, "unsupported fieldPath: spec.bogus", id="field-path"
        ),
        pytest.param(
            {"env": [resource("limits.bogus")]},
            "unsupported container resource : limits.bogus",
            id="resource",
        ),
    ],
)
async def test_errors(container: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        await env_of(make_pod(container))
    assert str(error.value) == message


async def test_optional_env_from_missing_is_skipped() -> None:
    pod = make_pod(
        {
            "envFrom": [
                {"configMapRef": {"name": "nope", "optional": True}},
                {"secretRef": {"name": "x", "optional": True}},
            ]
        },
        enableServiceLinks=False,
    )
    assert await env_of(pod) == KUBERNETES_ENV


async def test_namespace_service_named_kubernetes_replaces_master() -> None:
    sources = Sources()
    sources.service_list.append(
        make_service("kubernetes", "ns", "10.96.0.99", [{"port": 80, "protocol": "TCP"}])
    )
    env = await env_of(make_pod({}), sources)
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.99"
    assert "KUBERNETES_SERVICE_PORT_HTTPS" not in env
    env = await env_of(make_pod({}, enableServiceLinks=False), sources)
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
