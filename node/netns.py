"""Sockets inside network namespaces, made from a process that stays where it is.

A socket belongs to the network namespace it was created in, and ``setns(2)`` with
``CLONE_NEWNET`` changes only the calling thread's namespace, so a thread can step into a
namespace, create a socket, and step back: the socket keeps talking inside the namespace.
The lab reaches its nodes this way from the host (``kubelab.lab.forward``), and the lab cloud
provider reaches the lab's router, over TCP and over netlink (a pyroute2 ``IPRoute`` built
inside the router's namespace); neither has to put an address on the host.  No child
process is forked to enter a namespace: forking beside the gRPC threads of the process that
runs the provider is unsafe.

Python 3.11 has no ``os.setns``, hence the libc call.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

CLONE_NEWNET = 0x40000000

T = TypeVar("T")

_libc = ctypes.CDLL(None, use_errno=True)


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


def call_in_netns(netns: Path, make: Callable[[], T]) -> T:
    """``make()`` run by the calling thread inside ``netns``; the thread is back in its own
    namespace when this returns or raises.  Sockets ``make`` creates stay in ``netns``.

    Blocking; call it from a worker thread, never from the event loop's.
    """
    with _entered(netns):
        return make()


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
