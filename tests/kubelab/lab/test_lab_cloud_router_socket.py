"""The lab cloud provider's netlink handle on the router: opened inside the router namespace by
the calling thread, with no child process forked (the provider runs beside gRPC threads), and
the thread back in its own namespace afterwards, failures included.  The namespace (with its
own ``lab0`` bridge) is created here and removed afterwards; the host's routes are only read."""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
from pathlib import Path

import psutil
import pyroute2
import pytest

from kubelab.lab import cloud as lab
from tests.netns import NetnsFactory

pytestmark = pytest.mark.privileged

SIOCGSKNS = 0x894C
"""ioctl: a file descriptor for the network namespace a socket belongs to."""
CIDR = "10.251.7.0/24"


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def router_netns(make_netns: NetnsFactory) -> Path:
    """A namespace holding ``lab0`` (10.240.9.1/24, up), as a lab's router does."""
    router = make_netns("ccm-sock")
    router.ip("link", "add", "lab0", "type", "bridge")
    router.ip("addr", "add", "10.240.9.1/24", "dev", "lab0")
    router.ip("link", "set", "lab0", "up")
    return router.path


def thread_netns() -> int:
    return os.stat("/proc/thread-self/ns/net").st_ino


def socket_netns(fileno: int) -> int:
    netns = fcntl.ioctl(fileno, SIOCGSKNS)
    try:
        return os.fstat(netns).st_ino
    finally:
        os.close(netns)


def no_fork() -> int:
    raise AssertionError("the route handle forked")


async def test_the_route_handle_opens_in_the_router_namespace_without_forking(
    router_netns: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "fork", no_fork)
    router = lab.NetnsRouter(str(router_netns), "lab0")
    me = psutil.Process()
    children = {child.pid for child in me.children(recursive=True)}

    def open_handle() -> tuple[int, int, int, int]:
        before = thread_netns()
        with router._ipr() as ipr:
            socket_in = socket_netns(ipr.asyncore.socket.fileno())
        return before, socket_in, thread_netns(), router_netns.stat().st_ino

    before, socket_in, after, wanted = await asyncio.to_thread(open_handle)
    assert {child.pid for child in me.children(recursive=True)} == children
    assert socket_in == wanted != before
    assert after == before


async def test_routes_land_in_the_router_namespace_not_the_hosts(router_netns: Path) -> None:
    router = lab.NetnsRouter(str(router_netns), "lab0")
    await asyncio.to_thread(router.replace_route, CIDR, "10.240.9.11")
    try:
        shown = sh("ip", "-n", router_netns.name, "route", "show", "proto", "200").strip()
        assert shown == f"{CIDR} via 10.240.9.11 dev lab0"
        assert CIDR not in sh("ip", "route", "show", "table", "all")
        assert await asyncio.to_thread(router.list_routes) == [(CIDR, "10.240.9.11")]
    finally:
        await asyncio.to_thread(router.delete_route, CIDR)
    assert sh("ip", "-n", router_netns.name, "route", "show", "proto", "200").strip() == ""


async def test_a_failing_handle_leaves_the_thread_in_its_own_namespace(
    router_netns: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []

    def broken() -> None:
        seen.append(thread_netns())
        raise OSError("no netlink today")

    monkeypatch.setattr(pyroute2, "IPRoute", broken)
    router = lab.NetnsRouter(str(router_netns), "lab0")

    def try_routes() -> tuple[int, int, int]:
        before = thread_netns()
        with pytest.raises(OSError, match="no netlink today"):
            router.list_routes()
        return before, thread_netns(), router_netns.stat().st_ino

    before, after, wanted = await asyncio.to_thread(try_routes)
    assert seen == [wanted]
    assert after == before != seen[0]


async def test_a_missing_router_namespace_is_an_error_that_leaves_the_thread_home(
    tmp_path: Path,
) -> None:
    router = lab.NetnsRouter(str(tmp_path / "gone"), "lab0")

    def try_routes() -> tuple[int, int]:
        before = thread_netns()
        with pytest.raises(FileNotFoundError):
            router.list_routes()
        return before, thread_netns()

    before, after = await asyncio.to_thread(try_routes)
    assert after == before
