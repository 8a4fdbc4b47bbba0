"""Reaching into network namespaces from the host without putting an address on the host.

The lab's processes (API server, kubelets, containerd, pods) live in network namespaces the
lab creates, and the machine's rule is that lab addresses never appear on the host's own
interfaces.  Yet kubectl, tests and benchmarks run on the host.  A socket belongs to the
network namespace it was created in, and ``setns(2)`` with ``CLONE_NEWNET`` changes only the
calling thread's namespace, so a thread can step into a namespace, create a socket, and step
back: the socket keeps talking inside the namespace while the process stays where it is.

- ``socket_in_netns`` creates (and connects or binds) one socket that way.
- ``NetnsForwarder`` listens on the host's loopback and relays each connection to an address
  inside a namespace (kubectl → the lab's API server), or the other way round with
  ``listen_netns`` (a node's loopback → the host's API server).

Python 3.11 has no ``os.setns``, hence the libc call.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import socket
from collections.abc import Iterator
from pathlib import Path

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")
_RELAY_CHUNK = 65536

_libc = ctypes.CDLL(None, use_errno=True)


def netns_path(name_or_path: str | Path) -> Path:
    """``/run/netns/NAME`` for a bare name (as ``ip netns`` names them), else the path."""
    path = Path(name_or_path)
    return path if path.is_absolute() else NETNS_DIR / path


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


@contextlib.contextmanager
def _entered(netns: Path) -> Iterator[None]:
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(netns, os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(own)


def socket_in_netns(
    netns: Path,
    *,
    connect: tuple[str, int] | None = None,
    bind: tuple[str, int] | None = None,
    timeout: float = 5.0,
) -> socket.socket:
    """A TCP socket living in ``netns``: connected to ``connect`` or listening on ``bind``.

    Blocking; call it from a worker thread (``asyncio.to_thread``): the thread enters the
    namespace only for the duration of the call.
    """
    with _entered(netns):
        host = (connect or bind or ("", 0))[0]
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            if connect is not None:
                sock.settimeout(timeout)
                sock.connect(connect)
            elif bind is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(bind)
                sock.listen(128)
        except BaseException:
            sock.close()
            raise
    sock.setblocking(False)
    return sock


class NetnsForwarder:
    """Relays TCP connections between two network namespaces; see the module docstring.

    ``connect_netns`` / ``listen_netns`` name the namespace of each side (``None``: the
    process's own).  ``start()`` returns the port listened on (``listen_port`` 0 picks one).
    """

    def __init__(
        self,
        target: tuple[str, int],
        *,
        connect_netns: Path | None = None,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        listen_netns: Path | None = None,
    ) -> None:
        self.target = target
        self.connect_netns = connect_netns
        self.listen = listen
        self.listen_netns = listen_netns
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        if self.listen_netns is not None:
            sock = await asyncio.to_thread(socket_in_netns, self.listen_netns, bind=self.listen)
            self._server = await asyncio.start_server(self._accepted, sock=sock)
        else:
            self._server = await asyncio.start_server(self._accepted, *self.listen)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._relays):
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            try:
                if self.connect_netns is not None:
                    sock = await asyncio.to_thread(
                        socket_in_netns, self.connect_netns, connect=self.target
                    )
                    upstream = await asyncio.open_connection(sock=sock)
                else:
                    upstream = await asyncio.open_connection(*self.target)
            except OSError:
                return
            up_reader, up_writer = upstream
            try:
                await asyncio.gather(
                    _pump(reader, up_writer), _pump(up_reader, writer), return_exceptions=True
                )
            finally:
                await _close(up_writer)
        finally:
            await _close(writer)
            self._relays.discard(task)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
        await writer.wait_closed()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_RELAY_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()
