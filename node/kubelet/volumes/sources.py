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

The ``kube-api-access-*`` volume of a pod's service account is an ordinary projected volume
(token, ``ca.crt`` and ``namespace``) that the API server's ServiceAccount admission adds.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import NamedTuple, TypeVar

from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.api.kinds.core_v1.pod import Container, Pod
from kube.api.kinds.core_v1.volume import (
    FILE_MODE_DEFAULT,
    DownwardAPIVolumeFile,
    KeyToPath,
    ProjectedVolumeSource,
    ResourceFieldSelector,
    Volume,
    VolumeProjection,
    parse_quantity,
)
from kube.api.quantity import Quantity
from kube.api.struct import QuantityValue
from node.kubelet.volumes.atomic import FileProjection

__all__ = [
    "Objects",
    "References",
    "SourceError",
    "TokenGetter",
    "field_value",
    "format_map",
    "payload",
    "references",
    "resource_field_value",
]

TOKEN_MODE_WITH_OWNER = 0o600
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
