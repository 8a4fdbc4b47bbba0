"""The kubelet: the pods bound to this node, made real on the container runtime.

``Kubelet`` wires the parts and is the pod workers' ``PodSyncer``; each part has its module:

- pod sources: the API's pods with ``spec.nodeName`` = this node (an informer with that field
  selector) and static pods from ``--pod-manifest-path`` (``staticpods``); both feed
  ``podworkers.PodWorkers``, one task per pod (``sync → terminating → terminated → removed``);
- the runtime: ``runtime.manager.RuntimeManager`` turns a pod into CRI calls, the
  ``pleg`` relists it every second and wakes the workers of pods whose containers changed;
- per pod: volumes (``volumes.manager``), probes (``probes``), CrashLoopBackOff (``backoff``),
  status (``status.generate_pod_status`` computed, ``statusmanager`` sent);
- the node: ``nodestatus`` registers the Node and keeps its status and Lease, ``csinode`` its
  CSINode (the Node is not Ready before that exists, as upstream); once the Node
  has a podCIDR the pod network is configured (CNI config, the CNI agent, CRI's runtime
  config); the ``server`` answers the API server's logs/exec/attach/port-forward streams,
  with its serving certificate from ``--tls-cert-file`` or, rotating, from a certificate
  request for the Node's addresses (``certificate.serving_manager``).

What a sync does (``sync_pod``) follows upstream's ``SyncPod``: observe the pod in the runtime,
compute and send its status, stop if it reached a terminal phase, wait for the pod network
(host-network pods excepted), set up volumes, start probe workers, let the runtime manager
create what is missing, then observe and report again, so a pod shows Running as soon as its
containers run.  A terminating pod has its containers stopped within the grace period; a
terminated one gives back its volumes and keeps one dead instance per container (the GC's
rule, for ``logs --previous``); a removed one loses its containers and sandboxes, and
its deletion is confirmed to the API server (a DELETE with grace 0 and the pod's uid).

Housekeeping (every ``HOUSEKEEPING_PERIOD`` s, upstream ``HandlePodCleanups``) ends the workers
of pods that left the sources, stops and removes runtime pods that no source has (the
remains of a kubelet restart: adoption is the runtime manager's, which finds a pod's existing
sandbox and containers and never starts a second copy), removes volumes of unknown pods,
reconciles mirror pods and forgets old backoff entries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import shutil
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from kube.api.kinds.core_v1.node import NodeAddress
from kube.api.kinds.core_v1.pod import Pod, PodStatus
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.node_v1 import RuntimeClass
from kube.client.errors import ApiError, ClientError
from kube.client.events import EventRecorder
from kube.client.informers import DeletedFinalStateUnknown, SharedInformerFactory
from kube.client.interface import ApiClient
from kube.clock import Clock, RealClock
from kube.pki import KeyPair
from node.cni.agentprocess import AgentProcess
from node.cni.netconf import install_plugins, render_netconf, write_netconf
from node.cri.client import CRIError, RuntimeClient
from node.kubelet import certificate, mirror
from node.kubelet.apiobjects import ApiObjects
from node.kubelet.auth import AuthOptions, KubeletAuth
from node.kubelet.backoff import CrashLoopBackOff
from node.kubelet.cgroupstats import CgroupStatsProvider, RunningPod, SysCgroupReader
from node.kubelet.csinode import CHECK_PERIOD, CSINodeManager
from node.kubelet.logs import LogRotator
from node.kubelet.nodestatus import NodeOptions, NodeStatusManager
from node.kubelet.pleg import PodLifecycleEventGenerator
from node.kubelet.podworkers import PodWorkers, SyncOutcome
from node.kubelet.probes import NetworkProber, ProbeManager, ProbeType, ProbeUpdate
from node.kubelet.runtime.cgroups import Cgroups, SysCgroups
from node.kubelet.runtime.manager import PodInputs, RuntimeManager, SyncResult
from node.kubelet.runtime.options import NodeRuntimeOptions
from node.kubelet.runtime.runtimeclass import RuntimeClasses
from node.kubelet.runtime.state import PodRuntimeState, age
from node.kubelet.server import KubeletServer
from node.kubelet.staticpods import StaticPodSource, is_static_pod
from node.kubelet.status import (
    TERMINAL_PHASES,
    Observation,
    StartFailure,
    generate_pod_status,
)
from node.kubelet.statusmanager import StatusManager, delete_pod_now
from node.kubelet.volumes.manager import Mounter, SystemMounter, VolumeError, VolumeManager

log = logging.getLogger("kubelab.kubelet")

HOUSEKEEPING_PERIOD = 2.0
LOG_ROTATION_PERIOD = 10.0
NETWORK_POLL_PERIOD = 1.0
RUNTIME_WAIT_PERIOD = 1.0


class NetworkNotReady(Exception):
    """A pod that needs the pod network was synced before the network is configured."""


@dataclasses.dataclass(frozen=True)
class NetworkOptions:
    """The pod network this kubelet configures once its Node has a podCIDR.

    ``plugin`` is ``kubelab`` (our plugin, through the CNI agent on ``agent_socket``) or
    ``reference`` (the bridge and host-local plugins); ``None`` leaves the CNI config to
    someone else (the runtime then says when its network is ready).
    """

    conf_dir: Path
    bin_dir: Path
    data_dir: Path
    cluster_cidr: str
    plugin: str | None = "kubelab"

    @property
    def agent_socket(self) -> Path:
        return self.data_dir / "agent.sock"


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """The kubelet's HTTPS server (``port`` 0 picks one; ``None`` options: no server).
    Without ``tls_cert`` the serving certificate is requested and rotated through the API
    (``--rotate-server-certificates``) and kept in the kubelet's ``cert_dir``."""

    address: str
    port: int
    tls_cert: Path | None
    tls_key: Path | None
    client_ca: Path | None
    auth: AuthOptions = dataclasses.field(default_factory=AuthOptions)
    system_log_dir: Path | None = Path("/var/log")


