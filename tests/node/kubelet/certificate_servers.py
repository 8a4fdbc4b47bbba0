"""A control plane for the tests of kubelet certificates: an in-process API server under
``Node,RBAC`` with the real csrapproving and csrsigning controllers, running as the
controller-manager does (each controller as its service account), so that what a kubelet is
granted is what the lab grants it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from controlplane.apiserver.server import Running
from controlplane.controllers.command import ControllerManagerOptions, run_controller_manager
from controlplane.storage.sqlite import SQLiteStore
from tests.controlplane.apiserver.inprocess import serving


@contextlib.asynccontextmanager
async def cluster(tmp_path: Path, *, kubelet_serving: bool = False) -> AsyncIterator[Running]:
    """The server and the two certificate controllers; with ``kubelet_serving``, csrapproving
    approves kubelet serving certificates and the server verifies kubelets against its CA."""
    store = await SQLiteStore.open(tmp_path / "state.db")
    data_dir = tmp_path / "data"
    pki = data_dir / "pki"
    try:
        async with serving(
            store,
            data_dir,
            authorization_modes=("Node", "RBAC"),
            kubelet_certificate_authority=pki / "ca.crt" if kubelet_serving else None,
        ) as (running, _):
            options = ControllerManagerOptions(
                kubeconfig=data_dir / "controller-manager.kubeconfig",
                controllers="csrapproving,csrsigning",
                leader_elect=False,
                port=0,
                use_service_account_credentials=True,
                cluster_signing_cert_file=pki / "ca.crt",
                cluster_signing_key_file=pki / "ca.key",
                cluster_signing_duration=3600.0,
                approve_kubelet_serving=kubelet_serving,
            )
            stop = asyncio.Event()
            manager = asyncio.create_task(run_controller_manager(options, stop))
            try:
                yield running
            finally:
                stop.set()
                await manager
    finally:
        await store.close()
