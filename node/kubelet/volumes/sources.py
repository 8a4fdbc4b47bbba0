"""What the files of configMap, secret, downwardAPI and projected volumes contain.

Pure functions from API objects to a payload (relative path → ``FileProjection``), mirroring
upstream's ``configmap.MakePayload``, ``secret.MakePayload``, ``downwardapi.CollectData`` and
the projected volume's ``collectData``.  They do no I/O: the caller fetches the ConfigMaps and
Secrets a volume names (``references`` lists them) and passes what it found as ``Objects``; the
only effect is the injected ``TokenGetter`` of serviceAccountToken projections, which is why
``payload`` is a coroutine.  The manager turns the payload into files with the ``AtomicWriter``.

Field and resource values (``field_value``, ``resource_field_value``) are shared with the
environment of containers: they accept every path upstream's kubelet resolves for env
(``spec.nodeName``, ``status.podIP``, ...), a superset of what volume validation admits.

``mount_service_account_token`` is the pod mutation of upstream's ServiceAccount admission (the
``kube-api-access-<random>`` projected volume: token, ``ca.crt`` and ``namespace``, mounted
read-only at /var/run/secrets/kubernetes.io/serviceaccount in every container).
"""

from __future__ import annotations

import base64
import os
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import NamedTuple, TypeVar

import msgspec

from kubelab.api.kinds.core_v1.cluster import ConfigMap, Secret
from kubelab.api.kinds.core_v1.pod import Container, Pod
from kubelab.api.kinds.core_v1.volume import (
    FILE_MODE_DEFAULT,
    ConfigMapProjection,
    DownwardAPIProjection,
    DownwardAPIVolumeFile,
    KeyToPath,
    ObjectFieldSelector,
    ProjectedVolumeSource,
    ResourceFieldSelector,
    ServiceAccountTokenProjection,
    Volume,
    VolumeMount,
    VolumeProjection,
    parse_quantity,
)
from kubelab.api.quantity import Quantity
from kubelab.api.struct import QuantityValue
from node.kubelet.volumes.atomic import FileProjection

__all__ = [
    "SERVICE_ACCOUNT_MOUNT_PATH",
    "SERVICE_ACCOUNT_VOLUME_PREFIX",
    "Objects",
    "References",
    "SourceError",
    "TokenGetter",
    "field_value",
    "format_map",
    "mount_service_account_token",
    "payload",
    "references",
    "resource_field_value",
    "token_volume_source",
]

SERVICE_ACCOUNT_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVICE_ACCOUNT_VOLUME_PREFIX = "kube-api-access-"
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
# Upstream's WarnOnlyBoundTokenExpirationSeconds: one hour and seven seconds.
KUBE_API_ACCESS_EXPIRATION = 3607
TOKEN_MODE_WITH_OWNER = 0o600
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)

TokenGetter = Callable[[str | None, int], Awaitable[str]]
"""Fetches a service account token for the pod: (audience or None for the API server's
default audiences, expiration seconds) → the token."""


class SourceError(Exception):
    """A volume's content cannot be computed (missing object or key, unknown field)."""


class References(NamedTuple):
    """The ConfigMaps and Secrets (names, in the pod's namespace) a volume reads."""

    config_maps: frozenset[str]
    secrets: frozenset[str]


class Objects(NamedTuple):
    """The referenced objects that exist, by name; a name missing here was not found."""

    config_maps: Mapping[str, ConfigMap]
    secrets: Mapping[str, Secret]


def references(volume: Volume) -> References:
    """Names of the ConfigMaps and Secrets ``volume`` projects."""
    config_maps: set[str] = set()
    found_secrets: set[str] = set()
    if volume.config_map is not None:
        config_maps.add(volume.config_map.name or "")
    if volume.secret is not None:
        found_secrets.add(volume.secret.secret_name or "")
    for projection in _projections(volume.projected):
        if projection.config_map is not None:
            config_maps.add(projection.config_map.name or "")
        if projection.secret is not None:
            found_secrets.add(projection.secret.name or "")
    return References(frozenset(config_maps), frozenset(found_secrets))


def _projections(source: ProjectedVolumeSource | None) -> Sequence[VolumeProjection]:
    return (source.sources or []) if source is not None else []


def has_token(volume: Volume) -> bool:
    """Whether the volume holds a service account token (so lives on tmpfs, refreshed)."""
    return any(p.service_account_token is not None for p in _projections(volume.projected))


# ConfigMap and Secret keys.


