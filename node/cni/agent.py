"""The node's CNI agent: :class:`~node.cni.plugin.Plugin` served on a unix socket.

The ``kubelab-cni`` executable (:mod:`node.cni.shim`) forwards each CNI call here instead of
importing pyroute2 itself, so a pod's ADD or DEL costs a bare interpreter start and one
round trip rather than 200+ ms of imports.  The kubelet starts the agent inside the node's
network namespace (``python -m node.cni.agent SOCKET`` under ``nsenter --net=...``, or
:class:`CniAgent` in its own process when that already lives there): the netlink and iptables
work then happens in the very netns the plugin process would have inherited from containerd.

Each connection carries one call (wire format in :mod:`node.cni.shim`).  The call runs the same
:meth:`Plugin.run <node.cni.plugin.Plugin.run>` as the in-process plugin, in a worker thread
(pyroute2 and iptables-restore block); calls for the same container id are serialised, as a
runtime never expects two operations on one sandbox to interleave, while calls for different
containers run side by side (IPAM holds its own file lock).  A malformed request gets a CNI
error reply (code 4 or 6) and a failure the plugin did not map gets code 100: the agent never
dies of a request.  The socket is created with mode 0600 (``fchmod`` before ``bind``, so there
is no moment when it is open to others): only root, which the runtime runs as, may connect.

A process hosting the agent must not stop on signals through ``loop.add_signal_handler``:
pyroute2 forks a child for each pod-netns operation and SIGTERMs it when done, and the child
inherits the loop's signal wakeup fd, so the parent would see a SIGTERM of its own (seen: the
agent quit after three ADDs).  :func:`stop_on_signals` is the safe replacement.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from types import FrameType

from node.cni.plugin import (
    DEFAULT_VERSION,
    ERR_DECODE,
    ERR_INVALID_ENVIRONMENT,
    ERR_NETWORK,
    CniError,
    Plugin,
    Reply,
    format_error,
    node_plugin,
)

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 10.0
"""Seconds a client may take to send its whole request."""
SOCKET_MODE = 0o600


class CniAgent:
    """Serves :meth:`Plugin.run` on ``socket_path`` until :meth:`stop`."""

    def __init__(self, socket_path: Path, plugin: Plugin | None = None) -> None:
        self.socket_path = socket_path
        self.plugin = plugin if plugin is not None else node_plugin()
        self._server: asyncio.AbstractServer | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}
        self._calls: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen on the socket, replacing a stale one a previous agent left behind.

        pyroute2 is imported first (off the loop), so that no call pays for it.
        """
        await asyncio.to_thread(importlib.import_module, "pyroute2")
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            os.fchmod(sock.fileno(), SOCKET_MODE)
            sock.bind(str(self.socket_path))
        except OSError:
            sock.close()
            raise
        self._server = await asyncio.start_unix_server(self._serve, sock=sock)

    async def stop(self) -> None:
        """Stop listening, let the calls under way finish, remove the socket."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if self._calls:
            await asyncio.gather(*self._calls, return_exceptions=True)
        self.socket_path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._calls.add(task)
        try:
            reply = await self._answer(reader)
            writer.write(f"{reply.exit_code}\n".encode() + reply.output())
            await writer.drain()
        except ConnectionError as e:
            log.warning("CNI client went away: %s", e)
        finally:
            writer.close()
            self._calls.discard(task)

    async def _answer(self, reader: asyncio.StreamReader) -> Reply:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                data = await reader.read()
            env, stdin = decode_request(data)
        except CniError as e:
            return Reply(1, json.dumps(format_error(DEFAULT_VERSION, e)))
        except TimeoutError:
            error = CniError(ERR_DECODE, f"request not complete within {REQUEST_TIMEOUT:g} s")
            return Reply(1, json.dumps(format_error(DEFAULT_VERSION, error)))
        container_id = env.get("CNI_CONTAINERID", "")
        async with self._serialised(container_id):
            start = time.perf_counter()
            reply = await asyncio.to_thread(self._run, env, stdin)
        log.info(
            "CNI %s %s: exit %d in %.1f ms",
            env.get("CNI_COMMAND"),
            container_id,
            reply.exit_code,
            (time.perf_counter() - start) * 1000,
        )
        return reply

    def _run(self, env: Mapping[str, str], stdin: bytes) -> Reply:
        try:
            return self.plugin.run(env, stdin)
        except Exception as e:
            log.exception("CNI %s failed", env.get("CNI_COMMAND"))
            error = CniError(ERR_NETWORK, "CNI agent failed", f"{type(e).__name__}: {e}")
            return Reply(1, json.dumps(format_error(DEFAULT_VERSION, error)))

    @contextlib.asynccontextmanager
    async def _serialised(self, container_id: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(container_id, asyncio.Lock())
        self._users[container_id] = self._users.get(container_id, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[container_id] -= 1
            if not self._users[container_id]:
                del self._users[container_id], self._locks[container_id]


def decode_request(data: bytes) -> tuple[dict[str, str], bytes]:
    """(environment, stdin) of one request; CniError when it is malformed."""
    header, newline, stdin = data.partition(b"\n")
    if not newline:
        raise CniError(ERR_DECODE, "request has no environment line")
    try:
        env = json.loads(header)
    except ValueError as e:
        raise CniError(ERR_DECODE, "request environment is not JSON", str(e)) from e
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise CniError(ERR_INVALID_ENVIRONMENT, "request environment is not a string map")
    return env, stdin


async def serve(socket_path: Path) -> None:
    """Run an agent until SIGTERM or SIGINT."""
    agent = CniAgent(socket_path)
    await agent.start()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    stop_on_signals(lambda: loop.call_soon_threadsafe(stopping.set))
    try:
        await stopping.wait()
    finally:
        await agent.stop()


def stop_on_signals(stop: Callable[[], object]) -> None:
    """Call ``stop`` when this very process gets SIGTERM or SIGINT.

    Not ``loop.add_signal_handler``: its wakeup fd is inherited by the children pyroute2 forks
    for netns work and SIGTERMs when they are done, and a child's signal written there would
    stop the agent.  A forked child that runs this handler dies of the signal instead.
    """
    pid = os.getpid()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() == pid:
            stop()
        else:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)


def main(argv: list[str] | None = None) -> None:
    """``python -m node.cni.agent SOCKET``: the agent in the current network namespace."""
    parser = argparse.ArgumentParser(prog="python -m node.cni.agent", description=__doc__)
    parser.add_argument("socket", type=Path, help="the unix socket to listen on")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(serve(args.socket))


if __name__ == "__main__":
    main()
