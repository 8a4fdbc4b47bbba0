"""The CRI config of a pod's sandbox: upstream's ``generatePodSandboxConfig``.

The sandbox holds what the pod's containers share: its identity (metadata with the attempt
number, labels, annotations), hostname, log directory, DNS, host ports, cgroup parent,
sysctls and the pod-level security settings.  The security pieces the containers also use
(namespace sharing, seccomp profiles, supplemental groups) are here too, so both configs
read the pod the same way.
"""

from __future__ import annotations

from kube.api.kinds.core_v1.pod import Container, Pod, SeccompProfile
from node.cri.pb import api_pb2 as pb
from node.kubelet.runtime.cgroups import pod_cgroup_parent
from node.kubelet.runtime.dns import dns_config
from node.kubelet.runtime.envvars import ConfigError
from node.kubelet.runtime.hosts import pod_hostname
from node.kubelet.runtime.labels import sandbox_annotations, sandbox_labels
from node.kubelet.runtime.options import NodeRuntimeOptions

MAX_FQDN = 64
_PROTOCOLS = {"TCP": pb.TCP, "UDP": pb.UDP, "SCTP": pb.SCTP}
_PROFILE_TYPES = {
    "RuntimeDefault": pb.SecurityProfile.RuntimeDefault,
    "Unconfined": pb.SecurityProfile.Unconfined,
    "Localhost": pb.SecurityProfile.Localhost,
}


def all_containers(pod: Pod) -> list[Container]:
    """Init, regular and ephemeral containers."""
    spec = pod.spec
    if spec is None:
        return []
    return [
        *(spec.init_containers or ()),
        *(spec.containers or ()),
        *(spec.ephemeral_containers or ()),
    ]


def namespace_options(pod: Pod) -> pb.NamespaceOption:
    """Upstream ``NamespacesForPod``: host namespaces when asked for, one PID namespace per
    container unless the pod shares its process namespace."""
    spec = pod.spec
    if spec is None:
        return pb.NamespaceOption(pid=pb.CONTAINER)
    pid = pb.CONTAINER
    if spec.host_pid:
        pid = pb.NODE
    elif spec.share_process_namespace:
        pid = pb.POD
    return pb.NamespaceOption(
        network=pb.NODE if spec.host_network else pb.POD,
        pid=pid,
        ipc=pb.NODE if spec.host_ipc else pb.POD,
    )


def seccomp_profile(
    options: NodeRuntimeOptions, *profiles: SeccompProfile | None
) -> pb.SecurityProfile:
    """The first profile given (container's before pod's), Unconfined when none is: the
    kubelet's default without ``--seccomp-default``.  Localhost profiles are files under
    ``<root_dir>/seccomp``."""
    chosen = next((p for p in profiles if p is not None and p.type), None)
    if chosen is None:
        return pb.SecurityProfile(profile_type=pb.SecurityProfile.Unconfined)
    kind = _PROFILE_TYPES.get(chosen.type or "")
    if kind is None:
        raise ConfigError(f"unknown seccomp profile type: {chosen.type}")
    if kind != pb.SecurityProfile.Localhost:
        return pb.SecurityProfile(profile_type=kind)
    if not chosen.localhost_profile:
        raise ConfigError("localhostProfile must be set if seccompProfile type is Localhost.")
    path = options.root_dir / "seccomp" / chosen.localhost_profile
    return pb.SecurityProfile(profile_type=kind, localhost_ref=str(path))


def supplemental_groups(pod: Pod) -> list[int]:
    """The pod's fsGroup, then its supplementalGroups (upstream's order)."""
    context = pod.spec.security_context if pod.spec else None
    if context is None:
        return []
    groups = [context.fs_group] if context.fs_group is not None else []
    return groups + list(context.supplemental_groups or ())


def port_mappings(pod: Pod) -> list[pb.PortMapping]:
    """Every ``hostPort`` of the regular containers."""
    spec = pod.spec
    mappings = []
    for container in (spec.containers if spec else None) or ():
        for port in container.ports or ():
            if not port.host_port:
                continue
            protocol = _PROTOCOLS.get(port.protocol or "TCP")
            if protocol is None:
                raise ConfigError(f"unknown protocol {port.protocol!r} of a container port")
            mappings.append(
                pb.PortMapping(
                    protocol=protocol,
                    container_port=port.container_port or 0,
                    host_port=port.host_port,
                    host_ip=port.host_ip or "",
                )
            )
    return mappings


def _is_privileged(container: Container) -> bool:
    context = container.security_context
    return bool(context and context.privileged)


def _linux_config(pod: Pod, options: NodeRuntimeOptions) -> pb.LinuxPodSandboxConfig:
    context = pod.spec.security_context if pod.spec else None
    security = pb.LinuxSandboxSecurityContext(
        namespace_options=namespace_options(pod),
        privileged=any(_is_privileged(c) for c in all_containers(pod)),
        supplemental_groups=supplemental_groups(pod),
        seccomp=seccomp_profile(options, context.seccomp_profile if context else None),
    )
    if context is not None and context.run_as_user is not None:
        security.run_as_user.value = context.run_as_user
    if context is not None and context.run_as_group is not None:
        security.run_as_group.value = context.run_as_group
    sysctls = {s.name or "": s.value or "" for s in (context.sysctls if context else None) or ()}
    return pb.LinuxPodSandboxConfig(
        cgroup_parent=pod_cgroup_parent(pod, options),
        security_context=security,
        sysctls=sysctls,
    )


def _hostname(pod: Pod, options: NodeRuntimeOptions) -> str:
    """The sandbox's hostname: none for host-network pods, the FQDN with
    ``setHostnameAsFQDN`` (at most 64 characters)."""
    spec = pod.spec
    if spec is not None and spec.host_network:
        return ""
    hostname, domain = pod_hostname(pod, options)
    if spec is None or not spec.set_hostname_as_fqdn or not domain:
        return hostname
    fqdn = f"{hostname}.{domain}"
    if len(fqdn) > MAX_FQDN:
        raise ConfigError(
            f"failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is "
            f"too long ({MAX_FQDN} characters is the max, {len(fqdn)} characters requested)"
        )
    return fqdn


def sandbox_config(
    pod: Pod, attempt: int, options: NodeRuntimeOptions, *, dns: pb.DNSConfig | None = None
) -> pb.PodSandboxConfig:
    """The config to run the pod's sandbox with.  Raises ConfigError for settings that
    cannot be honoured (an FQDN too long, a Localhost seccomp profile without a name).

    ``dns`` is the pod's DNS config when the caller already computed it with ``dns_config``
    (to record its warning as an event); otherwise it is computed here, warning dropped.
    """
    meta = pod.metadata
    name, namespace, uid = meta.name or "", meta.namespace or "", meta.uid or ""
    if dns is None:
        dns, _warning = dns_config(pod, options)
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name, namespace=namespace, uid=uid, attempt=attempt),
        hostname=_hostname(pod, options),
        log_directory=str(options.pod_log_dir(namespace, name, uid)),
        dns_config=dns,
        port_mappings=port_mappings(pod),
        labels=sandbox_labels(pod),
        annotations=sandbox_annotations(pod),
        linux=_linux_config(pod, options),
    )
