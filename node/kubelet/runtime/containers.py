"""The CRI config of a container: upstream's ``generateContainerConfig`` with ``makeMounts``
and ``generateLinuxContainerConfig``.

From the pod, the container, its resolved environment (``envvars.container_env``) and the
host paths of the pod's volumes (the volume manager's) it builds what ``CreateContainer``
needs:

- command and args with ``$(VAR)`` expanded against the environment;
- mounts: each ``volumeMount`` (``subPath`` or ``subPathExpr`` inside the volume, created
  when missing; read-only; propagation), the pod's managed /etc/hosts unless the container
  mounts its own, and the termination-message file, a fresh host file per restart under
  ``<pod dir>/containers/<name>/``;
- the log path ``<name>/<restart>.log``, relative to the sandbox's log directory;
- Linux resources (``linux_resources``): CPU shares from the request, CFS quota from the
  limit (period 100ms), the memory limit, and the OOM score adjustment of the pod's QoS
  class (upstream's ``GetContainerOOMScoreAdjust``);
- the security context, container settings over the pod's
  (``DetermineEffectiveSecurityContext``), with ``runAsNonRoot`` checked against the user
  the container will run as; the default masked and read-only /proc paths unless the
  container is privileged or asks for ``procMount: Unmasked``.

Creating the subPath directories and the termination-message file is the only I/O.  What
cannot be honoured raises ``ConfigError`` with upstream's message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from kube.api.kinds.core_v1.pod import Container, Pod, SecurityContext, qos_class
from kube.api.kinds.core_v1.volume import VolumeMount, parse_quantity
from node.cri.pb import api_pb2 as pb
from node.kubelet.runtime.envvars import ConfigError, expand
from node.kubelet.runtime.labels import container_annotations, container_labels
from node.kubelet.runtime.options import NodeRuntimeOptions
from node.kubelet.runtime.sandbox import namespace_options, seccomp_profile, supplemental_groups

ETC_HOSTS = "/etc/hosts"
CPU_PERIOD = 100_000
MIN_CPU_QUOTA = 1000
MIN_SHARES, MAX_SHARES, SHARES_PER_CPU = 2, 262_144, 1024
GUARANTEED_OOM_SCORE_ADJ, BEST_EFFORT_OOM_SCORE_ADJ = -997, 1000
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# What runc hides from unprivileged containers (upstream ``securitycontext`` defaults).
DEFAULT_MASKED_PATHS = (
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
)
DEFAULT_READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
_PROPAGATION = {
    None: pb.PROPAGATION_PRIVATE,
    "None": pb.PROPAGATION_PRIVATE,
    "HostToContainer": pb.PROPAGATION_HOST_TO_CONTAINER,
    "Bidirectional": pb.PROPAGATION_BIDIRECTIONAL,
}


def termination_log_path(
    options: NodeRuntimeOptions, pod_uid: str, container: str, restart_count: int
) -> Path:
    """The host file the container's termination message is written to."""
    return options.pod_dir(pod_uid) / "containers" / container / f"termination-log-{restart_count}"


def _sub_path(mount: VolumeMount, env: Mapping[str, str]) -> str:
    """The mount's subPath (``subPathExpr`` expanded), checked to stay relative and
    without ``..``."""
    sub_path = mount.sub_path or expand(mount.sub_path_expr or "", env)
    if os.path.isabs(sub_path):
        raise ConfigError(f"error SubPath `{sub_path}` must not be an absolute path")
    if ".." in sub_path.split("/"):
        raise ConfigError(f"unable to provision SubPath `{sub_path}`: must not contain '..'")
    return sub_path


def _ensure_sub_path(volume: Path, sub_path: str) -> Path:
    """``volume/sub_path``, created with the volume's mode when missing.  It must resolve
    inside the volume (a symlink may not lead out of it), checked before anything is made.
    The check is not atomic: whoever can write the volume while this runs is trusted."""
    target = volume / sub_path
    resolved, base = target.resolve(), volume.resolve()
    if resolved != base and base not in resolved.parents:
        raise ConfigError(f"subpath {sub_path!r} of volume {str(volume)!r} is outside of it")
    missing = [d for d in (resolved, *resolved.parents) if base in d.parents and not d.exists()]
    try:
        mode = volume.stat().st_mode & 0o7777
        for directory in reversed(missing):
            directory.mkdir()
            directory.chmod(mode)
    except OSError as error:
        raise ConfigError(f'failed to mkdir "{target}": {error.strerror}') from None
    return target


