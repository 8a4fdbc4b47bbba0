"""The ``namespace/name`` key that caches, workqueues and controllers index objects by.

Cluster-scoped objects are keyed by their name alone, as in client-go's
``MetaNamespaceKeyFunc``; ``split_key`` inverts it.
"""

from __future__ import annotations

from kube.api.meta_v1 import ObjectMeta, Resource


def key_of(metadata: ObjectMeta) -> str:
    """``namespace/name``, or ``name`` for an object without a namespace."""
    name = metadata.name or ""
    return f"{metadata.namespace}/{name}" if metadata.namespace else name


def object_key(obj: Resource) -> str:
    """The key of an object."""
    return key_of(obj.metadata)


def split_key(key: str) -> tuple[str, str]:
    """(namespace, name) of a key; the namespace is ``""`` for cluster-scoped keys."""
    namespace, sep, name = key.partition("/")
    if not sep:
        return "", namespace
    if not namespace or not name or "/" in name:
        raise ValueError(f"unexpected key format: {key!r}")
    return namespace, name
