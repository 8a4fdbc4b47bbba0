"""A container's environment: upstream's ``makeEnvironmentVariables`` (``kubelet_pods.go``).

The order of resolution is upstream's:

1. ``envFrom``: every key of the named ConfigMaps and Secrets, with the source's prefix;
   keys that are not valid variable names (``IsEnvVarName``) are skipped;
2. ``env`` in declaration order, each replacing what came before: literal values with
   ``$(VAR)`` references expanded against the variables so far and the service variables;
   ``configMapKeyRef`` / ``secretKeyRef`` (a missing object or key is an error unless the
   reference is optional, then the variable is left out); ``fieldRef`` (pod and node IPs
   from the caller, since the status may not hold them yet); ``resourceFieldRef`` (limits
   not set default to the node's allocatable);
3. the service variables (``FromServices``: ``<SVC>_SERVICE_HOST``, ``<SVC>_SERVICE_PORT``,
   ``..._PORT_<NAME>`` and the Docker-link ``<SVC>_PORT...`` family) of every service with a
   cluster IP in the pod's namespace when ``enableServiceLinks`` is not false, and of the
   ``kubernetes`` service in ``default`` always; explicit variables win.

Whatever stops a container from being configured raises ``ConfigError``, whose message
becomes the ``CreateContainerConfigError`` waiting message.  ConfigMaps, Secrets and
Services come through ``EnvSources`` so tests need no API server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import msgspec

from kube.api import names
from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.api.kinds.core_v1.pod import Container, EnvVarSource, Pod
from kube.api.kinds.core_v1.service import Service
from kube.api.struct import QuantityValue
from node.cri.pb import api_pb2 as pb
from node.kubelet.volumes.sources import SourceError, field_value, resource_field_value

MASTER_SERVICES = frozenset({"kubernetes"})


class ConfigError(Exception):
    """A container cannot be configured; ``str(error)`` is the message to show."""


class EnvSources(Protocol):
    """Where referenced objects come from.  The getters return None for a missing object."""

    async def config_map(self, namespace: str, name: str) -> ConfigMap | None: ...

    async def secret(self, namespace: str, name: str) -> Secret | None: ...

    def services(self, namespace: str) -> Sequence[Service]: ...


def expand(text: str, env: Mapping[str, str]) -> str:
    """Upstream's ``expansion.Expand``: ``$(VAR)`` becomes the variable's value when it is
    known and stays as written when not; ``$$`` is a literal ``$``; any other ``$`` (or an
    unterminated ``$(``) is kept."""
    out: list[str] = []
    checkpoint = cursor = 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            following = text[cursor + 1]
            advance = 1
            if following == "$":
                out.append("$")
            elif following == "(":
                close = text.find(")", cursor + 2)
                if close == -1:
                    out.append("$(")
                else:
                    name = text[cursor + 2 : close]
                    out.append(env.get(name, f"$({name})"))
                    advance = close - cursor
            else:
                out.append("$" + following)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)


def _env_name(name: str) -> str:
    return name.replace("-", "_").upper()


def _has_cluster_ip(service: Service) -> bool:
    ip = service.spec.cluster_ip if service.spec else None
    return bool(ip) and ip != "None"


def service_env(services: Iterable[Service]) -> dict[str, str]:
    """Upstream's ``envvars.FromServices`` for services with a cluster IP, by name order."""
    env: dict[str, str] = {}
    for service in sorted(services, key=lambda s: s.metadata.name or ""):
        spec = service.spec
        if spec is None or not _has_cluster_ip(service) or not spec.ports:
            continue
        prefix, ip = _env_name(service.metadata.name or ""), spec.cluster_ip or ""
        env[f"{prefix}_SERVICE_HOST"] = ip
        env[f"{prefix}_SERVICE_PORT"] = str(spec.ports[0].port)
        for port in spec.ports:
            if port.name:
                env[f"{prefix}_SERVICE_PORT_{_env_name(port.name)}"] = str(port.port)
        host = f"[{ip}]" if ":" in ip else ip  # as Go's net.JoinHostPort
        for index, port in enumerate(spec.ports):
            protocol = port.protocol or "TCP"
            url = f"{protocol.lower()}://{host}:{port.port}"
            if index == 0:
                env[f"{prefix}_PORT"] = url
            port_prefix = f"{prefix}_PORT_{port.port}_{protocol.upper()}"
            env[port_prefix] = url
            env[f"{port_prefix}_PROTO"] = protocol.lower()
            env[f"{port_prefix}_PORT"] = str(port.port)
            env[f"{port_prefix}_ADDR"] = ip
    return env


def _linked_services(pod: Pod, sources: EnvSources) -> list[Service]:
    """The services whose variables the pod gets (``getServiceEnvVarMap``): the master
    services of ``default`` always, the pod namespace's when links are on (a same-named
    service there replaces the master one)."""
    namespace = pod.metadata.namespace or "default"
    links = pod.spec is None or pod.spec.enable_service_links is not False
    chosen: dict[str, Service] = {}
    for service in sources.services("default"):
        if service.metadata.name in MASTER_SERVICES and _has_cluster_ip(service):
            chosen[service.metadata.name or ""] = service
    for service in sources.services(namespace) if links else ():
        if _has_cluster_ip(service):
            chosen[service.metadata.name or ""] = service
    return list(chosen.values())


class _Objects:
    """ConfigMaps and Secrets fetched once per container, as upstream's local caches."""

    def __init__(self, sources: EnvSources, namespace: str) -> None:
        self._sources = sources
        self._namespace = namespace
        self._config_maps: dict[str, dict[str, str]] = {}
        self._secrets: dict[str, dict[str, str]] = {}

    async def config_map(self, name: str, optional: bool) -> dict[str, str] | None:
        """The ConfigMap's data; None when it is missing and optional."""
        if name not in self._config_maps:
            found = await self._sources.config_map(self._namespace, name)
            if found is None:
                if optional:
                    return None
                raise ConfigError(f'configmap "{name}" not found')
            self._config_maps[name] = dict(found.data or {})
        return self._config_maps[name]

    async def secret(self, name: str, optional: bool) -> dict[str, str] | None:
        """The Secret's data, decoded; None when it is missing and optional."""
        if name not in self._secrets:
            found = await self._sources.secret(self._namespace, name)
            if found is None:
                if optional:
                    return None
                raise ConfigError(f'secret "{name}" not found')
            data = found.decoded_data()
            self._secrets[name] = {k: v.decode(errors="replace") for k, v in data.items()}
        return self._secrets[name]


class _Context:
    """What a ``valueFrom`` is resolved against."""

    def __init__(
        self,
        pod: Pod,
        container: Container,
        objects: _Objects,
        pod_ips: Sequence[str],
        host_ips: Sequence[str],
        node_allocatable: Mapping[str, QuantityValue],
    ) -> None:
        self.pod, self.container, self.objects = pod, container, objects
        self.pod_ips, self.host_ips = pod_ips, host_ips
        self.node_allocatable = node_allocatable

    async def value(self, source: EnvVarSource) -> str | None:
        """The value, or None when an optional reference finds nothing."""
        key_ref = source.config_map_key_ref or source.secret_key_ref
        if key_ref is not None:
            name, optional = key_ref.name or "", bool(key_ref.optional)
            if source.config_map_key_ref is not None:
                data, kind = await self.objects.config_map(name, optional), "ConfigMap"
            else:
                data, kind = await self.objects.secret(name, optional), "Secret"
            where = f"{kind} {self.pod.metadata.namespace}/{name}"
            return _key(data, key_ref.key or "", optional, where)
        try:
            if source.field_ref is not None:
                return self._field(source.field_ref.field_path or "")
            if source.resource_field_ref is not None:
                field = source.resource_field_ref
                container = field.container_name or self.container.name or ""
                return resource_field_value(field, self.pod, container, self.node_allocatable)
        except SourceError as error:
            raise ConfigError(str(error)) from None
        raise ConfigError("unsupported environment variable source")

    def _field(self, path: str) -> str:
        by_status = {
            "status.podIP": self.pod_ips[:1],
            "status.podIPs": self.pod_ips,
            "status.hostIP": self.host_ips[:1],
            "status.hostIPs": self.host_ips,
        }
        if path in by_status:
            return ",".join(by_status[path])
        return field_value(self.pod, path)


def _key(data: Mapping[str, str] | None, key: str, optional: bool, where: str) -> str | None:
    if data is None:
        return None
    if key in data:
        return data[key]
    if optional:
        return None
    raise ConfigError(f"couldn't find key {key} in {where}")


async def _from_env_from(
    pod: Pod, container: Container, objects: _Objects, warnings: list[str] | None
) -> dict[str, str]:
    env: dict[str, str] = {}
    for source in container.env_from or ():
        if source.config_map_ref is not None:
            name, kind = source.config_map_ref.name or "", "configMap"
            data = await objects.config_map(name, bool(source.config_map_ref.optional))
        elif source.secret_ref is not None:
            name, kind = source.secret_ref.name or "", "secret"
            data = await objects.secret(name, bool(source.secret_ref.optional))
        else:
            continue
        invalid = []
        for key, value in (data or {}).items():
            variable = (source.prefix or "") + key
            if names.is_env_var_name(variable):
                invalid.append(variable)
            else:
                env[variable] = value
        if invalid and warnings is not None:
            warnings.append(
                f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom {kind} "
                f"{pod.metadata.namespace}/{name} were skipped since they are considered "
                "invalid environment variable names."
            )
    return env


async def container_env(
    pod: Pod,
    container: Container,
    sources: EnvSources,
    *,
    pod_ips: Sequence[str],
    host_ips: Sequence[str],
    node_name: str,
    node_allocatable: Mapping[str, QuantityValue] | None = None,
    warnings: list[str] | None = None,
) -> list[pb.KeyValue]:
    """The container's environment, in upstream's order (envFrom, env, services).

    ``warnings``, when given, receives upstream's ``InvalidEnvironmentVariableNames``
    event messages for envFrom keys that were skipped.

    ``node_name`` is accepted for callers that know the node before the pod is bound; the
    pod's ``spec.nodeName`` is what ``fieldRef`` reads when it is set.
    """
    namespace = pod.metadata.namespace or "default"
    spec = pod.spec
    if spec is not None and not spec.node_name:
        pod = msgspec.structs.replace(pod, spec=msgspec.structs.replace(spec, node_name=node_name))
    services = service_env(_linked_services(pod, sources))
    objects = _Objects(sources, namespace)
    env = await _from_env_from(pod, container, objects, warnings)
    context = _Context(pod, container, objects, pod_ips, host_ips, node_allocatable or {})
    for var in container.env or ():
        if var.value_from is not None and not var.value:
            resolved = await context.value(var.value_from)
            if resolved is not None:
                env[var.name or ""] = resolved
        else:
            env[var.name or ""] = expand(var.value or "", {**services, **env})
    for service_var, service_value in services.items():
        env.setdefault(service_var, service_value)
    return [pb.KeyValue(key=k, value=v) for k, v in env.items()]
