"""What the runtime manager needs to know about its node, fixed at kubelet start."""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class NodeRuntimeOptions:
    """Node facts the sandbox and container configs are built from.

    ``root_dir`` is the kubelet's (``/var/lib/kubelet``): a pod's files live under
    ``<root_dir>/pods/<uid>/`` (``volumes/``, ``etc-hosts``, ``containers/<name>/<id>``
    termination-log files).  Pod logs go under ``pod_logs_dir`` as
    ``<namespace>_<name>_<uid>/<container>/<restart>.log``.  ``cgroup_root`` is the cgroup
    path every pod cgroup is created under (QoS classes below it, as upstream's
    ``kubepods``); ``resolv_conf`` is the node's, which ``dnsPolicy: Default`` pods inherit.
    ``sandbox_events``: record ``SandboxCreated`` and ``AddedInterface`` Events for each new
    sandbox (steps of ``kubelab story``; bench/story.py turns them off to measure their cost).
    """

    node_name: str
    node_ips: tuple[str, ...]
    root_dir: Path
    pod_logs_dir: Path = Path("/var/log/pods")
    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = "cluster.local"
    resolv_conf: Path = Path("/etc/resolv.conf")
    cgroup_root: str = "/kubepods"
    sandbox_events: bool = True

    def pod_dir(self, pod_uid: str) -> Path:
        return self.root_dir / "pods" / pod_uid

    def pod_log_dir(self, namespace: str, name: str, pod_uid: str) -> Path:
        return self.pod_logs_dir / f"{namespace}_{name}_{pod_uid}"