def _key_payload(
    kind: str,
    data: Mapping[str, bytes],
    items: Sequence[KeyToPath] | None,
    default_mode: int,
    optional: bool,
) -> dict[str, FileProjection]:
    """Upstream's ``MakePayload``: every key, or the listed ones at their paths."""
    if not items:
        return {key: FileProjection(value, default_mode) for key, value in data.items()}
    result: dict[str, FileProjection] = {}
    for item in items:
        key = item.key or ""
        if key not in data:
            if optional:
                continue
            raise SourceError(f"{kind} references non-existent {kind} key: {key}")
        mode = item.mode if item.mode is not None else default_mode
        result[item.path or ""] = FileProjection(data[key], mode)
    return result


def _config_map_data(config_map: ConfigMap) -> dict[str, bytes]:
    data = {key: value.encode() for key, value in (config_map.data or {}).items()}
    for key, value in (config_map.binary_data or {}).items():
        data[key] = base64.b64decode(value)
    return data


T = TypeVar("T")


def _lookup(found: Mapping[str, T], name: str, resource: str, optional: bool) -> T | None:
    """The named object; None when it is missing but optional."""
    if name in found:
        return found[name]
    if optional:
        return None
    raise SourceError(f'{resource} "{name}" not found')


def _config_map_files(
    name: str | None,
    items: Sequence[KeyToPath] | None,
    default_mode: int,
    optional: bool | None,
    objects: Objects,
) -> dict[str, FileProjection]:
    config_map = _lookup(objects.config_maps, name or "", "configmaps", bool(optional))
    data = _config_map_data(config_map) if config_map is not None else {}
    return _key_payload("configmap", data, items, default_mode, bool(optional))


def _secret_files(
    name: str | None,
    items: Sequence[KeyToPath] | None,
    default_mode: int,
    optional: bool | None,
    objects: Objects,
) -> dict[str, FileProjection]:
    secret = _lookup(objects.secrets, name or "", "secrets", bool(optional))
    data = secret.decoded_data() if secret is not None else {}
    return _key_payload("secret", data, items, default_mode, bool(optional))


# The downward API.


def format_map(values: Mapping[str, str] | None) -> str:
    """Labels or annotations as ``key="value"`` lines, sorted, values quoted as Go's %q."""
    values = values or {}
    return "\n".join(f"{key}={_go_quote(values[key])}" for key in sorted(values))


_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t"}
_GO_ESCAPES |= {"\v": r"\v", "\\": r"\\", '"': r"\""}


def _go_quote(text: str) -> str:
    """Go's ``strconv.Quote``: printable runes as they are, the rest escaped."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def field_value(pod: Pod, field_path: str) -> str:
    """The value of a fieldRef (upstream ``podFieldSelectorRuntimeValue`` and
    ``fieldpath.ExtractFieldPathAsString``), including ``metadata.labels['key']``."""
    metadata, spec, status = pod.metadata, pod.spec, pod.status
    subscripted = re.fullmatch(r"(metadata\.(?:labels|annotations))\['(.*)'\]", field_path)
    if subscripted:
        path, key = subscripted.groups()
        checked = key.lower() if path == "metadata.annotations" else key
        if not _QUALIFIED_NAME.match(checked) or len(checked.partition("/")[2] or checked) > 63:
            raise SourceError(f"invalid key subscript in {field_path}")
        values = metadata.labels if path == "metadata.labels" else metadata.annotations
        return (values or {}).get(key, "")
    values_of: dict[str, Callable[[], str | None]] = {
        "metadata.name": lambda: metadata.name,
        "metadata.namespace": lambda: metadata.namespace,
        "metadata.uid": lambda: metadata.uid,
        "metadata.labels": lambda: format_map(metadata.labels),
        "metadata.annotations": lambda: format_map(metadata.annotations),
        "spec.nodeName": lambda: spec.node_name if spec else None,
        "spec.serviceAccountName": lambda: spec.service_account_name if spec else None,
        "status.hostIP": lambda: status.host_ip if status else None,
        "status.hostIPs": lambda: (
            ",".join(ip.ip or "" for ip in (status.host_ips or [])) if status else None
        ),
        "status.podIP": lambda: status.pod_ip if status else None,
        "status.podIPs": lambda: (
            ",".join(ip.ip or "" for ip in (status.pod_ips or [])) if status else None
        ),
    }
    if field_path not in values_of:
        raise SourceError(f"unsupported fieldPath: {field_path}")
    return values_of[field_path]() or ""


def _find_container(pod: Pod, name: str) -> Container:
    spec = pod.spec
    containers = [*(spec.containers or []), *(spec.init_containers or [])] if spec else []
    for container in containers:
        if container.name == name:
            return container
    raise SourceError(f"container {name} not found")


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


_OVERCOMMITTABLE = ("cpu", "memory", "ephemeral-storage")


def resource_field_value(
    selector: ResourceFieldSelector,
    pod: Pod,
    container_name: str,
    node_allocatable: Mapping[str, QuantityValue],
) -> str:
    """The value of a resourceFieldRef: the container's request or limit in units of the
    divisor, rounded up; a missing cpu/memory/ephemeral-storage limit is the node's
    allocatable (upstream ``ExtractResourceValueByContainerNameAndNodeAllocatable``)."""
    container = _find_container(pod, container_name)
    resources = container.resources
    requests = dict((resources.requests if resources else None) or {})
    limits = dict((resources.limits if resources else None) or {})
    for name in _OVERCOMMITTABLE:
        limit = parse_quantity(limits.get(name))
        if (limit is None or limit.value() == 0) and name in node_allocatable:
            limits[name] = node_allocatable[name]
    divisor = parse_quantity(selector.divisor)
    if divisor is None or divisor == Quantity.parse(0):
        divisor = Quantity.parse(1)
    kind, _, name = (selector.resource or "").partition(".")
    is_known = name in _OVERCOMMITTABLE or name.startswith("hugepages-")
    if kind not in ("requests", "limits") or not is_known:
        raise SourceError(f"unsupported container resource : {selector.resource}")
    amount = parse_quantity((requests if kind == "requests" else limits).get(name))
    amount = amount if amount is not None else Quantity.parse(0)
    if name == "cpu":
        return str(_ceil_div(amount.milli_value(), divisor.milli_value()))
    return str(_ceil_div(amount.value(), divisor.value()))


def _downward_api_files(
    pod: Pod,
    items: Sequence[DownwardAPIVolumeFile] | None,
    default_mode: int,
    node_allocatable: Mapping[str, QuantityValue],
) -> dict[str, FileProjection]:
    """Upstream ``downwardapi.CollectData``: every item, errors gathered."""
    result: dict[str, FileProjection] = {}
    errors: list[str] = []
    for item in items or []:
        mode = item.mode if item.mode is not None else default_mode
        value = ""
        try:
            if item.field_ref is not None:
                value = field_value(pod, item.field_ref.field_path or "")
            elif item.resource_field_ref is not None:
                ref = item.resource_field_ref
                value = resource_field_value(ref, pod, ref.container_name or "", node_allocatable)
        except SourceError as error:
            errors.append(str(error))
        result[os.path.normpath(item.path or "")] = FileProjection(value.encode(), mode)
    _raise_all(errors)
    return result


def _raise_all(errors: Sequence[str]) -> None:
    """Upstream's aggregate error: one message as is, several as ``[a, b]``."""
    if len(errors) == 1:
        raise SourceError(errors[0])
    if errors:
        raise SourceError(f"[{', '.join(errors)}]")


