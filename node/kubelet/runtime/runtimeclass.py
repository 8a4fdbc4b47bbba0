"""A pod's RuntimeClass resolved to the CRI handler its sandbox is run with.

As upstream's kubelet (pkg/kubelet/runtimeclass), the classes come from an informer, so a
sandbox creation never waits on the API server: a pod naming no class gets the runtime's
default handler (""), one naming a class gets its ``handler``, and one naming a class the
cache does not hold fails its sandbox creation with the lister's NotFound
(``runtimeclass.node.k8s.io "x" not found``); the pod worker retries with backoff, so the pod
starts once the class is created.
"""

from __future__ import annotations

from kube.api.kinds.node_v1 import RuntimeClass
from kube.client.informers import Indexer


class RuntimeClassNotFound(LookupError):
    """The pod's RuntimeClass is not in the cache; worded as upstream's lister words it."""

    def __init__(self, name: str) -> None:
        super().__init__(f'runtimeclass.node.k8s.io "{name}" not found')


class RuntimeClasses:
    """The handlers of the RuntimeClasses an informer holds (upstream's runtimeclass.Manager)."""

    def __init__(self, classes: Indexer[RuntimeClass]) -> None:
        self._classes = classes

    def runtime_handler(self, runtime_class_name: str | None) -> str:
        """The handler of ``runtime_class_name``; "" (the default) for no class."""
        if not runtime_class_name:
            return ""
        found = self._classes.get(runtime_class_name)
        if found is None:
            raise RuntimeClassNotFound(runtime_class_name)
        return found.handler or ""
