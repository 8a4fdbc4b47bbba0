"""Volume payloads: configMap, secret, downwardAPI, projected, and the API access volume."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.api.kinds.core_v1.pod import (
    Container,
    HostIP,
    Pod,
    PodIP,
    PodSecurityContext,
    PodSpec,
    PodStatus,
    ResourceRequirements,
    SecurityContext,
)
from kube.api.kinds.core_v1.volume import (
    ConfigMapProjection,
    ConfigMapVolumeSource,
    DownwardAPIProjection,
    DownwardAPIVolumeFile,
    DownwardAPIVolumeSource,
    KeyToPath,
    ObjectFieldSelector,
    ProjectedVolumeSource,
    ResourceFieldSelector,
    SecretProjection,
    SecretVolumeSource,
    ServiceAccountTokenProjection,
    Volume,
    VolumeProjection,
)
from kube.api.meta_v1 import ObjectMeta
from node.kubelet.volumes.atomic import FileProjection
from node.kubelet.volumes.sources import (
    Objects,
    References,
    SourceError,
    field_value,
    payload,
    references,
    resource_field_value,
)

CONFIG = ConfigMap(
    metadata=ObjectMeta(name="config"),
    data={"a": "alpha", "b": "beta"},
    binary_data={"bin": base64.b64encode(b"\x00\x01").decode()},
)
SECRET = Secret(metadata=ObjectMeta(name="creds"), data={"user": base64.b64encode(b"u").decode()})
OBJECTS = Objects({"config": CONFIG}, {"creds": SECRET})
NONE = Objects({}, {})


def make_pod(**spec: Any) -> Pod:
    app = Container(
        name="app",
        resources=ResourceRequirements(
            requests={"cpu": "250m", "memory": "64Mi"}, limits={"cpu": "1500m"}
        ),
    )
    return Pod(
        metadata=ObjectMeta(
            name="web",
            namespace="shop",
            uid="u-1",
            labels={"app": "web", "tier": "front"},
            annotations={"note": 'say "hi"\n\tbye', "k": "é\x01"},
        ),
        spec=PodSpec(
            **{"containers": [app], "node_name": "n1", "service_account_name": "sa"} | spec
        ),
        status=PodStatus(
            pod_ip="10.0.0.5",
            pod_ips=[PodIP(ip="10.0.0.5"), PodIP(ip="fd00::5")],
            host_ip="192.168.1.2",
            host_ips=[HostIP(ip="192.168.1.2")],
        ),
    )


POD = make_pod()


class Tokens:
    """A token getter recording its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, int]] = []

    async def __call__(self, audience: str | None, expiration_seconds: int) -> str:
        self.calls.append((audience, expiration_seconds))
        return f"token-{audience}-{expiration_seconds}"


async def files(volume: Volume, objects: Objects = OBJECTS, pod: Pod = POD) -> dict[str, Any]:
    result = await payload(pod, volume, objects, Tokens(), {"memory": "8Gi"})
    return {path: (f.data, oct(f.mode)) for path, f in result.items()}


@pytest.mark.parametrize(
    ("volume", "expected"),
    [
        pytest.param(
            Volume(name="v", config_map=ConfigMapVolumeSource(name="config")),
            {"a": (b"alpha", "0o644"), "b": (b"beta", "0o644"), "bin": (b"\x00\x01", "0o644")},
            id="configmap-all-keys",
        ),
        pytest.param(
            Volume(
                name="v",
                config_map=ConfigMapVolumeSource(
                    name="config",
                    default_mode=0o600,
                    items=[
                        KeyToPath(key="a", path="dir/a.txt", mode=0o400),
                        KeyToPath(key="b", path="b"),
                    ],
                ),
            ),
            {"dir/a.txt": (b"alpha", "0o400"), "b": (b"beta", "0o600")},
            id="configmap-items-and-modes",
        ),
        pytest.param(
            Volume(
                name="v",
                config_map=ConfigMapVolumeSource(
                    name="config", optional=True, items=[KeyToPath(key="zz", path="zz")]
                ),
            ),
            {},
            id="configmap-optional-missing-key",
        ),
        pytest.param(
            Volume(name="v", config_map=ConfigMapVolumeSource(name="gone", optional=True)),
            {},
            id="configmap-optional-missing",
        ),
        pytest.param(
            Volume(name="v", secret=SecretVolumeSource(secret_name="creds", default_mode=0o400)),
            {"user": (b"u", "0o400")},
            id="secret",
        ),
        pytest.param(
            Volume(name="v", secret=SecretVolumeSource(secret_name="gone", optional=True)),
            {},
            id="secret-optional-missing",
        ),
        pytest.param(
            Volume(
                name="v",
                downward_api=DownwardAPIVolumeSource(
                    items=[
                        DownwardAPIVolumeFile(
                            path="./labels",
                            field_ref=ObjectFieldSelector(field_path="metadata.labels"),
                        ),
                        DownwardAPIVolumeFile(
                            path="cpu",
                            mode=0o400,
                            resource_field_ref=ResourceFieldSelector(
                                container_name="app", resource="limits.cpu", divisor="1m"
                            ),
                        ),
                    ]
                ),
            ),
            {"labels": (b'app="web"\ntier="front"', "0o644"), "cpu": (b"1500", "0o400")},
            id="downward-api",
        ),
    ],
)
async def test_payload(volume: Volume, expected: dict[str, Any]) -> None:
    assert await files(volume) == expected


