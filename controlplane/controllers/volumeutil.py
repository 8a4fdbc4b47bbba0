"""What the storage controllers (persistentvolume-binder, pvc-protection, resourcequota) read
the same way: the storage class of a claim or a volume, the claims a pod mounts, and the
annotations the binder and the scheduler exchange (upstream ``storage/util`` and
``component-helpers/storage/volume``)."""

from __future__ import annotations

from kube.api.kinds.core_v1.pod import Pod

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"


def claim_names(pod: Pod) -> list[str]:
    """The claims a pod mounts: named ones, and the ``<pod>-<volume>`` claim of each generic
    ephemeral volume."""
    names: list[str] = []
    for volume in (pod.spec.volumes if pod.spec else None) or ():
        if volume.persistent_volume_claim is not None:
            names.append(volume.persistent_volume_claim.claim_name or "")
        elif volume.ephemeral is not None:
            names.append(f"{pod.metadata.name}-{volume.name}")
    return names
