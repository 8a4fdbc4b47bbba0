"""ComponentStatus: the control plane's health, probed when a client reads it.

Upstream's ``pkg/registry/core/componentstatus``: nothing is stored; a get probes the one
component named, a list probes every one at once (the list is sorted by name here, where
upstream's comes in the order its probes finish).  Each answer is a ComponentStatus with one
``Healthy`` condition: ``True`` with the component's answer as message, ``False`` with what
went wrong.  The components are those
upstream's API server knows of:

- ``scheduler`` and ``controller-manager``, by ``/healthz`` (``HTTPProbe``, upstream's
  ``HttpServer`` with its HTTP prober: a status below 400 is healthy and its body, at most
  10 KiB, is the message; anything else, a refused connection included, is unhealthy with the
  reason as message and no error, so ``kubectl get cs`` shows it under MESSAGE as upstream's
  does).  Upstream probes ``https://127.0.0.1:10259`` and ``:10257``; kubelab's components
  serve plain HTTP, and ``kubelab server`` tells its API server the ports it gave them;
- ``etcd-0``, the storage backend (``StoreProbe``): upstream has one ``etcd-N`` per storage
  backend, whatever holds it, and probes the backend, not its members; here the one backend
  is etcd or SQLite, probed with a read as ``/healthz``'s ``etcd`` check reads it: ``ok``, or
  unhealthy with the store's error as error.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import aiohttp

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import Selection
from kube.api.kinds.core_v1.cluster import COMPONENT_HEALTHY, ComponentCondition, ComponentStatus
from kube.api.meta_v1 import ListMeta, ObjectMeta, ResourceList

PROBE_TIMEOUT = 20.0
MAX_BODY = 10 * 1024

SUCCESS, FAILURE = "True", "False"


class ComponentProbe(Protocol):
    """Checks one component (upstream's ``Server.DoServerCheck``)."""

    async def check(self) -> tuple[str, str, str]:
        """(condition status, message, error)."""
        ...


@dataclass(frozen=True)
class HTTPProbe:
    """A component's health endpoint, as upstream's HTTP prober reads it."""

    url: str
    timeout: float = PROBE_TIMEOUT

    async def check(self) -> tuple[str, str, str]:
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(self.url, ssl=False) as response,
            ):
                body = (await response.content.read(MAX_BODY)).decode(errors="replace")
                status = response.status
        except TimeoutError:
            return FAILURE, f'Get "{self.url}": context deadline exceeded', ""
        except aiohttp.ClientError as error:
            return FAILURE, f'Get "{self.url}": {_reason(self.url, error)}', ""
        if status >= 400:
            return FAILURE, f"HTTP probe failed with statuscode: {status}", ""
        return SUCCESS, body, ""


def _reason(url: str, error: aiohttp.ClientError) -> str:
    """Why a request failed, as Go's net/http says it where the cause is the usual one."""
    cause = getattr(error, "os_error", None)
    if isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return f"dial tcp {parts.hostname}:{port}: connect: connection refused"
    return str(error)


@dataclass(frozen=True)
class StoreProbe:
    """The storage backend, by a read (``read`` raises when the store cannot answer)."""

    read: Callable[[], Awaitable[object]]
    timeout: float = PROBE_TIMEOUT

    async def check(self) -> tuple[str, str, str]:
        try:
            async with asyncio.timeout(self.timeout):
                await self.read()
        except TimeoutError:
            return FAILURE, "", "context deadline exceeded"
        except Exception as error:  # any failure of the store is its health, not ours
            return FAILURE, "", str(error) or type(error).__name__
        return SUCCESS, "ok", ""


class ComponentStatusREST:
    """Get and list of ComponentStatus, probing ``components`` (name → probe)."""

    def __init__(self, components: Mapping[str, ComponentProbe]) -> None:
        self.components = components

    async def get(self, namespace: str, name: str) -> ComponentStatus:
        probe = self.components.get(name)
        if probe is None:
            raise errors.not_found(ComponentStatus.kind_info, name)
        return await _status(name, probe)

    async def list(self, namespace: str, selection: Selection) -> ResourceList[ComponentStatus]:
        names = sorted(self.components)
        found = await asyncio.gather(*(_status(n, self.components[n]) for n in names))
        info = ComponentStatus.kind_info
        return ResourceList(
            api_version=info.api_version,
            kind=info.list_kind,
            metadata=ListMeta(),
            items=[s for s in found if selection.matches(info, s)],
        )


async def _status(name: str, probe: ComponentProbe) -> ComponentStatus:
    status, message, error = await probe.check()
    return ComponentStatus(
        api_version=ComponentStatus.API_VERSION,
        kind=ComponentStatus.KIND,
        metadata=ObjectMeta(name=name),
        conditions=[
            ComponentCondition(
                type=COMPONENT_HEALTHY,
                status=status,
                message=message or None,
                error=error or None,
            )
        ],
    )
