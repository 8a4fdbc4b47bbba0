from __future__ import annotations

import pytest

from controlplane.scheduler.framework.interface import SUCCESS, CycleState
from controlplane.scheduler.framework.types import PodInfo
from controlplane.scheduler.plugins import imagelocality
from kube.api.kinds.core_v1.pod import Container
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

MB = 1024 * 1024

# Image layout of upstream's test: node1 has 40/300 MB images, node2 250/10 MB,
# node3 2000 MB; "gcr.io/10" and "gcr.io/2000" sit on one node each.
NODE_IMAGES = {
    "node1": {"gcr.io/40:latest": 40 * MB, "gcr.io/300:latest": 300 * MB},
    "node2": {"gcr.io/250:latest": 250 * MB, "gcr.io/10:v1": 10 * MB},
    "node3": {"gcr.io/2000:latest": 2000 * MB},
}


def test_score_scales_by_spread() -> None:
    images = {"shared:latest": 600 * MB}
    nodes = [make_node_info(make_node(f"n{i}", images=images)) for i in range(2)]
    nodes.append(make_node_info(make_node("n2")))
    plugin = imagelocality.new(None, FakeHandle(nodes))
    pod = PodInfo.of(make_pod(images=("shared",)))
    # 600MB on 2 of 3 nodes counts 400MB: 100*(400 - 23)/(1000 - 23) -> 38.
    assert [plugin.score(CycleState(), pod, node)[0] for node in nodes] == [38, 38, 0]


@pytest.mark.parametrize(
    ("images", "init_images", "expected"),
    [
        # Each image on 1 of 3 nodes counts a third of its size; two containers allow 2000MB.
        # node1: 40/3 MB -> 0; node2: 100*(250/3 - 23)/(2000 - 23) -> 3.
        pytest.param(("gcr.io/40", "gcr.io/250"), (), [0, 3, 0], id="two-images-spread"),
        # node1: 100*(340/3 - 23)/(2000 - 23) -> 4.
        pytest.param(("gcr.io/40", "gcr.io/300"), (), [4, 0, 0], id="both-on-one-node"),
        # node3: 100*(2000/3 - 23)/(1000 - 23) -> 65.
        pytest.param(("gcr.io/2000",), (), [0, 0, 65], id="one-big-image"),
        pytest.param(("gcr.io/10:v1", "gcr.io/250"), (), [0, 3, 0], id="explicit-tag"),
        pytest.param(("gcr.io/missing",), (), [0, 0, 0], id="absent-everywhere"),
        pytest.param(("gcr.io/40",), ("gcr.io/300",), [4, 0, 0], id="init-containers-count"),
    ],
)
def test_score(images: tuple[str, ...], init_images: tuple[str, ...], expected: list[int]) -> None:
    nodes = [make_node_info(make_node(name, images=imgs)) for name, imgs in NODE_IMAGES.items()]
    plugin = imagelocality.new(None, FakeHandle(nodes))
    init = [Container(name=f"i{i}", image=image) for i, image in enumerate(init_images)] or None
    pod = PodInfo.of(make_pod(images=images, init_containers=init))
    results = [plugin.score(CycleState(), pod, node) for node in nodes]
    assert all(status == SUCCESS for _, status in results)
    assert [score for score, _ in results] == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("nginx", "nginx:latest", id="bare"),
        pytest.param("nginx:1.25", "nginx:1.25", id="tagged"),
        pytest.param("registry:5000/app", "registry:5000/app:latest", id="registry-port"),
        pytest.param("registry:5000/app:v2", "registry:5000/app:v2", id="registry-port-tag"),
    ],
)
def test_normalized_image_name(name: str, expected: str) -> None:
    assert imagelocality.normalized_image_name(name) == expected


@pytest.mark.parametrize(
    ("total", "containers", "expected"),
    [
        pytest.param(0, 1, 0, id="below-min"),
        pytest.param(23 * MB, 1, 0, id="at-min"),
        pytest.param(1000 * MB, 1, 100, id="at-max"),
        pytest.param(5000 * MB, 2, 100, id="above-max"),
        pytest.param(1000 * MB, 2, 49, id="per-container-max"),
    ],
)
def test_calculate_priority(total: int, containers: int, expected: int) -> None:
    assert imagelocality.calculate_priority(total, containers) == expected


@pytest.mark.parametrize(
    ("images", "init_images"),
    [
        pytest.param(("gcr.io/40", "gcr.io/250"), (), id="two-images-spread"),
        pytest.param(("gcr.io/40", "gcr.io/300"), (), id="both-on-one-node"),
        pytest.param(("gcr.io/2000",), (), id="one-big-image"),
        pytest.param(("gcr.io/2000", "gcr.io/2000"), (), id="same-image-twice"),
        pytest.param(("gcr.io/missing",), (), id="absent-everywhere"),
        pytest.param(("gcr.io/40",), ("gcr.io/300", "gcr.io/10:v1"), id="init-containers"),
    ],
)
def test_score_nodes_equals_score(images: tuple[str, ...], init_images: tuple[str, ...]) -> None:
    nodes = [make_node_info(make_node(name, images=imgs)) for name, imgs in NODE_IMAGES.items()]
    nodes += [
        make_node_info(make_node("bare")),
        make_node_info(make_node("twin", images={"gcr.io/2000:latest": 2000 * MB})),
    ]
    plugin = imagelocality.new(None, FakeHandle(nodes))
    init = [Container(name=f"i{i}", image=image) for i, image in enumerate(init_images)] or None
    pod = PodInfo.of(make_pod(images=images, init_containers=init))
    scores, status = plugin.score_nodes(CycleState(), pod, nodes)
    assert status is SUCCESS
    assert [(score, SUCCESS) for score in scores] == [
        plugin.score(CycleState(), pod, node) for node in nodes
    ]
