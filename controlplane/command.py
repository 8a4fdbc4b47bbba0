"""``kubelab server``: every control-plane component in one process, like ``k3s server``.

The API server starts first and writes its admin kubeconfig; the other components then run in
the same event loop as clients of it, over HTTPS like any other client, so nothing about them
differs from running each as its own command.  (They use the admin identity until the
security issue gives each component its own.)  A component that stops with an error stops
the whole server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from controlplane.apiserver import command as apiserver_command
from controlplane.scheduler import command as scheduler_command
from kubelab import component


def add_flags(parser: argparse.ArgumentParser) -> None:
    apiserver_command.add_flags(parser)
    parser.add_argument(
        "--scheduler-config",
        type=Path,
        help="a KubeSchedulerConfiguration file for the scheduler (default: the defaults)",
    )
    parser.add_argument(
        "--scheduler-port",
        type=int,
        default=scheduler_command.DEFAULT_PORT,
        help="the scheduler's /healthz, /metrics and explain port "
        f"(default: {scheduler_command.DEFAULT_PORT}; 0: any free port)",
    )


async def serve(args: argparse.Namespace, stop: asyncio.Event) -> int:
    data_dir = apiserver_command.prepare_data_dir(args)
    async with apiserver_command.serving(args, data_dir):
        scheduler = scheduler_command.SchedulerOptions(
            kubeconfig=data_dir / "admin.kubeconfig",
            config=args.scheduler_config,
            port=args.scheduler_port,
        )
        components = [asyncio.create_task(scheduler_command.run_scheduler(scheduler, stop))]
        stopping = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait(
                [*components, stopping], return_when=asyncio.FIRST_COMPLETED
            )
            failed = [task for task in done if task is not stopping]
            code = max((task.result() for task in failed), default=0)
        finally:
            stop.set()
            for task in [*components, stopping]:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    return code


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)
    return lambda args: component.run(lambda stop: serve(args, stop))
