"""PodSecurity: the Pod Security Standards, enforced per namespace from its labels.

A namespace labelled ``pod-security.kubernetes.io/<mode>: <level>`` (modes ``enforce``,
``warn``, ``audit``; levels ``privileged``, ``baseline``, ``restricted``; optionally
``<mode>-version``) has each pod checked against the level:

- **enforce**: a violating pod is refused, 403 ``violates PodSecurity "restricted:latest":
  privileged (container "app" must not set securityContext.privileged=true), ...``; every pod
  checked has the level recorded in its request's audit event
  (``pod-security.kubernetes.io/enforce-policy: restricted:latest``);
- **warn**: the write succeeds with a ``Warning`` header (``would violate PodSecurity ...``),
  which kubectl prints; workload objects (Deployments, Jobs, ...) are warned about for their
  pod template, as upstream, but never refused.  Without a warn label, the warn level is the
  enforce level when that is stricter (upstream's defaulting);
- **audit**: the violations are recorded in the request's audit event
  (``pod-security.kubernetes.io/audit-violations: would violate PodSecurity ...``), for pods
  and workloads alike.

It is a validating plugin: it runs after every mutating one and every mutating webhook, so a
webhook cannot make a pod privileged behind its back.

When a namespace's enforce level changes, the update is answered with warnings naming the
pods already there that the new level would refuse (``existing pods in namespace "x" violate
the new PodSecurity enforce level "restricted:latest"``, then ``web-1 (and 2 other pods):
privileged, runAsNonRoot != true``), read from the server's pods cache; they keep running.

The checks are upstream's (``k8s.io/pod-security-admission/policy``), with their reasons and
details, reported as upstream orders them: the baseline checks by id, then the restricted ones
by id (two of which replace their baseline forms).  ``baseline``: host namespaces, privileged
containers, capabilities beyond the default set, hostPath volumes, host ports, ``procMount``,
Unconfined seccomp, SELinux types and users, unsafe sysctls, Windows host processes.
``restricted`` adds: volume types, ``allowPrivilegeEscalation``, ``runAsNonRoot``,
``runAsUser=0``, a required seccomp profile, and capabilities dropped to ``ALL`` but
``NET_BIND_SERVICE``.  Every version label is read as ``latest``: this server knows one
version of the standards.  A label whose level is not known enforces ``restricted``, as
upstream fails closed.  Namespaces are read from the server's watch cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import Admission, RequestContext
from controlplane.apiserver.storage.watchcache import WatchCache
from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec
from kube.api.kinds.core_v1.volume import Volume
from kube.api.meta_v1 import Resource
from kube.api.scheme import KindInfo

LABEL_PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
ENFORCE_POLICY = LABEL_PREFIX + "enforce-policy"
"""The audit annotation naming the enforce level a pod was checked against."""
AUDIT_VIOLATIONS = LABEL_PREFIX + "audit-violations"
"""The audit annotation listing what the audit level would refuse."""
LEVELS = ("privileged", "baseline", "restricted")

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
RESTRICTED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
VOLUME_SOURCES = [
    (f.name, f.encode_name) for f in msgspec.structs.fields(Volume) if f.name != "name"
]
"""Each volume source's attribute and JSON name, for "uses restricted volume type ..."."""


@dataclass(frozen=True)
class Violation:
    reason: str
    detail: str

    def __str__(self) -> str:
        return f"{self.reason} ({self.detail})" if self.detail else self.reason


