"""The hollow nodes' kubelet servers: the real ``KubeletServer``, one per node, over their
synthetic usage.

With ``kubelab hollow-nodes --kubelet-address IP``, every hollow node serves its kubelet API
on IP at a port of its own (the node reports IP as its InternalIP and the port as its kubelet
endpoint, as kubemark's hollow kubelets report theirs), so the metrics-server scrapes a
thousand hollow nodes as it scrapes real ones: ``/metrics/resource`` and ``/stats/summary``
answer the node's ``usage.HollowUsage``, ``/pods`` its pods, behind the kubelet's own
authentication (client certificates of ``client_ca``, bearer tokens reviewed by the API
server, no anonymous requests) and SubjectAccessReview authorization.  Hollow containers run
nothing, so the container endpoints (logs, exec, attach, port-forward) find nothing running and
say so; ``NoRuntime`` answers any runtime call that would still be made with UNIMPLEMENTED.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import grpc

from kube.api.kinds.core_v1.pod import Pod, PodStatus
from kube.client.informers import Indexer, SharedInformer, index_by_node_name
from kube.client.interface import ApiClient
from kube.clock import Clock
from kube.pki import KeyPair
from node.cri.client import CRIError
from node.cri.pb import api_pb2 as pb
from node.hollow.usage import USAGE_ANNOTATION, HollowUsage, UsageProfile
from node.kubelet.auth import AuthOptions, KubeletAuth
from node.kubelet.server import KubeletServer

NODE_NAME_INDEX = "spec.nodeName"


class NoRuntime:
    """The runtime of a hollow node: it has none (see the module docstring)."""

    @staticmethod
    def _refuse(method: str) -> CRIError:
        return CRIError(method, grpc.StatusCode.UNIMPLEMENTED, "a hollow node runs no containers")

    async def container_status(self, container_id: str) -> pb.ContainerStatus:
        raise self._refuse("ContainerStatus")

    async def exec(
        self,
        container_id: str,
        cmd: Iterable[str],
        *,
        tty: bool = False,
        stdin: bool = False,
        stdout: bool = True,
        stderr: bool = True,
    ) -> str:
        raise self._refuse("Exec")

    async def attach(
        self,
        container_id: str,
        *,
        tty: bool = False,
        stdin: bool = False,
        stdout: bool = True,
        stderr: bool = True,
    ) -> str:
        raise self._refuse("Attach")

    async def port_forward(self, sandbox_id: str, ports: Iterable[int]) -> str:
        raise self._refuse("PortForward")


class HollowPods:
    """One hollow node's ``PodLookup``: the pods bound to it, from the fleet's informer (indexed
    by ``NODE_NAME_INDEX``)."""

    def __init__(self, node_name: str, pods: Indexer[Pod]) -> None:
        self.node_name = node_name
        self._pods = pods

    def pods(self) -> list[Pod]:
        return self._pods.by_index(NODE_NAME_INDEX, self.node_name)

    def find_pod(self, namespace: str, name: str) -> Pod | None:
        return next(
            (
                p
                for p in self.pods()
                if (p.metadata.namespace, p.metadata.name) == (namespace, name)
            ),
            None,
        )

    def pod_status(self, pod: Pod) -> PodStatus:
        return pod.status or PodStatus()

    async def running_container_id(self, pod_uid: str, container: str) -> str | None:
        return None

    def sandbox_id(self, pod_uid: str) -> str | None:
        return None


def kubelet_servers(
    node_names: Iterable[str],
    pods: SharedInformer[Pod],
    client: ApiClient,
    clock: Clock,
    *,
    address: str,
    certificate: KeyPair,
    client_ca: Path,
    profile: UsageProfile,
) -> list[KubeletServer]:
    """The kubelet server of each hollow node, listening on ``address`` at free ports, over
    ``pods`` (indexed by ``NODE_NAME_INDEX``), each node's usage stepping the moment a pod of
    it is told to use something else."""
    pods.add_indexers({NODE_NAME_INDEX: index_by_node_name})
    usages: dict[str, HollowUsage] = {}
    servers = []
    for node_name in node_names:
        lookup = HollowPods(node_name, pods.lister)
        usage = usages[node_name] = HollowUsage(node_name, lookup.pods, profile, clock)
        servers.append(
            KubeletServer(
                lookup,
                NoRuntime(),
                address=address,
                port=0,
                certificate=certificate,
                client_ca=client_ca,
                auth=KubeletAuth(
                    AuthOptions(anonymous=False, token_webhook=True, webhook_authorization=True),
                    client,
                    node_name,
                    clock,
                ),
                clock=clock,
                stats_provider=usage,
            )
        )

    def updated(old: Pod, new: Pod) -> None:
        usage = usages.get(new.spec.node_name or "") if new.spec else None
        if usage is not None and _told_usage(old) != _told_usage(new):
            usage.usage_changed()

    pods.add_event_handler(on_update=updated)
    return servers


def _told_usage(pod: Pod) -> str | None:
    return (pod.metadata.annotations or {}).get(USAGE_ANNOTATION)
