"""Pods, Namespaces and NetworkPolicies for the agent's tests, as the API server stores them.

Policies are written as manifests (YAML, as on kubernetes.io) and defaulted as the API server
defaults them, so a test reads like the policy a user applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kube.api.codec import from_builtins, load_yaml_documents
from kube.api.kinds.core_v1.cluster import NAMESPACE_NAME_LABEL, Namespace
from kube.api.kinds.core_v1.pod import Container, ContainerPort, Pod, PodIP, PodStatus
from kube.api.kinds.networking_v1 import NetworkPolicy
from kube.api.meta_v1 import ObjectMeta
from kube.api.walk import set_defaults
from tests.builders import pod as build_pod


def pod(
    namespace: str,
    name: str,
    ip: str | None,
    node: str = "node1",
    labels: Mapping[str, str] | None = None,
    ports: Sequence[tuple[str, int, str]] = (),
    phase: str = "Running",
    host_network: bool | None = None,
) -> Pod:
    """A running pod with address ``ip`` on ``node``; ``ports``: its one container's named
    ports as ``(name, number, protocol)``."""
    container = Container(
        name="c",
        image="busybox",
        ports=[ContainerPort(name=n, container_port=p, protocol=proto) for n, p, proto in ports]
        or None,
    )
    built = build_pod(
        name,
        namespace,
        labels=labels or {"pod": name},
        node_name=node,
        containers=[container],
        host_network=host_network,
    )
    built.status = PodStatus(
        phase=phase, pod_ip=ip, pod_ips=[PodIP(ip=ip)] if ip is not None else None
    )
    return built


def namespace(name: str, labels: Mapping[str, str] | None = None) -> Namespace:
    """A namespace with the label the API server adds to every one, and ``labels``."""
    return Namespace(
        metadata=ObjectMeta(name=name, labels={NAMESPACE_NAME_LABEL: name, **(labels or {})})
    )


def policy(manifest: str) -> NetworkPolicy:
    """A NetworkPolicy from its YAML manifest, defaulted as the API server stores it."""
    (raw,) = load_yaml_documents(manifest)
    decoded = from_builtins(raw, NetworkPolicy).obj
    set_defaults(decoded)
    return decoded


__all__ = ["namespace", "pod", "policy"]