# Projected volumes.


def _effective_run_as_user(pod: Pod, container: Container) -> int | None:
    if container.security_context and container.security_context.run_as_user is not None:
        return container.security_context.run_as_user
    context = pod.spec.security_context if pod.spec else None
    return context.run_as_user if context else None


def fs_user(pod: Pod) -> int | None:
    """Upstream ``FsUserFrom``: the runAsUser every init and app container shares, if any."""
    spec = pod.spec
    users = (
        {
            _effective_run_as_user(pod, container)
            for container in [*(spec.init_containers or []), *(spec.containers or [])]
        }
        if spec
        else set()
    )
    return next(iter(users)) if len(users) == 1 else None


async def _projected_files(
    pod: Pod,
    source: ProjectedVolumeSource,
    objects: Objects,
    token_getter: TokenGetter,
    node_allocatable: Mapping[str, QuantityValue],
) -> dict[str, FileProjection]:
    """Upstream's projected ``collectData``: the sources merged in order, errors gathered."""
    default_mode = _mode(source.default_mode)
    result: dict[str, FileProjection] = {}
    errors: list[str] = []
    for projection in source.sources or []:
        try:
            result |= await _projection_files(
                pod, projection, default_mode, objects, token_getter, node_allocatable
            )
        except SourceError as error:
            errors.append(str(error))
    _raise_all(errors)
    return result


async def _projection_files(
    pod: Pod,
    projection: VolumeProjection,
    default_mode: int,
    objects: Objects,
    token_getter: TokenGetter,
    node_allocatable: Mapping[str, QuantityValue],
) -> dict[str, FileProjection]:
    if (config_map := projection.config_map) is not None:
        return _config_map_files(
            config_map.name, config_map.items, default_mode, config_map.optional, objects
        )
    if (secret := projection.secret) is not None:
        return _secret_files(secret.name, secret.items, default_mode, secret.optional, objects)
    if projection.downward_api is not None:
        items = projection.downward_api.items
        return _downward_api_files(pod, items, default_mode, node_allocatable)
    if (token := projection.service_account_token) is not None:
        owner = fs_user(pod)
        context = pod.spec.security_context if pod.spec else None
        has_group = context is not None and context.fs_group is not None
        # With an owner (or a group, which upstream then grants read) the token is 0600.
        mode = TOKEN_MODE_WITH_OWNER if owner is not None or has_group else default_mode
        value = await token_getter(token.audience or None, token.expiration_seconds or 3600)
        return {token.path or "": FileProjection(value.encode(), mode, owner)}
    return {}


