"""The sandbox config: identity, hostname, logs, DNS, ports, cgroup, sysctls, security."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from google.protobuf import json_format

from kube.api.kinds.core_v1.pod import Pod
from node.cri.pb import api_pb2 as pb
from node.kubelet.runtime.envvars import ConfigError
from node.kubelet.runtime.options import NodeRuntimeOptions
from node.kubelet.runtime.sandbox import sandbox_config


def make_pod(spec: dict[str, Any] | None = None, **metadata: Any) -> Pod:
    spec = {"containers": [{"name": "app", "image": "busybox"}], **(spec or {})}
    meta = {"name": "web", "namespace": "ns", "uid": "u1", **metadata}
    return msgspec.convert({"metadata": meta, "spec": spec}, Pod)


@pytest.fixture
def options(tmp_path: Path) -> NodeRuntimeOptions:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 192.0.2.53\n")
    return NodeRuntimeOptions(
        node_name="n",
        node_ips=("192.0.2.1",),
        root_dir=tmp_path / "kubelet",
        pod_logs_dir=tmp_path / "logs",
        cluster_dns=("10.96.0.10",),
        resolv_conf=resolv,
    )


def test_minimal_pod(options: NodeRuntimeOptions, tmp_path: Path) -> None:
    pod = make_pod(labels={"app": "web"}, annotations={"note": "x"})
    config = sandbox_config(pod, 2, options)
    assert json_format.MessageToDict(config, preserving_proto_field_name=True) == {
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "attempt": 2},
        "hostname": "web",
        "log_directory": str(tmp_path / "logs" / "ns_web_u1"),
        "dns_config": {
            "servers": ["10.96.0.10"],
            "searches": ["ns.svc.cluster.local", "svc.cluster.local", "cluster.local"],
            "options": ["ndots:5"],
        },
        "labels": {
            "app": "web",
            "io.kubernetes.pod.name": "web",
            "io.kubernetes.pod.namespace": "ns",
            "io.kubernetes.pod.uid": "u1",
        },
        "annotations": {"note": "x"},
        "linux": {
            "cgroup_parent": "/kubepods/besteffort/podu1",
            "security_context": {
                "namespace_options": {"pid": "CONTAINER"},
                "seccomp": {"profile_type": "Unconfined"},
            },
        },
    }


def security(pod: Pod, options: NodeRuntimeOptions) -> pb.LinuxSandboxSecurityContext:
    return sandbox_config(pod, 0, options).linux.security_context


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"hostNetwork": True}, (pb.NODE, pb.CONTAINER, pb.POD), id="host-network"),
        pytest.param(
            {"hostPID": True, "hostIPC": True}, (pb.POD, pb.NODE, pb.NODE), id="host-pid-ipc"
        ),
        pytest.param({"shareProcessNamespace": True}, (pb.POD, pb.POD, pb.POD), id="shared-pid"),
    ],
)
def test_namespace_options(
    options: NodeRuntimeOptions, spec: dict[str, Any], expected: tuple[int, int, int]
) -> None:
    namespaces = security(make_pod(spec), options).namespace_options
    assert (namespaces.network, namespaces.pid, namespaces.ipc) == expected


def test_pod_security_context(options: NodeRuntimeOptions) -> None:
    pod = make_pod(
        {
            "securityContext": {
                "runAsUser": 1000,
                "runAsGroup": 0,
                "fsGroup": 2000,
                "supplementalGroups": [3000, 3001],
                "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}],
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "initContainers": [
                {"name": "init", "image": "busybox", "securityContext": {"privileged": True}}
            ],
        }
    )
    config = sandbox_config(pod, 0, options)
    context = config.linux.security_context
    assert context.HasField("run_as_user") and context.run_as_user.value == 1000
    assert context.HasField("run_as_group") and context.run_as_group.value == 0
    assert list(context.supplemental_groups) == [2000, 3000, 3001]
    assert context.privileged
    assert context.seccomp == pb.SecurityProfile(profile_type=pb.SecurityProfile.RuntimeDefault)
    assert dict(config.linux.sysctls) == {"net.ipv4.ip_unprivileged_port_start": "0"}


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        pytest.param(
            {"type": "Unconfined"},
            pb.SecurityProfile(profile_type=pb.SecurityProfile.Unconfined),
            id="unconfined",
        ),
        pytest.param(
            {"type": "Localhost", "localhostProfile": "profiles/audit.json"},
            "localhost",
            id="localhost",
        ),
    ],
)
def test_seccomp(options: NodeRuntimeOptions, profile: dict[str, Any], expected: Any) -> None:
    context = security(make_pod({"securityContext": {"seccompProfile": profile}}), options)
    if expected == "localhost":
        expected = pb.SecurityProfile(
            profile_type=pb.SecurityProfile.Localhost,
            localhost_ref=str(options.root_dir / "seccomp" / "profiles/audit.json"),
        )
    assert context.seccomp == expected


def test_port_mappings(options: NodeRuntimeOptions) -> None:
    pod = make_pod(
        {
            "containers": [
                {
                    "name": "app",
                    "image": "busybox",
                    "ports": [
                        {"containerPort": 80, "hostPort": 8080, "protocol": "TCP"},
                        {
                            "containerPort": 53,
                            "hostPort": 5353,
                            "protocol": "UDP",
                            "hostIP": "127.0.0.1",
                        },
                        {"containerPort": 9090, "protocol": "TCP"},
                    ],
                },
                {"name": "b", "image": "busybox", "ports": [{"containerPort": 1, "hostPort": 2}]},
            ]
        }
    )
    assert list(sandbox_config(pod, 0, options).port_mappings) == [
        pb.PortMapping(protocol=pb.TCP, container_port=80, host_port=8080),
        pb.PortMapping(protocol=pb.UDP, container_port=53, host_port=5353, host_ip="127.0.0.1"),
        pb.PortMapping(protocol=pb.TCP, container_port=1, host_port=2),
    ]


@pytest.mark.parametrize(
    ("spec", "hostname"),
    [
        pytest.param({"hostNetwork": True}, "", id="host-network-has-none"),
        pytest.param({"hostname": "db-0", "subdomain": "db"}, "db-0", id="hostname"),
        pytest.param(
            {"hostname": "db-0", "subdomain": "db", "setHostnameAsFQDN": True},
            "db-0.db.ns.svc.cluster.local",
            id="fqdn",
        ),
        pytest.param({"setHostnameAsFQDN": True}, "web", id="fqdn-without-subdomain"),
    ],
)
def test_hostname(options: NodeRuntimeOptions, spec: dict[str, Any], hostname: str) -> None:
    assert sandbox_config(make_pod(spec), 0, options).hostname == hostname


def test_given_dns_is_used(options: NodeRuntimeOptions) -> None:
    dns = pb.DNSConfig(servers=["1.1.1.1"])
    assert sandbox_config(make_pod(), 0, options, dns=dns).dns_config == dns


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"hostname": "h" * 30, "subdomain": "s" * 20, "setHostnameAsFQDN": True},
            "failed to construct FQDN from pod hostname and cluster domain, FQDN "
            f"{'h' * 30}.{'s' * 20}.ns.svc.cluster.local is too long (64 characters is the max, "
            "72 characters requested)",
            id="fqdn-too-long",
        ),
        pytest.param(
            {"securityContext": {"seccompProfile": {"type": "Localhost"}}},
            "localhostProfile must be set if seccompProfile type is Localhost.",
            id="localhost-without-profile",
        ),
        pytest.param(
            {
                "containers": [
                    {
                        "name": "a",
                        "image": "b",
                        "ports": [{"containerPort": 1, "hostPort": 2, "protocol": "ICMP"}],
                    }
                ]
            },
            "unknown protocol 'ICMP' of a container port",
            id="bad-protocol",
        ),
    ],
)
def test_config_errors(options: NodeRuntimeOptions, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        sandbox_config(make_pod(spec), 0, options)
    assert str(error.value) == message
