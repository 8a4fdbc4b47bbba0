"""ServiceAccount admission through the API: the default account, refusals, and the projected
``kube-api-access-*`` volume (token, CA, namespace) in every container."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.api.kinds.core_v1.pod import MIRROR_POD_ANNOTATION, Container, Pod
from kube.api.kinds.core_v1.volume import (
    ConfigMapProjection,
    DownwardAPIProjection,
    DownwardAPIVolumeFile,
    EmptyDirVolumeSource,
    KeyToPath,
    LocalObjectReference,
    ObjectFieldSelector,
    ProjectedVolumeSource,
    ServiceAccountTokenProjection,
    Volume,
    VolumeMount,
    VolumeProjection,
)
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests import builders
from tests.controlplane.apiserver.admission_servers import BACKENDS, serve
from tests.servers import ServerProcess

PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(scope="module", params=BACKENDS)
def apiserver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    yield from serve(
        request.param, tmp_path_factory, "--enable-admission-plugins", "ServiceAccount"
    )


@pytest.fixture
async def accounts(client: Client, namespace: str) -> str:
    """The namespace with its default account (no serviceaccount controller runs here)."""
    await client.create(ServiceAccount(metadata=ObjectMeta(name="default", namespace=namespace)))
    return namespace


def pod(namespace: str, name: str = "p", **spec: Any) -> Pod:
    app = [Container(name="app", image="app")]
    return builders.pod(name, namespace, **{"containers": app, **spec})


async def test_default_account_and_token_volume(client: Client, accounts: str) -> None:
    created = await client.create(
        pod(accounts, init_containers=[Container(name="init", image="app")])
    )

    spec = created.spec
    assert spec is not None and spec.service_account_name == "default"
    (volume,) = spec.volumes or []
    assert volume.name is not None and re.fullmatch(r"kube-api-access-[a-z0-9]{5}", volume.name)
    assert volume.projected == ProjectedVolumeSource(
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
    )
    mount = VolumeMount(name=volume.name, read_only=True, mount_path=PATH)
    for container in [*(spec.init_containers or []), *(spec.containers or [])]:
        assert container.volume_mounts == [mount]


async def test_missing_account_is_refused(client: Client, accounts: str) -> None:
    with pytest.raises(ApiError) as refused:
        await client.create(pod(accounts, service_account_name="ghost"))
    assert refused.value.code == 403
    assert refused.value.message == (
        f'pods "p" is forbidden: error looking up service account {accounts}/ghost: '
        'serviceaccount "ghost" not found'
    )


@pytest.mark.parametrize(
    ("account_automount", "pod_automount", "mounted"),
    [
        pytest.param(False, None, False, id="account-off"),
        pytest.param(False, True, True, id="pod-overrides-account"),
        pytest.param(None, False, False, id="pod-off"),
    ],
)
async def test_automount_follows_pod_then_account(
    client: Client,
    accounts: str,
    account_automount: bool | None,
    pod_automount: bool | None,
    mounted: bool,
) -> None:
    await client.create(
        ServiceAccount(
            metadata=ObjectMeta(name="robot", namespace=accounts),
            automount_service_account_token=account_automount,
        )
    )
    created = await client.create(
        pod(
            accounts,
            service_account_name="robot",
            automount_service_account_token=pod_automount,
        )
    )
    assert created.spec is not None
    assert bool(created.spec.volumes) == mounted
    (app,) = created.spec.containers or []
    assert bool(app.volume_mounts) == mounted


async def test_account_pull_secrets_unless_the_pod_names_its_own(
    client: Client, accounts: str
) -> None:
    await client.create(
        ServiceAccount(
            metadata=ObjectMeta(name="puller", namespace=accounts),
            image_pull_secrets=[LocalObjectReference(name="regcred")],
        )
    )
    inherited = await client.create(pod(accounts, "a", service_account_name="puller"))
    own = await client.create(
        pod(
            accounts,
            "b",
            service_account_name="puller",
            image_pull_secrets=[LocalObjectReference(name="mine")],
        )
    )
    assert inherited.spec is not None and own.spec is not None
    assert [r.name for r in inherited.spec.image_pull_secrets or []] == ["regcred"]
    assert [r.name for r in own.spec.image_pull_secrets or []] == ["mine"]


async def test_own_mount_at_the_path_is_kept(client: Client, accounts: str) -> None:
    own = VolumeMount(name="mine", mount_path=PATH)
    created = await client.create(
        pod(
            accounts,
            containers=[
                Container(name="own", image="app", volume_mounts=[own]),
                Container(name="plain", image="app"),
            ],
            volumes=[Volume(name="mine", empty_dir=EmptyDirVolumeSource())],
        )
    )
    assert created.spec is not None
    own_container, plain = created.spec.containers or []
    assert own_container.volume_mounts == [own]
    assert [m.mount_path for m in plain.volume_mounts or []] == [PATH]


async def test_mirror_pods_may_not_name_an_account(client: Client, accounts: str) -> None:
    mirror = pod(accounts, service_account_name="default", node_name="n1")
    mirror.metadata.annotations = {MIRROR_POD_ANNOTATION: "hash"}
    with pytest.raises(ApiError) as refused:
        await client.create(mirror)
    assert refused.value.code == 403
    assert "a mirror pod may not reference service accounts" in refused.value.message
    mirror.spec.service_account_name = None  # type: ignore[union-attr]
    created = await client.create(mirror)
    assert created.spec is not None and not created.spec.volumes
