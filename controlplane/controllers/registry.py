"""Every controller by name, in the order the controller-manager starts them."""

from __future__ import annotations

from collections.abc import Mapping

from controlplane.controllers import (
    admissionpolicystatus,
    bootstrapsigner,
    clusterroleaggregation,
    cronjob,
    csrapproving,
    csrsigning,
    daemonset,
    deployment,
    disruption,
    endpoints,
    endpointslice,
    garbagecollector,
    horizontal,
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
    servicecidrs,
    statefulset,
    tainteviction,
    tokencleaner,
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
    horizontal.NAME: horizontal.new,
    persistentvolume.NAME: persistentvolume.new,
    volumeprotection.PVC_NAME: volumeprotection.new_pvc_protection,
    volumeprotection.PV_NAME: volumeprotection.new_pv_protection,
    clusterroleaggregation.NAME: clusterroleaggregation.new,
    csrapproving.NAME: csrapproving.new,
    csrsigning.NAME: csrsigning.new,
    bootstrapsigner.NAME: bootstrapsigner.new,
    tokencleaner.NAME: tokencleaner.new,
    servicecidrs.NAME: servicecidrs.new,
    admissionpolicystatus.NAME: admissionpolicystatus.new,
}

SERVICE_ACCOUNTS: Mapping[str, str] = {
    deployment.NAME: "deployment-controller",
    replicaset.NAME: "replicaset-controller",
    replicationcontroller.NAME: "replication-controller",
    daemonset.NAME: "daemon-set-controller",
    statefulset.NAME: "statefulset-controller",
    job.NAME: "job-controller",
    cronjob.NAME: "cronjob-controller",
    ttlafterfinished.NAME: "ttl-after-finished-controller",
    endpoints.NAME: "endpoint-controller",
    endpointslice.NAME: "endpointslice-controller",
    namespace.NAME: "namespace-controller",
    serviceaccount.NAME: "service-account-controller",
    rootcacert.NAME: "root-ca-cert-publisher",
    nodeipam.NAME: "node-controller",
    nodelifecycle.NAME: "node-controller",
    tainteviction.NAME: "taint-eviction-controller",
    garbagecollector.NAME: "generic-garbage-collector",
    podgc.NAME: "pod-garbage-collector",
    resourcequota.NAME: "resourcequota-controller",
    disruption.NAME: "disruption-controller",
    horizontal.NAME: "horizontal-pod-autoscaler",
    persistentvolume.NAME: "persistent-volume-binder",
    volumeprotection.PVC_NAME: "pvc-protection-controller",
    volumeprotection.PV_NAME: "pv-protection-controller",
    clusterroleaggregation.NAME: "clusterrole-aggregation-controller",
    csrapproving.NAME: "certificate-controller",
    csrsigning.NAME: "certificate-controller",
    bootstrapsigner.NAME: "bootstrap-signer",
    tokencleaner.NAME: "token-cleaner",
    servicecidrs.NAME: "service-cidrs-controller",
    admissionpolicystatus.NAME: "validatingadmissionpolicy-status-controller",
}
"""The ``kube-system`` service account each controller acts as with
``--use-service-account-credentials`` (upstream's names; RBAC binds each to its
``system:controller:<account>`` role)."""

OFF_BY_DEFAULT: tuple[str, ...] = (bootstrapsigner.NAME, tokencleaner.NAME)
"""Controllers ``*`` leaves out, as upstream: ``--controllers=*,bootstrapsigner,tokencleaner``
turns them on."""
