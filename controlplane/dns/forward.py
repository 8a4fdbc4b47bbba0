"""Forwarding the questions the cluster zone does not own to the node's resolvers.

The upstreams come from a resolv.conf (``--upstream-resolv-conf``, ``/etc/resolv.conf`` by
default: the DNS pod runs with dnsPolicy Default, so that file is its node's resolver, never
the cluster DNS itself).  A query goes to each upstream in the file's order until one answers,
over the transport the client used (a truncated UDP answer is passed on truncated, and the
client retries over TCP as it would with any server); the answer is relayed as the upstream
gave it.  dnspython sends and receives; each attempt has a timeout, so a dead upstream costs
at most ``timeout`` per attempt and never hangs a client.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

import dns.asyncquery
import dns.exception
import dns.message

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 2.0


class Upstream(NamedTuple):
    host: str
    port: int = 53

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class ForwardError(Exception):
    """No upstream answered."""


class Forwarder(Protocol):
    async def forward(self, query: dns.message.Message, tcp: bool) -> dns.message.Message:
        """The upstream's answer to ``query``; ForwardError if none answers."""
        ...


def read_resolv_conf(path: Path) -> list[Upstream]:
    """The ``nameserver`` addresses in a resolv.conf, in order; none if it cannot be read."""
    try:
        text = path.read_text()
    except OSError as error:
        log.warning("no upstream resolvers: cannot read %s: %s", path, error.strerror)
        return []
    upstreams = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "nameserver":
            try:
                upstreams.append(Upstream(str(ipaddress.ip_address(fields[1].split("%")[0]))))
            except ValueError:
                log.warning("%s: ignoring nameserver %r: not an IP address", path, fields[1])
    return upstreams


class UpstreamForwarder:
    """:class:`Forwarder` to ``upstreams`` in order, each attempt bounded by ``timeout``."""

    def __init__(self, upstreams: Sequence[Upstream], timeout: float = DEFAULT_TIMEOUT) -> None:
        if not upstreams:
            raise ValueError("a forwarder needs at least one upstream")
        self.upstreams = list(upstreams)
        self.timeout = timeout

    async def forward(self, query: dns.message.Message, tcp: bool) -> dns.message.Message:
        failures = []
        for upstream in self.upstreams:
            try:
                if tcp:
                    return await dns.asyncquery.tcp(
                        query, upstream.host, timeout=self.timeout, port=upstream.port
                    )
                return await dns.asyncquery.udp(
                    query, upstream.host, timeout=self.timeout, port=upstream.port
                )
            except (dns.exception.DNSException, OSError, EOFError) as error:
                failures.append(f"{upstream}: {error or type(error).__name__}")
        raise ForwardError("; ".join(failures))
