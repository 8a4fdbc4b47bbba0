"""The CRI protocol subset (proto/runtime/v1/api.proto) and its generated stubs.

The wire checks pin field numbers and wire types against the upstream CRI
(k8s.io/cri-api runtime.v1): a tag byte is ``(field_number << 3) | wire_type``,
wire type 0 for varints, 2 for strings, bytes, sub-messages and maps.
"""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from node.cri.pb import api_pb2 as pb
from node.cri.pb import api_pb2_grpc as pb_grpc

REPO_ROOT = Path(__file__).resolve().parents[2]
GENERATE = REPO_ROOT / "proto" / "generate.py"

RUNTIME_RPCS = {
    "Version",
    "RunPodSandbox",
    "StopPodSandbox",
    "RemovePodSandbox",
    "PodSandboxStatus",
    "ListPodSandbox",
    "CreateContainer",
    "StartContainer",
    "StopContainer",
    "RemoveContainer",
    "ListContainers",
    "ContainerStatus",
    "UpdateContainerResources",
    "ReopenContainerLog",
    "ExecSync",
    "Exec",
    "Attach",
    "PortForward",
    "ContainerStats",
    "ListContainerStats",
    "UpdateRuntimeConfig",
    "Status",
}
IMAGE_RPCS = {"ListImages", "ImageStatus", "PullImage", "RemoveImage", "ImageFsInfo"}


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kubelab_proto_generate", GENERATE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- (a) the generated files are current --------------------------------------------


