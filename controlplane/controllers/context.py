"""What every controller is given: the API, the shared informers, events, time and options."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kube.client.events import EventRecorder
from kube.client.informers import SharedInformerFactory
from kube.client.interface import ApiClient
from kube.clock import Clock


@dataclass(frozen=True)
class AutoscalerOptions:
    """The horizontal pod autoscaler's flags (upstream's --horizontal-pod-autoscaler-*)."""

    sync_period: float = 15.0
    """Seconds between two syncs of an HPA."""
    downscale_stabilization: float = 300.0
    """Seconds of recommendations a scale-down takes the highest of (an HPA's own
    behavior.scaleDown.stabilizationWindowSeconds wins)."""
    tolerance: float = 0.1
    """How far from 1 a metric's ratio to its target must be for the HPA to act."""
    cpu_initialization_period: float = 300.0
    """Seconds after a pod starts during which its CPU samples may be skipped."""
    initial_readiness_delay: float = 30.0
    """Seconds after a pod starts during which its readiness changes count as initial."""


@dataclass(frozen=True)
class ControllerOptions:
    """The controller-manager's flags that controllers read."""

    cluster_cidr: str = "10.244.0.0/16"
    node_cidr_mask_size: int = 24
    service_cluster_ip_range: str = "10.96.0.0/12"
    node_monitor_grace_period: float = 40.0
    """Seconds without a Lease renewal or status update before a node is NotReady."""
    node_eviction_rate: float = 0.1
    """Nodes per second whose pods may be evicted (upstream --node-eviction-rate)."""
    terminated_pod_gc_threshold: int = 12500
    cluster_signing_cert_file: Path | None = None
    cluster_signing_key_file: Path | None = None
    """The CA csrsigning signs with (upstream --cluster-signing-cert-file/-key-file)."""
    cluster_signing_duration: float = 365 * 24 * 3600.0
    """The longest lifetime csrsigning gives a certificate, in seconds."""
    approve_kubelet_serving: bool = False
    """csrapproving approves kubelets' serving certificate requests (see there)."""
    autoscaler: AutoscalerOptions = field(default_factory=AutoscalerOptions)
    concurrent_syncs: dict[str, int] = field(default_factory=dict)
    """Workers per controller name; 5 when absent."""

    def workers(self, controller: str) -> int:
        return self.concurrent_syncs.get(controller, 5)


@dataclass(frozen=True)
class ControllerContext:
    client: ApiClient
    informers: SharedInformerFactory
    recorder: EventRecorder
    clock: Clock
    options: ControllerOptions = field(default_factory=ControllerOptions)