@pytest.mark.parametrize(
    ("volume", "message"),
    [
        pytest.param(
            Volume(name="v", config_map=ConfigMapVolumeSource(name="gone")),
            'configmaps "gone" not found',
            id="configmap-missing",
        ),
        pytest.param(
            Volume(
                name="v",
                config_map=ConfigMapVolumeSource(
                    name="config", items=[KeyToPath(key="zz", path="zz")]
                ),
            ),
            "configmap references non-existent configmap key: zz",
            id="configmap-missing-key",
        ),
        pytest.param(
            Volume(
                name="v",
                secret=SecretVolumeSource(
                    secret_name="creds", items=[KeyToPath(key="pw", path="pw")]
                ),
            ),
            "secret references non-existent secret key: pw",
            id="secret-missing-key",
        ),
        pytest.param(
            Volume(name="v", secret=SecretVolumeSource(secret_name="gone")),
            'secrets "gone" not found',
            id="secret-missing",
        ),
        pytest.param(
            Volume(
                name="v",
                projected=ProjectedVolumeSource(
                    sources=[
                        VolumeProjection(config_map=ConfigMapProjection(name="gone")),
                        VolumeProjection(secret=SecretProjection(name="gone")),
                    ]
                ),
            ),
            '[configmaps "gone" not found, secrets "gone" not found]',
            id="projected-errors-aggregated",
        ),
        pytest.param(
            Volume(name="v", host_path=None),
            "volume v has no projected content",
            id="not-projected",
        ),
    ],
)
async def test_payload_errors(volume: Volume, message: str) -> None:
    with pytest.raises(SourceError) as raised:
        await files(volume)

    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("metadata.name", "web", id="name"),
        pytest.param("metadata.namespace", "shop", id="namespace"),
        pytest.param("metadata.uid", "u-1", id="uid"),
        pytest.param("metadata.labels", 'app="web"\ntier="front"', id="labels"),
        pytest.param(
            "metadata.annotations",
            'k="é\\x01"\nnote="say \\"hi\\"\\n\\tbye"',
            id="annotations-go-quoted",
        ),
        pytest.param("metadata.labels['tier']", "front", id="label-subscript"),
        pytest.param("metadata.annotations['absent']", "", id="annotation-subscript-absent"),
        pytest.param("spec.nodeName", "n1", id="node-name"),
        pytest.param("spec.serviceAccountName", "sa", id="service-account"),
        pytest.param("status.podIP", "10.0.0.5", id="pod-ip"),
        pytest.param("status.podIPs", "10.0.0.5,fd00::5", id="pod-ips"),
        pytest.param("status.hostIP", "192.168.1.2", id="host-ip"),
    ],
)
def test_field_value(path: str, expected: str) -> None:
    assert field_value(POD, path) == expected


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("spec.hostname", "unsupported fieldPath: spec.hostname", id="unsupported"),
        pytest.param("metadata.labels['a b']", "invalid key subscript", id="bad-subscript"),
    ],
)
def test_field_value_errors(path: str, message: str) -> None:
    with pytest.raises(SourceError, match=message.replace("[", r"\[")):
        field_value(POD, path)


@pytest.mark.parametrize(
    ("resource", "divisor", "expected"),
    [
        pytest.param("limits.cpu", None, "2", id="cpu-cores-rounded-up"),
        pytest.param("limits.cpu", "1m", "1500", id="cpu-millicores"),
        pytest.param("requests.cpu", "100m", "3", id="cpu-divisor-rounded-up"),
        pytest.param("requests.memory", "1Mi", "64", id="memory-mebibytes"),
        pytest.param("requests.memory", "1M", "68", id="memory-megabytes-rounded-up"),
        pytest.param("limits.memory", "1Gi", "8", id="memory-limit-from-allocatable"),
        pytest.param("limits.ephemeral-storage", None, "0", id="no-limit-no-allocatable"),
        pytest.param("requests.hugepages-2Mi", None, "0", id="hugepages"),
    ],
)
def test_resource_field_value(resource: str, divisor: str | None, expected: str) -> None:
    selector = ResourceFieldSelector(resource=resource, divisor=divisor)

    assert resource_field_value(selector, POD, "app", {"memory": "8Gi"}) == expected


