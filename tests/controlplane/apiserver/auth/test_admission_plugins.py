"""The admission plugin flags and the small plugins: TaintNodesByCondition, AlwaysPullImages
(enabled here), DefaultStorageClass and DefaultIngressClass."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.apiserver.auth.admission import DEFAULT_PLUGINS, enabled
from kube.api.kinds.core_v1.node import Node, NodeSpec, Taint
from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec
from kube.api.kinds.core_v1.volume import (
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    VolumeResourceRequirements,
)
from kube.api.kinds.networking_v1 import (
    Ingress,
    IngressBackend,
    IngressClass,
    IngressClassSpec,
    IngressServiceBackend,
    IngressSpec,
    ServiceBackendPort,
)
from kube.api.kinds.storage_v1 import StorageClass
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests.controlplane.apiserver.admission_servers import BACKENDS, serve
from tests.servers import REPO, ServerProcess

DEFAULT_CLASS = {"storageclass.kubernetes.io/is-default-class": "true"}
DEFAULT_INGRESS_CLASS = {"ingressclass.kubernetes.io/is-default-class": "true"}


@pytest.fixture(scope="module", params=BACKENDS)
def apiserver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    yield from serve(
        request.param,
        tmp_path_factory,
        "--enable-admission-plugins",
        "AlwaysPullImages",
        "--disable-admission-plugins",
        "ServiceAccount",
    )


def test_flags_choose_from_the_default_set() -> None:
    assert enabled() == list(DEFAULT_PLUGINS)
    chosen = enabled(["NodeRestriction", "AlwaysPullImages"], ["ResourceQuota", "PodSecurity"])
    assert chosen == [
        "NamespaceLifecycle",
        "LimitRanger",
        "ServiceAccount",
        "NodeRestriction",
        "TaintNodesByCondition",
        "AlwaysPullImages",
        "Priority",
        "DefaultTolerationSeconds",
        "DefaultStorageClass",
        "RuntimeClass",
        "DefaultIngressClass",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionWebhook",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionWebhook",
    ]
    with pytest.raises(ValueError, match='enable-admission-plugins plugin "Bogus" is unknown'):
        enabled(["Bogus"])
    with pytest.raises(ValueError, match='"Priority" both in enable-admission-plugins and'):
        enabled(["Priority"], ["Priority"])


def test_the_server_refuses_unknown_plugins(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubelab",
            "apiserver",
            "--data-dir",
            str(tmp_path),
            "--secure-port",
            "0",
            "--disable-admission-plugins",
            "NoSuchPlugin",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode != 0
    assert 'disable-admission-plugins plugin "NoSuchPlugin" is unknown' in result.stderr


async def test_new_nodes_are_not_ready_until_seen(client: Client) -> None:
    own = Taint(key="dedicated", value="gpu", effect="NoSchedule")
    node = await client.create(
        Node(metadata=ObjectMeta(name="tainted-node"), spec=NodeSpec(taints=[own]))
    )
    try:
        assert node.spec is not None
        assert node.spec.taints == [
            own,
            Taint(key="node.kubernetes.io/not-ready", effect="NoSchedule"),
        ]
        node.spec.taints = [own]
        updated = await client.update(node)  # only creation taints: the controller lifts it
        assert updated.spec is not None and updated.spec.taints == [own]
    finally:
        await client.delete(Node, "tainted-node")


async def test_images_are_always_pulled(client: Client, namespace: str) -> None:
    created = await client.create(
        Pod(
            metadata=ObjectMeta(name="p", namespace=namespace),
            spec=PodSpec(
                init_containers=[Container(name="i", image="init", image_pull_policy="Never")],
                containers=[Container(name="c", image="app", image_pull_policy="IfNotPresent")],
            ),
        )
    )
    assert created.spec is not None
    policies = [c.image_pull_policy for c in (created.spec.init_containers or [])]
    policies += [c.image_pull_policy for c in (created.spec.containers or [])]
    assert policies == ["Always", "Always"]


async def test_claims_without_a_class_get_the_newest_default(
    client: Client, namespace: str
) -> None:
    def claim(name: str, storage_class: str | None) -> PersistentVolumeClaim:
        return PersistentVolumeClaim(
            metadata=ObjectMeta(name=name, namespace=namespace),
            spec=PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                storage_class_name=storage_class,
                resources=VolumeResourceRequirements(requests={"storage": "1Gi"}),
            ),
        )

    plain = await client.create(claim("before", None))
    assert plain.spec is not None and plain.spec.storage_class_name is None
    names = [f"{namespace}-old", f"{namespace}-new"]
    for name in names:
        await client.create(
            StorageClass(
                metadata=ObjectMeta(name=name, annotations=DEFAULT_CLASS), provisioner="x.io/p"
            )
        )
        await asyncio.sleep(1.1)  # creation timestamps have second precision
    try:
        defaulted = await client.create(claim("after", None))
        assert defaulted.spec is not None and defaulted.spec.storage_class_name == names[1]
        explicit = await client.create(claim("none", ""))
        assert explicit.spec is not None and explicit.spec.storage_class_name == ""
    finally:
        for name in names:
            try:
                await client.delete(StorageClass, name)
            except ApiError as error:
                if not error.not_found:
                    raise


async def test_ingresses_without_a_class_get_the_newest_default(
    client: Client, namespace: str
) -> None:
    """As upstream's DefaultIngressClass: only an Ingress naming no class, by field or by the
    deprecated annotation, gets the newest class annotated as default."""
    backend = IngressBackend(
        service=IngressServiceBackend(name="web", port=ServiceBackendPort(number=80))
    )

    def ingress(name: str, class_name: str | None, annotations: dict[str, str] | None) -> Ingress:
        return Ingress(
            metadata=ObjectMeta(name=name, namespace=namespace, annotations=annotations),
            spec=IngressSpec(ingress_class_name=class_name, default_backend=backend),
        )

    def class_name(created: Ingress) -> str | None:
        assert created.spec is not None
        return created.spec.ingress_class_name

    assert class_name(await client.create(ingress("before", None, None))) is None
    names = [f"{namespace}-old", f"{namespace}-new", f"{namespace}-plain"]
    for name in names:
        default = None if name.endswith("plain") else DEFAULT_INGRESS_CLASS
        await client.create(
            IngressClass(
                metadata=ObjectMeta(name=name, annotations=default),
                spec=IngressClassSpec(controller="example.com/ingress"),
            )
        )
        await asyncio.sleep(1.1)  # creation timestamps have second precision
    try:
        assert class_name(await client.create(ingress("after", None, None))) == names[1]
        assert class_name(await client.create(ingress("named", names[0], None))) == names[0]
        legacy = {"kubernetes.io/ingress.class": "nginx"}
        assert class_name(await client.create(ingress("legacy", None, legacy))) is None
    finally:
        for name in names:
            await client.delete(IngressClass, name)
