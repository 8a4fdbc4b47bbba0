"""``node_lab``: a whole lab of one proxy mode, shared by the node tests that run on one
(``tests/node/nodelabs.py`` says why and how it is shared).  A module asks for it with
``pytest.mark.parametrize("node_lab", [MODE, ...], indirect=True)``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from kubelab.lab import cluster
from kubelab.lab.topology import Lab, LabSpec
from tests.node.nodelabs import Mode, NodeLab
from tests.servers import Kubectl


@pytest.fixture(scope="session")
def node_lab(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodeLab]:
    mode: Mode = request.param
    spec = LabSpec(
        name=mode.lab,
        host_api_port=mode.host_api_port,
        proxy_mode=mode.proxy_mode,
        iptables_backend=mode.iptables_backend,
    )
    lab = Lab(spec)
    kubectl = Kubectl(lab.host_kubeconfig, tmp_path_factory.mktemp("kubectl"), "default")
    try:
        asyncio.run(cluster.up(lab, report=lambda line: None))
        yield NodeLab(mode, lab, kubectl)
    finally:
        asyncio.run(cluster.down(lab, report=lambda line: None))
