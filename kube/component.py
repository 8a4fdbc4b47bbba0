"""What every ``kubelab`` component process shares: flag types, client flags, and the run loop.

A component's entry point is a coroutine that takes a ``stop`` event and returns an exit code;
``run`` sets up logging, turns SIGINT and SIGTERM into that event, and runs the coroutine, so
every component shuts down the same way.  Heavy imports stay inside the components' own
commands, so ``kubelab --help`` stays instant.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import ipaddress
import logging
import os
import re
import signal
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web

    from kube.client.rest import Client

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|us|µs|ns|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str) -> float:
    """A Go duration (``15s``, ``1m30s``, ``250ms``) in seconds; ValueError if it is not one."""
    sign, body = (-1.0, text[1:]) if text.startswith("-") else (1.0, text.removeprefix("+"))
    if body == "0":
        return 0.0
    parts = _DURATION_PART.findall(body)
    if not parts or "".join(number + unit for number, unit in parts) != body:
        raise ValueError(f"time: invalid duration {text!r}")
    return sign * sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def go_duration(seconds: float) -> str:
    """``seconds`` as Go prints a ``time.Duration`` (``500ms``, ``10s``, ``1m30s``, ``1h0m0s``), for
    messages that follow upstream's."""

    def trim(value: float) -> str:
        return f"{value:.9f}".rstrip("0").rstrip(".")

    if seconds == 0:
        return "0s"
    if seconds < 1:
        for unit, scale in (("ms", 1e3), ("µs", 1e6)):
            if seconds * scale >= 1:
                return trim(seconds * scale) + unit
        return trim(seconds * 1e9) + "ns"
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    if hours:
        return f"{hours}h{minutes}m{trim(secs)}s"
    if minutes:
        return f"{minutes}m{trim(secs)}s"
    return f"{trim(secs)}s"


def boolean(text: str) -> bool:
    """A Go boolean flag value given with ``=`` (``--anonymous-auth=false``)."""
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def duration(text: str) -> float:
    """A non-negative Go duration flag value (``5m``, ``1m30s``, ``250ms``) in seconds."""
    try:
        seconds = parse_duration(text)
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"expected a duration such as 5m or 30s, got {text!r}")
    return seconds


def address(text: str) -> tuple[str, int]:
    """An ``IP:PORT`` flag value (``--healthz-bind-address``; IPv6 as ``[::1]:53``)."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    try:
        ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        number = -1
    if not sep or not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"expected IP:PORT, got {text!r}")
    return host, number


def add_client_flags(
    parser: argparse.ArgumentParser, qps: float = 50.0, burst: int = 100, required: bool = True
) -> None:
    """``--kubeconfig`` and client-side flow control, as the upstream components spell them."""
    parser.add_argument(
        "--kubeconfig", type=Path, required=required, help="kubeconfig naming the API server"
    )
    parser.add_argument(
        "--kube-api-qps",
        type=float,
        default=qps,
        help=f"requests per second to the API server (default: {qps:g})",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=int,
        default=burst,
        help=f"requests allowed in a burst above the QPS (default: {burst})",
    )


def add_serving_flags(parser: argparse.ArgumentParser, port: int, serves: str) -> None:
    """``--bind-address`` and ``--port`` of a component's own HTTP endpoints (``serves``)."""
    parser.add_argument("--bind-address", default="127.0.0.1", help="address for /healthz etc.")
    parser.add_argument(
        "--port",
        type=int,
        default=port,
        help=f"port for {serves} (default: {port}; 0: any free port)",
    )


def client_from_flags(args: argparse.Namespace, user_agent: str) -> Client:
    from kube.client.rest import Client

    return Client.from_kubeconfig(
        args.kubeconfig, user_agent=user_agent, qps=args.kube_api_qps, burst=args.kube_api_burst
    )


def tune_garbage_collector() -> None:
    """Collect cycles less eagerly: a process decoding thousands of objects per list would
    otherwise spend most of that time rescanning every live object it holds.

    Everything built while starting (modules, the scheme, codecs) is frozen out of collection,
    and the youngest generation is collected after 50,000 allocations instead of 700.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def _default_signals_in_child() -> None:
    """In a child forked without exec (pyroute2 forks one to open a netlink socket in another
    network namespace): default SIGINT/SIGTERM and no wakeup fd, since the parent's event
    loop listens on that socket, and a SIGTERM sent to the child would stop the parent."""
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)


def run(main: Callable[[asyncio.Event], Awaitable[int]]) -> int:
    """Run a component until it returns or a signal asks it to stop."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    os.register_at_fork(after_in_child=_default_signals_in_child)

    async def until_stopped() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await main(stop)

    return asyncio.run(until_stopped())


async def serve_health(app: web.Application, address: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve a component's /healthz, /metrics, ... over plain HTTP; the runner and the port
    (``port`` 0 picks a free one)."""
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    return runner, int(runner.addresses[0][1])


async def until_stopped(work: Coroutine[Any, Any, object], stop: asyncio.Event, name: str) -> int:
    """Run ``work`` until it ends or ``stop`` is set, and say how the process should exit:
    0, or 1 when the component lost its leader lease (it must stop acting at once, and a
    supervisor restarts it as a standby).  Any other failure propagates."""
    from kube.client.leaderelection import LeadershipLost

    task = asyncio.create_task(work)
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if task.done() and isinstance(task.exception(), LeadershipLost):
            logging.getLogger(f"kubelab.{name}").error("leader election lost: exiting")
            return 1
        if task.done() and (error := task.exception()) is not None:
            raise error
        return 0
    finally:
        for pending in (task, stopping):
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
                await pending
