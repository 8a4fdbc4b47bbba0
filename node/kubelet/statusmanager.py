"""The kubelet's status manager: the pod statuses it computed, and sending the changes.

Upstream's ``pkg/kubelet/status``, without its separate goroutine: the pod worker awaits
``set`` itself, so a pod's statuses reach the API server in the order they were computed and a
failed write fails the sync (which the worker retries).

``set`` remembers the status as the kubelet's own view (``get``, what probes and the next
status computation read) and writes it through the pod's ``status`` subresource only when it
differs, in the fields the kubelet owns (``status.status_changed``), from both what was last
written and what the API holds.  The write is a JSON merge patch carrying the pod's uid, so it
never lands on a new pod of the same name; fields the API has and the new status lacks are
cleared explicitly.  A static pod's status goes to its mirror pod.

``delete_pod_now`` is the last word on a pod: the DELETE with grace 0 (and the pod's uid as a
precondition) that removes a pod whose containers are gone.
"""

from __future__ import annotations

from typing import Any

from kube.api import codec
from kube.api.kinds.core_v1.pod import Pod, PodStatus
from kube.api.meta_v1 import Preconditions
from kube.client.errors import ApiError
from kube.client.interface import ApiClient
from node.kubelet.status import status_changed


def status_patch(api: PodStatus | None, status: PodStatus, uid: str) -> dict[str, Any]:
    """The merge patch turning ``api`` into ``status`` on the pod with ``uid``."""
    new = codec.to_builtins(status)
    old = codec.to_builtins(api) if api is not None else {}
    new.update({key: None for key in old.keys() - new.keys()})
    return {"metadata": {"uid": uid}, "status": new}


async def delete_pod_now(client: ApiClient, namespace: str, name: str, uid: str | None) -> bool:
    """Delete the pod at once, only while its uid is still ``uid`` when one is given; whether
    it was deleted (False: it was already gone, or the name now holds another pod)."""
    try:
        await client.delete(
            Pod,
            name,
            namespace,
            grace_period_seconds=0,
            preconditions=Preconditions(uid=uid) if uid else None,
        )
    except ApiError as error:
        if error.not_found or error.conflict:
            return False
        raise
    return True


class StatusManager:
    """See the module docstring."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self._computed: dict[str, PodStatus] = {}
        self._written: dict[str, PodStatus] = {}

    def get(self, uid: str) -> PodStatus | None:
        """The status last computed for the pod with ``uid``."""
        return self._computed.get(uid)

    async def set(self, pod: Pod, status: PodStatus, target: Pod | None = None) -> None:
        """Record ``status`` for ``pod`` and write it to ``target`` (default: the pod itself,
        as the API has it; a static pod's mirror pod) when it changed."""
        uid = pod.metadata.uid or ""
        self._computed[uid] = status
        api = target if target is not None else pod
        written = self._written.get(uid)
        if written is not None and not status_changed(written, status):
            return
        if api.status is not None and not status_changed(api.status, status):
            self._written[uid] = status
            return
        await self.client.patch(
            Pod,
            api.metadata.name or "",
            api.metadata.namespace,
            status_patch(api.status, status, api.metadata.uid or ""),
            subresource="status",
        )
        self._written[uid] = status

    def forget(self, uid: str) -> None:
        self._computed.pop(uid, None)
        self._written.pop(uid, None)
