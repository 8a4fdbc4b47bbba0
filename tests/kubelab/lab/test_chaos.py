"""The fault tests' harness (``tests.kubelab.lab.chaos``) without root: the invariant checks on
made-up histories, the writer and the watcher's records, the prober, then the whole workload
against a real ``kubelab server`` that is killed with -9 and started again in the middle, which
must leave every invariant holding while the records show the outage.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.kinds.core_v1.pod import Pod, PodSpec
from kube.api.meta_v1 import ObjectMeta, Resource, Status
from kube.client.errors import ApiError, ClientError
from kube.client.kubeconfig import ClientConfig
from kube.client.rest import Client
from kubelab.lab.images import ECHOSERVER_IMAGE, ECHOSERVER_PORT
from tests.kubelab.lab.chaos import (
    LIST,
    Attempt,
    Failure,
    Prober,
    Seen,
    Watcher,
    Workload,
    Writer,
    backward_versions,
    create_all,
    lost_writes,
    manifests,
    unexpected_failures,
)
from tests.servers import ServerProcess, start_server, stop_server


def acked(seq: int, key: str, rv: int) -> Attempt:
    return Attempt(seq, key, 0.0, 0.0, resource_version=rv)


def failed(seq: int, key: str, status: int | None) -> Attempt:
    return Attempt(seq, key, 0.0, 0.0, status=status, error="failed")


def test_an_object_must_hold_its_last_acknowledged_write_or_a_later_attempted_one() -> None:
    attempts = [
        acked(1, "Deployment/web", 10),
        acked(2, "Deployment/web", 12),
        failed(3, "Deployment/web", 503),  # may have landed
        acked(1, "ConfigMap/chaos-1", 11),
        acked(2, "ConfigMap/chaos-2", 13),
    ]
    holding = {"Deployment/web": 2, "ConfigMap/chaos-1": 1, "ConfigMap/chaos-2": 2}
    assert lost_writes(attempts, holding) == []
    assert lost_writes(attempts, {**holding, "Deployment/web": 3}) == []  # the failed one landed
    assert lost_writes(attempts, {**holding, "Deployment/web": 1}) == [
        "Deployment/web: write 2 (, resourceVersion 12) acknowledged, object holds write 1"
    ]
    assert lost_writes(attempts, {**holding, "Deployment/web": 7}) == [
        "Deployment/web: holds write 7, which nobody attempted"
    ]
    gone = {k: v for k, v in holding.items() if k != "ConfigMap/chaos-2"}
    assert lost_writes(attempts, gone) == [
        "ConfigMap/chaos-2: write 2 () acknowledged, object gone"
    ]


def test_versions_may_not_go_backwards_for_a_watcher_but_a_list_may_repeat_one() -> None:
    history = [
        Seen(0, LIST, 10),
        Seen(1, "ADDED", 11, "Pod/a"),
        Seen(2, "MODIFIED", 12, "Pod/a"),
        Seen(3, LIST, 12),  # a re-list after a 410 at the version last seen
        Seen(4, "DELETED", 14, "Pod/a"),
    ]
    assert backward_versions("pods", history) == []
    assert backward_versions("pods", [*history, Seen(5, "ADDED", 13, "Pod/b")]) == [
        "watcher pods: ADDED Pod/b at 13 after DELETED Pod/a at 14"
    ]
    assert backward_versions("pods", [*history, Seen(5, "MODIFIED", 14, "Pod/b")]) == [
        "watcher pods: MODIFIED Pod/b at 14 after DELETED Pod/a at 14"  # an event replayed
    ]
    assert backward_versions("pods", [*history, Seen(5, LIST, 9)]) == [
        "watcher pods: LIST  at 9 after DELETED Pod/a at 14"
    ]


def test_only_throttling_unavailability_and_no_answer_are_tolerated() -> None:
    failures: list[Attempt | Failure] = [
        failed(1, "Deployment/web", 503),
        failed(2, "Deployment/web", 429),
        failed(3, "Deployment/web", None),
        Failure(0, "watch pods from 12", 410, "too old"),
        Failure(0, "list pods", 504, "timeout"),
    ]
    assert unexpected_failures(failures) == []
    assert unexpected_failures(
        [
            *failures,
            failed(4, "Deployment/web", 500),
            Failure(0, "list pods", 410, "gone"),
            Failure(0, "watch pods from 3", 500, "boom"),
        ]
    ) == [
        "write Deployment/web: 500 failed",
        "list pods: 410 gone",
        "watch pods from 3: 500 boom",
    ]


class Flaky:
    """An operation failing with each of ``errors`` in turn, then succeeding."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)

    def key(self, seq: int) -> str:
        return f"Pod/p{seq}"

    def value(self, seq: int) -> str:
        return str(seq)

    async def write(self, seq: int) -> Resource:
        if self.errors:
            raise self.errors.pop(0)
        return Pod(metadata=ObjectMeta(name=f"p{seq}", resource_version=str(100 + seq)))


