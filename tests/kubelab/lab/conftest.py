"""The labs tests of this package share, each brought up by the first test that asks for it
and taken down once the package's tests are done (the node tests after them bring up labs of
their own).

- ``shared_lab``: a 2-worker lab for end-to-end tests that only add workloads (each in a
  namespace of its own) and leave the lab as they found it.  Tests that break, restart or
  reshape a lab bring up one of their own (``test_lab.py``).
- ``ha_lab``: the HA lab (three control planes, etcd, one worker) for the HA modules; the
  fault tests leave it healthy again after each fault, so the topology tests can follow them.

Names and host ports (``KUBELAB_SHARED_LAB``/``_PORT``, ``KUBELAB_HA_LAB``/``_PORT``) can be
overridden to run beside another copy of the suite.
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
HA_LAB = os.environ.get("KUBELAB_HA_LAB", "klha")
HA_PORT = int(os.environ.get("KUBELAB_HA_PORT", "16453"))


@pytest.fixture(scope="package")
def shared_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    spec = LabSpec(name=SHARED_LAB, workers=2, host_api_port=SHARED_PORT)
    with lab_up(spec, tmp_path_factory.mktemp("kubectl-shared")) as running:
        yield running


@pytest.fixture(scope="package")
def ha_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    spec = LabSpec(name=HA_LAB, workers=1, store="etcd", control_planes=3, host_api_port=HA_PORT)
    flags = ("--control-planes", "3", "--store", "etcd")
    with lab_up(spec, tmp_path_factory.mktemp("kubectl-ha"), *flags) as running:
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
