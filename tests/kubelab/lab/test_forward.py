"""Sockets in other network namespaces: a forwarder from the host's loopback into a netns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubelab.lab.forward import NetnsForwarder
from node.netns import socket_in_netns
from tests.netns import NetnsFactory

pytestmark = pytest.mark.privileged


@pytest.fixture
def netns(make_netns: NetnsFactory) -> Path:
    return make_netns().path


@pytest.fixture
async def echo_in_netns(netns: Path) -> AsyncIterator[int]:
    """An echo server listening on the namespace's own loopback."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.read(100))
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    sock = await asyncio.to_thread(socket_in_netns, netns, bind=("127.0.0.1", 0))
    server = await asyncio.start_server(echo, sock=sock)
    try:
        yield int(sock.getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


async def test_the_host_reaches_a_namespace_loopback_through_the_forwarder(
    netns: Path, echo_in_netns: int
) -> None:
    with pytest.raises(ConnectionRefusedError):  # not reachable from the host directly
        await asyncio.open_connection("127.0.0.1", echo_in_netns)
    forwarder = NetnsForwarder(("127.0.0.1", echo_in_netns), connect_netns=netns)
    port = await forwarder.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"hello")
        assert await reader.read(100) == b"hello"
        writer.close()
        await writer.wait_closed()
    finally:
        await forwarder.stop()


async def test_a_namespace_reaches_the_host_through_a_forwarder_listening_inside(
    netns: Path,
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"from the host")
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    host_port = server.sockets[0].getsockname()[1]
    forwarder = NetnsForwarder(("127.0.0.1", host_port), listen_netns=netns)
    port = await forwarder.start()
    try:
        sock = await asyncio.to_thread(socket_in_netns, netns, connect=("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock)
        assert await reader.read(100) == b"from the host"
        writer.close()
        await writer.wait_closed()
    finally:
        await forwarder.stop()
        server.close()
        await server.wait_closed()
