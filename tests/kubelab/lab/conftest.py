"""The session's shared lab: one 2-worker lab, brought up by the first test that asks for it
and taken down at the end of the run, for end-to-end tests that only add workloads (each in a
namespace of its own) and leave the lab as they found it.  Tests that break, restart or
reshape a lab bring up one of their own (``test_lab.py``, the HA modules).

Its name and host port (``KUBELAB_SHARED_LAB``, ``KUBELAB_SHARED_PORT``) can be overridden to
run beside another copy of the suite.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from kubelab.lab.topology import LabSpec
from tests.kubelab.lab.labs import RunningLab, lab_up
from tests.servers import Kubectl

SHARED_LAB = os.environ.get("KUBELAB_SHARED_LAB", "klshared")
SHARED_PORT = int(os.environ.get("KUBELAB_SHARED_PORT", "16444"))


@pytest.fixture(scope="session")
def shared_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    spec = LabSpec(name=SHARED_LAB, workers=2, host_api_port=SHARED_PORT)
    with lab_up(spec, tmp_path_factory.mktemp("kubectl-shared")) as running:
        yield running


@pytest.fixture
def lab_kubectl(shared_lab: RunningLab) -> Iterator[Kubectl]:
    """kubectl on the shared lab in a namespace of the test's own (``kubectl create
    namespace``, as a user makes one), deleted afterwards with everything in it."""
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    shared_lab.kubectl.run("create", "namespace", namespace, namespaced=False)
    kubectl = Kubectl(shared_lab.kubectl.kubeconfig, shared_lab.kubectl.cache_dir, namespace)
    try:
        yield kubectl
    finally:
        shared_lab.kubectl.run("delete", "namespace", namespace, "--wait=false", namespaced=False)
