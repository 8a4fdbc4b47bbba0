"""ImageLocality: prefer nodes that already hold the pod's images, so it starts without a
long pull (upstream ``imagelocality``).

Each image present on the node counts its size scaled by the fraction of nodes that have it:
an image on every node says nothing about this one, and weighting by spread keeps pods of one
image from piling onto the few nodes that pulled it first.  The sum is clamped between 23 MiB
and 1000 MiB per container and mapped linearly onto 0..100.  Image names are compared as the
kubelet reports them, after adding the implicit ``:latest`` tag.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    SUCCESS,
    CycleState,
    Handle,
    Status,
)
from controlplane.scheduler.framework.types import ImageState, NodeInfo, PodInfo

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """``name`` with the implicit ``:latest`` tag made explicit (a ``:`` before the last
    ``/`` is a registry port, not a tag)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def scaled_image_score(state: ImageState, total_nodes: int) -> int:
    """The image's size times the fraction of nodes that have it."""
    return int(state.size * (state.num_nodes / total_nodes))


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    """``sum_scores`` clamped to [23 MiB, 1000 MiB per container] and scaled onto 0..100."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality:
    NAME: ClassVar[str] = names.IMAGE_LOCALITY

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        total_nodes = len(self._handle.snapshot.list())
        spec = pod.pod.spec
        containers = [*(spec.init_containers or ()), *(spec.containers or ())] if spec else []
        image_sum = 0
        for container in containers:
            image = node.image_states.get(normalized_image_name(container.image or ""))
            if image is not None:
                image_sum += scaled_image_score(image, total_nodes)
        return calculate_priority(image_sum, len(containers)), SUCCESS

    def score_extensions(self) -> None:
        return None


def new(args: Mapping[str, Any] | None, handle: Handle) -> ImageLocality:
    return ImageLocality(handle)