@pytest.mark.parametrize(
    ("resource", "container", "message"),
    [
        pytest.param(
            "limits.nvidia.com/gpu", "app", "unsupported container resource", id="resource"
        ),
        pytest.param("limits.cpu", "sidecar", "container sidecar not found", id="container"),
    ],
)
def test_resource_field_value_errors(resource: str, container: str, message: str) -> None:
    with pytest.raises(SourceError, match=message):
        resource_field_value(ResourceFieldSelector(resource=resource), POD, container, {})


def projected(*sources: VolumeProjection) -> Volume:
    return Volume(
        name="p", projected=ProjectedVolumeSource(sources=list(sources), default_mode=0o640)
    )


TOKEN = VolumeProjection(
    service_account_token=ServiceAccountTokenProjection(
        audience="vault", expiration_seconds=7200, path="vault/token"
    )
)


@pytest.mark.parametrize(
    ("pod", "token_mode", "owner"),
    [
        pytest.param(POD, 0o640, None, id="default-mode"),
        pytest.param(
            make_pod(security_context=PodSecurityContext(run_as_user=1000)),
            0o600,
            1000,
            id="one-user",
        ),
        pytest.param(
            make_pod(
                security_context=PodSecurityContext(run_as_user=1000),
                init_containers=[
                    Container(name="i", security_context=SecurityContext(run_as_user=0))
                ],
            ),
            0o640,
            None,
            id="two-users",
        ),
        pytest.param(
            make_pod(security_context=PodSecurityContext(fs_group=2000)), 0o600, None, id="fs-group"
        ),
    ],
)
async def test_projected_combines_sources(pod: Pod, token_mode: int, owner: int | None) -> None:
    tokens = Tokens()
    volume = projected(
        TOKEN,
        VolumeProjection(
            config_map=ConfigMapProjection(name="config", items=[KeyToPath(key="a", path="a")])
        ),
        VolumeProjection(secret=SecretProjection(name="creds")),
        VolumeProjection(
            downward_api=DownwardAPIProjection(
                items=[
                    DownwardAPIVolumeFile(
                        path="ns", field_ref=ObjectFieldSelector(field_path="metadata.namespace")
                    )
                ]
            )
        ),
        VolumeProjection(service_account_token=ServiceAccountTokenProjection(path="default-token")),
    )

    result = await payload(pod, volume, OBJECTS, tokens, {})

    assert result == {
        "vault/token": FileProjection(b"token-vault-7200", token_mode, owner),
        "a": FileProjection(b"alpha", 0o640),
        "user": FileProjection(b"u", 0o640),
        "ns": FileProjection(b"shop", 0o640),
        "default-token": FileProjection(b"token-None-3600", token_mode, owner),
    }
    assert tokens.calls == [("vault", 7200), (None, 3600)]


def test_references() -> None:
    volume = projected(
        VolumeProjection(config_map=ConfigMapProjection(name="c1")),
        VolumeProjection(secret=SecretProjection(name="s1")),
        TOKEN,
    )

    assert references(volume) == References(frozenset({"c1"}), frozenset({"s1"}))
    assert references(Volume(name="s", secret=SecretVolumeSource(secret_name="s2"))) == References(
        frozenset(), frozenset({"s2"})
    )


async def test_api_access_volume_holds_token_ca_and_namespace() -> None:
    """The volume ServiceAccount admission adds (upstream's shape) is served as it says."""
    volume = Volume(
        name="kube-api-access-abcde",
        projected=ProjectedVolumeSource(
            default_mode=0o644,
            sources=[
                VolumeProjection(
                    service_account_token=ServiceAccountTokenProjection(
                        path="token", expiration_seconds=3607
                    )
                ),
                VolumeProjection(
                    config_map=ConfigMapProjection(
                        name="kube-root-ca.crt", items=[KeyToPath(key="ca.crt", path="ca.crt")]
                    )
                ),
                VolumeProjection(
                    downward_api=DownwardAPIProjection(
                        items=[
                            DownwardAPIVolumeFile(
                                path="namespace",
                                field_ref=ObjectFieldSelector(
                                    api_version="v1", field_path="metadata.namespace"
                                ),
                            )
                        ]
                    )
                ),
            ],
        ),
    )
    root_ca = ConfigMap(metadata=ObjectMeta(name="kube-root-ca.crt"), data={"ca.crt": "PEM"})

    result = await files(volume, Objects({"kube-root-ca.crt": root_ca}, {}), POD)

    assert result == {
        "token": (b"token-None-3607", "0o644"),
        "ca.crt": (b"PEM", "0o644"),
        "namespace": (b"shop", "0o644"),
    }
