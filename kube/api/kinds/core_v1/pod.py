"""core/v1 workloads: Pod and everything below its spec and status, PodTemplate,
ReplicationController and Binding.

``PodSpec`` is shared by every workload kind (``PodTemplateSpec``); its defaults are the ones
upstream applies to any pod spec, while those only a real pod gets (requests copied from
limits, service links, host ports under host networking) live on ``Pod``.  Validation that
needs the whole spec (container names across init, regular and ephemeral containers, mounts
of declared volumes, host ports, claims) is in ``PodSpec.validate``; rules that hold for pods
but not for templates in ``Pod.validate``; the narrow set of changes a running pod accepts in
``Pod.validate_update``.

The reference and selector types pods share with volumes (``ObjectReference``,
``LocalObjectReference``, ``NodeSelector``, ...) are declared in ``volume.py``.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Protocol, Self, TypeVar

import msgspec

from kube.api import names
from kube.api.errors import ROOT, ErrorList, ErrorType, FieldError, Path
from kube.api.kinds.core_v1 import resources as resource_names
from kube.api.kinds.core_v1.volume import (
    NAME_AS_LOCAL_REFERENCE,
    PULL_POLICIES,
    ZERO,
    LocalObjectReference,
    NodeSelector,
    NodeSelectorTerm,
    ObjectFieldSelector,
    ObjectReference,
    ResourceFieldSelector,
    Volume,
    VolumeDevice,
    VolumeMount,
    describe_changes,
    image_pull_policy,
    parse_quantity,
    struct_fields,
    validate_one_of,
    validate_relative_path,
    validate_template_metadata,
)
from kube.api.meta_v1 import LabelSelector, ObjectMeta, Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column, age, join_or_none
from kube.api.quantity import Quantity
from kube.api.scheme import CREATE_ONLY, kind
from kube.api.struct import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    IANA_SVC_NAME,
    IP_ADDRESS,
    QUALIFIED_NAME,
    Embedded,
    IntOrString,
    QuantityValue,
    Struct,
    Time,
    atomic,
    meta,
)

MAX_INT32 = 2**31 - 1
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
PROTOCOLS = ("TCP", "UDP", "SCTP")
PROFILE_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
NODE_LOST_REASON = "NodeLost"

UserID = Annotated[int | None, meta(minimum=0, maximum=MAX_INT32)]
ResourceList = dict[str, QuantityValue]

ENV_FIELD_PATHS = frozenset(
    {
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.serviceAccountName",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
    }
)


def _validate_port(value: IntOrString | None, path: Path, errors: ErrorList) -> None:
    """A port given by number (1-65535) or by IANA service name."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        errors.extend_checked(path, value, names.is_valid_port_num(value))
    else:
        errors.extend_checked(path, value, names.is_iana_svc_name(value))


# Affinity.


class PreferredSchedulingTerm(Struct):
    """A node selector term the scheduler prefers, with its weight (1-100)."""

    weight: Annotated[int | None, meta(required=True, minimum=1, maximum=100, proto=1)] = None
    preference: Annotated[NodeSelectorTerm | None, meta(required=True, proto=2)] = None


class NodeAffinity(Struct):
    """Which nodes the pod must, or would rather, run on."""

    required_during_scheduling_ignored_during_execution: Annotated[
        NodeSelector | None, meta(proto=1)
    ] = None
    preferred_during_scheduling_ignored_during_execution: Annotated[
        list[PreferredSchedulingTerm] | None, atomic(proto=2)
    ] = None