def test_generate_check_passes() -> None:
    proc = subprocess.run(
        [sys.executable, str(GENERATE), "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_check_reports_missing_and_differing_files(tmp_path: Path) -> None:
    gen = _load_generator()
    stale = gen.stale_files(tmp_path)
    assert sorted(stale) == sorted(f"{tmp_path / n} (missing)" for n in gen.GENERATED_FILES)

    gen.generate(tmp_path)
    assert gen.stale_files(tmp_path) == []

    (tmp_path / "api_pb2_grpc.py").write_text("# edited by hand\n")
    assert gen.stale_files(tmp_path) == [f"{tmp_path / 'api_pb2_grpc.py'} (differs)"]


def test_generation_is_deterministic(tmp_path: Path) -> None:
    gen = _load_generator()
    first = gen.generate(tmp_path / "a")
    second = gen.generate(tmp_path / "b")
    assert first == second
    for name, data in first.items():
        assert (tmp_path / "a" / name).read_bytes() == data


# --- (b) stubs import and expose the expected RPCs -----------------------------------


def test_grpc_module_imports_pb2_from_package() -> None:
    source = Path(pb_grpc.__file__).read_text()
    assert "from node.cri.pb import api_pb2 as" in source
    assert "from runtime.v1 import" not in source
    assert getattr(pb_grpc, "runtime_dot_v1_dot_api__pb2") is pb  # noqa: B009


def test_messages_belong_to_the_package_module() -> None:
    msg = pb.KeyValue(key="PATH", value="/bin")
    assert type(msg).__module__ == "node.cri.pb.api_pb2"
    assert pickle.loads(pickle.dumps(msg)) == msg


@pytest.mark.parametrize(
    ("service", "stub_name", "servicer_name", "adder_name", "rpcs"),
    [
        pytest.param(
            "RuntimeService",
            "RuntimeServiceStub",
            "RuntimeServiceServicer",
            "add_RuntimeServiceServicer_to_server",
            RUNTIME_RPCS,
            id="runtime-service",
        ),
        pytest.param(
            "ImageService",
            "ImageServiceStub",
            "ImageServiceServicer",
            "add_ImageServiceServicer_to_server",
            IMAGE_RPCS,
            id="image-service",
        ),
    ],
)
def test_service_stubs(
    service: str, stub_name: str, servicer_name: str, adder_name: str, rpcs: set[str]
) -> None:
    svc = pb.DESCRIPTOR.services_by_name[service]
    # The full name is part of every RPC's path on the wire: /runtime.v1.<Service>/<Method>.
    assert svc.full_name == f"runtime.v1.{service}"
    assert {m.name for m in svc.methods} == rpcs
    assert all(not m.client_streaming and not m.server_streaming for m in svc.methods)

    servicer = getattr(pb_grpc, servicer_name)
    assert callable(getattr(pb_grpc, adder_name))
    for rpc in rpcs:
        assert callable(getattr(servicer, rpc))

    with grpc.insecure_channel("unix:///nonexistent/kubelab-cri-test.sock") as channel:
        stub = getattr(pb_grpc, stub_name)(channel)
        for rpc in rpcs:
            assert callable(getattr(stub, rpc)), rpc


def test_rpc_request_and_response_types() -> None:
    methods = pb.DESCRIPTOR.services_by_name["RuntimeService"].methods_by_name
    assert methods["RunPodSandbox"].input_type is pb.RunPodSandboxRequest.DESCRIPTOR
    assert methods["ListPodSandbox"].output_type is pb.ListPodSandboxResponse.DESCRIPTOR
    image = pb.DESCRIPTOR.services_by_name["ImageService"].methods_by_name
    assert image["PullImage"].input_type is pb.PullImageRequest.DESCRIPTOR


# --- (c) wire compatibility -----------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param(pb.KeyValue(key="A", value="b"), b"\x0a\x01A\x12\x01b", id="keyvalue"),
        pytest.param(pb.PodSandboxConfig(hostname="h"), b"\x12\x01h", id="sandbox-hostname-f2"),
        pytest.param(
            pb.PodSandboxConfig(log_directory="/l"), b"\x1a\x02/l", id="sandbox-log-directory-f3"
        ),
        pytest.param(
            pb.PodSandboxConfig(labels={"a": "b"}),
            b"\x32\x06\x0a\x01a\x12\x01b",
            id="sandbox-labels-map-f6",
        ),
        pytest.param(
            pb.PodSandboxConfig(linux=pb.LinuxPodSandboxConfig(cgroup_parent="c")),
            b"\x42\x03\x0a\x01c",
            id="sandbox-linux-f8",
        ),
        pytest.param(
            pb.PodSandboxMetadata(name="n", uid="u", namespace="s", attempt=1),
            b"\x0a\x01n\x12\x01u\x1a\x01s\x20\x01",
            id="sandbox-metadata",
        ),
        pytest.param(
            pb.PortMapping(protocol=pb.UDP, container_port=80, host_port=8080, host_ip="0"),
            b"\x08\x01\x10\x50\x18\x90\x3f\x22\x010",
            id="port-mapping",
        ),
        pytest.param(
            pb.ContainerConfig(image=pb.ImageSpec(image="busybox")),
            b"\x12\x09\x0a\x07busybox",
            id="container-image-f2",
        ),
        pytest.param(
            pb.ContainerConfig(envs=[pb.KeyValue(key="K", value="V")]),
            b"\x32\x06\x0a\x01K\x12\x01V",
            id="container-envs-f6",
        ),
        pytest.param(pb.ContainerConfig(log_path="x"), b"\x5a\x01x", id="container-log-path-f11"),
        pytest.param(pb.ContainerConfig(tty=True), b"\x70\x01", id="container-tty-f14"),
        pytest.param(
            pb.ContainerConfig(linux=pb.LinuxContainerConfig()),
            b"\x7a\x00",
            id="container-linux-f15",
        ),
        pytest.param(
            pb.LinuxContainerResources(memory_swap_limit_in_bytes=1),
            b"\x50\x01",
            id="resources-swap-f10",
        ),
        pytest.param(
            pb.LinuxContainerResources(unified={"k": "v"}),
            b"\x4a\x06\x0a\x01k\x12\x01v",
            id="resources-unified-f9",
        ),
        pytest.param(
            pb.LinuxContainerSecurityContext(no_new_privs=True),
            b"\x58\x01",
            id="container-security-no-new-privs-f11",
        ),
        pytest.param(
            # A present-but-zero wrapper (run as root group) must still be sent.
            pb.LinuxContainerSecurityContext(run_as_group=pb.Int64Value(value=0)),
            b"\x62\x00",
            id="container-security-run-as-group-f12",
        ),
        pytest.param(
            pb.LinuxContainerSecurityContext(
                seccomp=pb.SecurityProfile(profile_type=pb.SecurityProfile.Unconfined)
            ),
            b"\x7a\x02\x08\x01",
            id="container-security-seccomp-f15",
        ),
        pytest.param(
            pb.LinuxSandboxSecurityContext(run_as_group=pb.Int64Value(value=7)),
            b"\x42\x02\x08\x07",
            id="sandbox-security-run-as-group-f8",
        ),
        pytest.param(
            pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER, ipc=pb.POD),
            b"\x08\x02\x10\x01",
            id="namespace-option",
        ),
        pytest.param(
            pb.ContainerStatus(exit_code=-1),
            b"\x38" + b"\xff" * 9 + b"\x01",
            id="container-status-negative-exit-code-f7",
        ),
        pytest.param(
            pb.ContainerStatus(log_path="l"), b"\x7a\x01l", id="container-status-log-path-f15"
        ),
        pytest.param(pb.StopContainerRequest(timeout=30), b"\x10\x1e", id="stop-timeout"),
        pytest.param(pb.ExecSyncResponse(exit_code=3), b"\x18\x03", id="exec-sync-exit-code"),
        pytest.param(pb.RuntimeCondition(status=True), b"\x10\x01", id="runtime-condition"),
        pytest.param(pb.Image(size=5, pinned=True), b"\x20\x05\x40\x01", id="image-size-pinned"),
        pytest.param(
            pb.PullImageRequest(sandbox_config=pb.PodSandboxConfig(hostname="h")),
            b"\x1a\x03\x12\x01h",
            id="pull-image-sandbox-config-f3",
        ),
        pytest.param(
            pb.MemoryUsage(working_set_bytes=pb.UInt64Value(value=5)),
            b"\x12\x02\x08\x05",
            id="memory-working-set-f2",
        ),
        pytest.param(
            pb.CpuUsage(usage_nano_cores=pb.UInt64Value(value=1)),
            b"\x1a\x02\x08\x01",
            id="cpu-usage-nano-cores-f3",
        ),
    ],
)
def test_wire_encoding(message: Message, expected: bytes) -> None:
    assert message.SerializeToString(deterministic=True) == expected
    parsed = type(message).FromString(expected)
    assert parsed == message


