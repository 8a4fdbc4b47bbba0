"""The RuntimeClass admission plugin through a real API server: a pod naming a class gets its
overhead, node selector and tolerations; a missing class, a different overhead and a
conflicting node selector are refused with upstream's messages."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api.kinds.core_v1.pod import Container, Pod, Toleration
from kube.api.kinds.node_v1 import Overhead, RuntimeClass, Scheduling
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests import builders

GVISOR = Toleration(key="example.com/gvisor", operator="Exists", effect="NoSchedule")


def pod(name: str, namespace: str, **spec: Any) -> Pod:
    return builders.pod(name, namespace, containers=[Container(name="c", image="app")], **spec)


async def refusal(client: Client, created: Pod) -> str:
    with pytest.raises(ApiError) as refused:
        await client.create(created)
    assert refused.value.code == 403
    return refused.value.message


@pytest.fixture
async def runtime_class(client: Client, namespace: str) -> str:
    """A class with an overhead and scheduling constraints, named after the test's namespace."""
    name = f"{namespace}-sandboxed"
    await client.create(
        RuntimeClass(
            metadata=ObjectMeta(name=name),
            handler="runsc",
            overhead=Overhead(pod_fixed={"cpu": "250m", "memory": "120Mi"}),
            scheduling=Scheduling(node_selector={"sandbox": "gvisor"}, tolerations=[GVISOR]),
        )
    )
    return name


async def test_a_pod_gets_its_class_overhead_and_scheduling(
    client: Client, namespace: str, runtime_class: str
) -> None:
    created = await client.create(
        pod(
            "p",
            namespace,
            runtime_class_name=runtime_class,
            node_selector={"zone": "a"},
            tolerations=[GVISOR],
        )
    )
    assert created.spec is not None
    assert created.spec.overhead == {"cpu": "250m", "memory": "120Mi"}
    assert created.spec.node_selector == {"zone": "a", "sandbox": "gvisor"}
    assert (created.spec.tolerations or []).count(GVISOR) == 1
    plain = await client.create(pod("q", namespace, runtime_class_name=runtime_class))
    assert plain.spec is not None and plain.spec.node_selector == {"sandbox": "gvisor"}
    assert GVISOR in (plain.spec.tolerations or [])
    same = await client.create(
        pod(
            "r",
            namespace,
            runtime_class_name=runtime_class,
            overhead={"cpu": "0.25", "memory": "120Mi"},
        )
    )
    assert same.spec is not None and same.spec.overhead == {"cpu": "250m", "memory": "120Mi"}


async def test_refusals(client: Client, namespace: str, runtime_class: str) -> None:
    missing = await refusal(client, pod("p", namespace, runtime_class_name="no-such-class"))
    assert missing == 'pods "p" is forbidden: pod rejected: RuntimeClass "no-such-class" not found'
    other = pod("p", namespace, runtime_class_name=runtime_class, overhead={"cpu": "1"})
    assert await refusal(client, other) == (
        'pods "p" is forbidden: pod rejected: '
        "Pod's Overhead doesn't match RuntimeClass's defined Overhead"
    )
    conflict = pod(
        "p", namespace, runtime_class_name=runtime_class, node_selector={"sandbox": "kata"}
    )
    assert await refusal(client, conflict) == (
        'pods "p" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = '
        "gvisor; pod.spec.nodeSelector[sandbox] = kata"
    )
    classless = pod("p", namespace, overhead={"cpu": "1"})
    assert await refusal(client, classless) == (
        'pods "p" is forbidden: pod rejected: '
        "Pod Overhead set without corresponding RuntimeClass defined Overhead"
    )
