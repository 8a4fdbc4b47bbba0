"""The forwarder as a load balancer: which targets are in, which one a connection gets, and
the connections cut when a target goes out (fake probes; real sockets on loopback)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from kubelab.lab.forward import Address, Backends, HealthCheck, NetnsForwarder, Probe

A, B, C = ("10.0.0.1", 6443), ("10.0.0.2", 6443), ("10.0.0.3", 6443)
CHECK = HealthCheck("/readyz", Path("ca.crt"), fall=2)


def answers(healthy: set[Address]) -> Probe:
    async def probe(target: Address) -> bool:
        return target in healthy

    return probe


async def test_targets_are_out_until_a_check_passes_then_taken_in_turn() -> None:
    backends = Backends([A, B, C], CHECK)
    assert backends.healthy() == ()
    assert await backends.check_all(answers({A, C})) == [A, C]
    assert [backends.pick() for _ in range(4)] == [A, C, A, C]


async def test_with_no_healthy_target_the_others_are_tried_in_turn() -> None:
    backends = Backends([A, B, C], CHECK)
    assert [backends.pick() for _ in range(3)] == [A, B, C]
    await backends.check_all(answers({B}))
    assert backends.pick(excluding=[B]) in (A, C)
    assert backends.pick(excluding=[A, B, C]) is None


async def test_a_target_goes_out_after_fall_failures_and_back_after_one_success() -> None:
    backends = Backends([A, B], CHECK)
    await backends.check_all(answers({A, B}))
    assert await backends.check_all(answers({A})) == []  # one failure: still in
    assert backends.healthy() == (A, B)
    assert await backends.check_all(answers({A})) == [B]
    assert backends.healthy() == (A,)
    assert await backends.check_all(answers({A, B})) == [B]
    assert backends.healthy() == (A, B)


async def test_a_refused_connection_takes_a_target_out_at_once() -> None:
    backends = Backends([A, B], CHECK)
    await backends.check_all(answers({A, B}))
    assert backends.refused(A)
    assert not backends.refused(A)
    assert [backends.pick() for _ in range(3)] == [B, B, B]
    assert backends.pick(excluding=[B]) == A  # out, but the only one left to try


def test_without_health_checks_every_target_stays_in() -> None:
    backends = Backends([A])
    assert backends.pick() == A
    assert not backends.refused(A) and not backends.observe(A, False)
    assert backends.healthy() == (A,)
    assert backends.describe() == [{"address": "10.0.0.1:6443", "healthy": True}]
    with pytest.raises(ValueError, match="at least one target"):
        Backends([])


@pytest.fixture
async def two_servers() -> AsyncIterator[list[Address]]:
    """Two servers on loopback, each answering every line with its own name."""

    def named(
        name: bytes,
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await reader.readline():
                writer.write(name + b"\n")
                await writer.drain()
            writer.close()

        return serve

    servers = [await asyncio.start_server(named(n), "127.0.0.1", 0) for n in (b"one", b"two")]
    yield [("127.0.0.1", int(s.sockets[0].getsockname()[1])) for s in servers]
    for server in servers:
        server.close()


async def test_connections_alternate_and_those_of_a_target_gone_out_are_closed(
    two_servers: list[Address],
) -> None:
    one, two = two_servers
    healthy = {one, two}
    changes: list[tuple[Address, ...]] = []
    both_in = asyncio.Event()

    heard: list[list[dict[str, object]]] = []

    def changed(forwarder: NetnsForwarder) -> None:
        heard.append(forwarder.describe())
        now = forwarder.backends.healthy()
        if not changes or changes[-1] != now:
            changes.append(now)
        if now == (one, two):
            both_in.set()

    forwarder = NetnsForwarder(
        Backends([one, two], HealthCheck("/readyz", Path("ca.crt"), interval=0.01, fall=1)),
        probe=answers(healthy),
        on_change=changed,
    )
    port = await forwarder.start()
    try:
        await asyncio.wait_for(both_in.wait(), 5)
        clients = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        said = []
        for reader, writer in clients:
            writer.write(b"hi\n")
            said.append(await reader.readline())
        assert said == [b"one\n", b"two\n"]
        relayed = {d["address"]: d["clients"] for d in forwarder.describe()}
        mine = [f"127.0.0.1:{w.get_extra_info('sockname')[1]}" for _, w in clients]
        assert relayed == {f"{h}:{p}": [c] for (h, p), c in zip((one, two), mine, strict=True)}
        await asyncio.sleep(0.1)  # a few checks: the next one reports the relays
        assert heard[-1] == forwarder.describe()
        healthy.discard(one)
        try:
            left = await asyncio.wait_for(clients[0][0].read(), 5)
        except ConnectionResetError:  # aborted: EOF or a reset
            left = b""
        assert left == b""
        clients[1][1].write(b"still there?\n")
        assert await clients[1][0].readline() == b"two\n"
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"hi\n")
        assert await reader.readline() == b"two\n"
        assert changes == [(), (one, two), (two,)]
        for _, w in [*clients, (reader, writer)]:
            w.close()
    finally:
        await forwarder.stop()
