"""Every controller by name, in the order the controller-manager starts them."""

from __future__ import annotations

from collections.abc import Mapping

from controlplane.controllers import (
    clusterroleaggregation,
    cronjob,
    daemonset,
    deployment,
    disruption,
    endpoints,
    endpointslice,
    garbagecollector,
    job,
    namespace,
    nodeipam,
    nodelifecycle,
    persistentvolume,
    podgc,
    replicaset,
    replicationcontroller,
    resourcequota,
    rootcacert,
    serviceaccount,
    statefulset,
    tainteviction,
    ttlafterfinished,
    volumeprotection,
)
from controlplane.controllers.manager import ControllerFactory

CONTROLLERS: Mapping[str, ControllerFactory] = {
    deployment.NAME: deployment.new,
    replicaset.NAME: replicaset.new,
    replicationcontroller.NAME: replicationcontroller.new,
    daemonset.NAME: daemonset.new,
    statefulset.NAME: statefulset.new,
    job.NAME: job.new,
    cronjob.NAME: cronjob.new,
    ttlafterfinished.NAME: ttlafterfinished.new,
    endpoints.NAME: endpoints.new,
    endpointslice.NAME: endpointslice.new,
    namespace.NAME: namespace.new,
    serviceaccount.NAME: serviceaccount.new,
    rootcacert.NAME: rootcacert.new,
    nodeipam.NAME: nodeipam.new,
    nodelifecycle.NAME: nodelifecycle.new,
    tainteviction.NAME: tainteviction.new,
    garbagecollector.NAME: garbagecollector.new,
    podgc.NAME: podgc.new,
    resourcequota.NAME: resourcequota.new,
    disruption.NAME: disruption.new,
    persistentvolume.NAME: persistentvolume.new,
    volumeprotection.PVC_NAME: volumeprotection.new_pvc_protection,
    volumeprotection.PV_NAME: volumeprotection.new_pv_protection,
    clusterroleaggregation.NAME: clusterroleaggregation.new,
}

OFF_BY_DEFAULT: tuple[str, ...] = ()
"""Controllers ``*`` leaves out (upstream: bootstrapsigner, tokencleaner)."""