def _bytes_valued_keyvalue() -> type[Message]:
    """KeyValue as newer cri-api declares it (value is bytes), in a private pool."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name="kubelab_test/keyvalue_bytes.proto", package="kubelab_test", syntax="proto3"
    )
    msg = fdp.message_type.add(name="KeyValue")
    string, bytes_, optional = (
        descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
        descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    msg.field.add(name="key", number=1, type=string, label=optional)
    msg.field.add(name="value", number=2, type=bytes_, label=optional)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("kubelab_test.KeyValue"))


def test_keyvalue_string_is_wire_compatible_with_bytes() -> None:
    bytes_kv = _bytes_valued_keyvalue()
    ours = pb.KeyValue(key="HOME", value="/root")
    theirs = bytes_kv(key="HOME", value=b"/root")
    assert ours.SerializeToString() == theirs.SerializeToString()
    assert pb.KeyValue.FromString(theirs.SerializeToString()) == ours


def test_unknown_fields_from_newer_runtimes_survive() -> None:
    # ContainerStatus field 17 (image_id, newer cri-api) is reserved in our subset.
    known = pb.ContainerStatus(id="c").SerializeToString()
    extra = b"\x8a\x01\x08sha256:x"  # tag (17 << 3 | 2) as a two-byte varint
    status = pb.ContainerStatus.FromString(known + extra)
    assert status.id == "c"
    assert status.SerializeToString() == known + extra


def test_run_pod_sandbox_request_round_trip() -> None:
    req = pb.RunPodSandboxRequest(
        config=pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name="web", uid="1234", namespace="default", attempt=2),
            hostname="web",
            log_directory="/var/log/pods/default_web_1234",
            dns_config=pb.DNSConfig(
                servers=["10.96.0.10"],
                searches=["default.svc.cluster.local", "svc.cluster.local"],
                options=["ndots:5"],
            ),
            port_mappings=[
                pb.PortMapping(protocol=pb.TCP, container_port=80, host_port=8080, host_ip="")
            ],
            labels={"app": "web", "io.kubernetes.pod.name": "web"},
            annotations={"kubernetes.io/config.source": "api"},
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent="/kubepods/besteffort/pod1234",
                security_context=pb.LinuxSandboxSecurityContext(
                    namespace_options=pb.NamespaceOption(
                        network=pb.POD, pid=pb.CONTAINER, ipc=pb.POD
                    ),
                    run_as_user=pb.Int64Value(value=1000),
                    supplemental_groups=[1000, 2000],
                    seccomp=pb.SecurityProfile(profile_type=pb.SecurityProfile.RuntimeDefault),
                ),
                sysctls={"net.ipv4.ip_unprivileged_port_start": "0"},
                resources=pb.LinuxContainerResources(cpu_shares=2, memory_limit_in_bytes=1 << 28),
            ),
        ),
        runtime_handler="runc",
    )
    data = req.SerializeToString(deterministic=True)
    back = pb.RunPodSandboxRequest.FromString(data)

    assert back == req
    assert back.SerializeToString(deterministic=True) == data
    assert data[:1] == b"\x0a"  # config is field 1, length-delimited
    cfg = back.config
    assert cfg.metadata.uid == "1234"
    assert cfg.metadata.attempt == 2
    assert list(cfg.dns_config.searches) == ["default.svc.cluster.local", "svc.cluster.local"]
    assert cfg.port_mappings[0].host_port == 8080
    assert dict(cfg.labels) == {"app": "web", "io.kubernetes.pod.name": "web"}
    sc = cfg.linux.security_context
    assert sc.namespace_options.pid == pb.CONTAINER
    assert sc.HasField("run_as_user")
    assert sc.run_as_user.value == 1000
    assert not sc.HasField("run_as_group")
    assert list(sc.supplemental_groups) == [1000, 2000]
    assert cfg.linux.sysctls["net.ipv4.ip_unprivileged_port_start"] == "0"
    assert cfg.linux.resources.memory_limit_in_bytes == 1 << 28
    assert back.runtime_handler == "runc"


def test_create_container_request_round_trip() -> None:
    req = pb.CreateContainerRequest(
        pod_sandbox_id="sb1",
        config=pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name="app", attempt=0),
            image=pb.ImageSpec(image="docker.io/library/busybox:1.36"),
            command=["/bin/sh", "-c"],
            args=["sleep 3600"],
            working_dir="/",
            envs=[pb.KeyValue(key="A", value="1")],
            mounts=[
                pb.Mount(
                    container_path="/etc/hosts",
                    host_path="/var/lib/kubelet/pods/1234/etc-hosts",
                    readonly=True,
                    propagation=pb.PROPAGATION_PRIVATE,
                )
            ],
            log_path="app/0.log",
            linux=pb.LinuxContainerConfig(
                resources=pb.LinuxContainerResources(
                    cpu_period=100_000, cpu_quota=50_000, oom_score_adj=1000
                ),
                security_context=pb.LinuxContainerSecurityContext(
                    capabilities=pb.Capability(drop_capabilities=["ALL"]),
                    masked_paths=["/proc/kcore"],
                    readonly_paths=["/proc/sys"],
                    no_new_privs=True,
                ),
            ),
        ),
        sandbox_config=pb.PodSandboxConfig(hostname="web"),
    )
    back = pb.CreateContainerRequest.FromString(req.SerializeToString())
    assert back == req
    assert back.config.linux.resources.cpu_quota == 50_000
    assert list(back.config.linux.security_context.capabilities.drop_capabilities) == ["ALL"]
