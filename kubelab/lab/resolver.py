"""The lab's answer to names from outside: NXDOMAIN at once, never a timeout.

``nsenter --net`` changes a process's network namespace, not its files, so containerd and the
kubelet on a lab node read the host's /etc/resolv.conf, whose nameservers the lab's network
cannot reach: a lookup waited out its timeouts (``lookup registry-1.docker.io on
10.255.255.53:53: i/o timeout``).  The lab has no internet, so the truthful answer to any such
name is that it does not exist.  The router holds each of the host's (non-loopback)
nameserver addresses on its loopback (``kubelab.lab.network``) and runs this server there: it
answers every query, over UDP and TCP, with NXDOMAIN for the question asked.  Nodes route
everything via the router, so their lookups end in milliseconds.

Pods never see it: their resolv.conf is the cluster DNS's, or the kubelet's
``--resolv-conf`` (without nameservers in the lab).  Parsing and rendering DNS messages is
dnspython's.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Sequence
from typing import cast

import dns.exception
import dns.flags
import dns.message
import dns.rcode


def answer(wire: bytes) -> bytes | None:
    """The NXDOMAIN response to a query (None for what is not a DNS query)."""
    try:
        query = dns.message.from_wire(wire)
    except dns.exception.DNSException:
        return None
    if query.flags & dns.flags.QR:
        return None
    response = dns.message.make_response(query)
    response.set_rcode(dns.rcode.NXDOMAIN)
    return response.to_wire()


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        reply = answer(data)
        if reply is not None and self.transport is not None:
            self.transport.sendto(reply, addr)


async def _stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """DNS over TCP: two-byte length, message; as many as the client sends."""
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
        while True:
            (length,) = struct.unpack("!H", await reader.readexactly(2))
            reply = answer(await reader.readexactly(length))
            if reply is None:
                break
            writer.write(struct.pack("!H", len(reply)) + reply)
            await writer.drain()
    writer.close()


async def serve(addresses: Sequence[tuple[str, int]], stop: asyncio.Event) -> None:
    """Answer on every address (UDP and TCP) until ``stop`` is set."""
    loop = asyncio.get_running_loop()
    transports = []
    servers = []
    try:
        for host, port in addresses:
            transport, _ = await loop.create_datagram_endpoint(_Datagrams, local_addr=(host, port))
            transports.append(transport)
            servers.append(await asyncio.start_server(_stream, host, port))
        await stop.wait()
    finally:
        for transport in transports:
            transport.close()
        for server in servers:
            server.close()
