"""The hollow kubelet: pods bound to hollow nodes become Running and Ready, and go when deleted.

One informer watches every assigned pod (``spec.nodeName!=``) for the whole fleet; pods on
nodes outside the fleet are ignored.  Handlers only enqueue keys; workers read the pod from
the cache and do what a kubelet would at that point, level-triggered:

- bound and not started yet → the status a kubelet reports once every container started
  (phase Running, the four conditions True, a pod IP, each container running and ready);
- running, and the conditions it owns differ from its own view → its view again, as a
  kubelet's status manager reports whenever the API's differs: Ready again after the node
  lifecycle controller marked the pods of a node that went silent, and Ready or not as the
  pod's readiness gates say (conditions other components set, e.g. a load balancer's);
- marked for deletion → the final delete with grace period 0 (the kubelet's confirmation
  that the containers are gone), conditioned on the pod's uid.

Pods never finish: hollow containers run until deleted, as in upstream's kubemark.  Pod IPs
come from 10.128.0.0/9, a /24 per node, so they are unique across the fleet.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Sequence

import msgspec

from kube.api import codec
from kube.api.keys import object_key, split_key
from kube.api.kinds.core_v1.pod import (
    ContainerState,
    ContainerStateRunning,
    ContainerStatus,
    HostIP,
    Pod,
    PodCondition,
    PodIP,
    PodStatus,
)
from kube.client.errors import ApiError, ClientError
from kube.client.informers import DeletedFinalStateUnknown, SharedInformerFactory
from kube.client.interface import ApiClient
from kube.client.workqueue import RateLimitingQueue
from kube.clock import Clock
from node.hollow.nodes import FleetSpec
from node.kubelet.status import pod_ready
from node.kubelet.statusmanager import delete_pod_now

LOG = logging.getLogger("kubelab.hollow")

POD_ADDRESSES = ipaddress.ip_network("10.128.0.0/9")
POD_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


class HollowKubelet:
    """Drives the pods of every node in a fleet."""

    def __init__(
        self,
        client: ApiClient,
        informers: SharedInformerFactory,
        spec: FleetSpec,
        clock: Clock,
        *,
        workers: int = 8,
    ) -> None:
        self.client = client
        self.spec = spec
        self.clock = clock
        self.workers = workers
        self._nodes = {spec.name(i): i for i in range(spec.count)}
        self._next_host: dict[str, int] = {}
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
        self.pods = informers.informer_for(Pod, field_selector="spec.nodeName!=")
        self.pods.add_event_handler(self._on_pod, lambda _, new: self._on_pod(new), self._on_gone)

    def _ours(self, pod: Pod) -> bool:
        return bool(pod.spec and pod.spec.node_name in self._nodes)

    def _on_pod(self, pod: Pod) -> None:
        if self._ours(pod) and (
            pod.metadata.deletion_timestamp or not _started(pod) or self._misreported(pod)
        ):
            self.queue.add(object_key(pod))

    def _misreported(self, pod: Pod) -> bool:
        """Running, yet a condition the kubelet owns is not as it sees it."""
        status = pod.status
        if status is None or status.phase != "Running":
            return False
        return self._conditions(pod, status.conditions or ()) != status.conditions

    def _on_gone(self, pod: Pod | DeletedFinalStateUnknown[Pod]) -> None:
        self.queue.forget(pod.key if isinstance(pod, DeletedFinalStateUnknown) else object_key(pod))

    async def run(self) -> None:
        """Process pods until cancelled."""
        try:
            await asyncio.gather(
                *(self.queue.work(self.sync, self._failed) for _ in range(self.workers))
            )
        finally:
            self.queue.shutdown()

    def _failed(self, key: str, error: Exception) -> None:
        expected = isinstance(error, ApiError | ClientError)
        LOG.warning("syncing pod %s: %s", key, error, exc_info=None if expected else error)

    async def sync(self, key: str) -> None:
        pod = self.pods.lister.get(key)
        if pod is None or not self._ours(pod):
            return
        namespace, name = split_key(key)
        if pod.metadata.deletion_timestamp:
            await delete_pod_now(self.client, namespace, name, pod.metadata.uid)
        elif not _started(pod):
            status = self.running_status(pod)
            await self.client.patch(
                Pod,
                name,
                namespace,
                {"status": codec.to_builtins(status)},
                patch_type="strategic",  # as a kubelet: conditions others set stay
                subresource="status",
            )
        elif self._misreported(pod):
            assert pod.status is not None
            conditions = self._conditions(pod, pod.status.conditions or ())
            # Only the conditions it owns, every field named (null clears a stale reason), as
            # a kubelet's patch carries: the rest may have changed since the cache saw them.
            owned = [
                {"reason": None, "message": None, **codec.to_builtins(c)}
                for c in conditions
                if c.type in POD_CONDITIONS
            ]
            patch = {"status": {"conditions": owned}}
            await self.client.patch(
                Pod, name, namespace, patch, patch_type="strategic", subresource="status"
            )

    def _conditions(self, pod: Pod, current: Sequence[PodCondition]) -> list[PodCondition]:
        """``current`` with the conditions a kubelet owns as it sees them: every container
        runs and is ready, so all are True but Ready, which the readiness gates decide.  A
        condition keeps its transition time while its status stays."""
        containers_ready = PodCondition(type="ContainersReady", status="True")
        ready = pod_ready(pod, containers_ready, current)
        wanted = {kind: PodCondition(type=kind, status="True") for kind in POD_CONDITIONS}
        wanted["Ready"] = msgspec.structs.replace(ready, observed_generation=None)
        now = self.clock.now()
        conditions = []
        for condition in current:
            desired = wanted.pop(condition.type or "", None)
            if desired is None or (condition.status, condition.reason, condition.message) == (
                desired.status,
                desired.reason,
                desired.message,
            ):
                conditions.append(condition)
            else:
                conditions.append(msgspec.structs.replace(desired, last_transition_time=now))
        conditions += [
            msgspec.structs.replace(c, last_transition_time=now) for c in wanted.values()
        ]
        return conditions

    def running_status(self, pod: Pod) -> PodStatus:
        """The status a kubelet reports once all of the pod's containers run and are ready."""
        assert pod.spec is not None and pod.spec.node_name is not None
        index = self._nodes[pod.spec.node_name]
        host_ip = self.spec.address(index)
        pod_ip = self._pod_ip(pod.spec.node_name, index)
        now = self.clock.now()
        return PodStatus(
            phase="Running",
            conditions=self._conditions(
                pod, [PodCondition(type="PodScheduled", status="True", last_transition_time=now)]
            ),
            host_ip=host_ip,
            host_ips=[HostIP(ip=host_ip)],
            pod_ip=pod_ip,
            pod_ips=[PodIP(ip=pod_ip)],
            start_time=now,
            container_statuses=[
                ContainerStatus(
                    name=container.name,
                    image=container.image,
                    image_id=f"hollow://{container.image}",
                    container_id=f"hollow://{pod.metadata.uid}/{container.name}",
                    ready=True,
                    started=True,
                    restart_count=0,
                    state=ContainerState(running=ContainerStateRunning(started_at=now)),
                )
                for container in pod.spec.containers or ()
            ],
            qos_class=pod.status.qos_class if pod.status else None,
        )

    def _pod_ip(self, node_name: str, index: int) -> str:
        host = self._next_host.get(node_name, 1) % 253 + 1
        self._next_host[node_name] = host
        return str(POD_ADDRESSES[index * 256 + host])


def _started(pod: Pod) -> bool:
    """Running, or finished: a kubelet never brings a terminated pod back."""
    return bool(pod.status and pod.status.phase in ("Running", "Succeeded", "Failed"))