class PodAffinityTerm(Struct):
    """Pods (by label and namespace) the pod must run near, within a topology domain."""

    label_selector: Annotated[LabelSelector | None, meta(proto=1)] = None
    namespaces: Annotated[list[str] | None, atomic(proto=2)] = None
    topology_key: Annotated[str | None, meta(proto=3)] = None
    namespace_selector: Annotated[LabelSelector | None, meta(proto=4)] = None
    match_label_keys: Annotated[list[str] | None, atomic(proto=5)] = None
    mismatch_label_keys: Annotated[list[str] | None, atomic(proto=6)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        for namespace in self.namespaces or ():
            errors.extend_checked(
                path.child("namespace"), namespace, names.is_dns1123_label(namespace)
            )
        selector_keys = _selector_keys(self.label_selector)
        for attr, name in (
            ("match_label_keys", "matchLabelKeys"),
            ("mismatch_label_keys", "mismatchLabelKeys"),
        ):
            keys: list[str] = getattr(self, attr) or []
            if keys and self.label_selector is None:
                detail = "must not be specified when labelSelector is not set"
                errors.forbidden(path.child(name), detail)
                continue
            for i, key in enumerate(keys):
                errors.extend_checked(path.child(name).index(i), key, names.is_qualified_name(key))
        for i, key in enumerate(self.match_label_keys or ()):
            if key in selector_keys:
                detail = "exists in both matchLabelKeys and labelSelector"
                errors.invalid(path.index(i), key, detail)
            if key in (self.mismatch_label_keys or ()):
                detail = "exists in both matchLabelKeys and mismatchLabelKeys"
                errors.invalid(path.child("matchLabelKeys").index(i), key, detail)
        if not self.topology_key:
            errors.required(path.child("topologyKey"), "can not be empty")
        else:
            errors.extend_checked(
                path.child("topologyKey"),
                self.topology_key,
                names.is_qualified_name(self.topology_key),
            )


def _selector_keys(selector: LabelSelector | None) -> set[str]:
    """The label keys a selector constrains."""
    if selector is None:
        return set()
    keys = set(selector.match_labels or {})
    keys.update(req.key for req in selector.match_expressions or () if req.key)
    return keys


class WeightedPodAffinityTerm(Struct):
    """A pod affinity term the scheduler prefers, with its weight (1-100)."""

    weight: Annotated[int | None, meta(required=True, minimum=1, maximum=100, proto=1)] = None
    pod_affinity_term: Annotated[PodAffinityTerm | None, meta(required=True, proto=2)] = None


class PodAffinity(Struct):
    """Pods this pod must, or would rather, run in the same domain as."""

    required_during_scheduling_ignored_during_execution: Annotated[
        list[PodAffinityTerm] | None, atomic(proto=1)
    ] = None
    preferred_during_scheduling_ignored_during_execution: Annotated[
        list[WeightedPodAffinityTerm] | None, atomic(proto=2)
    ] = None


class PodAntiAffinity(Struct):
    """Pods this pod must not, or would rather not, run in the same domain as."""

    required_during_scheduling_ignored_during_execution: Annotated[
        list[PodAffinityTerm] | None, atomic(proto=1)
    ] = None
    preferred_during_scheduling_ignored_during_execution: Annotated[
        list[WeightedPodAffinityTerm] | None, atomic(proto=2)
    ] = None


class Affinity(Struct):
    """Node affinity, pod affinity and pod anti-affinity."""

    node_affinity: Annotated[NodeAffinity | None, meta(proto=1)] = None
    pod_affinity: Annotated[PodAffinity | None, meta(proto=2)] = None
    pod_anti_affinity: Annotated[PodAntiAffinity | None, meta(proto=3)] = None


# Environment.


class _KeySelector(Struct):
    """One key of a named ConfigMap or Secret."""

    PROTO_EMBEDDED = NAME_AS_LOCAL_REFERENCE

    name: Annotated[str | None, meta(format=DNS1123_SUBDOMAIN, proto=1, omitempty=True)] = None
    key: Annotated[str | None, meta(required=True, proto=2)] = None
    optional: Annotated[bool | None, meta(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.key:
            errors.extend_checked(path.child("key"), self.key, names.is_config_map_key(self.key))


class ConfigMapKeySelector(_KeySelector):
    """One key of a ConfigMap."""


class SecretKeySelector(_KeySelector):
    """One key of a Secret."""


class FileKeySelector(Struct):
    """One key of an env file written by an init container into an emptyDir volume."""

    volume_name: Annotated[str | None, meta(required=True, format=DNS1123_LABEL, proto=1)] = None
    path: Annotated[str | None, meta(required=True, proto=2)] = None
    key: Annotated[str | None, meta(required=True, proto=3)] = None
    optional: Annotated[bool | None, meta(proto=4)] = None

    def set_defaults(self) -> None:
        if self.optional is None:
            self.optional = False

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_relative_path(self.path, path.child("path"), errors)


class EnvVarSource(Struct):
    """Where an environment variable's value comes from."""

    field_ref: Annotated[ObjectFieldSelector | None, meta(proto=1)] = None
    resource_field_ref: Annotated[ResourceFieldSelector | None, meta(proto=2)] = None
    config_map_key_ref: Annotated[ConfigMapKeySelector | None, meta(proto=3)] = None
    secret_key_ref: Annotated[SecretKeySelector | None, meta(proto=4)] = None
    file_key_ref: Annotated[FileKeySelector | None, meta(proto=5)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.field_ref is not None:
            self.field_ref.check(ENV_FIELD_PATHS, path.child("fieldRef"), errors)
        if self.resource_field_ref is not None:
            self.resource_field_ref.check(False, path.child("resourceFieldRef"), errors)

    def count(self) -> int:
        """How many sources are set (exactly one should be)."""
        return sum(getattr(self, attr) is not None for attr, _ in _ENV_SOURCES)


_ENV_SOURCES = struct_fields(EnvVarSource)


class EnvVar(Struct):
    """An environment variable: a literal value or one taken from elsewhere."""

    name: Annotated[str | None, meta(required=True, proto=1)] = None
    value: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    value_from: Annotated[EnvVarSource | None, meta(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.name:
            errors.extend_checked(
                path.child("name"), self.name, names.is_relaxed_env_var_name(self.name)
            )
        if self.value_from is None:
            return
        count, from_path = self.value_from.count(), path.child("valueFrom")
        if count == 0:
            detail = (
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, "
                "`secretKeyRef` or `fileKeyRef`"
            )
            errors.invalid(from_path, "", detail)
        elif self.value:
            errors.invalid(from_path, "", "may not be specified when `value` is not empty")
        elif count > 1:
            errors.invalid(from_path, "", "may not have more than one field specified at a time")


class ConfigMapEnvSource(Struct):
    """A ConfigMap whose keys all become environment variables."""

    PROTO_EMBEDDED = NAME_AS_LOCAL_REFERENCE

    name: Annotated[
        str | None, meta(required=True, format=DNS1123_SUBDOMAIN, proto=1, omitempty=True)
    ] = None
    optional: Annotated[bool | None, meta(proto=2)] = None


class SecretEnvSource(Struct):
    """A Secret whose keys all become environment variables."""

    PROTO_EMBEDDED = NAME_AS_LOCAL_REFERENCE

    name: Annotated[
        str | None, meta(required=True, format=DNS1123_SUBDOMAIN, proto=1, omitempty=True)
    ] = None
    optional: Annotated[bool | None, meta(proto=2)] = None


class EnvFromSource(Struct):
    """A ConfigMap or Secret to take every environment variable from, with a prefix."""

    prefix: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    config_map_ref: Annotated[ConfigMapEnvSource | None, meta(proto=2)] = None
    secret_ref: Annotated[SecretEnvSource | None, meta(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.prefix:
            errors.extend_checked(
                path.child("prefix"), self.prefix, names.is_relaxed_env_var_name(self.prefix)
            )

    def count(self) -> int:
        """How many sources are set (exactly one should be)."""
        return (self.config_map_ref is not None) + (self.secret_ref is not None)


# Probes and lifecycle hooks.


class ExecAction(Struct):
    """A command run inside the container."""

    command: Annotated[list[str] | None, atomic(required=True, proto=1)] = None


class HTTPHeader(Struct):
    """A header sent with an HTTP probe."""

    name: Annotated[str | None, meta(required=True, proto=1)] = None
    value: Annotated[str | None, meta(proto=2)] = None


class HTTPGetAction(Struct):
    """An HTTP GET against the container."""

    path: Annotated[str | None, meta(required=True, proto=1, omitempty=True)] = None
    port: Annotated[IntOrString | None, meta(required=True, proto=2)] = None
    host: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    scheme: Annotated[
        str | None, meta(required=True, enum=("HTTP", "HTTPS"), proto=4, omitempty=True)
    ] = None
    http_headers: Annotated[list[HTTPHeader] | None, atomic(proto=5)] = None

    def set_defaults(self) -> None:
        self.path = self.path or "/"
        self.scheme = self.scheme or "HTTP"

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_port(self.port, path.child("port"), errors)
        for header in self.http_headers or ():
            if header.name:
                problems = names.is_http_header_name(header.name)
                errors.extend_checked(path.child("httpHeaders"), header.name, problems)


class TCPSocketAction(Struct):
    """A TCP connection to the container."""

    port: Annotated[IntOrString | None, meta(required=True, proto=1)] = None
    host: Annotated[str | None, meta(proto=2, omitempty=True)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_port(self.port, path.child("port"), errors)


class GRPCAction(Struct):
    """A gRPC health check against the container."""

    port: Annotated[int | None, meta(required=True, proto=1)] = None
    service: Annotated[str | None, meta(proto=2)] = None

    def set_defaults(self) -> None:
        if self.service is None:
            self.service = ""

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_port(self.port, path.child("port"), errors)


class SleepAction(Struct):
    """A pause, in seconds, before the container is stopped."""

    seconds: Annotated[int | None, meta(required=True, proto=1, int64=True)] = None


class Probe(Struct):
    """A periodic check of a container, and the thresholds that turn results into a verdict."""

    PROTO_EMBEDDED = (Embedded(1, "ProbeHandler", ("exec", "http_get", "tcp_socket", "grpc")),)

    exec: Annotated[ExecAction | None, meta(proto=1)] = None
    http_get: Annotated[HTTPGetAction | None, meta(proto=2)] = None
    tcp_socket: Annotated[TCPSocketAction | None, meta(proto=3)] = None
    grpc: Annotated[GRPCAction | None, meta(proto=4)] = None
    initial_delay_seconds: Annotated[int | None, meta(minimum=0, proto=2, omitempty=True)] = None
    timeout_seconds: Annotated[int | None, meta(minimum=0, proto=3, omitempty=True)] = None
    period_seconds: Annotated[int | None, meta(minimum=0, proto=4, omitempty=True)] = None
    success_threshold: Annotated[int | None, meta(minimum=0, proto=5, omitempty=True)] = None
    failure_threshold: Annotated[int | None, meta(minimum=0, proto=6, omitempty=True)] = None
    termination_grace_period_seconds: Annotated[
        int | None, meta(minimum=1, proto=7, int64=True)
    ] = None

    def set_defaults(self) -> None:
        self.timeout_seconds = self.timeout_seconds or 1
        self.period_seconds = self.period_seconds or 10
        self.success_threshold = self.success_threshold or 1
        self.failure_threshold = self.failure_threshold or 3

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_one_of(self, _PROBE_HANDLERS, "handler type", path, errors)


_PROBE_HANDLERS = struct_fields(Probe)[:4]


class LifecycleHandler(Struct):
    """What to do after a container starts or before it stops."""

    exec: Annotated[ExecAction | None, meta(proto=1)] = None
    http_get: Annotated[HTTPGetAction | None, meta(proto=2)] = None
    tcp_socket: Annotated[TCPSocketAction | None, meta(proto=3)] = None
    sleep: Annotated[SleepAction | None, meta(proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_one_of(self, _LIFECYCLE_HANDLERS, "handler type", path, errors)


_LIFECYCLE_HANDLERS = struct_fields(LifecycleHandler)


class Lifecycle(Struct):
    """Hooks run after a container starts and before it stops, and its stop signal."""

    post_start: Annotated[LifecycleHandler | None, meta(proto=1)] = None
    pre_stop: Annotated[LifecycleHandler | None, meta(proto=2)] = None
    stop_signal: Annotated[str | None, meta(proto=3)] = None

    def handlers(self) -> Iterator[tuple[str, LifecycleHandler]]:
        """The hooks that are set, with their JSON names."""
        for name, handler in (("postStart", self.post_start), ("preStop", self.pre_stop)):
            if handler is not None:
                yield name, handler


# Containers.


class ContainerPort(Struct):
    """A port a container exposes."""

    name: Annotated[str | None, meta(format=IANA_SVC_NAME, proto=1, omitempty=True)] = None
    host_port: Annotated[int | None, meta(proto=2, omitempty=True)] = None
    container_port: Annotated[int | None, meta(proto=3)] = None
    protocol: Annotated[
        str | None, meta(required=True, enum=PROTOCOLS, proto=4, omitempty=True)
    ] = None
    host_ip: Annotated[str | None, meta(proto=5, omitempty=True)] = msgspec.field(
        default=None, name="hostIP"
    )

    def set_defaults(self) -> None:
        self.protocol = self.protocol or "TCP"

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.container_port:
            errors.required(path.child("containerPort"))
        else:
            _validate_port(self.container_port, path.child("containerPort"), errors)
        if self.host_port:
            _validate_port(self.host_port, path.child("hostPort"), errors)


class ResourceClaim(Struct):
    """A claim (or one request of it) of the pod that a container uses."""

    name: Annotated[str | None, meta(required=True, proto=1)] = None
    request: Annotated[str | None, meta(format=DNS1123_LABEL, proto=2, omitempty=True)] = None


_QOS_RESOURCES = ("cpu", "memory")


def _validate_resource_name(resource: str, path: Path, errors: ErrorList) -> None:
    """A resource a container may request: standard, hugepages or an extended resource.

    Unlike upstream (and limit ranges, ``resource_names.validate_container_resource_name``), a
    pod reports one error per resource: the name problems joined, and no "standard resource
    type" error besides "standard resource for containers".
    """
    problems = names.is_qualified_name(resource)
    errors.extend_checked(path, resource, problems)
    if not problems:
        resource_names.validate_container_resource_kind(resource, path, errors)


def _validate_resource_value(resource: str, value: Any, path: Path, errors: ErrorList) -> None:
    parsed = parse_quantity(value)
    if parsed is None:
        return
    if parsed < ZERO:
        errors.invalid(path, str(parsed), "must be greater than or equal to 0")
    if not resource_names.is_native(resource) and parsed.milli_value() % 1000:
        errors.invalid(path, str(parsed), "must be an integer")


def validate_resource_lists(
    limits: ResourceList | None, requests: ResourceList | None, path: Path, errors: ErrorList
) -> None:
    """Resource names and amounts of limits and requests, and every request within its
    limit (equal to it for resources that cannot be overcommitted)."""
    limits, requests = limits or {}, requests or {}
    limit_path, request_path = path.child("limits"), path.child("requests")
    for resource, value in limits.items():
        _validate_resource_name(resource, limit_path.key(resource), errors)
        _validate_resource_value(resource, value, limit_path.key(resource), errors)
    for resource, value in requests.items():
        _validate_resource_name(resource, request_path.key(resource), errors)
        _validate_resource_value(resource, value, request_path.key(resource), errors)
        request, limit = parse_quantity(value), parse_quantity(limits.get(resource))
        if resource not in limits:
            if not resource_names.overcommit_allowed(resource):
                detail = "Limit must be set for non overcommitable resources"
                errors.required(limit_path, detail)
        elif request is None or limit is None:
            continue
        elif request != limit and not resource_names.overcommit_allowed(resource):
            detail = f"must be equal to {resource} limit of {limit}"
            errors.invalid(request_path, str(request), detail)
        elif request > limit:
            detail = f"must be less than or equal to {resource} limit of {limit}"
            errors.invalid(request_path, str(request), detail)
    used = limits.keys() | requests.keys()
    if any(resource_names.is_hugepages(r) for r in used) and not any(
        r in _QOS_RESOURCES for r in used
    ):
        errors.forbidden(path, "HugePages require cpu or memory")


class ResourceRequirements(Struct):
    """The compute resources a container (or a whole pod) asks for and may use."""

    limits: Annotated[ResourceList | None, meta(proto=1)] = None
    requests: Annotated[ResourceList | None, meta(proto=2)] = None
    claims: Annotated[
        list[ResourceClaim] | None, meta(list_type="map", list_map_keys=("name",), proto=3)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_resource_lists(self.limits, self.requests, path, errors)

    def validate_claims(self, pod_claims: set[str], path: Path, errors: ErrorList) -> None:
        """Every claim named must be a claim of the pod, each at most once."""
        seen: set[str] = set()
        for i, claim in enumerate(self.claims or ()):
            name, claim_path = claim.name or "", path.index(i)
            if not name:
                continue
            key = f"{name}/{claim.request}" if claim.request else name
            if name in seen:
                errors.duplicate(claim_path, name)
            else:
                if key in seen:
                    errors.duplicate(claim_path, key)
                elif not claim.request and any(k.startswith(name + "/") for k in seen):
                    errors.duplicate(claim_path, name)
                seen.add(key)
            if name not in pod_claims:
                listed = ": " + ", ".join(sorted(pod_claims)) if pod_claims else " which is empty"
                detail = "must be one of the names in pod.spec.resourceClaims" + listed
                errors.append(FieldError(ErrorType.NOT_FOUND, str(claim_path), name, detail))


class ContainerResizePolicy(Struct):
    """Whether resizing a resource of a running container restarts it."""

    resource_name: Annotated[str | None, meta(required=True, enum=_QOS_RESOURCES, proto=1)] = None
    restart_policy: Annotated[
        str | None, meta(required=True, enum=("NotRequired", "RestartContainer"), proto=2)
    ] = None


class ContainerRestartRuleOnExitCodes(Struct):
    """Exit codes a restart rule matches (or matches all but)."""

    operator: Annotated[
        str | None, meta(required=True, enum=("In", "NotIn"), proto=1, omitempty=True)
    ] = None
    values: Annotated[list[int] | None, meta(list_type="set", proto=2)] = None


class ContainerRestartRule(Struct):
    """When a container that exited is restarted regardless of the pod's restart policy."""

    action: Annotated[
        str | None, meta(required=True, enum=("Restart",), proto=1, omitempty=True)
    ] = None
    exit_codes: Annotated[ContainerRestartRuleOnExitCodes | None, meta(proto=2)] = None


class Capabilities(Struct):
    """Linux capabilities added to and dropped from the container's default set."""

    add: Annotated[list[str] | None, atomic(proto=1)] = None
    drop: Annotated[list[str] | None, atomic(proto=2)] = None


class SELinuxOptions(Struct):
    """The SELinux context given to a container."""

    user: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    role: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    type: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    level: Annotated[str | None, meta(proto=4, omitempty=True)] = None


class WindowsSecurityContextOptions(Struct):
    """Windows-only settings: GMSA credentials, user name, host process."""

    gmsa_credential_spec_name: Annotated[str | None, meta(format=DNS1123_SUBDOMAIN, proto=1)] = None
    gmsa_credential_spec: Annotated[str | None, meta(proto=2)] = None
    run_as_user_name: Annotated[str | None, meta(proto=3)] = None
    host_process: Annotated[bool | None, meta(proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        spec = self.gmsa_credential_spec
        if spec is not None and not spec:
            detail = "gmsaCredentialSpec cannot be an empty string"
            errors.invalid(path.child("gmsaCredentialSpec"), spec, detail)
        elif spec is not None and len(spec) > 64 * 1024:
            detail = "gmsaCredentialSpec size must be under 64 KiB"
            errors.invalid(path.child("gmsaCredentialSpec"), spec, detail)
        user = self.run_as_user_name
        if user is not None:
            problem = _windows_user_problem(user)
            if problem:
                errors.invalid(path.child("runAsUserName"), user, problem)


_NETBIOS_DOMAIN = re.compile(r'^[^\\/:*?"<>|.][^\\/:*?"<>|]{0,14}$')
_DNS_DOMAIN = re.compile(
    r"^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}"
    r"[a-zA-Z0-9])?)*$"
)


def _windows_user_problem(value: str) -> str:
    """What is wrong with a Windows ``DOMAIN\\USER`` name, if anything."""
    if not value:
        return "runAsUserName cannot be an empty string"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "runAsUserName cannot contain control characters"
    parts = value.split("\\")
    if len(parts) > 2:
        return "runAsUserName cannot contain more than one backslash"
    domain, user = (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])
    if len(domain) >= 256:
        return "runAsUserName's Domain length must be under 256 characters"
    if len(parts) == 2 and not (_NETBIOS_DOMAIN.match(domain) or _DNS_DOMAIN.match(domain)):
        return "runAsUserName's Domain doesn't match the NetBios nor the DNS format"
    if not user:
        return "runAsUserName's User cannot be empty"
    if len(user) > 104:
        return "runAsUserName's User length must not be longer than 104 characters"
    if set(user) <= {".", " "}:
        return "runAsUserName's User cannot contain only periods or spaces"
    if any(c in '"/\\:;|=,+*?<>@[]' for c in user):
        return "runAsUserName's User cannot contain the following characters: \"/\\:;|=,+*?<>@[]"
    return ""


class SeccompProfile(Struct):
    """The seccomp profile a container runs under."""

    type: Annotated[str | None, meta(required=True, enum=PROFILE_TYPES, proto=1)] = None
    localhost_profile: Annotated[str | None, meta(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        profile_path = path.child("localhostProfile")
        if self.type == "Localhost":
            if self.localhost_profile is None:
                detail = "must be set when seccomp type is Localhost"
                errors.required(profile_path, detail)
            else:
                validate_relative_path(self.localhost_profile, profile_path, errors)
        elif self.localhost_profile is not None:
            detail = "can only be set when seccomp type is Localhost"
            errors.invalid(profile_path, msgspec.to_builtins(self), detail)


class AppArmorProfile(Struct):
    """The AppArmor profile a container runs under."""

    type: Annotated[str | None, meta(required=True, enum=PROFILE_TYPES, proto=1)] = None
    localhost_profile: Annotated[str | None, meta(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        profile, profile_path = self.localhost_profile, path.child("localhostProfile")
        if self.type == "Localhost":
            if profile is None or profile == "":
                errors.required(profile_path, "must be set when AppArmor type is Localhost")
            elif profile.strip() != profile:
                errors.invalid(profile_path, profile, "must not be padded with whitespace")
            if profile is not None and len(profile) > 4095:
                errors.too_long(profile_path, 4095)
        elif profile is not None and self.type in PROFILE_TYPES:
            detail = "can only be set when AppArmor type is Localhost"
            errors.invalid(profile_path, profile, detail)


class SecurityContext(Struct):
    """Security settings of one container, overriding the pod's."""

    capabilities: Annotated[Capabilities | None, meta(proto=1)] = None
    privileged: Annotated[bool | None, meta(proto=2)] = None
    se_linux_options: Annotated[SELinuxOptions | None, meta(proto=3)] = None
    windows_options: Annotated[WindowsSecurityContextOptions | None, meta(proto=10)] = None
    run_as_user: Annotated[UserID, meta(proto=4, int64=True)] = None
    run_as_group: Annotated[UserID, meta(proto=8, int64=True)] = None
    run_as_non_root: Annotated[bool | None, meta(proto=5)] = None
    read_only_root_filesystem: Annotated[bool | None, meta(proto=6)] = None
    allow_privilege_escalation: Annotated[bool | None, meta(proto=7)] = None
    proc_mount: Annotated[str | None, meta(enum=("Default", "Unmasked"), proto=9)] = None
    seccomp_profile: Annotated[SeccompProfile | None, meta(proto=11)] = None
    app_armor_profile: Annotated[AppArmorProfile | None, meta(proto=12)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.allow_privilege_escalation is False:
            if self.privileged:
                detail = "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"
                errors.invalid(path, msgspec.to_builtins(self), detail)
            if "CAP_SYS_ADMIN" in ((self.capabilities and self.capabilities.add) or ()):
                detail = (
                    "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` "
                    "CAP_SYS_ADMIN"
                )
                errors.invalid(path, msgspec.to_builtins(self), detail)


class Container(Struct):
    """A container of a pod: image, command, environment, ports, mounts, probes, resources."""

    name: Annotated[str | None, meta(required=True, format=DNS1123_LABEL, proto=1)] = None
    image: Annotated[str | None, meta(required=True, proto=2, omitempty=True)] = None
    command: Annotated[list[str] | None, atomic(proto=3)] = None
    args: Annotated[list[str] | None, atomic(proto=4)] = None
    working_dir: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    ports: Annotated[
        list[ContainerPort] | None,
        meta(merge_key="containerPort", list_map_keys=("containerPort", "protocol"), proto=6),
    ] = None
    env_from: Annotated[list[EnvFromSource] | None, atomic(proto=19)] = None
    env: Annotated[list[EnvVar] | None, meta(merge_key="name", proto=7)] = None
    resources: Annotated[ResourceRequirements | None, meta(proto=8)] = None
    resize_policy: Annotated[list[ContainerResizePolicy] | None, atomic(proto=23)] = None
    restart_policy: Annotated[str | None, meta(proto=24)] = None
    restart_policy_rules: Annotated[list[ContainerRestartRule] | None, atomic(proto=25)] = None
    volume_mounts: Annotated[list[VolumeMount] | None, meta(merge_key="mountPath", proto=9)] = None
    volume_devices: Annotated[list[VolumeDevice] | None, meta(merge_key="devicePath", proto=21)] = (
        None
    )
    liveness_probe: Annotated[Probe | None, meta(proto=10)] = None
    readiness_probe: Annotated[Probe | None, meta(proto=11)] = None
    startup_probe: Annotated[Probe | None, meta(proto=22)] = None
    lifecycle: Annotated[Lifecycle | None, meta(proto=12)] = None
    termination_message_path: Annotated[str | None, meta(proto=13, omitempty=True)] = None
    termination_message_policy: Annotated[
        str | None,
        meta(required=True, enum=("File", "FallbackToLogsOnError"), proto=20, omitempty=True),
    ] = None
    image_pull_policy: Annotated[
        str | None, meta(required=True, enum=PULL_POLICIES, proto=14, omitempty=True)
    ] = None
    security_context: Annotated[SecurityContext | None, meta(proto=15)] = None
    stdin: Annotated[bool | None, meta(proto=16, omitempty=True)] = None
    stdin_once: Annotated[bool | None, meta(proto=17, omitempty=True)] = None
    tty: Annotated[bool | None, meta(proto=18, omitempty=True)] = None

    def set_defaults(self) -> None:
        if not self.image_pull_policy:
            self.image_pull_policy = image_pull_policy(self.image)
        self.termination_message_path = self.termination_message_path or "/dev/termination-log"
        self.termination_message_policy = self.termination_message_policy or "File"

    def validate(self, path: Path, errors: ErrorList) -> None:
        seen: set[str] = set()
        for i, port in enumerate(self.ports or ()):
            if port.name and port.name in seen:
                errors.duplicate(path.child("ports").index(i).child("name"), port.name)
            seen.add(port.name or "")
        for source in self.env_from or ():
            count = source.count()
            if count == 0:
                detail = "must specify one of: `configMapRef` or `secretRef`"
                errors.invalid(path.child("envFrom"), "", detail)
            elif count > 1:
                detail = "may not have more than one field specified at a time"
                errors.invalid(path.child("envFrom"), "", detail)
        for name, probe in (
            ("livenessProbe", self.liveness_probe),
            ("startupProbe", self.startup_probe),
        ):
            if probe is not None and probe.success_threshold not in (None, 1):
                detail = "must be 1"
                errors.invalid(
                    path.child(name).child("successThreshold"), probe.success_threshold, detail
                )
        readiness = self.readiness_probe
        if readiness is not None and readiness.termination_grace_period_seconds is not None:
            errors.invalid(
                path.child("readinessProbe").child("terminationGracePeriodSeconds"),
                readiness.termination_grace_period_seconds,
                "must not be set for readinessProbes",
            )
        seen_resources: set[str] = set()
        for i, policy in enumerate(self.resize_policy or ()):
            if policy.resource_name in seen_resources:
                errors.duplicate(path.child("resizePolicy").index(i), policy.resource_name)
            seen_resources.add(policy.resource_name or "")

    def is_sidecar(self) -> bool:
        """Whether this (init) container keeps running beside the others: a sidecar."""
        return self.restart_policy == "Always"


class EphemeralContainer(Container):
    """A container added to a running pod for troubleshooting; it is never restarted."""

    PROTO_EMBEDDED = (Embedded(1, "EphemeralContainerCommon", Container.__struct_fields__),)

    target_container_name: Annotated[str | None, meta(proto=2, omitempty=True)] = None


# Pod-level settings.


class PodDNSConfigOption(Struct):
    """A resolver option (``ndots:2``, ``edns0``)."""

    name: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    value: Annotated[str | None, meta(proto=2)] = None


MAX_DNS_NAMESERVERS = 3
MAX_DNS_SEARCHES = 32
MAX_DNS_SEARCH_CHARS = 2048


class PodDNSConfig(Struct):
    """DNS settings merged into the pod's resolv.conf."""

    nameservers: Annotated[
        list[Annotated[str, meta(format=IP_ADDRESS)]] | None, atomic(proto=1)
    ] = None
    searches: Annotated[list[str] | None, atomic(proto=2)] = None
    options: Annotated[list[PodDNSConfigOption] | None, atomic(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        servers, searches = self.nameservers or [], self.searches or []
        if len(servers) > MAX_DNS_NAMESERVERS:
            detail = f"must not have more than {MAX_DNS_NAMESERVERS} nameservers"
            errors.invalid(path.child("nameservers"), servers, detail)
        if len(searches) > MAX_DNS_SEARCHES:
            detail = f"must not have more than {MAX_DNS_SEARCHES} search paths"
            errors.invalid(path.child("searches"), searches, detail)
        if len(" ".join(searches)) > MAX_DNS_SEARCH_CHARS:
            detail = (
                f"must not have more than {MAX_DNS_SEARCH_CHARS} characters (including spaces) "
                "in the search list"
            )
            errors.invalid(path.child("searches"), searches, detail)
        for i, search in enumerate(searches):
            if search != ".":
                # Upstream's relaxed rule: a DNS subdomain in which '_' may stand for any
                # letter, and a trailing dot is allowed.
                domain = search.removesuffix(".")
                problems = names.is_dns1123_subdomain(domain.replace("_", "a"))
                errors.extend_checked(path.child("searches").index(i), domain, problems)
        for i, option in enumerate(self.options or ()):
            if not option.name:
                errors.required(path.child("options").index(i), "must not be empty")


class HostAlias(Struct):
    """Extra lines for the pod's /etc/hosts: an IP and its host names."""

    ip: Annotated[str | None, meta(required=True, format=IP_ADDRESS, proto=1)] = None
    hostnames: Annotated[
        list[Annotated[str, meta(format=DNS1123_SUBDOMAIN)]] | None, atomic(proto=2)
    ] = None


class PodOS(Struct):
    """The operating system the pod's containers are built for."""

    name: Annotated[str | None, meta(required=True, enum=("linux", "windows"), proto=1)] = None


class PodReadinessGate(Struct):
    """An extra pod condition that must be True for the pod to be ready."""

    condition_type: Annotated[str | None, meta(required=True, format=QUALIFIED_NAME, proto=1)] = (
        None
    )


class PodResourceClaim(Struct):
    """A dynamic resource claim the pod uses, by name or from a template."""

    name: Annotated[str | None, meta(required=True, format=DNS1123_LABEL, proto=1)] = None
    resource_claim_name: Annotated[str | None, meta(format=DNS1123_SUBDOMAIN, proto=3)] = None
    resource_claim_template_name: Annotated[str | None, meta(format=DNS1123_SUBDOMAIN, proto=4)] = (
        None
    )

    def validate(self, path: Path, errors: ErrorList) -> None:
        given = (self.resource_claim_name is not None) + (
            self.resource_claim_template_name is not None
        )
        if given != 1:
            detail = (
                "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"
                if given
                else "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
            )
            errors.invalid(path, msgspec.to_builtins(self), detail)


class PodSchedulingGate(Struct):
    """A gate that keeps the pod from being scheduled until it is removed."""

    name: Annotated[str | None, meta(required=True, proto=1)] = None


class PodSchedulingGroup(Struct):
    """The workload group (PodGroup) the pod is scheduled with."""

    pod_group_name: Annotated[str | None, meta(proto=1)] = None


class Sysctl(Struct):
    """A kernel parameter set in the pod's namespaces."""

    name: Annotated[str | None, meta(required=True, proto=1)] = None
    value: Annotated[str | None, meta(proto=2)] = None


_SYSCTL_NAME = re.compile(r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")


class PodSecurityContext(Struct):
    """Security settings of the whole pod: users, groups, volume ownership, sysctls."""

    se_linux_options: Annotated[SELinuxOptions | None, meta(proto=1)] = None
    windows_options: Annotated[WindowsSecurityContextOptions | None, meta(proto=8)] = None
    run_as_user: Annotated[UserID, meta(proto=2, int64=True)] = None
    run_as_group: Annotated[UserID, meta(proto=6, int64=True)] = None
    run_as_non_root: Annotated[bool | None, meta(proto=3)] = None
    supplemental_groups: Annotated[list[int] | None, atomic(proto=4, int64=True)] = None
    supplemental_groups_policy: Annotated[str | None, meta(enum=("Merge", "Strict"), proto=12)] = (
        None
    )
    fs_group: Annotated[UserID, meta(proto=5, int64=True)] = None
    sysctls: Annotated[list[Sysctl] | None, atomic(proto=7)] = None
    fs_group_change_policy: Annotated[
        str | None, meta(enum=("OnRootMismatch", "Always"), proto=9)
    ] = None
    seccomp_profile: Annotated[SeccompProfile | None, meta(proto=10)] = None
    app_armor_profile: Annotated[AppArmorProfile | None, meta(proto=11)] = None
    se_linux_change_policy: Annotated[
        str | None, meta(enum=("Recursive", "MountOption"), proto=13)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        for i, gid in enumerate(self.supplemental_groups or ()):
            if not 0 <= gid <= MAX_INT32:
                detail = f"must be between 0 and {MAX_INT32}, inclusive"
                errors.invalid(path.child("supplementalGroups").index(i), gid, detail)
        seen: set[str] = set()
        for i, sysctl in enumerate(self.sysctls or ()):
            name, name_path = sysctl.name or "", path.child("sysctls").index(i).child("name")
            if name and (len(name) > 253 or not _SYSCTL_NAME.match(name)):
                detail = f"must have at most 253 characters and match regex {_SYSCTL_NAME.pattern}"
                errors.invalid(name_path, name, detail)
            elif name in seen:
                errors.duplicate(name_path, name)
            seen.add(name)


class Toleration(Struct):
    """Lets the pod schedule onto (or stay on) nodes with a matching taint."""

    key: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    operator: Annotated[str | None, meta(enum=("Equal", "Exists"), proto=2, omitempty=True)] = None
    value: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    effect: Annotated[str | None, meta(enum=TAINT_EFFECTS, proto=4, omitempty=True)] = None
    toleration_seconds: Annotated[int | None, meta(proto=5, int64=True)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        operator_path = path.child("operator")
        if self.key:
            errors.extend_checked(path.child("key"), self.key, names.is_qualified_name(self.key))
        elif self.operator != "Exists":
            detail = (
                "operator must be Exists when `key` is empty, which means "
                '"match all values and all keys"'
            )
            errors.invalid(operator_path, self.operator or "", detail)
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            detail = "effect must be 'NoExecute' when `tolerationSeconds` is set"
            errors.invalid(path.child("effect"), self.effect or "", detail)
        if self.operator in (None, "", "Equal"):
            problems = names.is_valid_label_value(self.value or "")
            if problems:
                errors.invalid(operator_path, self.value or "", ";".join(problems))
        elif self.operator == "Exists" and self.value:
            detail = "value must be empty when `operator` is 'Exists'"
            errors.invalid(operator_path, self.value, detail)

    def same_except_seconds(self, other: Toleration) -> bool:
        """Whether two tolerations differ at most in their tolerationSeconds."""
        return msgspec.structs.replace(other, toleration_seconds=self.toleration_seconds) == self


class TopologySpreadConstraint(Struct):
    """How evenly matching pods must spread across the domains of a topology key."""

    max_skew: Annotated[int | None, meta(required=True, proto=1)] = None
    topology_key: Annotated[str | None, meta(required=True, proto=2)] = None
    when_unsatisfiable: Annotated[
        str | None, meta(required=True, enum=("DoNotSchedule", "ScheduleAnyway"), proto=3)
    ] = None
    label_selector: Annotated[LabelSelector | None, meta(proto=4)] = None
    min_domains: Annotated[int | None, meta(proto=5)] = None
    node_affinity_policy: Annotated[str | None, meta(enum=("Honor", "Ignore"), proto=6)] = None
    node_taints_policy: Annotated[str | None, meta(enum=("Honor", "Ignore"), proto=7)] = None
    match_label_keys: Annotated[list[str] | None, atomic(proto=8)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.max_skew is not None and self.max_skew <= 0:
            errors.invalid(path.child("maxSkew"), self.max_skew, "must be greater than zero")
        if self.min_domains is not None:
            domains_path = path.child("minDomains")
            if self.min_domains <= 0:
                errors.invalid(domains_path, self.min_domains, "must be greater than zero")
            if self.when_unsatisfiable != "DoNotSchedule":
                detail = (
                    "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not "
                    f"{self.when_unsatisfiable or ''}"
                )
                errors.invalid(domains_path, self.min_domains, detail)
        keys_path = path.child("matchLabelKeys")
        if self.match_label_keys and self.label_selector is None:
            detail = "must not be specified when labelSelector is not set"
            errors.forbidden(keys_path, detail)
        selector_keys = _selector_keys(self.label_selector)
        for i, key in enumerate(self.match_label_keys or ()):
            errors.extend_checked(keys_path.index(i), key, names.is_qualified_name(key))
            if key in selector_keys:
                detail = "exists in both matchLabelKeys and labelSelector"
                errors.invalid(keys_path.index(i), key, detail)


# The pod spec.

_WINDOWS_POD_FORBIDDEN = (
    ("app_armor_profile", "appArmorProfile"),
    ("se_linux_options", "seLinuxOptions"),
    ("seccomp_profile", "seccompProfile"),
    ("fs_group", "fsGroup"),
    ("fs_group_change_policy", "fsGroupChangePolicy"),
    ("sysctls", "sysctls"),
    ("run_as_user", "runAsUser"),
    ("run_as_group", "runAsGroup"),
    ("supplemental_groups", "supplementalGroups"),
    ("supplemental_groups_policy", "supplementalGroupsPolicy"),
    ("se_linux_change_policy", "seLinuxChangePolicy"),
)
_WINDOWS_CONTAINER_FORBIDDEN = (
    ("app_armor_profile", "appArmorProfile"),
    ("se_linux_options", "seLinuxOptions"),
    ("seccomp_profile", "seccompProfile"),
    ("capabilities", "capabilities"),
    ("read_only_root_filesystem", "readOnlyRootFilesystem"),
    ("privileged", "privileged"),
    ("allow_privilege_escalation", "allowPrivilegeEscalation"),
    ("proc_mount", "procMount"),
    ("run_as_user", "runAsUser"),
    ("run_as_group", "runAsGroup"),
)
# Fields an ephemeral container may not set (upstream keeps an allow-list of the others).
_EPHEMERAL_FORBIDDEN = (
    ("ports", "ports"),
    ("resources", "resources"),
    ("resize_policy", "resizePolicy"),
    ("restart_policy", "restartPolicy"),
    ("restart_policy_rules", "restartPolicyRules"),
    ("liveness_probe", "livenessProbe"),
    ("readiness_probe", "readinessProbe"),
    ("startup_probe", "startupProbe"),
    ("lifecycle", "lifecycle"),
)
_INIT_FORBIDDEN = (
    ("lifecycle", "lifecycle"),
    ("liveness_probe", "livenessProbe"),
    ("readiness_probe", "readinessProbe"),
    ("startup_probe", "startupProbe"),
)
_NET_SYSCTL_PREFIXES = ("net.", "net/")
_IPC_SYSCTL_PREFIXES = (
    "kernel.shm",
    "kernel/shm",
    "kernel.msg",
    "kernel/msg",
    "kernel.sem",
    "kernel/sem",
)


class PodSpec(Struct):
    """What a pod runs and how: containers, volumes, scheduling, security, DNS."""

    volumes: Annotated[
        list[Volume] | None, meta(merge_key="name", patch_strategy="merge,retainKeys", proto=1)
    ] = None
    init_containers: Annotated[list[Container] | None, meta(merge_key="name", proto=20)] = None
    containers: Annotated[
        list[Container] | None, meta(required=True, merge_key="name", proto=2)
    ] = None
    ephemeral_containers: Annotated[
        list[EphemeralContainer] | None, meta(merge_key="name", proto=34)
    ] = None
    restart_policy: Annotated[str | None, meta(enum=RESTART_POLICIES, proto=3, omitempty=True)] = (
        None
    )
    termination_grace_period_seconds: Annotated[int | None, meta(proto=4, int64=True)] = None
    active_deadline_seconds: Annotated[
        int | None, meta(minimum=1, maximum=MAX_INT32, proto=5, int64=True)
    ] = None
    dns_policy: Annotated[str | None, meta(enum=DNS_POLICIES, proto=6, omitempty=True)] = None
    node_selector: Annotated[dict[str, str] | None, meta(map_type="atomic", proto=7)] = None
    service_account_name: Annotated[
        str | None, meta(format=DNS1123_SUBDOMAIN, proto=8, omitempty=True)
    ] = None
    service_account: Annotated[str | None, meta(proto=9, omitempty=True)] = None
    automount_service_account_token: Annotated[bool | None, meta(proto=21)] = None
    node_name: Annotated[str | None, meta(format=DNS1123_SUBDOMAIN, proto=10, omitempty=True)] = (
        None
    )
    host_network: Annotated[bool | None, meta(proto=11, omitempty=True)] = None
    host_pid: Annotated[bool | None, meta(proto=12, omitempty=True)] = msgspec.field(
        default=None, name="hostPID"
    )
    host_ipc: Annotated[bool | None, meta(proto=13, omitempty=True)] = msgspec.field(
        default=None, name="hostIPC"
    )
    share_process_namespace: Annotated[bool | None, meta(proto=27)] = None
    security_context: Annotated[PodSecurityContext | None, meta(proto=14)] = None
    image_pull_secrets: Annotated[
        list[LocalObjectReference] | None, meta(merge_key="name", proto=15)
    ] = None
    hostname: Annotated[str | None, meta(format=DNS1123_LABEL, proto=16, omitempty=True)] = None
    subdomain: Annotated[str | None, meta(format=DNS1123_LABEL, proto=17, omitempty=True)] = None
    affinity: Annotated[Affinity | None, meta(proto=18)] = None
    scheduler_name: Annotated[str | None, meta(proto=19, omitempty=True)] = None
    tolerations: Annotated[list[Toleration] | None, atomic(proto=22)] = None
    host_aliases: Annotated[list[HostAlias] | None, meta(merge_key="ip", proto=23)] = None
    priority_class_name: Annotated[
        str | None, meta(format=DNS1123_SUBDOMAIN, proto=24, omitempty=True)
    ] = None
    priority: Annotated[int | None, meta(proto=25)] = None
    dns_config: Annotated[PodDNSConfig | None, meta(proto=26)] = None
    readiness_gates: Annotated[list[PodReadinessGate] | None, atomic(proto=28)] = None
    runtime_class_name: Annotated[str | None, meta(format=DNS1123_SUBDOMAIN, proto=29)] = None
    enable_service_links: Annotated[bool | None, meta(proto=30)] = None
    preemption_policy: Annotated[
        str | None, meta(enum=("PreemptLowerPriority", "Never"), proto=31)
    ] = None
    overhead: Annotated[ResourceList | None, meta(proto=32)] = None
    topology_spread_constraints: Annotated[
        list[TopologySpreadConstraint] | None,
        meta(merge_key="topologyKey", list_map_keys=("topologyKey", "whenUnsatisfiable"), proto=33),
    ] = None
    set_hostname_as_fqdn: Annotated[bool | None, meta(proto=35)] = msgspec.field(
        default=None, name="setHostnameAsFQDN"
    )
    os: Annotated[PodOS | None, meta(proto=36)] = None
    host_users: Annotated[bool | None, meta(proto=37)] = None
    scheduling_gates: Annotated[
        list[PodSchedulingGate] | None, meta(merge_key="name", proto=38)
    ] = None
    resource_claims: Annotated[
        list[PodResourceClaim] | None,
        meta(merge_key="name", patch_strategy="merge,retainKeys", proto=39),
    ] = None
    resources: Annotated[ResourceRequirements | None, meta(proto=40)] = None
    hostname_override: Annotated[str | None, meta(proto=41)] = None
    scheduling_group: Annotated[PodSchedulingGroup | None, meta(proto=43)] = None

    def set_defaults(self) -> None:
        self.dns_policy = self.dns_policy or "ClusterFirst"
        self.restart_policy = self.restart_policy or "Always"
        if self.security_context is None:
            self.security_context = PodSecurityContext()
        if self.termination_grace_period_seconds is None:
            self.termination_grace_period_seconds = 30
        self.scheduler_name = self.scheduler_name or "default-scheduler"
        # The deprecated serviceAccount mirrors serviceAccountName (upstream's conversion).
        self.service_account_name = self.service_account_name or self.service_account
        self.service_account = self.service_account_name

    def all_containers(self, path: Path) -> Iterator[tuple[Path, Container]]:
        """Every container, regular then init then ephemeral, with its path below ``path``."""
        for name, containers in (
            ("containers", self.containers),
            ("initContainers", self.init_containers),
            ("ephemeralContainers", self.ephemeral_containers),
        ):
            for i, container in enumerate(containers or ()):
                yield path.child(name).index(i), container

    def validate(self, path: Path, errors: ErrorList) -> None:
        # Defaulting fills these; upstream's validation (not its OpenAPI schema) requires them.
        for name, value in (
            ("restartPolicy", self.restart_policy),
            ("terminationGracePeriodSeconds", self.termination_grace_period_seconds),
            ("dnsPolicy", self.dns_policy),
        ):
            if value is None or value == "":
                errors.required(path.child(name))
        volumes = self._volumes(path.child("volumes"), errors)
        pod_claims = self._claims(path.child("resourceClaims"), errors)
        seen: set[str] = set()
        for container_path, container in self.all_containers(path):
            if container.name in seen:
                errors.duplicate(container_path.child("name"), container.name)
            elif container.name:
                seen.add(container.name)
            self._validate_container(container, container_path, volumes, errors)
            if container.resources is not None:
                claims_path = container_path.child("resources").child("claims")
                container.resources.validate_claims(pod_claims, claims_path, errors)
        self._validate_roles(path, errors)
        self._validate_host_network(path, errors)
        names.validate_labels(self.node_selector, path.child("nodeSelector"), errors)
        self._validate_dns(path, errors)
        self._validate_gates(path.child("schedulingGates"), errors)
        self._validate_spread(path.child("topologySpreadConstraints"), errors)
        self._validate_security(path, errors)
        if self.overhead:
            validate_resource_lists(self.overhead, None, path.child("overhead"), errors)
        if self.resources is not None:
            self._validate_pod_resources(path.child("resources"), errors)

    def _volumes(self, path: Path, errors: ErrorList) -> dict[str, Volume]:
        """The volumes by name; a name given twice is reported."""
        volumes: dict[str, Volume] = {}
        for i, volume in enumerate(self.volumes or ()):
            if volume.name in volumes:
                errors.duplicate(path.index(i).child("name"), volume.name)
            elif volume.name:
                volumes[volume.name] = volume
        return volumes

    def _claims(self, path: Path, errors: ErrorList) -> set[str]:
        """The names of the pod's resource claims; a name given twice is reported."""
        claims: set[str] = set()
        for i, claim in enumerate(self.resource_claims or ()):
            if claim.name in claims:
                errors.duplicate(path.index(i).child("name"), claim.name)
            elif claim.name:
                claims.add(claim.name)
        return claims

    def _validate_container(
        self, container: Container, path: Path, volumes: dict[str, Volume], errors: ErrorList
    ) -> None:
        """What a container must agree on with the rest of the pod."""
        self._validate_mounts(container, path, volumes, errors)
        self._validate_devices(container, path, volumes, errors)
        for i, policy in enumerate(container.resize_policy or ()):
            if self.restart_policy == "Never" and policy.restart_policy != "NotRequired":
                detail = "must be 'NotRequired' when `restartPolicy` is 'Never'"
                errors.invalid(path.child("resizePolicy").index(i), policy.restart_policy, detail)
        grace = self.termination_grace_period_seconds
        for name, handler in container.lifecycle.handlers() if container.lifecycle else ():
            seconds = handler.sleep.seconds if handler.sleep else None
            if grace is not None and seconds is not None and not 0 <= seconds <= grace:
                detail = (
                    f"must be non-negative and less than terminationGracePeriodSeconds ({grace})"
                )
                sleep_path = path.child("lifecycle").child(name).child("sleep")
                errors.invalid(sleep_path, seconds, detail)
        context = container.security_context
        if (
            context is not None
            and context.proc_mount == "Unmasked"
            and self.host_users is not False
        ):
            detail = "`hostUsers` must be false to use `Unmasked`"
            proc_path = path.child("securityContext").child("procMount")
            errors.invalid(proc_path, context.proc_mount, detail)

    @staticmethod
    def _validate_mounts(
        container: Container, path: Path, volumes: dict[str, Volume], errors: ErrorList
    ) -> None:
        devices = {d.name: d.device_path for d in container.volume_devices or () if d.name}
        privileged = bool(container.security_context and container.security_context.privileged)
        mount_paths: set[str] = set()
        for i, mount in enumerate(container.volume_mounts or ()):
            mount_path = path.child("volumeMounts").index(i)
            volume = volumes.get(mount.name or "")
            if volume is None:
                errors.not_found(mount_path.child("name"), mount.name or "")
            elif volume.image is not None:
                for value, name in (
                    (mount.sub_path, "subPath"),
                    (mount.sub_path_expr, "subPathExpr"),
                ):
                    if value:
                        detail = "not allowed in image volume sources"
                        errors.invalid(mount_path.child(name), value, detail)
            if mount.mount_path in mount_paths:
                errors.invalid(mount_path.child("mountPath"), mount.mount_path, "must be unique")
            mount_paths.add(mount.mount_path or "")
            if mount.name in devices:
                detail = "must not already exist in volumeDevices"
                errors.invalid(mount_path.child("name"), mount.name, detail)
            if mount.mount_path in devices.values():
                detail = "must not already exist as a path in volumeDevices"
                errors.invalid(mount_path.child("mountPath"), mount.mount_path, detail)
            if mount.mount_propagation == "Bidirectional" and not privileged:
                detail = (
                    "Bidirectional mount propagation is available only to privileged containers"
                )
                errors.forbidden(path.child("volumeMounts").child("mountPropagation"), detail)

    @staticmethod
    def _validate_devices(
        container: Container, path: Path, volumes: dict[str, Volume], errors: ErrorList
    ) -> None:
        mounts = {m.name: m.mount_path for m in container.volume_mounts or () if m.name}
        device_names: set[str] = set()
        device_paths: set[str] = set()
        for i, device in enumerate(container.volume_devices or ()):
            device_path = path.child("volumeDevices").index(i)
            name, dev = device.name or "", device.device_path or ""
            if name in device_names:
                errors.invalid(device_path.child("name"), name, "must be unique")
            volume = volumes.get(name)
            if volume is None:
                errors.not_found(device_path.child("name"), name)
            elif not volume.is_claim():
                detail = (
                    "can only use volume source type of PersistentVolumeClaim or Ephemeral for "
                    "block mode"
                )
                errors.invalid(device_path.child("name"), name, detail)
            if dev in device_paths:
                errors.invalid(device_path.child("devicePath"), dev, "must be unique")
            if ".." in dev.split("/"):
                detail = "can not contain backsteps ('..')"
                errors.invalid(device_path.child("devicePath"), dev, detail)
            else:
                device_paths.add(dev)
            if name in mounts:
                detail = "must not already exist in volumeMounts"
                errors.invalid(device_path.child("name"), name, detail)
            if dev in mounts.values():
                detail = "must not already exist as a path in volumeMounts"
                errors.invalid(device_path.child("devicePath"), dev, detail)
            if name:
                device_names.add(name)

    def _validate_roles(self, path: Path, errors: ErrorList) -> None:
        """What regular, init and ephemeral containers may each set, and host ports."""
        init_path = path.child("initContainers")
        for i, container in enumerate(self.init_containers or ()):
            _validate_host_ports([container], init_path, errors, first=i)
            policy_path = init_path.index(i).child("restartPolicy")
            if container.restart_policy is not None and not container.is_sidecar():
                errors.not_supported(policy_path, container.restart_policy, ["Always"])
            if container.is_sidecar():
                continue
            for attr, name in _INIT_FORBIDDEN:
                if getattr(container, attr) is not None:
                    detail = "may not be set for init containers without restartPolicy=Always"
                    errors.forbidden(init_path.index(i).child(name), detail)
        for i, container in enumerate(self.containers or ()):
            if container.restart_policy is not None:
                policy_path = path.child("containers").index(i).child("restartPolicy")
                errors.forbidden(policy_path, "may not be set for non-init containers")
        _validate_host_ports(self.containers or [], path.child("containers"), errors)
        others = {c.name for c in (*(self.containers or ()), *(self.init_containers or ()))}
        for i, container in enumerate(self.ephemeral_containers or ()):
            ec_path = path.child("ephemeralContainers").index(i)
            target = container.target_container_name
            if target and target not in others:
                errors.not_found(ec_path.child("targetContainerName"), target)
            for attr, name in _EPHEMERAL_FORBIDDEN:
                value = getattr(container, attr)
                # Set means not the zero value: kubectl debug sends ``resources: {}``.
                if value is not None and value != type(value)():
                    detail = "cannot be set for an Ephemeral Container"
                    errors.forbidden(ec_path.child(name), detail)
            for j, mount in enumerate(container.volume_mounts or ()):
                mount_path = ec_path.child("volumeMounts").index(j)
                for value, name in (
                    (mount.sub_path, "subPath"),
                    (mount.sub_path_expr, "subPathExpr"),
                ):
                    if value:
                        detail = "cannot be set for an Ephemeral Container"
                        errors.forbidden(mount_path.child(name), detail)

    def _validate_host_network(self, path: Path, errors: ErrorList) -> None:
        if not self.host_network:
            return
        for i, container in enumerate(self.containers or ()):
            for j, port in enumerate(container.ports or ()):
                if port.host_port and port.host_port != port.container_port:
                    port_path = path.child("containers").index(i).child("ports").index(j)
                    detail = "must match `containerPort` when `hostNetwork` is true"
                    errors.invalid(port_path.child("hostPort"), port.host_port, detail)

    def _validate_dns(self, path: Path, errors: ErrorList) -> None:
        if self.dns_policy != "None":
            return
        config_path = path.child("dnsConfig")
        if self.dns_config is None:
            errors.required(config_path, "must provide `dnsConfig` when `dnsPolicy` is None")
        elif not self.dns_config.nameservers:
            detail = "must provide at least one DNS nameserver when `dnsPolicy` is None"
            errors.required(config_path.child("nameservers"), detail)

    def _validate_gates(self, path: Path, errors: ErrorList) -> None:
        seen: set[str] = set()
        for i, gate in enumerate(self.scheduling_gates or ()):
            name = gate.name or ""
            if name:
                errors.extend_checked(path.index(i), name, names.is_qualified_name(name))
            if name in seen:
                errors.duplicate(path.index(i), name)
            seen.add(name)

    def _validate_spread(self, path: Path, errors: ErrorList) -> None:
        """No two constraints may share a topology key and an unsatisfiable action."""
        constraints = self.topology_spread_constraints or []
        for i, constraint in enumerate(constraints):
            pair = (constraint.topology_key, constraint.when_unsatisfiable)
            if any((c.topology_key, c.when_unsatisfiable) == pair for c in constraints[i + 1 :]):
                errors.duplicate(
                    path.index(i).child("{topologyKey, whenUnsatisfiable}"),
                    f"{{{pair[0] or ''}, {pair[1] or ''}}}",
                )

    def _validate_security(self, path: Path, errors: ErrorList) -> None:
        context = self.security_context or PodSecurityContext()
        context_path = path.child("securityContext")
        if self.share_process_namespace and self.host_pid:
            errors.invalid(
                context_path.child("shareProcessNamespace"),
                True,
                "ShareProcessNamespace and HostPID cannot both be enabled",
            )
        for i, sysctl in enumerate(context.sysctls or ()):
            name = sysctl.name or ""
            name_path = context_path.child("sysctls").index(i).child("name")
            if self.host_network and name.startswith(_NET_SYSCTL_PREFIXES):
                errors.invalid(name_path, name, "may not be specified when 'hostNetwork' is true")
            elif self.host_ipc and name.startswith(_IPC_SYSCTL_PREFIXES):
                errors.invalid(name_path, name, "may not be specified when 'hostIPC' is true")
        if self.host_users is False:
            for flag, name in (
                (self.host_network, "hostNetwork"),
                (self.host_pid, "HostPID"),
                (self.host_ipc, "HostIPC"),
            ):
                if flag:
                    errors.forbidden(path.child(name), "when `pod.Spec.HostUsers` is false")
        os_name = self.os.name if self.os else None
        if os_name == "linux":
            self._validate_linux(path, errors)
        elif os_name == "windows":
            self._validate_windows(path, errors)

    def _validate_linux(self, path: Path, errors: ErrorList) -> None:
        detail = "windows options cannot be set for a linux pod"
        if self.security_context is not None and self.security_context.windows_options:
            errors.forbidden(path.child("securityContext").child("windowsOptions"), detail)
        for container_path, container in self.all_containers(path):
            if container.security_context and container.security_context.windows_options:
                options_path = container_path.child("securityContext").child("windowsOptions")
                errors.forbidden(options_path, detail)

    def _validate_windows(self, path: Path, errors: ErrorList) -> None:
        detail = "cannot be set for a windows pod"
        context = self.security_context or PodSecurityContext()
        for attr, name in _WINDOWS_POD_FORBIDDEN:
            if getattr(context, attr) is not None:
                errors.forbidden(path.child("securityContext").child(name), detail)
        for value, name in (
            (self.host_users, "hostUsers"),
            (self.host_pid or None, "hostPID"),
            (self.host_ipc or None, "hostIPC"),
            (self.share_process_namespace, "shareProcessNamespace"),
        ):
            if value is not None:
                errors.forbidden(path.child(name), detail)
        for container_path, container in self.all_containers(path):
            context_path = container_path.child("securityContext")
            for attr, name in _WINDOWS_CONTAINER_FORBIDDEN:
                if getattr(container.security_context, attr, None) is not None:
                    errors.forbidden(context_path.child(name), detail)

    def _validate_pod_resources(self, path: Path, errors: ErrorList) -> None:
        """Pod-level resources: cpu, memory and hugepages only, and no claims."""
        resources = self.resources or ResourceRequirements()
        if resources.claims is not None:
            detail = "claims cannot be set for Resources at pod-level"
            errors.forbidden(path.child("claims"), detail)
        for list_name, values in (("limits", resources.limits), ("requests", resources.requests)):
            for resource in values or {}:
                if not _is_pod_level(resource):
                    supported = ["cpu", "hugepages-", "memory"]
                    errors.not_supported(path.child(list_name).key(resource), resource, supported)


def _validate_host_ports(
    containers: list[Container], path: Path, errors: ErrorList, first: int = 0
) -> None:
    """No two ports of ``containers`` (numbered from ``first``) may take the same host port,
    protocol and host IP."""
    seen: set[str] = set()
    for i, container in enumerate(containers, start=first):
        for j, port in enumerate(container.ports or ()):
            if not port.host_port:
                continue
            key = f"{port.protocol or ''}/{port.host_ip or ''}/{port.host_port}"
            if key in seen:
                errors.duplicate(path.index(i).child("ports").index(j).child("hostPort"), key)
            seen.add(key)


def qos_class(spec: PodSpec | None) -> str:
    """The QoS class of a pod: Guaranteed, Burstable or BestEffort (upstream ``ComputePodQOS``).

    Only cpu and memory count, and only positive amounts.  Pod-level resources decide when the
    spec has them; otherwise the regular and init containers do.  Guaranteed needs every
    container (or the pod level, when it limits anything) to limit both, and the summed
    requests to equal the summed limits; BestEffort means nothing is requested or limited.
    """
    spec = spec or PodSpec()
    pod_level = spec.resources is not None
    groups = (
        [spec.resources]
        if spec.resources is not None
        else [c.resources for c in (*(spec.containers or ()), *(spec.init_containers or ()))]
    )
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    guaranteed = True
    for resources in groups:
        resources = resources or ResourceRequirements()
        _add_positive(requests, resources.requests)
        limited = _add_positive(limits, resources.limits)
        if (resources.limits or not pod_level) and not limited >= set(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    equal = requests.keys() == limits.keys() and all(limits[r] == q for r, q in requests.items())
    return "Guaranteed" if guaranteed and equal else "Burstable"


def _is_pod_level(resource: str) -> bool:
    """Whether pod-level resources may name ``resource``."""
    return resource in _QOS_RESOURCES or resource_names.is_hugepages(resource)


class Amounts(Protocol):
    """Amounts of resources that add up and rise to another's, whatever their unit."""

    def add(self, other: Self) -> None: ...

    def maximum(self, other: Self) -> None: ...

    def copy(self) -> Self: ...


class Quantities(dict[str, Quantity]):
    """Amounts by resource name, as the API writes them."""

    @classmethod
    def of(cls, values: ResourceList | None) -> Quantities:
        """The amounts of a resource list (values that are no quantity are left out)."""
        parsed = ((name, parse_quantity(value)) for name, value in (values or {}).items())
        return cls({name: amount for name, amount in parsed if amount is not None})

    def add(self, other: Quantities) -> None:
        for resource, amount in other.items():
            self[resource] = self[resource] + amount if resource in self else amount

    def maximum(self, other: Quantities) -> None:
        for resource, amount in other.items():
            if resource not in self or self[resource] < amount:
                self[resource] = amount

    def copy(self) -> Quantities:
        return Quantities(self)


AmountsT = TypeVar("AmountsT", bound=Amounts)


def containers_together(
    spec: PodSpec, amounts: Callable[[Container], AmountsT], nothing: Callable[[], AmountsT]
) -> AmountsT:
    """What a pod's containers need together (upstream ``AggregateContainerRequests`` and
    ``...Limits``), for ``amounts`` of each container: regular containers and sidecars (init
    containers with ``restartPolicy: Always``) run together and add up; each other init
    container runs alone beside the sidecars started before it, so the larger peak counts.
    The one definition for the API's defaults, the scheduler, quota and LimitRanger."""
    total = nothing()
    for container in spec.containers or ():
        total.add(amounts(container))
    sidecars = nothing()
    peak = nothing()
    for container in spec.init_containers or ():
        if container.is_sidecar():
            sidecars.add(amounts(container))
            peak.maximum(sidecars)
        else:
            during = sidecars.copy()
            during.add(amounts(container))
            peak.maximum(during)
    total.add(sidecars)
    total.maximum(peak)
    return total


def container_requests(container: Container) -> Quantities:
    return Quantities.of(container.resources.requests if container.resources else None)


def _default_pod_requests(spec: PodSpec) -> None:
    """Pod-level limits imply pod-level requests: what the containers request together, else
    the limit (upstream ``defaultPodRequests``)."""
    resources = spec.resources
    if resources is None or not resources.limits:
        return
    requests = dict(resources.requests or {})
    for resource, amount in containers_together(spec, container_requests, Quantities).items():
        if (
            resource not in requests
            and _is_pod_level(resource)
            and resource_names.overcommit_allowed(resource)
        ):
            requests[resource] = str(amount)
    for resource, limit in resources.limits.items():
        if resource not in requests and _is_pod_level(resource):
            requests[resource] = limit
    resources.requests = requests or None


def _add_positive(totals: dict[str, Any], resources: ResourceList | None) -> set[str]:
    """Add the positive cpu and memory amounts of ``resources`` to ``totals``; return the
    resources that had one."""
    found: set[str] = set()
    for resource, value in (resources or {}).items():
        amount = parse_quantity(value)
        if resource in _QOS_RESOURCES and amount is not None and amount > ZERO:
            totals[resource] = totals[resource] + amount if resource in totals else amount
            found.add(resource)
    return found


# Pod status.


class PodCondition(Struct):
    """An observation about a pod: PodScheduled, Initialized, ContainersReady, Ready, ..."""

    type: Annotated[str | None, meta(proto=1)] = None
    observed_generation: Annotated[int | None, meta(proto=7, int64=True, omitempty=True)] = None
    status: Annotated[str | None, meta(proto=2)] = None
    last_probe_time: Annotated[Time | None, meta(proto=3, omitempty=True)] = None
    last_transition_time: Annotated[Time | None, meta(proto=4, omitempty=True)] = None
    reason: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=6, omitempty=True)] = None


class ContainerStateWaiting(Struct):
    """A container not running yet, and why (``ContainerCreating``, ``ImagePullBackOff``)."""

    reason: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=2, omitempty=True)] = None


class ContainerStateRunning(Struct):
    """A running container, and since when."""

    started_at: Annotated[Time | None, meta(proto=1, omitempty=True)] = None


class ContainerStateTerminated(Struct):
    """A container that exited: how, when, and why."""

    exit_code: Annotated[int | None, meta(proto=1)] = None
    signal: Annotated[int | None, meta(proto=2, omitempty=True)] = None
    reason: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    started_at: Annotated[Time | None, meta(proto=5, omitempty=True)] = None
    finished_at: Annotated[Time | None, meta(proto=6, omitempty=True)] = None
    container_id: Annotated[str | None, meta(proto=7, omitempty=True)] = msgspec.field(
        default=None, name="containerID"
    )


class ContainerState(Struct):
    """The state a container is in; at most one member is set."""

    waiting: Annotated[ContainerStateWaiting | None, meta(proto=1)] = None
    running: Annotated[ContainerStateRunning | None, meta(proto=2)] = None
    terminated: Annotated[ContainerStateTerminated | None, meta(proto=3)] = None


class ImageVolumeStatus(Struct):
    """The image an image volume was resolved to."""

    image_ref: Annotated[str | None, meta(proto=1, omitempty=True)] = None


class VolumeStatus(Struct):
    """The status of a mounted volume, by source type."""

    image: Annotated[ImageVolumeStatus | None, meta(proto=1)] = None


class VolumeMountStatus(Struct):
    """A volume as the container actually mounted it."""

    name: Annotated[str | None, meta(proto=1)] = None
    mount_path: Annotated[str | None, meta(proto=2)] = None
    read_only: Annotated[bool | None, meta(proto=3, omitempty=True)] = None
    recursive_read_only: Annotated[str | None, meta(proto=4)] = None
    volume_status: Annotated[VolumeStatus | None, meta(proto=5)] = None


class LinuxContainerUser(Struct):
    """The identity a Linux container's first process runs with."""

    uid: Annotated[int | None, meta(proto=1, int64=True)] = None
    gid: Annotated[int | None, meta(proto=2, int64=True)] = None
    supplemental_groups: Annotated[list[int] | None, atomic(proto=3, int64=True)] = None


class ContainerUser(Struct):
    """The identity a container's first process runs with."""

    linux: Annotated[LinuxContainerUser | None, meta(proto=1)] = None


class ResourceHealth(Struct):
    """The health of one device allocated to a container."""

    resource_id: Annotated[str | None, meta(proto=1)] = msgspec.field(
        default=None, name="resourceID"
    )
    health: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=6)] = None


class ResourceStatus(Struct):
    """The health of the devices of one resource allocated to a container."""

    name: Annotated[str | None, meta(proto=1)] = None
    resources: Annotated[
        list[ResourceHealth] | None, meta(list_type="map", list_map_keys=("resourceID",), proto=2)
    ] = None


class ContainerStatus(Struct):
    """What the kubelet reports about one container."""

    name: Annotated[str | None, meta(proto=1)] = None
    state: Annotated[ContainerState | None, meta(proto=2)] = None
    last_state: Annotated[ContainerState | None, meta(proto=3)] = None
    ready: Annotated[bool | None, meta(proto=4)] = None
    restart_count: Annotated[int | None, meta(proto=5)] = None
    image: Annotated[str | None, meta(proto=6)] = None
    image_id: Annotated[str | None, meta(proto=7)] = msgspec.field(default=None, name="imageID")
    container_id: Annotated[str | None, meta(proto=8, omitempty=True)] = msgspec.field(
        default=None, name="containerID"
    )
    started: Annotated[bool | None, meta(proto=9)] = None
    allocated_resources: Annotated[ResourceList | None, meta(proto=10)] = None
    resources: Annotated[ResourceRequirements | None, meta(proto=11)] = None
    volume_mounts: Annotated[
        list[VolumeMountStatus] | None, meta(merge_key="mountPath", proto=12)
    ] = None
    user: Annotated[ContainerUser | None, meta(proto=13)] = None
    allocated_resources_status: Annotated[
        list[ResourceStatus] | None, meta(merge_key="name", proto=14)
    ] = None
    stop_signal: Annotated[str | None, meta(proto=15)] = None


class HostIP(Struct):
    """An IP address of the node the pod runs on."""

    ip: Annotated[str | None, meta(required=True, format=IP_ADDRESS, proto=1)] = None


class PodIP(Struct):
    """An IP address of the pod."""

    ip: Annotated[str | None, meta(required=True, format=IP_ADDRESS, proto=1)] = None


class PodResourceClaimStatus(Struct):
    """The ResourceClaim generated for one of the pod's claims."""

    name: Annotated[str | None, meta(proto=1)] = None
    resource_claim_name: Annotated[str | None, meta(proto=2)] = None


class ContainerExtendedResourceRequest(Struct):
    """How an extended resource request of a container maps to a device request."""

    container_name: Annotated[str | None, meta(proto=1)] = None
    resource_name: Annotated[str | None, meta(proto=2)] = None
    request_name: Annotated[str | None, meta(proto=3)] = None


class PodExtendedResourceClaimStatus(Struct):
    """The ResourceClaim created for the pod's extended resource requests."""

    request_mappings: Annotated[list[ContainerExtendedResourceRequest] | None, atomic(proto=1)] = (
        None
    )
    resource_claim_name: Annotated[str | None, meta(proto=2)] = None


class NodeAllocatableResourceClaimStatus(Struct):
    """Node-allocatable resources a ResourceClaim gave some containers of the pod."""

    resource_claim_name: Annotated[str | None, meta(proto=1)] = None
    containers: Annotated[list[str] | None, meta(list_type="set", proto=2)] = None
    resources: Annotated[ResourceList | None, meta(proto=3)] = None


class PodStatus(Struct):
    """Where the pod is in its life, where it runs, and the state of each container."""

    observed_generation: Annotated[int | None, meta(proto=17, int64=True, omitempty=True)] = None
    phase: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    conditions: Annotated[list[PodCondition] | None, meta(merge_key="type", proto=2)] = None
    message: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    reason: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    nominated_node_name: Annotated[str | None, meta(proto=11, omitempty=True)] = None
    host_ip: Annotated[str | None, meta(proto=5, omitempty=True)] = msgspec.field(
        default=None, name="hostIP"
    )
    host_ips: Annotated[list[HostIP] | None, meta(merge_key="ip", list_type="atomic", proto=16)] = (
        msgspec.field(default=None, name="hostIPs")
    )
    pod_ip: Annotated[str | None, meta(proto=6, omitempty=True)] = msgspec.field(
        default=None, name="podIP"
    )
    pod_ips: Annotated[list[PodIP] | None, meta(merge_key="ip", proto=12)] = msgspec.field(
        default=None, name="podIPs"
    )
    start_time: Annotated[Time | None, meta(proto=7)] = None
    init_container_statuses: Annotated[list[ContainerStatus] | None, atomic(proto=10)] = None
    container_statuses: Annotated[list[ContainerStatus] | None, atomic(proto=8)] = None
    qos_class: Annotated[str | None, meta(proto=9, omitempty=True)] = None
    ephemeral_container_statuses: Annotated[list[ContainerStatus] | None, atomic(proto=13)] = None
    resize: Annotated[str | None, meta(proto=14, omitempty=True)] = None
    resource_claim_statuses: Annotated[
        list[PodResourceClaimStatus] | None,
        meta(merge_key="name", patch_strategy="merge,retainKeys", proto=15),
    ] = None
    extended_resource_claim_status: Annotated[
        PodExtendedResourceClaimStatus | None, meta(proto=18)
    ] = None
    allocated_resources: Annotated[ResourceList | None, meta(proto=19)] = None
    resources: Annotated[ResourceRequirements | None, meta(proto=20)] = None
    node_allocatable_resource_claim_statuses: Annotated[
        list[NodeAllocatableResourceClaimStatus] | None,
        meta(merge_key="resourceClaimName", proto=21),
    ] = None

    def set_defaults(self) -> None:
        # podIP and hostIP are the first of podIPs and hostIPs; when they disagree the single
        # field wins, as it does in upstream's conversion.
        if self.pod_ip and (not self.pod_ips or self.pod_ips[0].ip != self.pod_ip):
            self.pod_ips = [PodIP(ip=self.pod_ip)]
        elif self.pod_ips:
            self.pod_ip = self.pod_ips[0].ip
        if self.host_ip and (not self.host_ips or self.host_ips[0].ip != self.host_ip):
            self.host_ips = [HostIP(ip=self.host_ip)]
        elif self.host_ips:
            self.host_ip = self.host_ips[0].ip

    def validate(self, path: Path, errors: ErrorList) -> None:
        host_ips = self.host_ips or []
        if host_ips and host_ips[0].ip != (self.host_ip or ""):
            ip_path = path.child("hostIPs").index(0).child("ip")
            errors.invalid(ip_path, host_ips[0].ip, "must be equal to `hostIP`")
        for name, ips in (
            ("podIPs", [entry.ip for entry in self.pod_ips or ()]),
            ("hostIPs", [entry.ip for entry in host_ips]),
        ):
            seen: set[str | None] = set()
            for i, ip in enumerate(ips):
                if ip in seen:
                    errors.duplicate(path.child(name).index(i), {"ip": ip})
                seen.add(ip)

    def first_pod_ip(self) -> str:
        """The pod's primary IP ("" when it has none yet)."""
        return self.pod_ips[0].ip or "" if self.pod_ips else self.pod_ip or ""

    def condition_true(self, condition_type: str) -> bool:
        """Whether the pod has the condition with status True."""
        return any(c.type == condition_type and c.status == "True" for c in self.conditions or ())


# Templates and the kinds.


class PodTemplateSpec(Struct):
    """The pod a workload controller creates: labels, annotations and a pod spec."""

    metadata: Annotated[ObjectMeta | None, meta(proto=1)] = None
    spec: Annotated[PodSpec | None, meta(required=True, proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_template_metadata(self.metadata, path.child("metadata"), errors)
        if self.spec is not None and self.spec.ephemeral_containers:
            errors.forbidden(
                path.child("spec").child("ephemeralContainers"),
                "ephemeral containers not allowed in pod template",
            )

    def labels(self) -> dict[str, str]:
        """The labels pods made from the template get."""
        return (self.metadata.labels if self.metadata else None) or {}


def _containers(template: PodTemplateSpec | None) -> list[Container]:
    if template is None or template.spec is None:
        return []
    return list(template.spec.containers or ())


def template_columns(
    template_of: Callable[[Any], PodTemplateSpec | None], *, priority: int = 1
) -> tuple[Column, Column]:
    """The CONTAINERS and IMAGES columns of a kind whose pods come from a template (``-o wide``
    only unless ``priority`` is 0)."""
    return (
        Column(
            "Containers",
            lambda o, now: ",".join(c.name or "" for c in _containers(template_of(o))),
            priority=priority,
            description="Names of each container in the template.",
        ),
        Column(
            "Images",
            lambda o, now: ",".join(c.image or "" for c in _containers(template_of(o))),
            priority=priority,
            description="Images referenced by each container in the template.",
        ),
    )


def format_labels(labels: dict[str, str] | None) -> str:
    """Labels as kubectl prints them: ``a=b,c=d`` sorted by key, or ``<none>``."""
    return join_or_none([f"{k}={v}" for k, v in sorted((labels or {}).items())])


class _PodSummary(msgspec.Struct):
    """What ``kubectl get pods`` says about a pod: ready/total, status text, restarts."""

    ready: int = 0
    total: int = 0
    reason: str = ""
    restarts: int = 0
    last_restart: datetime.datetime | None = None


def _latest(current: datetime.datetime | None, status: ContainerStatus) -> datetime.datetime | None:
    """The later of ``current`` and when the container last terminated."""
    last = status.last_state.terminated if status.last_state else None
    finished = last.finished_at if last else None
    if finished is None or (current is not None and finished <= current):
        return current
    return finished


def pod_summary(pod: Pod) -> _PodSummary:
    """READY, STATUS and RESTARTS of a pod, by upstream's printer logic (``printPod``)."""
    spec, status = pod.spec or PodSpec(), pod.status or PodStatus()
    summary = _PodSummary(total=len(spec.containers or ()))
    summary.reason = status.reason or status.phase or ""
    for condition in status.conditions or ():
        if condition.type == "PodScheduled" and condition.reason == "SchedulingGated":
            summary.reason = "SchedulingGated"
    inits = {c.name: c for c in spec.init_containers or ()}
    summary.total += sum(c.is_sidecar() for c in inits.values())
    sidecar_restarts, sidecar_last = 0, None
    initializing = False
    init_count = len(spec.init_containers or ())
    for i, container in enumerate(status.init_container_statuses or ()):
        summary.restarts += container.restart_count or 0
        summary.last_restart = _latest(summary.last_restart, container)
        init = inits.get(container.name)
        sidecar = init is not None and init.is_sidecar()
        if sidecar:
            sidecar_restarts += container.restart_count or 0
            sidecar_last = _latest(sidecar_last, container)
        state = container.state or ContainerState()
        if state.terminated is not None and state.terminated.exit_code == 0:
            continue
        if sidecar and container.started:
            summary.ready += bool(container.ready)
            continue
        initializing = True
        if state.terminated is not None:
            terminated = state.terminated
            if terminated.reason:
                summary.reason = "Init:" + terminated.reason
            elif terminated.signal:
                summary.reason = f"Init:Signal:{terminated.signal}"
            else:
                summary.reason = f"Init:ExitCode:{terminated.exit_code or 0}"
        elif state.waiting is not None and state.waiting.reason not in (
            None,
            "",
            "PodInitializing",
        ):
            summary.reason = "Init:" + (state.waiting.reason or "")
        else:
            summary.reason = f"Init:{i}/{init_count}"
        break
    if not initializing or status.condition_true("Initialized"):
        summary.restarts, summary.last_restart = sidecar_restarts, sidecar_last
        running = False
        for container in reversed(status.container_statuses or ()):
            summary.restarts += container.restart_count or 0
            summary.last_restart = _latest(summary.last_restart, container)
            state = container.state or ContainerState()
            if state.waiting is not None and state.waiting.reason:
                summary.reason = state.waiting.reason
            elif state.terminated is not None and state.terminated.reason:
                summary.reason = state.terminated.reason
            elif state.terminated is not None:
                terminated = state.terminated
                summary.reason = (
                    f"Signal:{terminated.signal}"
                    if terminated.signal
                    else f"ExitCode:{terminated.exit_code or 0}"
                )
            elif container.ready and state.running is not None:
                running = True
                summary.ready += 1
        if summary.reason == "Completed" and running:
            summary.reason = "Running" if status.condition_true("Ready") else "NotReady"
    if pod.metadata.deletion_timestamp is not None:
        if status.reason == NODE_LOST_REASON:
            summary.reason = "Unknown"
        elif status.phase not in ("Succeeded", "Failed"):
            summary.reason = "Terminating"
    return summary


def _restarts_cell(pod: Pod, now: datetime.datetime) -> str:
    summary = pod_summary(pod)
    if summary.restarts and summary.last_restart is not None:
        return f"{summary.restarts} ({age(summary.last_restart, now)} ago)"
    return str(summary.restarts)


def _readiness_gates_cell(pod: Pod) -> str:
    gates = (pod.spec.readiness_gates if pod.spec else None) or []
    if not gates:
        return "<none>"
    status = pod.status or PodStatus()
    true = 0
    for gate in gates:
        matching = [c for c in status.conditions or () if c.type == gate.condition_type]
        true += bool(matching) and matching[0].status == "True"
    return f"{true}/{len(gates)}"


def _pod_status(pod: Pod) -> PodStatus:
    return pod.status or PodStatus()


def _pod_spec(pod: Pod) -> PodSpec:
    return pod.spec or PodSpec()


_POD_COLUMNS = (
    NAME_COLUMN,
    Column(
        "Ready",
        lambda o, now: f"{(s := pod_summary(o)).ready}/{s.total}",
        description="The aggregate readiness state of this pod for accepting traffic.",
    ),
    Column(
        "Status",
        lambda o, now: pod_summary(o).reason,
        description="The aggregate status of the containers in this pod.",
    ),
    Column(
        "Restarts",
        _restarts_cell,
        description="The number of times the containers in this pod have been restarted and "
        "when the last container in this pod has restarted.",
    ),
    AGE_COLUMN,
    Column("IP", lambda o, now: _pod_status(o).first_pod_ip() or "<none>", priority=1),
    Column("Node", lambda o, now: _pod_spec(o).node_name or "<none>", priority=1),
    Column(
        "Nominated Node",
        lambda o, now: _pod_status(o).nominated_node_name or "<none>",
        priority=1,
    ),
    Column("Readiness Gates", lambda o, now: _readiness_gates_cell(o), priority=1),
)

_POD_FIELDS = {
    "spec.nodeName": lambda o: _pod_spec(o).node_name,
    "spec.restartPolicy": lambda o: _pod_spec(o).restart_policy,
    "spec.schedulerName": lambda o: _pod_spec(o).scheduler_name,
    "spec.serviceAccountName": lambda o: _pod_spec(o).service_account_name,
    "spec.hostNetwork": lambda o: "true" if _pod_spec(o).host_network else "false",
    "status.phase": lambda o: _pod_status(o).phase,
    "status.podIP": lambda o: _pod_status(o).first_pod_ip(),
    "status.podIPs": lambda o: ",".join(ip.ip or "" for ip in _pod_status(o).pod_ips or ()),
    "status.nominatedNodeName": lambda o: _pod_status(o).nominated_node_name,
}

UPDATABLE_POD_FIELDS = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)


@kind(
    group="",
    version="v1",
    plural="pods",
    short_names=("po",),
    categories=("all",),
    subresources=(
        "status",
        "binding",
        "eviction",
        "log",
        "exec",
        "attach",
        "portforward",
        "proxy",
        "ephemeralcontainers",
        "resize",
    ),
    columns=_POD_COLUMNS,
    field_selectors=_POD_FIELDS,
)
class Pod(Resource):
    """One or more containers scheduled together onto a node, sharing network and volumes."""

    spec: Annotated[
        PodSpec | None,
        meta(
            required=True,
            doc="What the pod runs: containers, volumes, scheduling, security.",
            proto=2,
        ),
    ] = None
    status: Annotated[
        PodStatus | None,
        meta(doc="What the pod is doing, as the kubelet and the scheduler last reported.", proto=3),
    ] = None

    def set_defaults(self) -> None:
        spec = self.spec
        if spec is None:
            return
        workload = [*(spec.containers or ()), *(spec.init_containers or ())]
        for container in workload:
            resources = container.resources
            if resources is not None and resources.limits is not None:
                resources.requests = {**resources.limits, **(resources.requests or {})}
        _default_pod_requests(spec)
        if spec.enable_service_links is None:
            spec.enable_service_links = True
        if spec.host_network:
            for container in workload:
                for port in container.ports or ():
                    port.host_port = port.host_port or port.container_port

    def validate(self, path: Path, errors: ErrorList) -> None:
        spec = self.spec
        if spec is None:
            return
        spec_path = path.child("spec")
        for container_path, container in spec.all_containers(spec_path):
            image = container.image or ""
            if image != image.strip():
                detail = "must not have leading or trailing whitespace"
                errors.invalid(container_path.child("image"), image, detail)
        volumes_path = spec_path.child("volumes")
        if not spec.service_account_name:
            for i, volume in enumerate(spec.volumes or ()):
                sources = volume.projected.sources if volume.projected else None
                for j, source in enumerate(sources or ()):
                    if source.service_account_token is not None:
                        token_path = volumes_path.index(i).child("projected").child("sources")
                        detail = "must not be specified when serviceAccountName is not set"
                        errors.forbidden(token_path.index(j).child("serviceAccountToken"), detail)
        self._validate_ephemeral_claims(spec, volumes_path, errors)
        if spec.node_name and spec.scheduling_gates:
            detail = "cannot be set until all schedulingGates have been cleared"
            errors.forbidden(spec_path.child("nodeName"), detail)
        annotations = self.metadata.annotations or {}
        if MIRROR_POD_ANNOTATION in annotations and not spec.node_name:
            errors.invalid(
                path.child("metadata").child("annotations").key(MIRROR_POD_ANNOTATION),
                annotations[MIRROR_POD_ANNOTATION],
                "must set spec.nodeName if mirror pod annotation is set",
            )

    def _validate_ephemeral_claims(self, spec: PodSpec, path: Path, errors: ErrorList) -> None:
        """The claims of ephemeral volumes are named <pod>-<volume>; other volumes may not
        use them."""
        pod_name = self.metadata.name
        if not pod_name:
            return
        created = {f"{pod_name}-{v.name}" for v in spec.volumes or () if v.ephemeral is not None}
        for i, volume in enumerate(spec.volumes or ()):
            if volume.ephemeral is not None and volume.name:
                claim = f"{pod_name}-{volume.name}"
                for problem in names.is_dns1123_subdomain(claim):
                    detail = f'PVC name "{claim}": {problem}'
                    errors.invalid(path.index(i).child("name"), volume.name, detail)
            claim_source = volume.persistent_volume_claim
            if claim_source is not None and claim_source.claim_name in created:
                errors.invalid(
                    path.index(i).child("persistentVolumeClaim").child("claimName"),
                    claim_source.claim_name,
                    "must not reference a PVC that gets created for an ephemeral volume",
                )

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        spec_path = ROOT.child("spec")
        new, previous = _pod_spec(self), _pod_spec(old)
        for name, new_list, old_list in (
            ("containers", new.containers, previous.containers),
            ("initContainers", new.init_containers, previous.init_containers),
        ):
            if len(new_list or ()) != len(old_list or ()):
                detail = "pod updates may not add or remove containers"
                errors.forbidden(spec_path.child(name), detail)
                return
        if not _validate_deadline_update(new, previous, spec_path, errors):
            return
        for toleration in previous.tolerations or ():
            if not any(toleration.same_except_seconds(t) for t in new.tolerations or ()):
                detail = "existing toleration can not be modified except its tolerationSeconds"
                errors.forbidden(spec_path.child("tolerations"), detail)
                break
        old_gates = {gate.name for gate in previous.scheduling_gates or ()}
        for i, gate in enumerate(new.scheduling_gates or ()):
            if gate.name not in old_gates:
                detail = f"only deletion is allowed, but found new scheduling gate '{gate.name}'"
                errors.forbidden(spec_path.child("schedulingGates").index(i).child("name"), detail)
        munged = msgspec.structs.replace(
            new,
            containers=_with_images_of(new.containers, previous.containers),
            init_containers=_with_images_of(new.init_containers, previous.init_containers),
            active_deadline_seconds=previous.active_deadline_seconds,
            scheduling_gates=previous.scheduling_gates,
            tolerations=previous.tolerations,
        )
        old_grace = previous.termination_grace_period_seconds
        if old_grace is not None and old_grace < 0 and munged.termination_grace_period_seconds == 1:
            munged.termination_grace_period_seconds = old_grace
        old_json, new_json = msgspec.to_builtins(previous), msgspec.to_builtins(munged)
        if old_json != new_json:
            errors.forbidden(
                spec_path,
                "pod updates may not change fields other than "
                + ",".join(UPDATABLE_POD_FIELDS)
                + "\n"
                + describe_changes(old_json, new_json),
            )

    def validate_ephemeral_containers_update(self, old: Self, errors: ErrorList) -> None:
        """What a write to ``pods/ephemeralcontainers`` may do besides being a valid pod:
        add ephemeral containers, never remove or change one (upstream
        ``ValidatePodEphemeralContainersUpdate``; list order is not compared, as a patch
        need not keep it).  Static pods take none."""
        if MIRROR_POD_ANNOTATION in (old.metadata.annotations or {}):
            errors.clear()
            # Upstream names no field here: its empty path renders as "[]".
            errors.forbidden(ROOT.key(""), "static pods do not support ephemeral containers")
            return
        spec_path = ROOT.child("spec").child("ephemeralContainers")
        added = {c.name: c for c in _pod_spec(self).ephemeral_containers or ()}
        for existing in _pod_spec(old).ephemeral_containers or ():
            now = added.get(existing.name)
            if now is None:
                detail = f'existing ephemeral containers "{existing.name}" may not be removed\n'
                errors.forbidden(spec_path, detail)
            elif now != existing:
                old_json, new_json = msgspec.to_builtins(existing), msgspec.to_builtins(now)
                detail = (
                    f'existing ephemeral containers "{existing.name}" may not be changed\n'
                    + describe_changes(old_json, new_json)
                )
                errors.forbidden(spec_path, detail)


def _validate_deadline_update(
    new: PodSpec, previous: PodSpec, spec_path: Path, errors: ErrorList
) -> bool:
    """activeDeadlineSeconds may be set, or lowered, but not raised or removed.  False when
    the change is so wrong that checking further is pointless."""
    deadline_path = spec_path.child("activeDeadlineSeconds")
    value, old_value = new.active_deadline_seconds, previous.active_deadline_seconds
    if value is None:
        if old_value is not None:
            detail = "must not update from a positive integer to nil value"
            errors.invalid(deadline_path, None, detail)
        return True
    if not 0 <= value <= MAX_INT32:
        errors.invalid(deadline_path, value, f"must be between 0 and {MAX_INT32}, inclusive")
        return False
    if old_value is not None and old_value < value:
        errors.invalid(deadline_path, value, "must be less than or equal to previous value")
        return False
    return True


def _with_images_of(
    containers: list[Container] | None, old: list[Container] | None
) -> list[Container] | None:
    """``containers`` with the images of ``old`` (images are what a pod update may change)."""
    if containers is None:
        return None
    return [
        msgspec.structs.replace(c, image=o.image)
        for c, o in zip(containers, old or (), strict=False)
    ]


@kind(
    group="",
    version="v1",
    plural="podtemplates",
    columns=(
        NAME_COLUMN,
        *template_columns(lambda o: o.template, priority=0),
        Column(
            "Pod Labels",
            lambda o, now: format_labels(o.template.labels() if o.template else None),
            description="The labels for the pod template.",
        ),
    ),
)
class PodTemplate(Resource):
    """A stored pod template, for tools that create pods from it."""

    template: Annotated[
        PodTemplateSpec | None,
        meta(required=True, doc="The pod the template describes.", proto=2),
    ] = None


class ReplicationControllerCondition(Struct):
    """An observation about a replication controller (ReplicaFailure)."""

    type: Annotated[str | None, meta(required=True, proto=1)] = None
    status: Annotated[str | None, meta(required=True, proto=2)] = None
    last_transition_time: Annotated[Time | None, meta(proto=3, omitempty=True)] = None
    reason: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=5, omitempty=True)] = None


class ReplicationControllerSpec(Struct):
    """How many pods to keep, which pods count, and the template new pods are made from."""

    replicas: Annotated[int | None, meta(minimum=0, proto=1)] = None
    min_ready_seconds: Annotated[int | None, meta(minimum=0, proto=4, omitempty=True)] = None
    selector: Annotated[dict[str, str] | None, meta(map_type="atomic", proto=2)] = None
    template: Annotated[PodTemplateSpec | None, meta(required=True, proto=3)] = None

    def set_defaults(self) -> None:
        if self.replicas is None:
            self.replicas = 1

    def validate(self, path: Path, errors: ErrorList) -> None:
        selector = self.selector or {}
        if not selector:
            errors.required(path.child("selector"))
        template, template_path = self.template, path.child("template")
        if template is None:
            return
        labels = template.labels()
        if selector and any(labels.get(k) != v for k, v in selector.items()):
            errors.invalid(
                template_path.child("metadata").child("labels"),
                labels,
                "`selector` does not match template `labels`",
            )
        spec = template.spec or PodSpec()
        if spec.restart_policy != "Always":
            policy_path = template_path.child("spec").child("restartPolicy")
            errors.not_supported(policy_path, spec.restart_policy or "", ["Always"])
        if spec.active_deadline_seconds is not None:
            errors.forbidden(
                template_path.child("spec").child("activeDeadlineSeconds"),
                "activeDeadlineSeconds in ReplicationController is not Supported",
            )


class ReplicationControllerStatus(Struct):
    """How many pods the controller has, and how many are ready and available."""

    replicas: Annotated[int | None, meta(minimum=0, proto=1)] = None
    fully_labeled_replicas: Annotated[int | None, meta(minimum=0, proto=2, omitempty=True)] = None
    ready_replicas: Annotated[int | None, meta(minimum=0, proto=4, omitempty=True)] = None
    available_replicas: Annotated[int | None, meta(minimum=0, proto=5, omitempty=True)] = None
    observed_generation: Annotated[
        int | None, meta(minimum=0, proto=3, int64=True, omitempty=True)
    ] = None
    conditions: Annotated[
        list[ReplicationControllerCondition] | None, meta(merge_key="type", proto=6)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        replicas, ready = self.replicas or 0, self.ready_replicas or 0
        for value, name in (
            (self.fully_labeled_replicas or 0, "fullyLabeledReplicas"),
            (ready, "readyReplicas"),
            (self.available_replicas or 0, "availableReplicas"),
        ):
            if value > replicas:
                errors.invalid(path.child(name), value, "cannot be greater than status.replicas")
        if (self.available_replicas or 0) > ready:
            errors.invalid(
                path.child("availableReplicas"),
                self.available_replicas,
                "cannot be greater than readyReplicas",
            )


def _rc_status(o: ReplicationController) -> ReplicationControllerStatus:
    return o.status or ReplicationControllerStatus()


@kind(
    group="",
    version="v1",
    plural="replicationcontrollers",
    short_names=("rc",),
    categories=("all",),
    subresources=("status", "scale"),
    columns=(
        NAME_COLUMN,
        Column("Desired", lambda o, now: (o.spec.replicas if o.spec else None) or 0, "integer"),
        Column("Current", lambda o, now: _rc_status(o).replicas or 0, "integer"),
        Column("Ready", lambda o, now: _rc_status(o).ready_replicas or 0, "integer"),
        AGE_COLUMN,
        *template_columns(lambda o: o.spec.template if o.spec else None),
        Column(
            "Selector",
            lambda o, now: format_labels(o.spec.selector if o.spec else None),
            priority=1,
        ),
    ),
    field_selectors={"status.replicas": lambda o: str(_rc_status(o).replicas or 0)},
)
class ReplicationController(Resource):
    """Keeps a number of identical pods running (the predecessor of ReplicaSet)."""

    spec: Annotated[
        ReplicationControllerSpec | None,
        meta(
            doc="How many pods to keep, which pods count, and the template for new ones.", proto=2
        ),
    ] = None
    status: Annotated[
        ReplicationControllerStatus | None,
        meta(doc="How many pods there are, and how many are ready and available.", proto=3),
    ] = None

    def set_defaults(self) -> None:
        labels = self.spec.template.labels() if self.spec and self.spec.template else {}
        if labels and self.spec is not None:
            self.spec.selector = self.spec.selector or dict(labels)
            self.metadata.labels = self.metadata.labels or dict(labels)


@kind(group="", version="v1", plural="bindings", verbs=CREATE_ONLY)
class Binding(Resource):
    """Binds a pod to a node: what the scheduler posts to ``pods/binding``."""

    target: Annotated[
        ObjectReference | None, meta(doc="The node the pod is bound to (kind Node).", proto=2)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        target = self.target or ObjectReference()
        if target.kind and target.kind != "Node":
            errors.not_supported(
                path.child("target").child("kind"), target.kind, ["Node", "<empty>"]
            )
        if not target.name:
            errors.required(path.child("target").child("name"))
