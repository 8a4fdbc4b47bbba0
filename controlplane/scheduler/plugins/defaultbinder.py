"""DefaultBinder: bind the pod to its node by POSTing a Binding to ``pods/NAME/binding``.

The Binding carries the pod's uid, so the API server refuses it if the pod was deleted and
re-created under the same name since the scheduler saw it.  Any API error fails the binding
cycle; the framework then unreserves the pod and the queue retries it with backoff.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import SUCCESS, CycleState, Handle, Status
from controlplane.scheduler.framework.types import PodInfo
from kube.api.kinds.core_v1.pod import Binding, Pod
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError, ClientError


class DefaultBinder:
    NAME: ClassVar[str] = names.DEFAULT_BINDER

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        metadata = pod.pod.metadata
        binding = Binding(
            metadata=ObjectMeta(name=metadata.name, namespace=metadata.namespace, uid=metadata.uid),
            target=ObjectReference(kind="Node", name=node_name),
        )
        try:
            await self._handle.client.create_subresource(
                Pod, metadata.name or "", metadata.namespace, "binding", binding
            )
        except (ApiError, ClientError) as error:
            return Status.failed(error)
        return SUCCESS


def new(args: Mapping[str, Any] | None, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)