@dataclasses.dataclass(frozen=True)
class KubeletConfig:
    node: NodeOptions
    runtime: NodeRuntimeOptions
    runtime_endpoint: str
    network: NetworkOptions | None = None
    server: ServerOptions | None = None
    pod_manifest_path: Path | None = None
    cert_dir: Path = Path("/var/lib/kubelet/pki")
    csinode_check_period: float = CHECK_PERIOD


class Kubelet:
    """See the module docstring.  ``run()`` until cancelled; the pods keep running after."""

    def __init__(
        self,
        client: ApiClient,
        config: KubeletConfig,
        *,
        clock: Clock | None = None,
        mounter: Mounter | None = None,
        cgroups: Cgroups | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.clock: Clock = clock or RealClock()
        self.node_name = config.node.node_name
        self.cri = RuntimeClient(config.runtime_endpoint)
        self.recorder = EventRecorder(client, "kubelet", host=self.node_name, clock=self.clock)
        self.informers = SharedInformerFactory(client, clock=self.clock)
        self.pods_informer = self.informers.informer_for(
            Pod, field_selector=f"spec.nodeName={self.node_name}"
        )
        self.objects = ApiObjects(
            client,
            self.informers.informer_for(Service).lister,
        )

        self.backoff = CrashLoopBackOff(self.clock)
        self.runtime = RuntimeManager(
            self.cri,
            config.runtime,
            self.clock,
            self.recorder,
            cgroups if cgroups is not None else SysCgroups(),
            self.backoff,
            self.objects,
            RuntimeClasses(self.informers.informer_for(RuntimeClass).lister),
        )
        self.volumes = VolumeManager(
            config.runtime.root_dir,
            mounter if mounter is not None else SystemMounter(),
            self.clock,
        )
        self.statuses = StatusManager(client)
        self.probes = ProbeManager(
            NetworkProber(self._exec_sync),
            self.clock,
            self.statuses.get,
            on_restart=self._probe_failed,
            on_status=self._probe_changed,
        )
        self.workers = PodWorkers(self, self.clock)
        self.pleg = PodLifecycleEventGenerator(self.runtime.snapshot, self.workers.sync, self.clock)
        self.csinode = CSINodeManager(
            client, self.node_name, self.clock, config.csinode_check_period
        )
        self.node_status = NodeStatusManager(
            client,
            config.node,
            self.cri,
            self.clock,
            events=self.recorder,
            health_checks=[self.pleg.healthy, self.csinode.healthy],
        )
        self.static = (
            StaticPodSource(config.pod_manifest_path, self.node_name, self.clock)
            if config.pod_manifest_path is not None
            else None
        )
        self.static_pods: dict[str, Pod] = {}
        self.mirrors = mirror.MirrorClient(client, self.node_name)
        self.log_rotator = LogRotator(self.cri, self.clock)
        self.server: KubeletServer | None = None
        self.serving_certificate: certificate.CertificateManager | None = None
        if config.server is not None:
            self.server = self._server(config.server)
        self.runtime_type = "containerd"
        self.cni_agent: AgentProcess | None = None
        self.pod_cidr: str | None = None
        self._unhealthy: dict[str, set[str]] = {}
        self._start_failures: dict[str, dict[str, StartFailure]] = {}

    def _server(self, options: ServerOptions) -> KubeletServer:
        served: KeyPair | None = None
        if options.tls_cert is not None and options.tls_key is not None:
            served = KeyPair(options.tls_cert.read_bytes(), options.tls_key.read_bytes())
        server = KubeletServer(
            self,
            self.cri,
            address=options.address,
            port=options.port,
            certificate=served,
            client_ca=options.client_ca,
            auth=KubeletAuth(options.auth, self.client, self.node_name, self.clock),
            system_log_dir=options.system_log_dir,
            clock=self.clock,
            stats_provider=CgroupStatsProvider(
                self.node_name, SysCgroupReader(), self._running_pods, self.clock
            ),
            sandboxes=self.runtime.sandboxes,
        )
        if served is None:
            self.serving_certificate = certificate.serving_manager(
                self.client,
                self.config.cert_dir,
                self.node_name,
                self.clock,
                self._addresses,
                server.use_certificate,
            )
        return server

    def _addresses(self) -> list[NodeAddress]:
        """The addresses of the Node status last sent (what the serving certificate names)."""
        node = self.node_status.node()
        return list(node.status.addresses or ()) if node and node.status else []

    # Running.

    async def run(self) -> None:
        """Register, start every loop, serve; returns only by cancellation (or a crash)."""
        await self._wait_for_runtime()
        async with self.recorder:
            await self.node_status.register()
            await self.csinode.initialize()
            self.pods_informer.add_event_handler(
                on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted
            )
            self.informers.start()
            await self.informers.wait_for_cache_sync()
            loops: list[Awaitable[None]] = [
                self.node_status.run(),
                self.csinode.run(),
                self.pleg.run(),
                self._every(HOUSEKEEPING_PERIOD, self.housekeeping),
                self._every(LOG_ROTATION_PERIOD, self.rotate_logs),
            ]
            if self.config.network is not None:
                loops.append(self._configure_network(self.config.network))
            if self.static is not None:
                loops.append(self.static.run(self._static_pods_changed))
            if self.serving_certificate is not None:
                loops.append(self.serving_certificate.run())
            if self.server is not None:
                await self.server.start()
            else:
                log.warning(
                    "no --tls-cert-file nor --rotate-server-certificates: the kubelet server "
                    "is off, so kubectl logs, exec and "
                    "port-forward cannot reach this node's pods"
                )
            try:
                await asyncio.gather(*loops)
            finally:
                await self._shutdown()

    async def _shutdown(self) -> None:
        await self.workers.close()
        await self.probes.close()
        await self.volumes.close()
        if self.server is not None:
            await self.server.stop()
        if self.cni_agent is not None:
            await self.cni_agent.stop()
        await self.informers.shutdown()
        await self.cri.close()

    async def _wait_for_runtime(self) -> None:
        while True:
            try:
                version = await self.cri.version()
            except CRIError as error:
                log.info("waiting for the container runtime: %s", error)
                await self.clock.sleep(RUNTIME_WAIT_PERIOD)
                continue
            log.info("container runtime %s %s", version.runtime_name, version.runtime_version)
            self.runtime_type = version.runtime_name
            return

    async def _every(self, period: float, work: Callable[[], Awaitable[None]]) -> None:
        while True:
            try:
                await work()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed", getattr(work, "__name__", "periodic work"))
            await self.clock.sleep(period)

    # Pod sources.

    def _pod_added(self, pod: Pod) -> None:
        if not mirror.is_mirror_pod(pod):
            self.workers.update_pod(pod)

    def _pod_updated(self, _: Pod, pod: Pod) -> None:
        self._pod_added(pod)

    def _pod_deleted(self, pod: Pod | DeletedFinalStateUnknown[Pod]) -> None:
        obj = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        if not mirror.is_mirror_pod(obj):
            self.workers.update_pod(obj, removed=True)

    def _static_pods_changed(self, pods: Sequence[Pod]) -> None:
        current = {p.metadata.uid or "": p for p in pods}
        for uid, pod in self.static_pods.items():
            if uid not in current:
                self.workers.update_pod(pod, removed=True)
        self.static_pods = current
        for pod in pods:
            self.workers.update_pod(pod)

    def desired_pods(self) -> list[Pod]:
        """The pods this node should run: its API pods (mirrors excluded) and static pods."""
        api = [p for p in self.pods_informer.lister.list() if not mirror.is_mirror_pod(p)]
        return [*api, *self.static_pods.values()]

    # The kubelet server's view (server.PodLookup).

    def pods(self) -> list[Pod]:
        return self.desired_pods()

    def find_pod(self, namespace: str, name: str) -> Pod | None:
        return next(
            (
                p
                for p in self.desired_pods()
                if p.metadata.namespace == namespace and p.metadata.name == name
            ),
            None,
        )

    def pod_status(self, pod: Pod) -> PodStatus:
        return self.statuses.get(pod.metadata.uid or "") or pod.status or PodStatus()

    async def running_container_id(self, pod_uid: str, container: str) -> str | None:
        state = await self.runtime.observe(pod_uid)
        running = [c for c in state.containers if c.name == container and c.state == "running"]
        return max(running, key=age).id if running else None

    def _running_pods(self) -> list[RunningPod]:
        """The pods the kubelet runs, with the runtime's last view of each (stats)."""
        states = self.pleg.pods
        return [
            (pod, states[pod.metadata.uid or ""])
            for pod in self.desired_pods()
            if (pod.metadata.uid or "") in states
        ]

    def sandbox_id(self, pod_uid: str) -> str | None:
        state = self.pleg.pods.get(pod_uid)
        sandbox = state.sandbox if state is not None else None
        return sandbox.id if sandbox is not None and sandbox.ready else None

    # The pod workers' syncer (podworkers.PodSyncer).

    async def sync_pod(self, pod: Pod) -> SyncOutcome:
        uid = pod.metadata.uid or ""
        if is_static_pod(pod) and self._status_target(pod) is None:
            await self.mirrors.create(pod)
        state = await self.runtime.observe(uid)
        status = self._status(pod, state)
        # A new pod's first status (Pending, ContainerCreating) would only delay its start:
        # it is sent after the runtime's work, or if that fails.
        fresh = self.statuses.get(uid) is None and not state.sandboxes
        if not fresh or status.phase in TERMINAL_PHASES:
            await self._send(pod, status)
        if status.phase in TERMINAL_PHASES:
            return SyncOutcome(terminal=True)
        try:
            result = await self._run_pod(pod, state)
        except Exception:
            if fresh:
                await self._send(pod, status)
            raise
        self._start_failures[uid] = dict(result.start_failures)
        state = await self.runtime.observe(uid)
        self.pleg.observed(state)
        await self._report(pod, state)
        await self.runtime.record_sandbox(uid)
        self.probes.poke(uid)
        return SyncOutcome(resync_after=result.retry_after)

    async def _run_pod(self, pod: Pod, state: PodRuntimeState) -> SyncResult:
        """The pod's network, volumes and probes, then the runtime manager's sync."""
        uid = pod.metadata.uid or ""
        if not _host_network(pod) and self.config.network is not None and not self.pod_cidr:
            self.recorder.event(
                pod, "Warning", "NetworkNotReady", "network is not ready: no pod CIDR yet"
            )
            raise NetworkNotReady(f"network is not ready for pod {uid}: the node has no podCIDR")
        try:
            paths = await self.volumes.setup(pod, self.objects)
        except VolumeError as error:
            self.recorder.event(pod, "Warning", "FailedMount", str(error))
            raise
        self.probes.add_pod(pod)
        unhealthy = frozenset(self._unhealthy.pop(uid, set()))
        return await self.runtime.sync_pod(
            pod,
            state,
            PodInputs(
                volume_paths=paths,
                env=self.objects,
                unhealthy=unhealthy,
                node_allocatable=self.node_status.allocatable(),
            ),
        )

    async def sync_terminating_pod(self, pod: Pod, grace_seconds: int) -> None:
        uid = pod.metadata.uid or ""
        await self.probes.remove_pod(uid)
        state = await self.runtime.observe(uid)
        await self.runtime.kill_pod(pod, state, grace_seconds)
        if self._in_api(pod):
            await self._report(pod, await self.runtime.observe(uid), terminal=True)

    async def sync_terminated_pod(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        await self.volumes.teardown(uid)
        await self.runtime.prune(await self.runtime.observe(uid))

    async def sync_removed_pod(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        await self.runtime.remove_pod(await self.runtime.observe(uid))
        self.pleg.observed(await self.runtime.observe(uid))
        self._forget(pod)
        if pod.metadata.deletion_timestamp is not None and not is_static_pod(pod):
            await delete_pod_now(
                self.client, pod.metadata.namespace or "", pod.metadata.name or "", uid
            )

    def _forget(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        options = self.config.runtime
        shutil.rmtree(options.pod_dir(uid), ignore_errors=True)
        shutil.rmtree(
            options.pod_log_dir(pod.metadata.namespace or "", pod.metadata.name or "", uid),
            ignore_errors=True,
        )
        self.statuses.forget(uid)
        self.backoff.forget_pod(uid)
        self._start_failures.pop(uid, None)
        self._unhealthy.pop(uid, None)

    async def _report(
        self, pod: Pod, state: PodRuntimeState, *, terminal: bool = False
    ) -> PodStatus:
        """Compute the pod's status from ``state`` and send it if it changed."""
        status = self._status(pod, state, terminal=terminal)
        await self._send(pod, status)
        return status

    def _status(self, pod: Pod, state: PodRuntimeState, *, terminal: bool = False) -> PodStatus:
        uid = pod.metadata.uid or ""
        seen = Observation(
            now=self.clock.now(),
            node_ips=self.config.node.node_ips,
            containers=state.containers,
            sandbox_ready=state.sandbox is not None and state.sandbox.ready,
            pod_ips=state.pod_ips,
            readiness=self.probes.verdicts(ProbeType.READINESS),
            startup=self.probes.verdicts(ProbeType.STARTUP),
            start_failures=self._start_failures.get(uid, {}),
            terminal=terminal,
            runtime_type=self.runtime_type,
        )
        return generate_pod_status(pod, seen, self.statuses.get(uid))

    async def _send(self, pod: Pod, status: PodStatus) -> None:
        target = self._status_target(pod)
        if target is not None:
            await self.statuses.set(pod, status, target)

    def _status_target(self, pod: Pod) -> Pod | None:
        """The API object a pod's status is written to: itself, or a static pod's mirror."""
        if not is_static_pod(pod):
            return self.pods_informer.lister.get(_key(pod)) or pod
        found = self.pods_informer.lister.get(_key(pod))
        return found if found is not None and mirror.is_mirror_pod(found) else None

    def _in_api(self, pod: Pod) -> bool:
        return is_static_pod(pod) or self.pods_informer.lister.get(_key(pod)) is not None

    # Probes.

    async def _exec_sync(self, container_id: str, command: list[str], seconds: float) -> int:
        result = await self.cri.exec_sync(container_id, command, math.ceil(seconds))
        return result.exit_code

    def _probe_failed(self, update: ProbeUpdate) -> None:
        self._unhealthy.setdefault(update.pod_uid, set()).add(update.container_id)
        self.workers.sync(update.pod_uid)

    def _probe_changed(self, update: ProbeUpdate) -> None:
        self.workers.sync(update.pod_uid)

    # Node-level loops.

    async def housekeeping(self) -> None:
        """One pass of upstream's HandlePodCleanups; see the module docstring."""
        desired = self.desired_pods()
        uids = {p.metadata.uid or "" for p in desired}
        self.workers.forget_missing(uids)
        known = uids | self.workers.known()
        for uid, state in list(self.pleg.pods.items()):
            if uid not in known and (state.sandboxes or state.containers):
                log.info("removing orphaned pod %s/%s (%s)", state.namespace, state.name, uid)
                await self.runtime.kill_pod(None, state, None)
                await self.runtime.remove_pod(state)
        for uid in self.volumes.pods_on_disk() - known:
            await self.volumes.teardown(uid)
            shutil.rmtree(self.config.runtime.pod_dir(uid), ignore_errors=True)
        mirrors = [p for p in self.pods_informer.lister.list() if mirror.is_mirror_pod(p)]
        await self.mirrors.reconcile(list(self.static_pods.values()), mirrors)
        self.backoff.gc()

    async def rotate_logs(self) -> None:
        options = self.config.runtime
        running = [
            (
                container.id,
                options.pod_log_dir(state.namespace, state.name, uid)
                / container.name
                / f"{container.restart_count}.log",
            )
            for uid, state in self.pleg.pods.items()
            for container in state.containers
            if container.state == "running"
        ]
        await self.log_rotator.rotate(running)

    async def _configure_network(self, network: NetworkOptions) -> None:
        """Wait for the Node's podCIDR, then configure the pod network once."""
        while True:
            node = self.node_status.node()
            cidr = node.spec.pod_cidr if node is not None and node.spec is not None else None
            if cidr:
                break
            self.node_status.set_network_error("the node has no podCIDR yet")
            await self.clock.sleep(NETWORK_POLL_PERIOD)
        if network.plugin is not None:
            install_plugins(network.bin_dir)
            if network.plugin == "kubelab":
                self.cni_agent = AgentProcess(network.agent_socket)
                await self.cni_agent.start()
            conflist = render_netconf(
                cidr,
                plugin="reference" if network.plugin == "reference" else "kubelab",
                cluster_cidr=network.cluster_cidr,
                data_dir=network.data_dir,
                agent_socket=network.agent_socket,
            )
            write_netconf(network.conf_dir, conflist)
        await self.cri.update_runtime_config(cidr)
        self.pod_cidr = cidr
        self.node_status.set_network_error(None)
        try:  # Ready now, not at the next status period (which retries anyway)
            await self.node_status.sync_status()
        except (ApiError, ClientError) as error:
            log.warning("reporting the node Ready: %s", error)
        log.info("pod network configured for %s", cidr)
        for pod in self.desired_pods():
            self.workers.sync(pod.metadata.uid or "")
        if self.cni_agent is not None:
            await self.cni_agent.supervise()


def _key(pod: Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


def _host_network(pod: Pod) -> bool:
    return bool(pod.spec and pod.spec.host_network)
