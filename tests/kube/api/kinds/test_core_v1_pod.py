"""core/v1 workloads: Pod, PodTemplate, ReplicationController and Binding.

Defaults as ``kubectl get -o yaml`` shows them, every validation hook (field path and error
type), the updates a pod accepts, the QoS class, printer cells and field selectors.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import codec, walk
from kube.api.kinds.core_v1.pod import (
    Binding,
    Pod,
    PodTemplate,
    ReplicationController,
    qos_class,
)
from kube.api.meta_v1 import Resource
from tests.kube.api.kinds.helpers import (
    CREATED,
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_FOUND,
    NOT_SUPPORTED,
    REQUIRED,
    Problem,
    cells,
    decode,
    merge,
    ordered,
    problems,
)


def pod(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "creationTimestamp": CREATED}
        | metadata,
        "spec": spec,
    }


APP = {"name": "app", "image": "nginx:1.27"}
POD = pod({"containers": [APP]})


def with_container(**fields: Any) -> dict[str, Any]:
    return pod({"containers": [APP | fields]})


# Defaults.


def test_minimal_pod_gets_upstream_defaults() -> None:
    out = codec.to_builtins(decode(POD, Pod))
    assert out["spec"] == {
        "containers": [
            {
                "name": "app",
                "image": "nginx:1.27",
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "enableServiceLinks": True,
    }


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.27", "IfNotPresent"),
        ("registry.local:5000/team/app", "Always"),
        ("registry.local:5000/team/app:v2", "IfNotPresent"),
        ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
        ("nginx:latest@sha256:" + "a" * 64, "Always"),
    ],
    ids=[
        "no-tag",
        "latest",
        "tag",
        "registry-port",
        "registry-port-tag",
        "digest",
        "latest-digest",
    ],
)
def test_image_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    obj = decode(pod({"containers": [{"name": "app", "image": image}]}), Pod)
    assert obj.spec.containers[0].image_pull_policy == policy


@pytest.mark.parametrize(
    ("container", "path", "expected"),
    [
        ({"ports": [{"containerPort": 80}]}, ("ports", 0, "protocol"), "TCP"),
        (
            {"livenessProbe": {"httpGet": {"port": 8080}}},
            ("livenessProbe",),
            {
                "httpGet": {"path": "/", "port": 8080, "scheme": "HTTP"},
                "timeoutSeconds": 1,
                "periodSeconds": 10,
                "successThreshold": 1,
                "failureThreshold": 3,
            },
        ),
        (
            {"readinessProbe": {"grpc": {"port": 9090}, "periodSeconds": 5}},
            ("readinessProbe",),
            {
                "grpc": {"port": 9090, "service": ""},
                "timeoutSeconds": 1,
                "periodSeconds": 5,
                "successThreshold": 1,
                "failureThreshold": 3,
            },
        ),
        (
            {"lifecycle": {"preStop": {"httpGet": {"port": "http"}}}},
            ("lifecycle", "preStop", "httpGet"),
            {"path": "/", "port": "http", "scheme": "HTTP"},
        ),
        (
            {"env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]},
            ("env", 0, "valueFrom", "fieldRef"),
            {"apiVersion": "v1", "fieldPath": "spec.nodeName"},
        ),
        (
            {"resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}},
            ("resources",),
            {
                "limits": {"cpu": "500m", "memory": "128Mi"},
                "requests": {"cpu": "500m", "memory": "128Mi"},
            },
        ),
        (
            {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "0.1"}}},
            ("resources", "requests"),
            {"cpu": "100m", "memory": "1Gi"},
        ),
    ],
    ids=[
        "port-protocol",
        "probe",
        "grpc-service",
        "lifecycle-http-get",
        "env-field-ref-api-version",
        "requests-from-limits",
        "requests-keep-own-values",
    ],
)
def test_container_defaults(
    container: dict[str, Any], path: tuple[Any, ...], expected: Any
) -> None:
    value: Any = codec.to_builtins(decode(with_container(**container), Pod))["spec"]["containers"][
        0
    ]
    for key in path:
        value = value[key]
    assert value == expected


@pytest.mark.parametrize(
    ("volume", "expected"),
    [
        ({"name": "scratch"}, {"name": "scratch", "emptyDir": {}}),
        (
            {"name": "conf", "configMap": {"name": "app"}},
            {"name": "conf", "configMap": {"name": "app", "defaultMode": 420}},
        ),
        (
            {"name": "creds", "secret": {"secretName": "db"}},
            {"name": "creds", "secret": {"secretName": "db", "defaultMode": 420}},
        ),
        (
            {"name": "host", "hostPath": {"path": "/var/log"}},
            {"name": "host", "hostPath": {"path": "/var/log", "type": ""}},
        ),
        (
            {
                "name": "token",
                "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
            },
            {
                "name": "token",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}
                    ],
                    "defaultMode": 420,
                },
            },
        ),
        (
            {"name": "tools", "image": {"reference": "tools:latest"}},
            {"name": "tools", "image": {"reference": "tools:latest", "pullPolicy": "Always"}},
        ),
    ],
    ids=["empty-dir-when-no-source", "config-map", "secret", "host-path", "projected", "image"],
)
def test_volume_defaults(volume: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = {"containers": [APP], "volumes": [volume], "serviceAccountName": "default"}
    assert codec.to_builtins(decode(pod(spec), Pod))["spec"]["volumes"] == [expected]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"serviceAccountName": "builder"}, ("builder", "builder")),
        ({"serviceAccount": "legacy"}, ("legacy", "legacy")),
        ({"serviceAccountName": "new", "serviceAccount": "old"}, ("new", "new")),
    ],
    ids=["name", "deprecated-field", "name-wins"],
)
def test_service_account_fields_mirror_each_other(
    given: dict[str, str], expected: tuple[str, str]
) -> None:
    spec = decode(pod({"containers": [APP]} | given), Pod).spec
    assert (spec.service_account_name, spec.service_account) == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"podIP": "10.0.0.5"}, {"podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}]}),
        (
            {"podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]},
            {"podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]},
        ),
        (
            {"podIP": "10.0.0.6", "podIPs": [{"ip": "10.0.0.5"}]},
            {"podIP": "10.0.0.6", "podIPs": [{"ip": "10.0.0.6"}]},
        ),
        ({"hostIP": "192.168.1.2"}, {"hostIP": "192.168.1.2", "hostIPs": [{"ip": "192.168.1.2"}]}),
    ],
    ids=["pod-ip", "pod-ips", "pod-ip-wins", "host-ip"],
)
def test_status_ips_agree(given: dict[str, Any], expected: dict[str, Any]) -> None:
    assert codec.to_builtins(decode(POD | {"status": given}, Pod))["status"] == expected


def test_host_network_copies_container_ports_to_host_ports() -> None:
    spec = {
        "hostNetwork": True,
        "containers": [
            APP | {"ports": [{"containerPort": 80}, {"containerPort": 81, "hostPort": 81}]}
        ],
        "initContainers": [{"name": "init", "image": "busybox", "ports": [{"containerPort": 90}]}],
    }
    obj = decode(pod(spec), Pod)
    assert [p.host_port for p in obj.spec.containers[0].ports] == [80, 81]
    assert obj.spec.init_containers[0].ports[0].host_port == 90


def test_pod_level_limits_imply_requests() -> None:
    spec = {
        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
        "initContainers": [
            {
                "name": "sidecar",
                "image": "s",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m"}},
            },
            {"name": "setup", "image": "s", "resources": {"requests": {"cpu": "1500m"}}},
        ],
        "containers": [APP | {"resources": {"requests": {"cpu": "500m"}}}],
    }
    resources = codec.to_builtins(decode(pod(spec), Pod))["spec"]["resources"]
    assert resources == {
        "limits": {"cpu": "2", "memory": "1Gi"},
        "requests": {"cpu": "1600m", "memory": "1Gi"},
    }


def test_pod_only_defaults_stay_off_templates() -> None:
    template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "worker", "namespace": "default"},
        "template": {
            "metadata": {"labels": {"app": "worker"}},
            "spec": {"containers": [APP | {"resources": {"limits": {"cpu": "1"}}}]},
        },
    }
    spec = codec.to_builtins(decode(template, PodTemplate))["template"]["spec"]
    assert "enableServiceLinks" not in spec
    assert spec["containers"][0]["resources"] == {"limits": {"cpu": "1"}}
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"


RC = {
    "apiVersion": "v1",
    "kind": "ReplicationController",
    "metadata": {"name": "nginx", "namespace": "default", "creationTimestamp": CREATED},
    "spec": {
        "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [APP]}},
    },
}


def test_replication_controller_defaults_selector_labels_and_replicas() -> None:
    out = codec.to_builtins(decode(RC, ReplicationController))
    assert out["metadata"]["labels"] == {"app": "nginx"}
    assert out["spec"]["selector"] == {"app": "nginx"}
    assert out["spec"]["replicas"] == 1


def test_defaults_are_idempotent() -> None:
    obj = decode(
        with_container(resources={"limits": {"cpu": "1"}}, ports=[{"containerPort": 1}]), Pod
    )
    once = codec.to_builtins(obj)
    walk.set_defaults(obj)
    assert codec.to_builtins(obj) == once


# Validation.

VALID = pod(
    {
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "conf", "configMap": {"name": "conf"}},
            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
        ],
        "serviceAccountName": "web",
        "initContainers": [
            {"name": "migrate", "image": "app:1", "command": ["migrate"]},
            {
                "name": "proxy",
                "image": "envoy:1",
                "restartPolicy": "Always",
                "readinessProbe": {"tcpSocket": {"port": 15000}},
            },
        ],
        "containers": [
            {
                "name": "app",
                "image": "app:1",
                "ports": [{"name": "http", "containerPort": 8080}],
                "env": [
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {
                        "name": "TEAM",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}},
                    },
                    {
                        "name": "MEMORY",
                        "valueFrom": {
                            "resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}
                        },
                    },
                ],
                "envFrom": [{"configMapRef": {"name": "conf"}, "prefix": "CONF_"}],
                "resources": {
                    "limits": {"cpu": "1", "memory": "1Gi", "example.com/gpu": "1"},
                    "requests": {"cpu": "500m"},
                },
                "volumeMounts": [{"name": "conf", "mountPath": "/etc/app", "readOnly": True}],
                "volumeDevices": [{"name": "data", "devicePath": "/dev/xvda"}],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}},
                "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 30},
                "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
                "securityContext": {
                    "runAsUser": 1000,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
            }
        ],
        "securityContext": {
            "fsGroup": 2000,
            "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}],
        },
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"},
            {"operator": "Exists"},
            {
                "key": "node.kubernetes.io/unreachable",
                "effect": "NoExecute",
                "tolerationSeconds": 60,
            },
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                            ]
                        },
                    }
                ],
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": "web"}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            },
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["pod-template-hash"],
            }
        ],
        "dnsPolicy": "None",
        "dnsConfig": {
            "nameservers": ["10.0.0.10"],
            "searches": ["svc.cluster.local."],
            "options": [{"name": "ndots", "value": "2"}],
        },
        "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["db.local"]}],
        "readinessGates": [{"conditionType": "example.com/ready"}],
        "schedulingGates": [{"name": "example.com/quota"}],
        "os": {"name": "linux"},
        "activeDeadlineSeconds": 600,
        "priorityClassName": "high",
    }
)


def test_valid_pod_has_no_errors() -> None:
    assert [str(e) for e in walk.validate(decode(VALID, Pod))] == []


def spec_with(**fields: Any) -> dict[str, Any]:
    return pod({"containers": [APP]} | fields)


CASES: list[tuple[str, dict[str, Any], list[Problem]]] = [
    ("no-containers", pod({"containers": []}), [("spec.containers", REQUIRED)]),
    (
        "no-spec",
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "d"}},
        [("spec", REQUIRED)],
    ),
    ("container-name-format", with_container(name="App_1"), [("spec.containers[0].name", INVALID)]),
    (
        "duplicate-container-names",
        spec_with(containers=[APP, APP]),
        [("spec.containers[1].name", DUPLICATE)],
    ),
    (
        "init-name-clashes-with-container",
        spec_with(initContainers=[APP]),
        [("spec.initContainers[0].name", DUPLICATE)],
    ),
    (
        "image-required",
        pod({"containers": [{"name": "app"}]}),
        [("spec.containers[0].image", REQUIRED)],
    ),
    (
        "image-whitespace",
        with_container(image=" nginx"),
        [("spec.containers[0].image", INVALID)],
    ),
    (
        "container-port-range",
        with_container(ports=[{"containerPort": 70000}]),
        [("spec.containers[0].ports[0].containerPort", INVALID)],
    ),
    (
        "container-port-required",
        with_container(ports=[{"containerPort": 0}]),
        [("spec.containers[0].ports[0].containerPort", REQUIRED)],
    ),
    (
        "host-port-range",
        with_container(ports=[{"containerPort": 80, "hostPort": 70000}]),
        [("spec.containers[0].ports[0].hostPort", INVALID)],
    ),
    (
        "port-protocol",
        with_container(ports=[{"containerPort": 80, "protocol": "ICMP"}]),
        [("spec.containers[0].ports[0].protocol", NOT_SUPPORTED)],
    ),
    (
        "port-name-too-long",
        with_container(ports=[{"name": "http-metrics-port", "containerPort": 80}]),
        [("spec.containers[0].ports[0].name", INVALID)],
    ),
    (
        "duplicate-port-names",
        with_container(
            ports=[{"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81}]
        ),
        [("spec.containers[0].ports[1].name", DUPLICATE)],
    ),
    (
        "host-port-conflict",
        spec_with(
            containers=[
                APP | {"ports": [{"containerPort": 80, "hostPort": 8080}]},
                {"name": "b", "image": "b", "ports": [{"containerPort": 81, "hostPort": 8080}]},
            ]
        ),
        [("spec.containers[1].ports[0].hostPort", DUPLICATE)],
    ),
    (
        "host-network-port-mismatch",
        spec_with(
            hostNetwork=True, containers=[APP | {"ports": [{"containerPort": 80, "hostPort": 81}]}]
        ),
        [("spec.containers[0].ports[0].hostPort", INVALID)],
    ),
    (
        "env-name-required",
        with_container(env=[{"value": "x"}]),
        [("spec.containers[0].env[0].name", REQUIRED)],
    ),
    (
        "env-value-and-value-from",
        with_container(
            env=[
                {
                    "name": "A",
                    "value": "x",
                    "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                }
            ]
        ),
        [("spec.containers[0].env[0].valueFrom", INVALID)],
    ),
    (
        "env-value-from-empty",
        with_container(env=[{"name": "A", "valueFrom": {}}]),
        [("spec.containers[0].env[0].valueFrom", INVALID)],
    ),
    (
        "env-value-from-two-sources",
        with_container(
            env=[
                {
                    "name": "A",
                    "valueFrom": {
                        "secretKeyRef": {"name": "s", "key": "k"},
                        "configMapKeyRef": {"name": "c", "key": "k"},
                    },
                }
            ]
        ),
        [("spec.containers[0].env[0].valueFrom", INVALID)],
    ),
    (
        "env-field-path-unsupported",
        with_container(
            env=[{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.schedulerName"}}}]
        ),
        [("spec.containers[0].env[0].valueFrom.fieldRef.fieldPath", NOT_SUPPORTED)],
    ),
    (
        "env-resource-unsupported",
        with_container(
            env=[{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}]
        ),
        [("spec.containers[0].env[0].valueFrom.resourceFieldRef.resource", NOT_SUPPORTED)],
    ),
    (
        "env-resource-divisor",
        with_container(
            env=[
                {
                    "name": "A",
                    "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1Mi"}},
                }
            ]
        ),
        [("spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor", INVALID)],
    ),
    (
        "env-from-no-source",
        with_container(envFrom=[{"prefix": "A_"}]),
        [("spec.containers[0].envFrom", INVALID)],
    ),
    (
        "volume-names-unique",
        spec_with(volumes=[{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]),
        [("spec.volumes[1].name", DUPLICATE)],
    ),
    (
        "volume-name-format",
        spec_with(volumes=[{"name": "Data", "emptyDir": {}}]),
        [("spec.volumes[0].name", INVALID)],
    ),
    (
        "volume-two-sources",
        spec_with(volumes=[{"name": "v", "emptyDir": {}, "hostPath": {"path": "/tmp"}}]),
        [("spec.volumes[0].hostPath", FORBIDDEN)],
    ),
    (
        "mount-of-undeclared-volume",
        with_container(volumeMounts=[{"name": "config", "mountPath": "/etc/x"}]),
        [("spec.containers[0].volumeMounts[0].name", NOT_FOUND)],
    ),
    (
        "mount-paths-unique",
        spec_with(
            volumes=[{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}],
            containers=[
                APP
                | {
                    "volumeMounts": [
                        {"name": "a", "mountPath": "/data"},
                        {"name": "b", "mountPath": "/data"},
                    ]
                }
            ],
        ),
        [("spec.containers[0].volumeMounts[1].mountPath", INVALID)],
    ),
    (
        "device-needs-claim",
        spec_with(
            volumes=[{"name": "a", "emptyDir": {}}],
            containers=[APP | {"volumeDevices": [{"name": "a", "devicePath": "/dev/a"}]}],
        ),
        [("spec.containers[0].volumeDevices[0].name", INVALID)],
    ),
    (
        "mount-sub-path-backsteps",
        spec_with(
            volumes=[{"name": "a", "emptyDir": {}}],
            containers=[
                APP | {"volumeMounts": [{"name": "a", "mountPath": "/a", "subPath": "../x"}]}
            ],
        ),
        [("spec.containers[0].volumeMounts[0].subPath", INVALID)],
    ),
    (
        "bidirectional-needs-privileged",
        spec_with(
            volumes=[{"name": "a", "emptyDir": {}}],
            containers=[
                APP
                | {
                    "volumeMounts": [
                        {"name": "a", "mountPath": "/a", "mountPropagation": "Bidirectional"}
                    ]
                }
            ],
        ),
        [("spec.containers[0].volumeMounts.mountPropagation", FORBIDDEN)],
    ),
    (
        "restart-policy-enum",
        spec_with(restartPolicy="Sometimes"),
        [("spec.restartPolicy", NOT_SUPPORTED)],
    ),
    ("dns-policy-enum", spec_with(dnsPolicy="Cluster"), [("spec.dnsPolicy", NOT_SUPPORTED)]),
    ("dns-none-needs-config", spec_with(dnsPolicy="None"), [("spec.dnsConfig", REQUIRED)]),
    (
        "dns-config-nameserver-ip",
        spec_with(dnsConfig={"nameservers": ["dns.local"]}),
        [("spec.dnsConfig.nameservers[0]", INVALID)],
    ),
    (
        "probe-without-handler",
        with_container(livenessProbe={"periodSeconds": 5}),
        [("spec.containers[0].livenessProbe", REQUIRED)],
    ),
    (
        "probe-with-two-handlers",
        with_container(readinessProbe={"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}),
        [("spec.containers[0].readinessProbe.tcpSocket", FORBIDDEN)],
    ),
    (
        "liveness-success-threshold",
        with_container(livenessProbe={"tcpSocket": {"port": 80}, "successThreshold": 2}),
        [("spec.containers[0].livenessProbe.successThreshold", INVALID)],
    ),
    (
        "readiness-grace-period",
        with_container(
            readinessProbe={"tcpSocket": {"port": 80}, "terminationGracePeriodSeconds": 5}
        ),
        [("spec.containers[0].readinessProbe.terminationGracePeriodSeconds", INVALID)],
    ),
    (
        "probe-negative-delay",
        with_container(livenessProbe={"tcpSocket": {"port": 80}, "initialDelaySeconds": -1}),
        [("spec.containers[0].livenessProbe.initialDelaySeconds", INVALID)],
    ),
    (
        "http-get-bad-port-name",
        with_container(livenessProbe={"httpGet": {"port": "Not_A_Port"}}),
        [("spec.containers[0].livenessProbe.httpGet.port", INVALID)],
    ),
    (
        "exec-without-command",
        with_container(livenessProbe={"exec": {}}),
        [("spec.containers[0].livenessProbe.exec.command", REQUIRED)],
    ),
    (
        "sleep-longer-than-grace",
        spec_with(
            terminationGracePeriodSeconds=10,
            containers=[APP | {"lifecycle": {"preStop": {"sleep": {"seconds": 11}}}}],
        ),
        [("spec.containers[0].lifecycle.preStop.sleep", INVALID)],
    ),
    (
        "init-container-probe",
        spec_with(
            initContainers=[
                {"name": "i", "image": "i", "livenessProbe": {"exec": {"command": ["x"]}}}
            ]
        ),
        [("spec.initContainers[0].livenessProbe", FORBIDDEN)],
    ),
    (
        "init-restart-policy",
        spec_with(initContainers=[{"name": "i", "image": "i", "restartPolicy": "Never"}]),
        [("spec.initContainers[0].restartPolicy", NOT_SUPPORTED)],
    ),
    (
        "regular-container-restart-policy",
        with_container(restartPolicy="Always"),
        [("spec.containers[0].restartPolicy", FORBIDDEN)],
    ),
    (
        "requests-exceed-limits",
        with_container(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
        [("spec.containers[0].resources.requests", INVALID)],
    ),
    (
        "negative-quantity",
        with_container(resources={"requests": {"memory": "-1"}}),
        [("spec.containers[0].resources.requests[memory]", INVALID)],
    ),
    (
        "bad-quantity",
        with_container(resources={"limits": {"memory": "1.5.3Gi"}}),
        [
            ("spec.containers[0].resources.limits[memory]", INVALID),
            ("spec.containers[0].resources.requests[memory]", INVALID),
        ],
    ),
    (
        "unknown-standard-resource",
        with_container(resources={"limits": {"gpu": "1"}}),
        [
            ("spec.containers[0].resources.limits[gpu]", INVALID),
            ("spec.containers[0].resources.requests[gpu]", INVALID),
        ],
    ),
    (
        "extended-resource-needs-limit",
        with_container(resources={"requests": {"example.com/gpu": "1"}}),
        [("spec.containers[0].resources.limits", REQUIRED)],
    ),
    (
        "extended-resource-integer",
        with_container(resources={"limits": {"example.com/gpu": "500m"}}),
        [
            ("spec.containers[0].resources.limits[example.com/gpu]", INVALID),
            ("spec.containers[0].resources.requests[example.com/gpu]", INVALID),
        ],
    ),
    (
        "claim-not-in-pod",
        with_container(resources={"claims": [{"name": "gpu"}]}),
        [("spec.containers[0].resources.claims[0]", NOT_FOUND)],
    ),
    (
        "toleration-exists-with-value",
        spec_with(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
        [("spec.tolerations[0].operator", INVALID)],
    ),
    (
        "toleration-empty-key-needs-exists",
        spec_with(tolerations=[{"operator": "Equal", "value": "v"}]),
        [("spec.tolerations[0].operator", INVALID)],
    ),
    (
        "toleration-seconds-need-no-execute",
        spec_with(tolerations=[{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]),
        [("spec.tolerations[0].effect", INVALID)],
    ),
    (
        "toleration-effect",
        spec_with(tolerations=[{"key": "k", "effect": "Evict"}]),
        [("spec.tolerations[0].effect", NOT_SUPPORTED)],
    ),
    (
        "node-selector-label-value",
        spec_with(nodeSelector={"disk": "fast ssd"}),
        [("spec.nodeSelector", INVALID)],
    ),
    (
        "node-selector-term-required",
        spec_with(
            affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}
        ),
        [
            (
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
                REQUIRED,
            )
        ],
    ),
    (
        "node-selector-operator",
        spec_with(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "Near"}]}
                        ]
                    }
                }
            }
        ),
        [
            (
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                ".nodeSelectorTerms[0].matchExpressions[0].operator",
                INVALID,
            )
        ],
    ),
    (
        "preferred-weight",
        spec_with(
            affinity={
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 0, "podAffinityTerm": {"topologyKey": "zone"}}
                    ]
                }
            }
        ),
        [
            (
                "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
                INVALID,
            )
        ],
    ),
    (
        "pod-affinity-topology-key",
        spec_with(
            affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}}
        ),
        [
            (
                "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
                REQUIRED,
            )
        ],
    ),
    (
        "spread-max-skew",
        spec_with(
            topologySpreadConstraints=[
                {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
            ]
        ),
        [("spec.topologySpreadConstraints[0].maxSkew", INVALID)],
    ),
    (
        "spread-duplicate",
        spec_with(
            topologySpreadConstraints=[
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
            ]
        ),
        [("spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}", DUPLICATE)],
    ),
    (
        "spread-min-domains-needs-do-not-schedule",
        spec_with(
            topologySpreadConstraints=[
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "minDomains": 2,
                }
            ]
        ),
        [("spec.topologySpreadConstraints[0].minDomains", INVALID)],
    ),
    (
        "active-deadline-positive",
        spec_with(activeDeadlineSeconds=0),
        [("spec.activeDeadlineSeconds", INVALID)],
    ),
    ("hostname-label", spec_with(hostname="web.example"), [("spec.hostname", INVALID)]),
    ("node-name-subdomain", spec_with(nodeName="Node_1"), [("spec.nodeName", INVALID)]),
    (
        "scheduling-gate-duplicate",
        spec_with(schedulingGates=[{"name": "a"}, {"name": "a"}]),
        [("spec.schedulingGates[1]", DUPLICATE)],
    ),
    (
        "node-name-with-gates",
        spec_with(nodeName="n1", schedulingGates=[{"name": "a"}]),
        [("spec.nodeName", FORBIDDEN)],
    ),
    (
        "host-alias-ip",
        spec_with(hostAliases=[{"ip": "not-an-ip", "hostnames": ["a"]}]),
        [("spec.hostAliases[0].ip", INVALID)],
    ),
    (
        "readiness-gate-name",
        spec_with(readinessGates=[{"conditionType": "not a name"}]),
        [("spec.readinessGates[0].conditionType", INVALID)],
    ),
    ("os-name", spec_with(os={"name": "plan9"}), [("spec.os.name", NOT_SUPPORTED)]),
    (
        "windows-forbids-linux-settings",
        spec_with(os={"name": "windows"}, securityContext={"runAsUser": 1}),
        [("spec.securityContext.runAsUser", FORBIDDEN)],
    ),
    (
        "linux-forbids-windows-options",
        spec_with(
            os={"name": "linux"},
            containers=[APP | {"securityContext": {"windowsOptions": {"runAsUserName": "a"}}}],
        ),
        [("spec.containers[0].securityContext.windowsOptions", FORBIDDEN)],
    ),
    (
        "privileged-without-escalation",
        with_container(securityContext={"privileged": True, "allowPrivilegeEscalation": False}),
        [("spec.containers[0].securityContext", INVALID)],
    ),
    (
        "seccomp-localhost-needs-profile",
        with_container(securityContext={"seccompProfile": {"type": "Localhost"}}),
        [("spec.containers[0].securityContext.seccompProfile.localhostProfile", REQUIRED)],
    ),
    (
        "run-as-user-range",
        spec_with(securityContext={"runAsUser": -1}),
        [("spec.securityContext.runAsUser", INVALID)],
    ),
    (
        "sysctl-duplicate",
        spec_with(
            securityContext={"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}] * 2}
        ),
        [("spec.securityContext.sysctls[1].name", DUPLICATE)],
    ),
    (
        "net-sysctl-with-host-network",
        spec_with(
            hostNetwork=True,
            securityContext={"sysctls": [{"name": "net.core.somaxconn", "value": "1"}]},
        ),
        [("spec.securityContext.sysctls[0].name", INVALID)],
    ),
    (
        "share-process-namespace-with-host-pid",
        spec_with(shareProcessNamespace=True, hostPID=True),
        [("spec.securityContext.shareProcessNamespace", INVALID)],
    ),
    (
        "host-users-false-with-host-network",
        spec_with(hostUsers=False, hostNetwork=True),
        [("spec.hostNetwork", FORBIDDEN)],
    ),
    (
        "token-projection-without-service-account",
        spec_with(
            volumes=[
                {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}
            ]
        ),
        [("spec.volumes[0].projected.sources[0].serviceAccountToken", FORBIDDEN)],
    ),
    (
        "resource-claim-needs-one-source",
        spec_with(resourceClaims=[{"name": "gpu"}]),
        [("spec.resourceClaims[0]", INVALID)],
    ),
    (
        "ephemeral-containers-target",
        spec_with(
            ephemeralContainers=[
                {"name": "debug", "image": "busybox", "targetContainerName": "nope"}
            ]
        ),
        [("spec.ephemeralContainers[0].targetContainerName", NOT_FOUND)],
    ),
    (
        "ephemeral-container-ports",
        spec_with(
            ephemeralContainers=[
                {"name": "debug", "image": "busybox", "ports": [{"containerPort": 80}]}
            ]
        ),
        [("spec.ephemeralContainers[0].ports", FORBIDDEN)],
    ),
    (
        "mirror-pod-needs-node",
        pod({"containers": [APP]}, annotations={"kubernetes.io/config.mirror": "x"}),
        [("metadata.annotations[kubernetes.io/config.mirror]", INVALID)],
    ),
    (
        "ephemeral-volume-claim-name",
        pod(
            {
                "containers": [APP],
                "volumes": [
                    {
                        "name": "scratch",
                        "ephemeral": {
                            "volumeClaimTemplate": {
                                "spec": {
                                    "accessModes": ["ReadWriteOnce"],
                                    "resources": {"requests": {"storage": "1Gi"}},
                                }
                            }
                        },
                    },
                    {"name": "other", "persistentVolumeClaim": {"claimName": "web-scratch"}},
                ],
            }
        ),
        [("spec.volumes[1].persistentVolumeClaim.claimName", INVALID)],
    ),
]


@pytest.mark.parametrize(("raw", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pod_validation(raw: dict[str, Any], expected: list[Problem]) -> None:
    assert problems(decode(raw, Pod)) == ordered(expected)


def test_termination_grace_period_is_required_without_defaults() -> None:
    raw = pod(
        {"containers": [APP | {"imagePullPolicy": "Always", "terminationMessagePolicy": "File"}]}
    )
    obj = codec.from_builtins(raw, Pod).obj
    assert ("spec.terminationGracePeriodSeconds", REQUIRED) in problems(obj)


def test_messages_follow_upstream() -> None:
    errors = walk.validate(
        decode(
            pod(
                {
                    "containers": [
                        APP
                        | {
                            "env": [
                                {
                                    "name": "A",
                                    "value": "x",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                }
                            ],
                            "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
                        }
                    ],
                    "volumes": [
                        {"name": "v", "emptyDir": {}, "nfs": {"server": "s", "path": "/x"}}
                    ],
                }
            ),
            Pod,
        )
    )
    assert [str(e) for e in errors] == [
        "spec.volumes[0].nfs: Forbidden: may not specify more than 1 volume type",
        'spec.containers[0].env[0].valueFrom: Invalid value: "": may not be specified when '
        "`value` is not empty",
        'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal '
        "to cpu limit of 1",
    ]


# Updates.


def updated(patch: dict[str, Any], base: dict[str, Any] = VALID) -> list[Problem]:
    old, new = decode(base, Pod), decode(merge(base, patch), Pod)
    return ordered((e.field, e.type) for e in walk.validate_update(new, old))


def containers_with(base: dict[str, Any], **fields: Any) -> list[dict[str, Any]]:
    return [c | fields for c in base["spec"]["containers"]]


UPDATE_CASES: list[tuple[str, dict[str, Any], list[Problem]]] = [
    ("image", {"spec": {"containers": containers_with(VALID, image="app:2")}}, []),
    ("active-deadline-lowered", {"spec": {"activeDeadlineSeconds": 300}}, []),
    (
        "active-deadline-raised",
        {"spec": {"activeDeadlineSeconds": 900}},
        [("spec.activeDeadlineSeconds", INVALID)],
    ),
    (
        "active-deadline-removed",
        {"spec": {"activeDeadlineSeconds": None}},
        [("spec.activeDeadlineSeconds", INVALID)],
    ),
    (
        "toleration-added",
        {
            "spec": {
                "tolerations": [*VALID["spec"]["tolerations"], {"key": "x", "operator": "Exists"}]
            }
        },
        [],
    ),
    (
        "toleration-seconds-changed",
        {
            "spec": {
                "tolerations": [
                    *VALID["spec"]["tolerations"][:2],
                    VALID["spec"]["tolerations"][2] | {"tolerationSeconds": 30},
                ]
            }
        },
        [],
    ),
    (
        "toleration-removed",
        {"spec": {"tolerations": VALID["spec"]["tolerations"][:1]}},
        [("spec.tolerations", FORBIDDEN)],
    ),
    ("scheduling-gate-removed", {"spec": {"schedulingGates": None}}, []),
    (
        "scheduling-gate-added",
        {
            "spec": {
                "schedulingGates": [{"name": "example.com/quota"}, {"name": "example.com/more"}]
            }
        },
        [("spec.schedulingGates[1].name", FORBIDDEN)],
    ),
    (
        "container-added",
        {"spec": {"containers": [*VALID["spec"]["containers"], {"name": "b", "image": "b"}]}},
        [("spec.containers", FORBIDDEN)],
    ),
    ("other-field", {"spec": {"hostname": "web-0"}}, [("spec", FORBIDDEN)]),
    (
        "container-command",
        {"spec": {"containers": containers_with(VALID, command=["other"])}},
        [("spec", FORBIDDEN)],
    ),
]


@pytest.mark.parametrize(
    ("patch", "expected"), [c[1:] for c in UPDATE_CASES], ids=[c[0] for c in UPDATE_CASES]
)
def test_pod_update(patch: dict[str, Any], expected: list[Problem]) -> None:
    assert updated(patch) == ordered(expected)


def test_spec_change_message_names_what_may_change() -> None:
    old, new = decode(POD, Pod), decode(merge(POD, {"spec": {"hostname": "web-0"}}), Pod)
    (error,) = walk.validate_update(new, old)
    assert error.detail.startswith(
        "pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
        "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to "
        "be set to 1 if it was previously negative)\n"
    )
    assert '+ hostname: "web-0"' in error.detail


# Other kinds.


def template_cases() -> list[tuple[str, dict[str, Any], list[Problem]]]:
    template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "worker", "namespace": "default"},
        "template": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [APP]}},
    }
    return [
        ("template-valid", template, []),
        (
            "template-label",
            merge(template, {"template": {"metadata": {"labels": {"app": "a b"}}}}),
            [("template.metadata.labels", INVALID)],
        ),
        (
            "template-ephemeral",
            merge(
                template,
                {"template": {"spec": {"ephemeralContainers": [{"name": "d", "image": "d"}]}}},
            ),
            [("template.spec.ephemeralContainers", FORBIDDEN)],
        ),
        ("template-missing", merge(template, {"template": None}), [("template", REQUIRED)]),
    ]


RC_CASES: list[tuple[str, dict[str, Any], list[Problem]]] = [
    ("rc-valid", RC, []),
    (
        "rc-selector-mismatch",
        merge(RC, {"spec": {"selector": {"app": "other"}}}),
        [("spec.template.metadata.labels", INVALID)],
    ),
    (
        "rc-restart-policy",
        merge(RC, {"spec": {"template": {"spec": {"restartPolicy": "OnFailure"}}}}),
        [("spec.template.spec.restartPolicy", NOT_SUPPORTED)],
    ),
    (
        "rc-active-deadline",
        merge(RC, {"spec": {"template": {"spec": {"activeDeadlineSeconds": 5}}}}),
        [("spec.template.spec.activeDeadlineSeconds", FORBIDDEN)],
    ),
    ("rc-negative-replicas", merge(RC, {"spec": {"replicas": -1}}), [("spec.replicas", INVALID)]),
    (
        "rc-status-ready-above-replicas",
        merge(RC, {"status": {"replicas": 1, "readyReplicas": 2, "availableReplicas": 0}}),
        [("status.readyReplicas", INVALID)],
    ),
    (
        "rc-template-required",
        merge(RC, {"spec": {"template": None, "selector": {"a": "b"}}}),
        [("spec.template", REQUIRED)],
    ),
]

BINDING = {
    "apiVersion": "v1",
    "kind": "Binding",
    "metadata": {"name": "web", "namespace": "default"},
    "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
}
BINDING_CASES: list[tuple[str, dict[str, Any], list[Problem]]] = [
    ("binding-valid", BINDING, []),
    ("binding-kind", merge(BINDING, {"target": {"kind": "Pod"}}), [("target.kind", NOT_SUPPORTED)]),
    ("binding-name", merge(BINDING, {"target": {"name": None}}), [("target.name", REQUIRED)]),
]


OTHER_KINDS: dict[str, type[Resource]] = {
    "PodTemplate": PodTemplate,
    "ReplicationController": ReplicationController,
    "Binding": Binding,
}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[1:] for c in (*template_cases(), *RC_CASES, *BINDING_CASES)],
    ids=[c[0] for c in (*template_cases(), *RC_CASES, *BINDING_CASES)],
)
def test_other_kinds_validation(raw: dict[str, Any], expected: list[Problem]) -> None:
    assert problems(decode(raw, OTHER_KINDS[raw["kind"]])) == ordered(expected)


def test_registrations() -> None:
    pods, rcs, bindings = Pod.kind_info, ReplicationController.kind_info, Binding.kind_info
    assert (pods.plural, pods.short_names, pods.categories) == ("pods", ("po",), ("all",))
    assert {
        "status",
        "binding",
        "eviction",
        "log",
        "exec",
        "attach",
        "portforward",
        "proxy",
        "ephemeralcontainers",
        "resize",
    } == set(pods.subresources)
    assert (rcs.short_names, rcs.categories, rcs.subresources) == (
        ("rc",),
        ("all",),
        ("status", "scale"),
    )
    assert (bindings.plural, bindings.verbs) == ("bindings", ("create",))
    assert PodTemplate.kind_info.plural == "podtemplates"


# QoS.


def resources(
    limits: dict[str, str] | None = None, requests: dict[str, str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if limits is not None:
        out["limits"] = limits
    if requests is not None:
        out["requests"] = requests
    return out


@pytest.mark.parametrize(
    ("containers", "pod_level", "expected"),
    [
        ([{}], None, "BestEffort"),
        ([resources(limits={"cpu": "1", "memory": "1Gi"})], None, "Guaranteed"),
        (
            [resources(limits={"cpu": "1", "memory": "1Gi"}, requests={"cpu": "500m"})],
            None,
            "Burstable",
        ),
        ([resources(limits={"cpu": "1"})], None, "Burstable"),
        ([resources(requests={"memory": "1Gi"})], None, "Burstable"),
        (
            [resources(limits={"cpu": "1", "memory": "1Gi"}), {}],
            None,
            "Burstable",
        ),
        ([resources(limits={"example.com/gpu": "1"})], None, "BestEffort"),
        ([resources(requests={"cpu": "0"})], None, "BestEffort"),
        (
            [resources(requests={"cpu": "1"})],
            resources(limits={"cpu": "1", "memory": "1Gi"}),
            "Guaranteed",
        ),
        ([{}], resources(requests={"cpu": "1"}), "Burstable"),
    ],
    ids=[
        "nothing",
        "limits-only",
        "requests-below-limits",
        "cpu-limit-only",
        "requests-only",
        "one-container-unlimited",
        "extended-resources-ignored",
        "zero-ignored",
        "pod-level-limits",
        "pod-level-requests",
    ],
)
def test_qos_class(
    containers: list[dict[str, Any]], pod_level: dict[str, Any] | None, expected: str
) -> None:
    spec: dict[str, Any] = {
        "containers": [APP | {"name": f"c{i}", "resources": r} for i, r in enumerate(containers)]
    }
    if pod_level is not None:
        spec["resources"] = pod_level
    assert qos_class(decode(pod(spec), Pod).spec) == expected


# Printer cells.


def running(name: str, ready: bool = True, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "ready": ready,
        "restartCount": restarts,
        "image": "x",
        "imageID": "",
        "state": {"running": {"startedAt": "2026-01-01T11:56:00Z"}},
    } | extra


def waiting(name: str, reason: str) -> dict[str, Any]:
    return {
        "name": name,
        "ready": False,
        "restartCount": 0,
        "image": "x",
        "imageID": "",
        "state": {"waiting": {"reason": reason}},
    }


def terminated(name: str, exit_code: int, reason: str = "", **extra: Any) -> dict[str, Any]:
    state = {"exitCode": exit_code} | ({"reason": reason} if reason else {}) | extra
    return {
        "name": name,
        "ready": False,
        "restartCount": 0,
        "image": "x",
        "imageID": "",
        "state": {"terminated": state},
    }


TWO = {"containers": [APP, {"name": "side", "image": "side"}]}
INIT = TWO | {"initContainers": [{"name": "i1", "image": "i"}, {"name": "i2", "image": "i"}]}
SIDECAR = {
    "containers": [APP],
    "initContainers": [{"name": "proxy", "image": "p", "restartPolicy": "Always"}],
}

PRINT_CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], list[Any]]] = [
    ("pending", TWO, {"phase": "Pending"}, {}, ["0/2", "Pending", "0"]),
    (
        "running",
        TWO,
        {
            "phase": "Running",
            "containerStatuses": [
                running("app"),
                running(
                    "side",
                    restarts=2,
                    lastState={"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T11:50:00Z"}},
                ),
            ],
        },
        {},
        ["2/2", "Running", "2 (10m ago)"],
    ),
    (
        "crash-loop",
        TWO,
        {
            "phase": "Running",
            "containerStatuses": [running("app"), waiting("side", "CrashLoopBackOff")],
        },
        {},
        ["1/2", "CrashLoopBackOff", "0"],
    ),
    (
        "completed",
        TWO,
        {
            "phase": "Succeeded",
            "containerStatuses": [
                terminated("app", 0, "Completed"),
                terminated("side", 0, "Completed"),
            ],
        },
        {},
        ["0/2", "Completed", "0"],
    ),
    (
        "exit-code-without-reason",
        TWO,
        {
            "phase": "Failed",
            "containerStatuses": [terminated("app", 0, "Completed"), terminated("side", 3)],
        },
        {},
        ["0/2", "Completed", "0"],
    ),
    (
        "signal",
        {"containers": [APP]},
        {"phase": "Failed", "containerStatuses": [terminated("app", 137, signal=9)]},
        {},
        ["0/1", "Signal:9", "0"],
    ),
    (
        "completed-but-one-running",
        TWO,
        {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [terminated("app", 0, "Completed"), running("side")],
        },
        {},
        ["1/2", "NotReady", "0"],
    ),
    (
        "init-progress",
        INIT,
        {
            "phase": "Pending",
            "initContainerStatuses": [terminated("i1", 0, "Completed"), running("i2", ready=False)],
        },
        {},
        ["0/2", "Init:1/2", "0"],
    ),
    (
        "init-failed",
        INIT,
        {
            "phase": "Pending",
            "initContainerStatuses": [
                terminated("i1", 1, "Error"),
                waiting("i2", "PodInitializing"),
            ],
        },
        {},
        ["0/2", "Init:Error", "0"],
    ),
    (
        "init-exit-code",
        INIT,
        {"phase": "Pending", "initContainerStatuses": [terminated("i1", 2)]},
        {},
        ["0/2", "Init:ExitCode:2", "0"],
    ),
    (
        "init-waiting",
        INIT,
        {"phase": "Pending", "initContainerStatuses": [waiting("i1", "ImagePullBackOff")]},
        {},
        ["0/2", "Init:ImagePullBackOff", "0"],
    ),
    (
        "pod-initializing",
        INIT,
        {
            "phase": "Pending",
            "initContainerStatuses": [
                terminated("i1", 0, "Completed"),
                terminated("i2", 0, "Completed"),
            ],
            "containerStatuses": [
                waiting("app", "PodInitializing"),
                waiting("side", "PodInitializing"),
            ],
        },
        {},
        ["0/2", "PodInitializing", "0"],
    ),
    (
        "sidecar-counts",
        SIDECAR,
        {
            "phase": "Running",
            "initContainerStatuses": [running("proxy", started=True, restarts=1)],
            "containerStatuses": [running("app")],
        },
        {},
        ["2/2", "Running", "1"],
    ),
    (
        "scheduling-gated",
        {"containers": [APP], "schedulingGates": [{"name": "g"}]},
        {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
            ],
        },
        {},
        ["0/1", "SchedulingGated", "0"],
    ),
    (
        "evicted",
        {"containers": [APP]},
        {"phase": "Failed", "reason": "Evicted"},
        {},
        ["0/1", "Evicted", "0"],
    ),
    (
        "terminating",
        {"containers": [APP]},
        {"phase": "Running", "containerStatuses": [running("app")]},
        {"deletionTimestamp": "2026-01-01T11:59:00Z"},
        ["1/1", "Terminating", "0"],
    ),
    (
        "node-lost",
        {"containers": [APP]},
        {"phase": "Running", "reason": "NodeLost"},
        {"deletionTimestamp": "2026-01-01T11:59:00Z"},
        ["0/1", "Unknown", "0"],
    ),
    (
        "terminating-but-succeeded",
        {"containers": [APP]},
        {"phase": "Succeeded", "containerStatuses": [terminated("app", 0, "Completed")]},
        {"deletionTimestamp": "2026-01-01T11:59:00Z"},
        ["0/1", "Completed", "0"],
    ),
]


@pytest.mark.parametrize(
    ("spec", "status", "metadata", "expected"),
    [c[1:] for c in PRINT_CASES],
    ids=[c[0] for c in PRINT_CASES],
)
def test_pod_ready_status_restarts(
    spec: dict[str, Any], status: dict[str, Any], metadata: dict[str, Any], expected: list[Any]
) -> None:
    obj = decode(pod(spec, **metadata) | {"status": status}, Pod)
    assert cells(obj, wide=False) == ["web", *expected, "5m"]


def test_pod_wide_cells() -> None:
    raw = pod(
        {
            "containers": [APP],
            "nodeName": "node-1",
            "readinessGates": [{"conditionType": "a"}, {"conditionType": "b"}],
        }
    ) | {
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.5",
            "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}],
            "conditions": [{"type": "a", "status": "True"}, {"type": "b", "status": "False"}],
            "containerStatuses": [running("app")],
        }
    }
    assert cells(decode(raw, Pod))[5:] == ["10.0.0.5", "node-1", "<none>", "1/2"]
    assert cells(decode(POD, Pod))[5:] == ["<none>", "<none>", "<none>", "<none>"]


def test_pod_column_names() -> None:
    columns = Pod.kind_info.columns
    assert [c.name for c in columns] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "IP",
        "Node",
        "Nominated Node",
        "Readiness Gates",
    ]
    assert [c.priority for c in columns] == [0, 0, 0, 0, 0, 1, 1, 1, 1]


def test_template_and_controller_cells() -> None:
    template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "worker", "namespace": "default", "creationTimestamp": CREATED},
        "template": {
            "metadata": {"labels": {"tier": "back", "app": "w"}},
            "spec": {"containers": [APP, {"name": "log", "image": "fluentbit:3"}]},
        },
    }
    assert cells(decode(template, PodTemplate)) == [
        "worker",
        "app,log",
        "nginx:1.27,fluentbit:3",
        "app=w,tier=back",
    ]
    rc = decode(merge(RC, {"status": {"replicas": 3, "readyReplicas": 2}}), ReplicationController)
    assert cells(rc) == ["nginx", 1, 3, 2, "5m", "app", "nginx:1.27", "app=nginx"]
    assert [c.name for c in ReplicationController.kind_info.columns] == [
        "Name",
        "Desired",
        "Current",
        "Ready",
        "Age",
        "Containers",
        "Images",
        "Selector",
    ]


# Field selectors.


def test_pod_field_selectors() -> None:
    raw = pod(
        {"containers": [APP], "nodeName": "node-1", "serviceAccountName": "sa", "hostNetwork": True}
    ) | {
        "status": {
            "phase": "Running",
            "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}],
            "nominatedNodeName": "n2",
        }
    }
    assert Pod.kind_info.selectable_fields(decode(raw, Pod)) == {
        "metadata.name": "web",
        "metadata.namespace": "default",
        "spec.nodeName": "node-1",
        "spec.restartPolicy": "Always",
        "spec.schedulerName": "default-scheduler",
        "spec.serviceAccountName": "sa",
        "spec.hostNetwork": "true",
        "status.phase": "Running",
        "status.podIP": "10.0.0.5",
        "status.podIPs": "10.0.0.5,fd00::5",
        "status.nominatedNodeName": "n2",
    }
    empty = Pod.kind_info.selectable_fields(decode(POD, Pod))
    assert (empty["spec.hostNetwork"], empty["status.podIP"], empty["spec.nodeName"]) == (
        "false",
        "",
        "",
    )


def test_replication_controller_field_selector() -> None:
    rc = decode(merge(RC, {"status": {"replicas": 3}}), ReplicationController)
    assert ReplicationController.kind_info.selectable_fields(rc)["status.replicas"] == "3"
    assert ReplicationController.kind_info.supports_field("status.replicas")
    assert not ReplicationController.kind_info.supports_field("spec.replicas")
