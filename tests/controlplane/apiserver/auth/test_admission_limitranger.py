"""LimitRanger through the API: defaults from LimitRanges, min/max/ratio per container and per
pod, and storage bounds of claims, refused with upstream's messages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kube.api.kinds.core_v1.cluster import LimitRange, LimitRangeItem, LimitRangeSpec
from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec, ResourceRequirements
from kube.api.kinds.core_v1.volume import (
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    VolumeResourceRequirements,
)
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests.controlplane.apiserver.admission_servers import BACKENDS, serve
from tests.servers import ServerProcess


@pytest.fixture(scope="module", params=BACKENDS)
def apiserver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    yield from serve(
        request.param, tmp_path_factory, "--disable-admission-plugins", "ServiceAccount"
    )


async def limits(client: Client, namespace: str, *items: LimitRangeItem) -> None:
    await client.create(
        LimitRange(
            metadata=ObjectMeta(name="limits", namespace=namespace),
            spec=LimitRangeSpec(limits=list(items)),
        )
    )


def container(name: str, requests: dict[str, str] | None = None, **limits: str) -> Container:
    return Container(
        name=name,
        image="app",
        resources=ResourceRequirements(requests=requests, limits=limits or None),  # type: ignore[arg-type]
    )


def pod(namespace: str, *containers: Container) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace=namespace),
        spec=PodSpec(containers=list(containers)),
    )


async def refused(client: Client, obj: object) -> str:
    with pytest.raises(ApiError) as error:
        await client.create(obj)  # type: ignore[type-var]
    assert error.value.code == 403
    return error.value.message


async def test_containers_get_default_requests_and_limits(client: Client, namespace: str) -> None:
    await limits(
        client,
        namespace,
        LimitRangeItem(
            type="Container",
            default={"cpu": "500m", "memory": "256Mi"},
            default_request={"cpu": "100m"},
        ),
    )
    created = await client.create(pod(namespace, container("app"), container("own", cpu="1")))
    assert created.spec is not None
    app, own = created.spec.containers or []
    assert app.resources is not None and own.resources is not None
    assert app.resources.requests == {"cpu": "100m", "memory": "256Mi"}
    assert app.resources.limits == {"cpu": "500m", "memory": "256Mi"}
    # A request defaults to the container's own limit before LimitRanger looks (API defaults).
    assert own.resources.requests == {"cpu": "1", "memory": "256Mi"}
    assert own.resources.limits == {"cpu": "1", "memory": "256Mi"}
    assert created.metadata.annotations == {
        "kubernetes.io/limit-ranger": "LimitRanger plugin set: cpu, memory request for "
        "container app; cpu, memory limit for container app; memory request for container "
        "own; memory limit for container own"
    }


async def test_container_bounds(client: Client, namespace: str) -> None:
    await limits(
        client,
        namespace,
        LimitRangeItem(
            type="Container",
            min={"cpu": "100m"},
            max={"cpu": "1", "memory": "1Gi"},
            max_limit_request_ratio={"cpu": "2"},
        ),
    )
    message = await refused(
        client, pod(namespace, container("big", {"cpu": "200m"}, cpu="2", memory="2Gi"))
    )
    assert message == (
        'pods "p" is forbidden: [maximum cpu usage per Container is 1, but limit is 2, '
        "maximum memory usage per Container is 1Gi, but limit is 2Gi, cpu max limit to "
        "request ratio per Container is 2, but provided ratio is 10.000000]"
    )
    message = await refused(
        client, pod(namespace, container("small", {"cpu": "50m"}, cpu="50m", memory="1Gi"))
    )
    assert (
        message
        == 'pods "p" is forbidden: minimum cpu usage per Container is 100m, but request is 50m'
    )
    fits = await client.create(
        pod(namespace, container("fits", {"cpu": "500m"}, cpu="1", memory="512Mi"))
    )
    assert fits.metadata.name == "p"


async def test_pod_bounds_add_up_containers(client: Client, namespace: str) -> None:
    await limits(client, namespace, LimitRangeItem(type="Pod", max={"memory": "1Gi"}))
    two = pod(namespace, container("a", memory="600Mi"), container("b", memory="600Mi"))
    message = await refused(client, two)
    assert message == (
        'pods "p" is forbidden: maximum memory usage per Pod is 1Gi, but limit is 1200Mi'
    )


async def test_claim_storage_bounds(client: Client, namespace: str) -> None:
    await limits(
        client,
        namespace,
        LimitRangeItem(
            type="PersistentVolumeClaim", min={"storage": "1Gi"}, max={"storage": "5Gi"}
        ),
    )

    def claim(size: str) -> PersistentVolumeClaim:
        return PersistentVolumeClaim(
            metadata=ObjectMeta(name="data", namespace=namespace),
            spec=PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                resources=VolumeResourceRequirements(requests={"storage": size}),
            ),
        )

    assert await refused(client, claim("10Gi")) == (
        'persistentvolumeclaims "data" is forbidden: maximum storage usage per '
        "PersistentVolumeClaim is 5Gi, but request is 10Gi"
    )
    assert await refused(client, claim("500Mi")) == (
        'persistentvolumeclaims "data" is forbidden: minimum storage usage per '
        "PersistentVolumeClaim is 1Gi, but request is 500Mi"
    )
    await client.create(claim("2Gi"))
