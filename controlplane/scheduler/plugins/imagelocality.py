"""ImageLocality: prefer nodes that already hold the pod's images, so it starts without a
long pull (upstream ``imagelocality``).

Each image present on the node counts its size scaled by the fraction of nodes that have it:
an image on every node says nothing about this one, and weighting by spread keeps pods of one
image from piling onto the few nodes that pulled it first.  The sum is clamped between 23 MiB
and 1000 MiB per container and mapped linearly onto 0..100.  Image names are compared as the
kubelet reports them, after adding the implicit ``:latest`` tag.

Score runs for every feasible node, so ``score_nodes`` scores a batch in one loop (``score``
delegates): the pod's image names and the cluster size are worked out once per batch, and a
node holding none of the images gets the precomputed empty-handed score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def _priority(
    image_states: Mapping[str, ImageState], images: list[str], total_nodes: int, containers: int
) -> int:
    """The score of a node with ``image_states`` for a pod with ``images``."""
    image_sum = 0
    for image in images:
        if (image_state := image_states.get(image)) is not None:
            image_sum += scaled_image_score(image_state, total_nodes)
    return calculate_priority(image_sum, containers)


class ImageLocality:
    NAME: ClassVar[str] = names.IMAGE_LOCALITY

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def score_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[list[int], Status]:
        total_nodes = len(self._handle.snapshot.list())
        spec = pod.pod.spec
        containers = [*(spec.init_containers or ()), *(spec.containers or ())] if spec else []
        images = [normalized_image_name(container.image or "") for container in containers]
        num_containers = len(containers)
        none_present = calculate_priority(0, num_containers)
        # A comprehension rather than a loop: most nodes report no images and cost no call.
        return [
            _priority(image_states, images, total_nodes, num_containers)
            if (image_states := node.image_states)
            else none_present
            for node in nodes
        ], SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        scores, status = self.score_nodes(state, pod, (node,))
        return scores[0], status

    def score_extensions(self) -> None:
        return None


def new(args: Mapping[str, Any] | None, handle: Handle) -> ImageLocality:
    return ImageLocality(handle)
