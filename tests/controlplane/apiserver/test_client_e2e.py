"""The official Python client's own e2e suite, unchanged, against ``kubelab server``.

The suite (``kubernetes/e2e_test`` in kubernetes-client/python) is not in the client's wheel
or sdist, and this project copies no upstream code, so it is read from a checkout named by
``KUBELAB_CLIENT_E2E`` (a directory holding ``kubernetes/e2e_test``, at the tag of the
installed client); ``make client-e2e CLIENT_GIT=...`` extracts one from a clone and runs this
module.  Without it the test is skipped.

The suite imports itself as ``kubernetes.e2e_test``: a conftest beside the copy adds the copy
to the installed package's ``__path__``.  It finds the server through ``KUBECONFIG``.  The
modules run are the ones that need no node (pods are created, never run): watch, informer,
apps, batch and utils.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import ServerProcess, serve_all_in_one

CHECKOUT = os.environ.get("KUBELAB_CLIENT_E2E", "")
MODULES = ("test_watch.py", "test_informer.py", "test_apps.py", "test_batch.py", "test_utils.py")
CONFTEST = """\
import pathlib

import kubernetes

kubernetes.__path__.append(str(pathlib.Path(__file__).parent / "kubernetes"))
"""

pytestmark = pytest.mark.skipif(
    not CHECKOUT, reason="KUBELAB_CLIENT_E2E names no copy of the client's e2e suite"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from serve_all_in_one(tmp_path_factory)


def test_the_official_clients_e2e_suite_passes(server: ServerProcess, tmp_path: Path) -> None:
    suite = tmp_path / "kubernetes" / "e2e_test"
    shutil.copytree(Path(CHECKOUT) / "kubernetes" / "e2e_test", suite)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        + [str(suite / module) for module in MODULES],
        cwd=tmp_path,
        env={**os.environ, "KUBECONFIG": str(server.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1], done.stdout[-2000:]