async def test_a_writer_records_each_answer_with_its_status_or_version() -> None:
    unavailable = ApiError(Status(code=503, reason="ServiceUnavailable", message="no quorum"))
    writer = Writer(Flaky(unavailable, ClientError("refused")), timeout=1.0)
    for _ in range(3):
        await writer.write_once()
    assert [(a.seq, a.status, a.resource_version) for a in writer.attempts] == [
        (1, 503, None),
        (2, None, None),
        (3, None, 103),
    ]
    assert [a.key for a in writer.acknowledged()] == ["Pod/p3"]
    assert "no quorum" in writer.failures()[0].error
    # Its backoff after failures grows (jitter at most half again): it does not hammer.
    delays = [writer.backoff.next_delay() for _ in range(4)]
    assert delays[0] <= 0.3 < 0.4 <= delays[2]


class Hanging:
    """An operation whose first write is acknowledged and the next ones never answered."""

    def key(self, seq: int) -> str:
        return "ConfigMap/hanging"

    def value(self, seq: int) -> str:
        return str(seq)

    async def write(self, seq: int) -> Resource:
        if seq > 1:
            await asyncio.Event().wait()
        return ConfigMap(metadata=ObjectMeta(name="hanging", resource_version="7"))


async def test_a_write_in_flight_when_the_writer_stops_counts_as_attempted() -> None:
    writer = Writer(Hanging(), interval=0.01)
    task = asyncio.create_task(writer.run())
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [(a.seq, a.resource_version, a.error) for a in writer.attempts] == [
        (1, 7, ""),
        (2, None, "cancelled in flight"),
    ]
    # It may have landed: an object holding it lost nothing and holds no write from nowhere.
    assert lost_writes(writer.attempts, {"ConfigMap/hanging": 2}) == []
    assert lost_writes(writer.attempts, {"ConfigMap/hanging": 3}) == [
        "ConfigMap/hanging: holds write 3, which nobody attempted"
    ]


def pod(uid: str, node: str | None, rv: int) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=f"pod-{uid}", uid=uid, resource_version=str(rv)),
        spec=PodSpec(containers=[], node_name=node),
    )


async def test_a_pod_watcher_catches_a_pod_bound_to_a_second_node() -> None:
    # A server nobody asks: the watcher's store is fed by hand.
    async with Client(ClientConfig(server="https://127.0.0.1:1")) as client:
        watcher = Watcher(client, Pod, "ns")
    watcher.replace([pod("a", None, 5)], "5")
    watcher.update(pod("a", "node1", 6))
    watcher.update(pod("a", "node1", 7))
    assert watcher.rebound == []
    watcher.update(pod("a", "node2", 8))
    assert watcher.rebound == ["pod pod-a (a) bound to node1, then to node2"]
    assert [(s.what, s.resource_version) for s in watcher.seen] == [
        (LIST, 5),
        ("MODIFIED", 6),
        ("MODIFIED", 7),
        ("MODIFIED", 8),
    ]


async def test_the_prober_counts_answers_and_silences() -> None:
    answering = Prober(["sh", "-c", "echo 200"], timeout=5)
    silent = Prober(["sleep", "5"], timeout=0.2)
    refusing = Prober(["sh", "-c", "echo refused; exit 7"])
    assert (await answering.probe_once()).detail == "200"
    assert (await silent.probe_once()).detail == "no answer in 0.2s"
    probe = await refusing.probe_once()
    assert (probe.ok, probe.detail) == (False, "refused")
    refusing.probes.append(probe)
    refusing.probes.append(await answering.probe_once())
    assert refusing.availability() == 0.5


# -- against a real server ------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    """``kubelab server`` (API server, scheduler, controllers); the list holds the running one
    (a test replaces it when it restarts the server)."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    running = [start_server(data_dir, *COMPONENT_PORTS, command="server")]
    try:
        yield running
    finally:
        stop_server(running[-1])


COMPONENT_PORTS = ("--scheduler-port", "0", "--controller-manager-port", "0")


@pytest.mark.slow
async def test_the_workload_across_a_server_killed_and_restarted(
    server: list[ServerProcess],
) -> None:
    first = server[0]
    async with Client.from_kubeconfig(first.kubeconfig, max_retries=0) as client:
        await create_all(client, manifests("chaos", "web", ECHOSERVER_IMAGE, ECHOSERVER_PORT))
        workload = Workload.standard(client, "chaos", "web", probe=["true"])
        async with workload.running():
            await asyncio.sleep(4)
            os.kill(first.process.pid, signal.SIGKILL)
            first.process.wait()
            await asyncio.sleep(2)
            server.append(
                start_server(
                    first.data_dir,
                    *COMPONENT_PORTS,
                    "--secure-port",
                    str(first.port),
                    command="server",
                )
            )
            stop_server(first)
            await asyncio.sleep(5)
        print(workload.summary())
        assert await workload.violations(settle=30) == []
        scaler, creator = workload.writers
        # The outage shows: writes without an answer, then acknowledged ones again.
        assert any(a.status is None for a in scaler.failures())
        assert scaler.attempts[-1].acknowledged or scaler.attempts[-2].acknowledged
        assert len(creator.acknowledged()) >= 6
        # Every watcher lost its stream; the Deployments' one, which the scaler keeps busy,
        # resumed through the new server and saw every acknowledged scale.
        assert all(watcher.failures for watcher in workload.watchers)
        deployments = next(w for w in workload.watchers if w.name == "deployments")
        assert deployments.seen[-1].at > deployments.failures[-1].at
        versions = {s.resource_version for s in deployments.seen}
        assert {a.resource_version for a in scaler.acknowledged()} <= versions
