"""autoscaling/v1: Scale, the view of any scalable object that its ``/scale`` subresource serves.

``kubectl scale`` and the HorizontalPodAutoscaler read and write a Deployment's, ReplicaSet's or
StatefulSet's replica count through this kind; it has no resource path of its own.
"""

from __future__ import annotations

from typing import Annotated

from kube.api.meta_v1 import Resource
from kube.api.scheme import NOT_SERVED, kind
from kube.api.struct import Struct, meta


class ScaleSpec(Struct):
    """The desired replica count of the scaled object."""

    replicas: Annotated[
        int | None, meta(minimum=0, doc="Desired number of instances of the scaled object.")
    ] = None


class ScaleStatus(Struct):
    """The observed replica count, and the selector of the pods counted (as a string)."""

    replicas: Annotated[
        int | None, meta(doc="Actual number of observed instances of the scaled object.")
    ] = None
    selector: Annotated[
        str | None, meta(doc="Label query over the pods counted, in label selector syntax.")
    ] = None


@kind(group="autoscaling", version="v1", plural="scales", verbs=NOT_SERVED)
class Scale(Resource):
    """The replica count of a scalable object, as its /scale subresource reads and writes it."""

    spec: Annotated[ScaleSpec | None, meta(doc="The desired state of the object.")] = None
    status: Annotated[
        ScaleStatus | None, meta(doc="The current state of the object; read-only.")
    ] = None
