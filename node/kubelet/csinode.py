"""The kubelet's CSINode: the storage.k8s.io/v1 object that says which CSI drivers run here.

Upstream's CSI volume plugin (``pkg/volume/csi``: ``initializeCSINode`` and the
``nodeinfomanager``) creates it once the Node exists: named after the node, owned by the Node
(so the garbage collector removes it with its Node), ``spec.drivers`` empty until CSI drivers
register, and annotated ``storage.alpha.kubernetes.io/migrated-plugins`` with the in-tree
volume plugins whose volumes CSI drivers serve instead (in 1.36 all seven, Portworx's
feature gate being on by default).  The scheduler and the attach/detach controller read it.

- ``initialize`` (``InitializeCSINodeWithAnnotation``) reads the CSINode, creates it if it is
  missing and puts the annotation right if it is stale, retrying with upstream's backoff (six
  tries over about 140 s) and then giving up with ``CSINodeError``, which ends the kubelet as
  upstream's ``klog.Fatalf`` does, so its supervisor restarts it.  Until it succeeds,
  ``healthy`` keeps the Node NotReady with upstream's messages ("CSINode is not yet
  initialized", then "failed to initialize CSINode: ...").
- ``run`` does the same every ``period`` seconds.  Upstream writes the CSINode again when a
  driver registers through the plugin watcher; kubelab has no plugin watcher, so the kubelet
  checks instead, and a CSINode deleted by hand, or with a Node that was deleted and
  registered again, comes back within a period.  A GET by name, not a watch: a node may get,
  create, update, patch and delete its own CSINode and no other, and may not list or watch
  CSINodes at all (the Node authorizer and NodeRestriction).

Registering drivers (``spec.drivers`` entries) is not done: no CSI driver can register here.
"""

from __future__ import annotations

import logging
import random

from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.storage_v1 import CSINode, CSINodeSpec
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError, ClientError
from kube.client.interface import ApiClient
from kube.clock import Clock
from node.kubelet.nodestatus import node_owner

log = logging.getLogger(__name__)

MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
MIGRATED_PLUGINS = (
    "kubernetes.io/aws-ebs",
    "kubernetes.io/azure-disk",
    "kubernetes.io/azure-file",
    "kubernetes.io/cinder",
    "kubernetes.io/gce-pd",
    "kubernetes.io/portworx-volume",
    "kubernetes.io/vsphere-volume",
)
"""The in-tree plugins served through CSI (upstream's ``migratedPlugins``, all enabled)."""
INIT_BACKOFF = (0.015, 6.0, 6, 0.1)
"""Upstream's ``initBackoff``: first wait, factor, tries, jitter."""
CHECK_PERIOD = 60.0
NOT_INITIALIZED = "CSINode is not yet initialized"


class CSINodeError(RuntimeError):
    """The CSINode could not be initialized after every retry."""


class CSINodeManager:
    """Keeps this node's CSINode; see the module docstring.  Not thread-safe."""

    def __init__(
        self, client: ApiClient, node_name: str, clock: Clock, period: float = CHECK_PERIOD
    ) -> None:
        self._client = client
        self._node_name = node_name
        self._clock = clock
        self._period = period
        self._error: str | None = NOT_INITIALIZED

    def healthy(self) -> tuple[bool, str]:
        """A Node health check: the CSINode is initialized (the message says why not)."""
        return self._error is None, self._error or ""

    async def initialize(self) -> CSINode:
        """Make sure the CSINode exists and is annotated; raises CSINodeError at the end."""
        wait, factor, tries, jitter = INIT_BACKOFF
        attempt = 1
        while True:
            try:
                csinode = await self.sync()
            except (ApiError, ClientError) as error:
                self._error = f"failed to initialize CSINode: {error}"
                log.error("Failed to initialize CSINode: %s", error)
                if attempt == tries:
                    raise CSINodeError(
                        f"Failed to initialize CSINode after retrying: {error}"
                    ) from error
                await self._clock.sleep(wait * (1 + jitter * random.random()))
                wait *= factor
                attempt += 1
                continue
            self._error = None
            return csinode

    async def run(self) -> None:
        """Check the CSINode every period until cancelled."""
        while True:
            await self._clock.sleep(self._period)
            try:
                await self.sync()
            except (ApiError, ClientError) as error:
                log.warning("checking CSINode %s: %s", self._node_name, error)

    async def sync(self) -> CSINode:
        """Create the CSINode if it is missing, annotate it if it is not; return it."""
        try:
            csinode = await self._client.get(CSINode, self._node_name)
        except ApiError as error:
            if not error.not_found:
                raise
            return await self._create()
        annotations = csinode.metadata.annotations or {}
        if annotations.get(MIGRATED_PLUGINS_ANNOTATION) == _migrated_plugins():
            return csinode
        csinode.metadata.annotations = {
            **annotations,
            MIGRATED_PLUGINS_ANNOTATION: _migrated_plugins(),
        }
        return await self._client.update(csinode)

    async def _create(self) -> CSINode:
        node = await self._client.get(Node, self._node_name)
        log.info("creating CSINode %s", self._node_name)
        return await self._client.create(
            CSINode(
                metadata=ObjectMeta(
                    name=self._node_name,
                    annotations={MIGRATED_PLUGINS_ANNOTATION: _migrated_plugins()},
                    owner_references=[node_owner(self._node_name, node.metadata.uid or "")],
                ),
                spec=CSINodeSpec(drivers=[]),
            )
        )


def _migrated_plugins() -> str:
    return ",".join(sorted(MIGRATED_PLUGINS))
