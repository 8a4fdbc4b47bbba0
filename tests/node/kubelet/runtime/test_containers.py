"""Container configs: command expansion, mounts, resources, OOM scores and security."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from kube.api.kinds.core_v1.pod import Container, Pod
from node.cri.pb import api_pb2 as pb
from node.kubelet.runtime.containers import (
    DEFAULT_MASKED_PATHS,
    DEFAULT_READONLY_PATHS,
    container_config,
    linux_resources,
    termination_log_path,
)
from node.kubelet.runtime.envvars import ConfigError
from node.kubelet.runtime.labels import container_annotations
from node.kubelet.runtime.options import NodeRuntimeOptions

GI = 2**30


def make_pod(container: dict[str, Any] | None = None, **spec: Any) -> Pod:
    annotations = spec.pop("annotations", None)
    data = {
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "annotations": annotations},
        "spec": {"containers": [{"name": "app", "image": "busybox", **(container or {})}], **spec},
    }
    return msgspec.convert(data, Pod)


def first(pod: Pod) -> Container:
    assert pod.spec is not None and pod.spec.containers
    return pod.spec.containers[0]


@pytest.fixture
def options(tmp_path: Path) -> NodeRuntimeOptions:
    return NodeRuntimeOptions(node_name="n", node_ips=(), root_dir=tmp_path / "kubelet")


@pytest.fixture
def volume(tmp_path: Path) -> Path:
    path = tmp_path / "vol"
    path.mkdir()
    path.chmod(0o2775)
    return path


def build(
    pod: Pod,
    options: NodeRuntimeOptions,
    *,
    env: dict[str, str] | None = None,
    volumes: dict[str, Path] | None = None,
    etc_hosts: Path | None = None,
    **kwargs: Any,
) -> pb.ContainerConfig:
    return container_config(
        pod,
        first(pod),
        restart_count=kwargs.pop("restart_count", 0),
        env=[pb.KeyValue(key=k, value=v) for k, v in (env or {}).items()],
        volume_paths=volumes or {},
        etc_hosts=etc_hosts,
        options=options,
        memory_capacity=kwargs.pop("memory_capacity", 8 * GI),
        **kwargs,
    )


def test_basic_config(options: NodeRuntimeOptions) -> None:
    pod = make_pod(
        {
            "command": ["sh", "-c", "echo $(GREETING) $$(GREETING) $(UNKNOWN)"],
            "args": ["$(GREETING)"],
            "workingDir": "/work",
            "stdin": True,
            "stdinOnce": True,
            "tty": True,
        }
    )
    config = build(pod, options, env={"GREETING": "hi"}, restart_count=3)
    assert config.metadata == pb.ContainerMetadata(name="app", attempt=3)
    assert config.image == pb.ImageSpec(image="busybox")
    assert list(config.command) == ["sh", "-c", "echo hi $(GREETING) $(UNKNOWN)"]
    assert list(config.args) == ["hi"]
    assert config.working_dir == "/work"
    assert list(config.envs) == [pb.KeyValue(key="GREETING", value="hi")]
    assert config.log_path == "app/3.log"
    assert (config.stdin, config.stdin_once, config.tty) == (True, True, True)
    assert config.labels["io.kubernetes.container.name"] == "app"
    assert dict(config.annotations) == container_annotations(pod, first(pod), 3)
    assert list(config.mounts) == []
    assert build(pod, options, image_ref="sha256:abc").image.image == "sha256:abc"


def test_mounts(options: NodeRuntimeOptions, volume: Path, tmp_path: Path) -> None:
    (volume / "existing").mkdir()
    pod = make_pod(
        {
            "volumeMounts": [
                {"name": "data", "mountPath": "/data", "readOnly": True},
                {"name": "data", "mountPath": "/shared", "mountPropagation": "HostToContainer"},
                {"name": "data", "mountPath": "/both", "mountPropagation": "Bidirectional"},
                {"name": "data", "mountPath": "/sub", "subPath": "a/b"},
                {"name": "data", "mountPath": "/expr", "subPathExpr": "logs/$(POD_NAME)"},
                {"name": "data", "mountPath": "/old", "subPath": "existing"},
            ],
            "terminationMessagePath": "/dev/termination-log",
        }
    )
    hosts = tmp_path / "etc-hosts"
    config = build(
        pod,
        options,
        env={"POD_NAME": "web"},
        volumes={"data": volume},
        etc_hosts=hosts,
        restart_count=1,
    )
    termination = termination_log_path(options, "u1", "app", 1)
    assert list(config.mounts) == [
        pb.Mount(container_path="/data", host_path=str(volume), readonly=True),
        pb.Mount(
            container_path="/shared",
            host_path=str(volume),
            propagation=pb.PROPAGATION_HOST_TO_CONTAINER,
        ),
        pb.Mount(
            container_path="/both", host_path=str(volume), propagation=pb.PROPAGATION_BIDIRECTIONAL
        ),
        pb.Mount(container_path="/sub", host_path=str(volume / "a/b")),
        pb.Mount(container_path="/expr", host_path=str(volume / "logs/web")),
        pb.Mount(container_path="/old", host_path=str(volume / "existing")),
        pb.Mount(container_path="/etc/hosts", host_path=str(hosts)),
        pb.Mount(container_path="/dev/termination-log", host_path=str(termination)),
    ]
    assert (volume / "a").stat().st_mode & 0o7777 == 0o2775
    assert (volume / "a/b").stat().st_mode & 0o7777 == 0o2775
    assert termination == options.root_dir / "pods/u1/containers/app/termination-log-1"
    assert termination.read_bytes() == b""
    assert termination.stat().st_mode & 0o777 == 0o666


def test_own_etc_hosts_mount_wins(
    options: NodeRuntimeOptions, volume: Path, tmp_path: Path
) -> None:
    pod = make_pod({"volumeMounts": [{"name": "h", "mountPath": "/etc/hosts", "subPath": "hosts"}]})
    config = build(pod, options, volumes={"h": volume}, etc_hosts=tmp_path / "etc-hosts")
    assert [m.host_path for m in config.mounts] == [str(volume / "hosts")]


def test_termination_file_is_fresh_per_attempt(options: NodeRuntimeOptions) -> None:
    pod = make_pod({"terminationMessagePath": "/dev/termination-log"})
    build(pod, options, restart_count=0)
    old = termination_log_path(options, "u1", "app", 0)
    old.write_text("previous message")
    build(pod, options, restart_count=0)
    assert old.read_text() == ""


@pytest.mark.parametrize(
    ("mount", "message"),
    [
        pytest.param(
            {"name": "nope", "mountPath": "/x"},
            'cannot find volume "nope" to mount into container "app"',
            id="no-volume",
        ),
        pytest.param(
            {"name": "data", "mountPath": "/x", "subPath": "/etc"},
            "error SubPath `/etc` must not be an absolute path",
            id="absolute",
        ),
        pytest.param(
            {"name": "data", "mountPath": "/x", "subPath": "a/../../etc"},
            "unable to provision SubPath `a/../../etc`: must not contain '..'",
            id="backsteps",
        ),
        pytest.param(
            {"name": "data", "mountPath": "/x", "subPathExpr": "$(UP)/etc"},
            "unable to provision SubPath `../etc`: must not contain '..'",
            id="expanded-backsteps",
        ),
        pytest.param(
            {"name": "data", "mountPath": "/x", "subPath": "out/etc"},
            "is outside of it",
            id="symlink-escape",
        ),
    ],
)
def test_mount_errors(
    options: NodeRuntimeOptions, volume: Path, tmp_path: Path, mount: dict[str, Any], message: str
) -> None:
    (volume / "out").symlink_to(tmp_path)
    with pytest.raises(ConfigError) as error:
        build(
            make_pod({"volumeMounts": [mount]}), options, env={"UP": ".."}, volumes={"data": volume}
        )
    assert message in str(error.value)
    assert not (tmp_path / "etc").exists()


def resources(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> dict[str, Any]:
    return {"resources": {"requests": requests, "limits": limits}}


@pytest.mark.parametrize(
    ("container", "spec", "expected"),
    [
        pytest.param({}, {}, (2, 0, 0, 1000), id="best-effort"),
        pytest.param(
            resources({"cpu": "500m", "memory": "1Gi"}, {"cpu": "500m", "memory": "1Gi"}),
            {},
            (512, 50_000, GI, -997),
            id="guaranteed",
        ),
        pytest.param(
            resources({"cpu": "1m", "memory": "2Gi"}), {}, (2, 0, 0, 750), id="burstable-quarter"
        ),
        pytest.param(resources({"memory": "1"}), {}, (2, 0, 0, 999), id="burstable-tiny-request"),
        pytest.param(resources({"memory": "8Gi"}), {}, (2, 0, 0, 3), id="burstable-whole-node"),
        pytest.param(
            resources(None, {"cpu": "2m"}),
            {},
            (2, 1000, 0, 999),
            id="quota-minimum-shares-from-limit",
        ),
        pytest.param(resources({"cpu": "300"}), {}, (262_144, 0, 0, 999), id="shares-maximum"),
        pytest.param({}, {"priority": 2_000_000_000}, (2, 0, 0, -997), id="critical-priority"),
        pytest.param(
            {},
            {"annotations": {"kubernetes.io/config.source": "file"}},
            (2, 0, 0, -997),
            id="static-pod",
        ),
    ],
)
def test_linux_resources(
    container: dict[str, Any], spec: dict[str, Any], expected: tuple[int, int, int, int]
) -> None:
    pod = make_pod(container, **spec)
    result = linux_resources(pod, first(pod), memory_capacity=8 * GI)
    assert (
        result.cpu_shares,
        result.cpu_quota,
        result.memory_limit_in_bytes,
        result.oom_score_adj,
    ) == expected
    assert result.cpu_period == 100_000


def test_memory_capacity_defaults_to_the_machine() -> None:
    pod = make_pod(resources({"memory": "1"}))
    assert linux_resources(pod, first(pod)).oom_score_adj == 999


def test_security_context(options: NodeRuntimeOptions) -> None:
    pod = make_pod(
        {
            "securityContext": {
                "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
                "runAsUser": 1000,
                "readOnlyRootFilesystem": True,
                "allowPrivilegeEscalation": False,
                "seccompProfile": {"type": "RuntimeDefault"},
            }
        },
        securityContext={
            "runAsUser": 5,
            "runAsGroup": 6,
            "runAsNonRoot": True,
            "fsGroup": 7,
            "seccompProfile": {"type": "Unconfined"},
        },
        hostNetwork=True,
    )
    context = build(pod, options).linux.security_context
    assert list(context.capabilities.add_capabilities) == ["NET_ADMIN"]
    assert list(context.capabilities.drop_capabilities) == ["ALL"]
    assert context.run_as_user.value == 1000
    assert context.HasField("run_as_group") and context.run_as_group.value == 6
    assert context.readonly_rootfs and context.no_new_privs and not context.privileged
    assert list(context.supplemental_groups) == [7]
    assert context.namespace_options == pb.NamespaceOption(
        network=pb.NODE, pid=pb.CONTAINER, ipc=pb.POD
    )
    assert context.seccomp.profile_type == pb.SecurityProfile.RuntimeDefault
    assert tuple(context.masked_paths) == DEFAULT_MASKED_PATHS
    assert tuple(context.readonly_paths) == DEFAULT_READONLY_PATHS


@pytest.mark.parametrize(
    ("security", "unmasked"),
    [
        pytest.param({"privileged": True}, True, id="privileged"),
        pytest.param({"procMount": "Unmasked"}, True, id="unmasked"),
        pytest.param({}, False, id="default"),
    ],
)
def test_masked_paths(
    options: NodeRuntimeOptions, security: dict[str, Any], unmasked: bool
) -> None:
    context = build(make_pod({"securityContext": security}), options).linux.security_context
    assert (list(context.masked_paths) == []) is unmasked
    assert (list(context.readonly_paths) == []) is unmasked
    assert not context.HasField("run_as_user") and not context.no_new_privs
    assert context.seccomp.profile_type == pb.SecurityProfile.Unconfined


WHERE = '(pod: "web_ns(u1)", container: app)'


@pytest.mark.parametrize(
    ("container", "pod_context", "image", "message"),
    [
        pytest.param(
            {"runAsUser": 0},
            {"runAsNonRoot": True},
            {},
            f"container's runAsUser breaks non-root policy {WHERE}",
            id="user-0",
        ),
        pytest.param(
            {"runAsNonRoot": True},
            {},
            {"image_uid": 0},
            f"container has runAsNonRoot and image will run as root {WHERE}",
            id="image-root",
        ),
        pytest.param(
            {"runAsNonRoot": True},
            {},
            {"image_user": "nginx"},
            "container has runAsNonRoot and image has non-numeric user (nginx), "
            f"cannot verify user is non-root {WHERE}",
            id="image-named-user",
        ),
        pytest.param({"runAsNonRoot": True}, {}, {"image_uid": 1000}, None, id="image-non-root"),
        pytest.param(
            {"runAsNonRoot": False},
            {"runAsNonRoot": True, "runAsUser": 0},
            {},
            None,
            id="container-allows-root",
        ),
        pytest.param(
            {},
            {"runAsNonRoot": True, "runAsUser": 10},
            {"image_uid": 0},
            None,
            id="pod-user-wins-over-image",
        ),
    ],
)
def test_run_as_non_root(
    options: NodeRuntimeOptions,
    container: dict[str, Any],
    pod_context: dict[str, Any],
    image: dict[str, Any],
    message: str | None,
) -> None:
    pod = make_pod({"securityContext": container}, securityContext=pod_context)
    if message is None:
        build(pod, options, **image)
        return
    with pytest.raises(ConfigError) as error:
        build(pod, options, **image)
    assert str(error.value) == message


def test_file_errors_are_config_errors(options: NodeRuntimeOptions, tmp_path: Path) -> None:
    options.root_dir.mkdir()
    (options.root_dir / "pods").write_text("not a directory")
    pod = make_pod({"terminationMessagePath": "/dev/termination-log"})
    with pytest.raises(ConfigError, match=r"failed to create termination message file .*: "):
        build(pod, options)
    pod = make_pod({"volumeMounts": [{"name": "v", "mountPath": "/x", "subPath": "a"}]})
    with pytest.raises(ConfigError, match=r'failed to mkdir ".*/gone/a": '):
        build(pod, options, volumes={"v": tmp_path / "gone"})
