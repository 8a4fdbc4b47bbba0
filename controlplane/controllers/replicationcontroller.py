"""The replicationcontroller controller: ReplicationControllers, run by the ReplicaSet logic.

Upstream implements ``pkg/controller/replication`` by converting ReplicationControllers to
ReplicaSets and running the ReplicaSet controller on them.  Here the ReplicaSet controller is
written against what both kinds share, so this module only names the kind: pods, events,
expectations, adoption, ranking and status behave exactly as for ReplicaSets (without
``terminatingReplicas``, which ReplicationControllers do not have).
"""

from __future__ import annotations

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.replicaset import ReplicaSetController
from kube.api.kinds.core_v1.pod import ReplicationController

NAME = "replicationcontroller"


class ReplicationManager(ReplicaSetController):
    NAME = NAME
    EVENT_SOURCE = "replication-controller"
    KIND = ReplicationController


def new(ctx: ControllerContext) -> ReplicationManager:
    return ReplicationManager(ctx)
