"""What the tests of ``kubelab server`` share: one server per module (a module that needs
flags defines its own ``server``) and the pinned kubectl on it, in the default namespace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import Kubectl, ServerProcess, serve_all_in_one


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from serve_all_in_one(tmp_path_factory)


@pytest.fixture
def kubectl(server: ServerProcess, tmp_path: Path) -> Kubectl:
    return Kubectl(server.kubeconfig, tmp_path / "kubectl-cache", "default")
