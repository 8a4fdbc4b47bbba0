from __future__ import annotations

from typing import Any, cast

import pytest

from controlplane.scheduler.framework.interface import Code, CycleState
from controlplane.scheduler.framework.types import PodInfo
from controlplane.scheduler.plugins import defaultbinder
from kube.api.kinds.core_v1.pod import Binding
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.meta_v1 import ObjectMeta, Status
from kube.client.errors import ApiError
from tests.controlplane.scheduler.builders import FakeHandle, make_pod
from tests.fakeapi import FakeApi


def created(client: FakeApi) -> list[tuple[str, str, str | None, str, Any]]:
    return [(a.kind, a.name, a.namespace, a.subresource, a.obj) for a in client.actions]


CONFLICT = ApiError(Status(code=409, reason="Conflict", message="pod p is already assigned"))
GONE = ApiError(Status(code=404, reason="NotFound", message='pods "p" not found'))


@pytest.mark.parametrize(
    ("error", "want_code", "want_reason"),
    [
        pytest.param(None, Code.SUCCESS, None, id="binds"),
        pytest.param(CONFLICT, Code.ERROR, str(CONFLICT), id="conflict-fails"),
        pytest.param(GONE, Code.ERROR, str(GONE), id="pod-gone-fails"),
    ],
)
async def test_bind(error: Exception | None, want_code: Code, want_reason: str | None) -> None:
    handle = FakeHandle()
    client = handle.client
    if error is not None:
        client.fail_next("create", error)
    plugin = defaultbinder.new(None, cast(Any, handle))
    pod = make_pod("p", "ns", uid="u1")

    status = await plugin.bind(CycleState(), PodInfo.of(pod), "node-1")

    assert status.code is want_code
    if want_reason is None:
        assert created(client) == [
            (
                "Pod",
                "p",
                "ns",
                "binding",
                Binding(
                    metadata=ObjectMeta(name="p", namespace="ns", uid="u1"),
                    target=ObjectReference(kind="Node", name="node-1"),
                ),
            )
        ]
    else:
        assert status.reasons == (want_reason,)
        assert status.error is error
        assert created(client) == []
