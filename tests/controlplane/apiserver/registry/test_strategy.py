"""Per-kind behaviour of writes that the API server applies: generated Job selectors, Secret
stringData merged into data."""

from __future__ import annotations

import pytest

from kube.api.kinds.batch_v1 import Job, JobSpec
from kube.api.kinds.core_v1.cluster import Secret
from kube.api.kinds.core_v1.pod import Container, PodSpec, PodTemplateSpec
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client


def job(name: str, namespace: str, **spec: object) -> Job:
    template = PodTemplateSpec(
        spec=PodSpec(containers=[Container(name="c", image="busybox")], restart_policy="Never")
    )
    return Job(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=JobSpec(template=template, **spec),  # type: ignore[arg-type]
    )


async def test_a_job_selects_its_own_pods_by_uid(client: Client, namespace: str) -> None:
    created = await client.create(job("once", namespace))
    uid = created.metadata.uid
    assert created.spec is not None and created.spec.selector is not None
    assert created.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert created.spec.template is not None and created.spec.template.metadata is not None
    assert created.spec.template.metadata.labels == {
        "job-name": "once",
        "batch.kubernetes.io/job-name": "once",
        "controller-uid": uid,
        "batch.kubernetes.io/controller-uid": uid,
    }


async def test_a_selector_needs_manual_selector(client: Client, namespace: str) -> None:
    chosen = LabelSelector(match_labels={"app": "x"})
    with pytest.raises(ApiError) as refused:
        await client.create(job("mine", namespace, selector=chosen))
    assert refused.value.code == 422


async def test_secret_string_data_is_merged_into_data(client: Client, namespace: str) -> None:
    meta = ObjectMeta(name="creds", namespace=namespace)
    created = await client.create(
        Secret(metadata=meta, data={"user": "YW5u", "pw": "b2xk"}, string_data={"pw": "new"})
    )
    assert created.string_data is None
    assert created.decoded_data() == {"user": b"ann", "pw": b"new"}
    created.string_data = {"token": "t"}
    updated = await client.update(created)
    assert updated.string_data is None
    assert updated.decoded_data() == {"user": b"ann", "pw": b"new", "token": b"t"}
    stored = await client.get(Secret, "creds", namespace)
    assert stored.data == updated.data