def _mode(mode: int | None) -> int:
    return mode if mode is not None else FILE_MODE_DEFAULT


async def payload(
    pod: Pod,
    volume: Volume,
    objects: Objects,
    token_getter: TokenGetter,
    node_allocatable: Mapping[str, QuantityValue],
) -> dict[str, FileProjection]:
    """The files of a configMap, secret, downwardAPI or projected volume.

    Raises ``SourceError`` with upstream's message when an object or key it needs is missing
    (unless optional) or a field cannot be resolved.
    """
    if (config_map := volume.config_map) is not None:
        return _config_map_files(
            config_map.name,
            config_map.items,
            _mode(config_map.default_mode),
            config_map.optional,
            objects,
        )
    if (secret := volume.secret) is not None:
        mode = _mode(secret.default_mode)
        return _secret_files(secret.secret_name, secret.items, mode, secret.optional, objects)
    if (downward := volume.downward_api) is not None:
        mode = _mode(downward.default_mode)
        return _downward_api_files(pod, downward.items, mode, node_allocatable)
    if volume.projected is not None:
        return await _projected_files(
            pod, volume.projected, objects, token_getter, node_allocatable
        )
    raise SourceError(f"volume {volume.name} has no projected content")


# The service account volume of upstream's admission.


def token_volume_source() -> ProjectedVolumeSource:
    """The projected source of a ``kube-api-access-*`` volume (upstream ``TokenVolumeSource``)."""
    return ProjectedVolumeSource(
        default_mode=FILE_MODE_DEFAULT,
        sources=[
            VolumeProjection(
                service_account_token=ServiceAccountTokenProjection(
                    path="token", expiration_seconds=KUBE_API_ACCESS_EXPIRATION
                )
            ),
            VolumeProjection(
                config_map=ConfigMapProjection(
                    name=ROOT_CA_CONFIG_MAP, items=[KeyToPath(key="ca.crt", path="ca.crt")]
                )
            ),
            VolumeProjection(
                downward_api=DownwardAPIProjection(
                    items=[
                        DownwardAPIVolumeFile(
                            path="namespace",
                            field_ref=ObjectFieldSelector(
                                api_version="v1", field_path="metadata.namespace"
                            ),
                        )
                    ]
                )
            ),
        ],
    )


def _random_suffix() -> str:
    return "".join(secrets.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))


def mount_service_account_token(
    pod: Pod, *, account_automount: bool | None, suffix: str | None = None
) -> Pod:
    """A copy of ``pod`` with the API access volume mounted in every init and app container
    that has nothing at the service account path yet (upstream's ServiceAccount admission).

    Automount follows the pod's ``automountServiceAccountToken``, else the account's, else
    true.  An existing ``kube-api-access-*`` volume is reused.
    """
    spec = pod.spec
    automount = spec.automount_service_account_token if spec else None
    automount = automount if automount is not None else account_automount
    if spec is None or automount is False:
        return pod
    volumes = list(spec.volumes or [])
    existing = next((v for v in volumes if _is_api_access(v.name)), None)
    name = (
        existing.name if existing else SERVICE_ACCOUNT_VOLUME_PREFIX + (suffix or _random_suffix())
    )
    mount = VolumeMount(name=name, read_only=True, mount_path=SERVICE_ACCOUNT_MOUNT_PATH)
    init_containers, init_added = _with_mount(spec.init_containers, mount)
    containers, added = _with_mount(spec.containers, mount)
    if existing is None and (init_added or added):
        volumes.append(Volume(name=name, projected=token_volume_source()))
    new_spec = msgspec.structs.replace(
        spec,
        volumes=volumes or None,
        init_containers=init_containers,
        containers=containers,
    )
    return msgspec.structs.replace(pod, spec=new_spec)


def _is_api_access(name: str | None) -> bool:
    return (name or "").startswith(SERVICE_ACCOUNT_VOLUME_PREFIX)


def _with_mount(
    containers: Iterable[Container] | None, mount: VolumeMount
) -> tuple[list[Container] | None, bool]:
    if containers is None:
        return None, False
    result: list[Container] = []
    added = False
    for container in containers:
        mounts = container.volume_mounts or []
        if any(m.mount_path == SERVICE_ACCOUNT_MOUNT_PATH for m in mounts):
            result.append(container)
            continue
        result.append(msgspec.structs.replace(container, volume_mounts=[*mounts, mount]))
        added = True
    return result, added
