"""Cloud providers by name: registered at import time, or found as installed entry points.

Upstream's ``RegisterCloudProvider``/``InitCloudProvider``: a provider's module calls
:func:`register_cloud_provider` when it is imported, and the cloud-controller-manager calls
:func:`init_cloud_provider` with ``--cloud-provider`` and ``--cloud-config``.  A name
registered twice or one nobody registered is an error that says which.

Go links a provider into the binary by importing its package; the Python way to do the same
without touching kubelab is a plain package that declares an entry point in the
``kubelab.cloud_providers`` group (``name = "package.module:factory"``).  An unknown name is
looked up there before it is an error: loading the entry point imports its module (which may
register itself, upstream-style) and otherwise registers the factory the entry point names.
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from controlplane.cloud.provider import CloudProvider

log = logging.getLogger("kubelab.cloud")

ENTRY_POINT_GROUP = "kubelab.cloud_providers"

Factory = Callable[[IO[str] | None], CloudProvider]
"""Builds a provider from its configuration file (opened), or None without one."""

_providers: dict[str, Factory] = {}
_lock = threading.Lock()


class CloudProviderError(Exception):
    """A provider name is registered twice, unknown, or its factory failed."""


def register_cloud_provider(name: str, factory: Factory) -> None:
    """Register ``factory`` as cloud provider ``name``; meant for import time."""
    with _lock:
        if name in _providers:
            raise CloudProviderError(f"cloud provider {name!r} was registered twice")
        _providers[name] = factory
    log.debug("registered cloud provider %r", name)


def unregister_cloud_provider(name: str) -> None:
    """Forget provider ``name`` (for tests that register their own)."""
    with _lock:
        _providers.pop(name, None)


def registered_providers() -> list[str]:
    with _lock:
        return sorted(_providers)


def _from_entry_point(name: str) -> Factory | None:
    found = [
        ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name
    ]
    if not found:
        return None
    if len(found) > 1:
        sources = ", ".join(ep.value for ep in found)
        raise CloudProviderError(f"cloud provider {name!r} has several entry points: {sources}")
    loaded = found[0].load()
    with _lock:
        registered = _providers.get(name)
    if registered is not None:
        return registered
    if not callable(loaded):
        raise CloudProviderError(
            f"entry point {found[0].value!r} of cloud provider {name!r} neither registers the "
            "provider when imported nor names a factory"
        )
    register_cloud_provider(name, loaded)
    return loaded  # type: ignore[no-any-return]


def get_cloud_provider_factory(name: str) -> Factory:
    """The factory of provider ``name``, loading its entry point if it is not registered yet."""
    with _lock:
        factory = _providers.get(name)
    if factory is None:
        factory = _from_entry_point(name)
    if factory is None:
        installed = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
        known = ", ".join(sorted({*registered_providers(), *installed})) or "none"
        raise CloudProviderError(
            f"unknown cloud provider {name!r} (known: {known}, registered or installed under "
            f"the entry point group {ENTRY_POINT_GROUP!r})"
        )
    return factory


def init_cloud_provider(name: str, config: Path | None) -> CloudProvider:
    """Build provider ``name`` from the configuration file ``config`` (None: without one)."""
    factory = get_cloud_provider_factory(name)
    try:
        if config is None:
            return factory(None)
        with config.open(encoding="utf-8") as file:
            return factory(file)
    except OSError as error:
        raise CloudProviderError(
            f"cloud provider {name!r}: cannot read {config}: {error}"
        ) from None
    except ValueError as error:
        raise CloudProviderError(f"cloud provider {name!r}: {error}") from None