def _volume_mounts(
    container: Container, env: Mapping[str, str], volume_paths: Mapping[str, Path]
) -> list[pb.Mount]:
    mounts = []
    for mount in container.volume_mounts or ():
        host = volume_paths.get(mount.name or "")
        if host is None:
            raise ConfigError(
                f'cannot find volume "{mount.name}" to mount into container "{container.name}"'
            )
        sub_path = _sub_path(mount, env)
        if sub_path:
            host = _ensure_sub_path(host, sub_path)
        propagation = _PROPAGATION.get(mount.mount_propagation)
        if propagation is None:
            raise ConfigError(f"invalid propagation mode: {mount.mount_propagation}")
        mounts.append(
            pb.Mount(
                container_path=mount.mount_path or "",
                host_path=str(host),
                readonly=bool(mount.read_only),
                propagation=propagation,
            )
        )
    return mounts


def _termination_mount(
    pod: Pod, container: Container, restart_count: int, options: NodeRuntimeOptions
) -> pb.Mount | None:
    """A fresh, world-writable host file mounted at the termination-message path."""
    if not container.termination_message_path:
        return None
    path = termination_log_path(
        options, pod.metadata.uid or "", container.name or "", restart_count
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        path.chmod(0o666)
    except OSError as error:
        message = f'failed to create termination message file "{path}": {error.strerror}'
        raise ConfigError(message) from None
    return pb.Mount(container_path=container.termination_message_path, host_path=str(path))


def _cpu_shares(milli_cpu: int) -> int:
    if milli_cpu == 0:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, milli_cpu * SHARES_PER_CPU // 1000))


def _cpu_quota(milli_cpu: int) -> int:
    if milli_cpu == 0:
        return 0
    return max(MIN_CPU_QUOTA, milli_cpu * CPU_PERIOD // 1000)


def _amount(resources: Mapping[str, object] | None, name: str, milli: bool) -> int:
    quantity = parse_quantity((resources or {}).get(name))
    if quantity is None:
        return 0
    return quantity.milli_value() if milli else quantity.value()


def _is_critical(pod: Pod) -> bool:
    """Upstream ``IsCriticalPod``: static and mirror pods, and system-critical priorities."""
    annotations = pod.metadata.annotations or {}
    source = annotations.get(CONFIG_SOURCE_ANNOTATION)
    static = source is not None and source != "api"
    priority = pod.spec.priority if pod.spec else None
    critical_priority = priority is not None and priority >= SYSTEM_CRITICAL_PRIORITY
    return static or MIRROR_ANNOTATION in annotations or critical_priority


def oom_score_adj(pod: Pod, container: Container, memory_capacity: int) -> int:
    """Guaranteed and critical pods -997, BestEffort 1000, Burstable by the share of the
    node's memory the container requests, within [3, 999]."""
    qos = qos_class(pod.spec)
    if _is_critical(pod) or qos == "Guaranteed":
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == "BestEffort":
        return BEST_EFFORT_OOM_SCORE_ADJ
    requests = container.resources.requests if container.resources else None
    request = _amount(requests, "memory", milli=False)
    score = 1000 - (1000 * request) // max(memory_capacity, 1)
    floor = 1000 + GUARANTEED_OOM_SCORE_ADJ
    if score < floor:
        return floor
    return BEST_EFFORT_OOM_SCORE_ADJ - 1 if score == BEST_EFFORT_OOM_SCORE_ADJ else score


def node_memory() -> int:
    """The machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def linux_resources(
    pod: Pod, container: Container, *, memory_capacity: int | None = None
) -> pb.LinuxContainerResources:
    """The container's cgroup limits; ``memory_capacity`` (the node's memory, bytes) is
    read from the machine when not given."""
    resources = container.resources
    requests = resources.requests if resources else None
    limits = resources.limits if resources else None
    cpu_request = _amount(requests, "cpu", milli=True)
    cpu_limit = _amount(limits, "cpu", milli=True)
    capacity = memory_capacity if memory_capacity is not None else node_memory()
    return pb.LinuxContainerResources(
        cpu_shares=_cpu_shares(cpu_request or cpu_limit),
        cpu_quota=_cpu_quota(cpu_limit),
        cpu_period=CPU_PERIOD,
        memory_limit_in_bytes=_amount(limits, "memory", milli=False),
        oom_score_adj=oom_score_adj(pod, container, capacity),
    )


def _effective(pod: Pod, container: Container) -> SecurityContext:
    """The container's security context with the pod's user, group, non-root and seccomp
    settings where the container has none."""
    own = container.security_context or SecurityContext()
    pod_context = pod.spec.security_context if pod.spec else None
    if pod_context is None:
        return own
    return SecurityContext(
        capabilities=own.capabilities,
        privileged=own.privileged,
        se_linux_options=own.se_linux_options or pod_context.se_linux_options,
        run_as_user=own.run_as_user if own.run_as_user is not None else pod_context.run_as_user,
        run_as_group=(
            own.run_as_group if own.run_as_group is not None else pod_context.run_as_group
        ),
        run_as_non_root=(
            own.run_as_non_root if own.run_as_non_root is not None else pod_context.run_as_non_root
        ),
        read_only_root_filesystem=own.read_only_root_filesystem,
        allow_privilege_escalation=own.allow_privilege_escalation,
        proc_mount=own.proc_mount,
        seccomp_profile=own.seccomp_profile or pod_context.seccomp_profile,
    )


def _check_non_root(
    pod: Pod, container: Container, context: SecurityContext, image_uid: int | None, image_user: str
) -> None:
    """Upstream ``verifyRunAsNonRoot``."""
    if not context.run_as_non_root:
        return
    meta = pod.metadata
    where = f'(pod: "{meta.name}_{meta.namespace}({meta.uid})", container: {container.name})'
    if context.run_as_user is not None:
        if context.run_as_user == 0:
            raise ConfigError(f"container's runAsUser breaks non-root policy {where}")
        return
    if image_uid == 0:
        raise ConfigError(f"container has runAsNonRoot and image will run as root {where}")
    if image_uid is None and image_user:
        raise ConfigError(
            f"container has runAsNonRoot and image has non-numeric user ({image_user}), "
            f"cannot verify user is non-root {where}"
        )


def _security_context(
    pod: Pod,
    container: Container,
    options: NodeRuntimeOptions,
    image_uid: int | None,
    image_user: str,
    pid_target: str | None,
) -> pb.LinuxContainerSecurityContext:
    context = _effective(pod, container)
    _check_non_root(pod, container, context, image_uid, image_user)
    pod_context = pod.spec.security_context if pod.spec else None
    capabilities = context.capabilities
    unmasked = bool(context.privileged) or context.proc_mount == "Unmasked"
    namespaces = namespace_options(pod)
    if pid_target is not None and namespaces.pid == pb.CONTAINER:
        namespaces.pid, namespaces.target_id = pb.TARGET, pid_target
    result = pb.LinuxContainerSecurityContext(
        capabilities=pb.Capability(
            add_capabilities=(capabilities.add if capabilities else None) or [],
            drop_capabilities=(capabilities.drop if capabilities else None) or [],
        ),
        privileged=bool(context.privileged),
        namespace_options=namespaces,
        readonly_rootfs=bool(context.read_only_root_filesystem),
        supplemental_groups=supplemental_groups(pod),
        no_new_privs=context.allow_privilege_escalation is False,
        masked_paths=() if unmasked else DEFAULT_MASKED_PATHS,
        readonly_paths=() if unmasked else DEFAULT_READONLY_PATHS,
        seccomp=seccomp_profile(
            options,
            container.security_context.seccomp_profile if container.security_context else None,
            pod_context.seccomp_profile if pod_context else None,
        ),
    )
    if context.run_as_user is not None:
        result.run_as_user.value = context.run_as_user
    if context.run_as_group is not None:
        result.run_as_group.value = context.run_as_group
    return result


def container_config(
    pod: Pod,
    container: Container,
    *,
    restart_count: int,
    env: Sequence[pb.KeyValue],
    volume_paths: Mapping[str, Path],
    etc_hosts: Path | None,
    options: NodeRuntimeOptions,
    image_ref: str | None = None,
    image_uid: int | None = None,
    image_user: str = "",
    memory_capacity: int | None = None,
    pid_target: str | None = None,
) -> pb.ContainerConfig:
    """The config to create the container with.

    ``image_ref`` is the pulled image's reference (the spec's image when not given);
    ``image_uid`` / ``image_user`` the user the image runs as, for the ``runAsNonRoot``
    check (unknown when not given); ``pid_target`` the id of the container whose process
    namespace an ephemeral container joins (``targetContainerName``), unless the pod
    shares one process namespace or the node's anyway.  Creates the subPath directories and the
    termination-message file; raises ConfigError when a mount or the security context
    cannot be honoured.
    """
    env_map = {kv.key: kv.value for kv in env}
    mounts = _volume_mounts(container, env_map, volume_paths)
    if etc_hosts is not None and all(m.container_path != ETC_HOSTS for m in mounts):
        mounts.append(pb.Mount(container_path=ETC_HOSTS, host_path=str(etc_hosts)))
    linux = pb.LinuxContainerConfig(
        resources=linux_resources(pod, container, memory_capacity=memory_capacity),
        security_context=_security_context(
            pod, container, options, image_uid, image_user, pid_target
        ),
    )
    termination = _termination_mount(pod, container, restart_count, options)
    if termination is not None:
        mounts.append(termination)
    name = container.name or ""
    return pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=name, attempt=restart_count),
        image=pb.ImageSpec(image=image_ref or container.image or ""),
        command=[expand(part, env_map) for part in container.command or ()],
        args=[expand(part, env_map) for part in container.args or ()],
        working_dir=container.working_dir or "",
        envs=list(env),
        mounts=mounts,
        labels=container_labels(pod, container),
        annotations=container_annotations(pod, container, restart_count),
        log_path=f"{name}/{restart_count}.log",
        stdin=bool(container.stdin),
        stdin_once=bool(container.stdin_once),
        tty=bool(container.tty),
        linux=linux,
    )