def pod_security(namespaces: WatchCache, pods: WatchCache) -> Admission:
    async def validate(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if isinstance(obj, Namespace) and isinstance(old, Namespace) and not ctx.subresource:
            ctx.warnings.extend(_existing_pods(obj, old, pods))
            return
        if operation not in ("CREATE", "UPDATE") or ctx.subresource not in (
            "",
            "ephemeralcontainers",
        ):
            return
        spec, is_pod = _pod_spec(obj)
        if spec is None:
            return
        if operation == "UPDATE" and old is not None and _pod_spec(old)[0] == spec:
            return  # metadata or status only: nothing the standards look at changed
        namespace = await namespaces.lookup("", obj.metadata.namespace or "")
        policy = _policy((namespace.metadata.labels if namespace is not None else None) or {})
        found: dict[str, list[Violation]] = {}

        def violations(mode: str) -> str:
            """The violations of the mode's level, worded (empty if none); each level is
            checked once."""
            level = policy[mode][0]
            if level != "privileged" and level not in found:
                found[level] = check(spec, level)
            return ", ".join(str(v) for v in found.get(level, ()))

        def shown(mode: str) -> str:
            return ":".join(policy[mode])

        name = obj.metadata.name or ""
        refusal = None
        if is_pod:
            ctx.audit_annotations[ENFORCE_POLICY] = shown("enforce")
            if text := violations("enforce"):
                refusal = errors.forbidden(
                    info,
                    name,
                    f'{info.plural} "{name}" is forbidden: violates PodSecurity '
                    f'"{shown("enforce")}": {text}',
                )
        if text := violations("audit"):
            ctx.audit_annotations[AUDIT_VIOLATIONS] = (
                f'would violate PodSecurity "{shown("audit")}": {text}'
            )
        if refusal is not None:
            raise refusal
        if text := violations("warn"):
            ctx.warnings.append(f'would violate PodSecurity "{shown("warn")}": {text}')

    return validate


def _policy(labels: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Each mode's (level, version) from a namespace's labels.  As upstream, a namespace that
    sets an enforce level and no warn level is warned at the enforce level when that is the
    stricter, so that workloads (never enforced) hear what their pods would meet."""
    policy = {mode: _level(labels, mode) for mode in MODES}
    enforce, warn = policy["enforce"], policy["warn"]
    if (
        LABEL_PREFIX + "warn" not in labels
        and LABEL_PREFIX + "enforce" in labels
        and LEVELS.index(enforce[0]) > LEVELS.index(warn[0])
    ):
        version = labels.get(f"{LABEL_PREFIX}warn-version") or enforce[1]
        policy["warn"] = (enforce[0], version)
    return policy


def _level(labels: dict[str, str], mode: str) -> tuple[str, str]:
    level = labels.get(LABEL_PREFIX + mode)
    version = labels.get(f"{LABEL_PREFIX}{mode}-version") or "latest"
    if level is None:
        return "privileged", version
    return (level if level in LEVELS else "restricted"), version


def _pod_spec(obj: Resource) -> tuple[PodSpec | None, bool]:
    """The pod spec to check: a pod's own, or a workload's pod template (CronJobs: two deep)."""
    if isinstance(obj, Pod):
        return obj.spec, True
    holder: Any = getattr(obj, "spec", None)
    job_template = getattr(holder, "job_template", None)
    if job_template is not None:
        holder = getattr(job_template, "spec", None)
    template = getattr(holder, "template", None)
    spec = getattr(template, "spec", None)
    return (spec if isinstance(spec, PodSpec) else None), False


def _existing_pods(namespace: Namespace, old: Namespace, pods: WatchCache) -> list[str]:
    """Upstream's warnings when a namespace's enforce level changes: which of its pods (from
    the pods cache) the new level would refuse, grouped by their violations."""
    level, version = _level(namespace.metadata.labels or {}, "enforce")
    if level == "privileged" or (level, version) == _level(old.metadata.labels or {}, "enforce"):
        return []
    name = namespace.metadata.name or ""
    groups: dict[str, list[str]] = {}
    for pod in sorted(pods.objects(), key=lambda p: p.metadata.name or ""):
        if not isinstance(pod, Pod) or pod.metadata.namespace != name or pod.spec is None:
            continue
        reasons = ", ".join(dict.fromkeys(v.reason for v in check(pod.spec, level)))
        if reasons:
            groups.setdefault(reasons, []).append(pod.metadata.name or "")
    if not groups:
        return []
    warnings = [
        f'existing pods in namespace "{name}" violate the new PodSecurity enforce level '
        f'"{level}:{version}"'
    ]
    for reasons, names in groups.items():
        others = len(names) - 1
        who = (
            f"{names[0]} (and {others} other pod{'s' if others > 1 else ''})"
            if others
            else names[0]
        )
        warnings.append(f"{who}: {reasons}")
    return warnings


def check(spec: PodSpec, level: str) -> list[Violation]:
    """The violations of ``level`` (baseline or restricted), in the order of upstream's ids."""
    checks = sorted(BASELINE.items())
    if level == "restricted":
        checks = [c for c in checks if c[0] not in REPLACED] + sorted(RESTRICTED.items())
    found = []
    for _, run in checks:
        violation = run(spec)
        if violation is not None:
            found.append(violation)
    return found


def _containers(spec: PodSpec) -> list[Container]:
    return [
        *(spec.init_containers or ()),
        *(spec.containers or ()),
        *(spec.ephemeral_containers or ()),
    ]


def _names(kind: str, names: Sequence[str]) -> str:
    quoted = ", ".join(f'"{n}"' for n in names)
    return f"{kind}{'s' if len(names) > 1 else ''} {quoted}"


def _verb(names: Sequence[str], one: str, many: str) -> str:
    return one if len(names) == 1 else many


def _sc(container: Container) -> Any:
    return container.security_context


# Baseline.


def _host_namespaces(spec: PodSpec) -> Violation | None:
    used = [
        f"{name}=true"
        for name, value in (
            ("hostNetwork", spec.host_network),
            ("hostPID", spec.host_pid),
            ("hostIPC", spec.host_ipc),
        )
        if value
    ]
    return Violation("host namespaces", ", ".join(used)) if used else None


def _privileged(spec: PodSpec) -> Violation | None:
    bad = [c.name or "" for c in _containers(spec) if _sc(c) and _sc(c).privileged]
    if not bad:
        return None
    return Violation(
        "privileged", f"{_names('container', bad)} must not set securityContext.privileged=true"
    )


def _capabilities_baseline(spec: PodSpec) -> Violation | None:
    bad: list[str] = []
    added: list[str] = []
    for c in _containers(spec):
        caps = _sc(c).capabilities if _sc(c) else None
        extra = [a for a in (caps.add if caps else None) or () if a not in BASELINE_CAPABILITIES]
        if extra:
            bad.append(c.name or "")
            added += [a for a in extra if a not in added]
    if not bad:
        return None
    return Violation(
        "non-default capabilities",
        f"{_names('container', bad)} must not include "
        + ", ".join(f'"{a}"' for a in added)
        + " in securityContext.capabilities.add",
    )


def _host_path_volumes(spec: PodSpec) -> Violation | None:
    bad = [v.name or "" for v in spec.volumes or () if v.host_path is not None]
    return Violation("hostPath volumes", _names("volume", bad)) if bad else None


def _host_ports(spec: PodSpec) -> Violation | None:
    bad: list[str] = []
    ports: list[str] = []
    for c in _containers(spec):
        used = [str(p.host_port) for p in c.ports or () if p.host_port]
        if used:
            bad.append(c.name or "")
            ports += used
    if not bad:
        return None
    return Violation(
        "hostPort",
        f"{_names('container', bad)} {_verb(bad, 'uses', 'use')} "
        f"{_verb(ports, 'hostPort', 'hostPorts')} {', '.join(ports)}",
    )


def _proc_mount(spec: PodSpec) -> Violation | None:
    bad = [
        c.name or ""
        for c in _containers(spec)
        if _sc(c) and _sc(c).proc_mount not in (None, "Default")
    ]
    if not bad:
        return None
    return Violation(
        "procMount",
        f'{_names("container", bad)} must not set securityContext.procMount to "Unmasked"',
    )


def _seccomp_baseline(spec: PodSpec) -> Violation | None:
    details = []
    pod_profile = spec.security_context.seccomp_profile if spec.security_context else None
    if pod_profile is not None and pod_profile.type == "Unconfined":
        details.append('pod must not set securityContext.seccompProfile.type to "Unconfined"')
    bad = [
        c.name or ""
        for c in _containers(spec)
        if _sc(c) and _sc(c).seccomp_profile and _sc(c).seccomp_profile.type == "Unconfined"
    ]
    if bad:
        details.append(
            f"{_names('container', bad)} must not set securityContext.seccompProfile.type to "
            '"Unconfined"'
        )
    return Violation("seccompProfile", "; ".join(details)) if details else None


def _selinux(spec: PodSpec) -> Violation | None:
    options = [spec.security_context.se_linux_options if spec.security_context else None]
    options += [_sc(c).se_linux_options if _sc(c) else None for c in _containers(spec)]
    bad_type = any(o is not None and (o.type or "") not in SELINUX_TYPES for o in options)
    bad_user = any(o is not None and o.user for o in options)
    bad_role = any(o is not None and o.role for o in options)
    details = [
        text
        for flag, text in (
            (bad_type, "type"),
            (bad_user, "user"),
            (bad_role, "role"),
        )
        if flag
    ]
    if not details:
        return None
    return Violation(
        "seLinuxOptions", f"forbidden securityContext.seLinuxOptions: {', '.join(details)}"
    )


def _sysctls(spec: PodSpec) -> Violation | None:
    sysctls = spec.security_context.sysctls if spec.security_context else None
    bad = [s.name or "" for s in sysctls or () if s.name not in SAFE_SYSCTLS]
    return Violation("forbidden sysctls", ", ".join(bad)) if bad else None


def _host_process(spec: PodSpec) -> Violation | None:
    pod_windows = spec.security_context.windows_options if spec.security_context else None
    pod_host = bool(pod_windows and pod_windows.host_process)
    bad = [
        c.name or ""
        for c in _containers(spec)
        if _sc(c) and _sc(c).windows_options and _sc(c).windows_options.host_process
    ]
    if not pod_host and not bad:
        return None
    who = (
        "pod and " + _names("container", bad)
        if pod_host and bad
        else ("pod" if pod_host else _names("container", bad))
    )
    return Violation(
        "hostProcess", f"{who} must not set securityContext.windowsOptions.hostProcess=true"
    )


BASELINE: dict[str, Callable[[PodSpec], Violation | None]] = {
    "hostNamespaces": _host_namespaces,
    "privileged": _privileged,
    "capabilities_baseline": _capabilities_baseline,
    "hostPathVolumes": _host_path_volumes,
    "hostPorts": _host_ports,
    "procMount": _proc_mount,
    "seccompProfile_baseline": _seccomp_baseline,
    "seLinuxOptions": _selinux,
    "sysctls": _sysctls,
    "windowsHostProcess": _host_process,
}


# Restricted.


def _volume_types(spec: PodSpec) -> Violation | None:
    bad: list[str] = []
    types: list[str] = []
    for volume in spec.volumes or ():
        kind = next(
            (json for attr, json in VOLUME_SOURCES if getattr(volume, attr) is not None), ""
        )
        if kind and kind not in RESTRICTED_VOLUME_TYPES:
            bad.append(volume.name or "")
            if kind not in types:
                types.append(kind)
    if not bad:
        return None
    return Violation(
        "restricted volume types",
        f"{_names('volume', bad)} {_verb(bad, 'uses', 'use')} restricted volume "
        f"{_verb(types, 'type', 'types')} " + ", ".join(f'"{t}"' for t in types),
    )


def _privilege_escalation(spec: PodSpec) -> Violation | None:
    bad = [
        c.name or ""
        for c in _containers(spec)
        if not (_sc(c) and _sc(c).allow_privilege_escalation is False)
    ]
    if not bad:
        return None
    return Violation(
        "allowPrivilegeEscalation != false",
        f"{_names('container', bad)} must set securityContext.allowPrivilegeEscalation=false",
    )


def _run_as_non_root(spec: PodSpec) -> Violation | None:
    pod_value = spec.security_context.run_as_non_root if spec.security_context else None
    details = []
    if pod_value is False:
        details.append("pod must not set securityContext.runAsNonRoot=false")
    explicit_false = [
        c.name or "" for c in _containers(spec) if _sc(c) and _sc(c).run_as_non_root is False
    ]
    if explicit_false:
        details.append(
            f"{_names('container', explicit_false)} must not set securityContext.runAsNonRoot=false"
        )
    if pod_value is None:
        unset = [
            c.name or ""
            for c in _containers(spec)
            if not (_sc(c) and _sc(c).run_as_non_root is not None)
        ]
        if unset:
            details.append(
                f"pod or {_names('container', unset)} must set securityContext.runAsNonRoot=true"
            )
    return Violation("runAsNonRoot != true", "; ".join(details)) if details else None


def _run_as_user(spec: PodSpec) -> Violation | None:
    details = []
    if spec.security_context is not None and spec.security_context.run_as_user == 0:
        details.append("pod must not set runAsUser=0")
    bad = [c.name or "" for c in _containers(spec) if _sc(c) and _sc(c).run_as_user == 0]
    if bad:
        details.append(f"{_names('container', bad)} must not set runAsUser=0")
    return Violation("runAsUser=0", "; ".join(details)) if details else None


def _seccomp_restricted(spec: PodSpec) -> Violation | None:
    allowed = ("RuntimeDefault", "Localhost")
    pod_profile = spec.security_context.seccomp_profile if spec.security_context else None
    details = []
    if pod_profile is not None and pod_profile.type not in allowed:
        details.append(
            f'pod must not set securityContext.seccompProfile.type to "{pod_profile.type}"'
        )
    for c in _containers(spec):
        profile = _sc(c).seccomp_profile if _sc(c) else None
        if profile is not None and profile.type not in allowed:
            details.append(
                f"{_names('container', [c.name or ''])} must not set "
                f'securityContext.seccompProfile.type to "{profile.type}"'
            )
    if pod_profile is None:
        unset = [c.name or "" for c in _containers(spec) if not (_sc(c) and _sc(c).seccomp_profile)]
        if unset:
            details.append(
                f"pod or {_names('container', unset)} must set securityContext.seccompProfile"
                '.type to "RuntimeDefault" or "Localhost"'
            )
    return Violation("seccompProfile", "; ".join(details)) if details else None


def _capabilities_restricted(spec: PodSpec) -> Violation | None:
    not_dropped: list[str] = []
    adding: list[str] = []
    added: list[str] = []
    for c in _containers(spec):
        caps = _sc(c).capabilities if _sc(c) else None
        if "ALL" not in ((caps.drop if caps else None) or ()):
            not_dropped.append(c.name or "")
        extra = [a for a in (caps.add if caps else None) or () if a != "NET_BIND_SERVICE"]
        if extra:
            adding.append(c.name or "")
            added += [a for a in extra if a not in added]
    details = []
    if not_dropped:
        details.append(
            f'{_names("container", not_dropped)} must set securityContext.capabilities.drop=["ALL"]'
        )
    if adding:
        details.append(
            f"{_names('container', adding)} must not include "
            + ", ".join(f'"{a}"' for a in added)
            + " in securityContext.capabilities.add"
        )
    return Violation("unrestricted capabilities", "; ".join(details)) if details else None


RESTRICTED: dict[str, Callable[[PodSpec], Violation | None]] = {
    "restrictedVolumes": _volume_types,
    "allowPrivilegeEscalation": _privilege_escalation,
    "runAsNonRoot": _run_as_non_root,
    "runAsUser": _run_as_user,
    "seccompProfile_restricted": _seccomp_restricted,
    "capabilities_restricted": _capabilities_restricted,
}
REPLACED = frozenset({"seccompProfile_baseline", "capabilities_baseline"})
"""Baseline checks whose restricted forms (above) check the same fields more strictly."""
