"""One priority level's seats and queues, driven step by step with explicit times (no clock,
no sleeps): shuffle sharding, queue length limits, fair dispatch, withdrawal; and the seats a
list takes."""

from __future__ import annotations

import pytest

from controlplane.apiserver.flowcontrol.controller import list_seats
from controlplane.apiserver.flowcontrol.fairqueuing import (
    CONCURRENCY_LIMIT,
    EXECUTE,
    QUEUE_FULL,
    QUEUED,
    QueueSet,
    Request,
    deal,
    flow_hash,
)


def request(flow: str, at: float = 0.0, seats: int = 1) -> Request:
    return Request("schema", flow, seats, at)


def test_a_hand_is_distinct_queues_chosen_by_the_hash() -> None:
    for value in (0, 1, 12345, 2**63 + 17, flow_hash("fs", "alice")):
        hand = deal(value, 64, 8)
        assert len(set(hand)) == 8 and all(0 <= card < 64 for card in hand)
    assert deal(flow_hash("fs", "alice"), 64, 8) == deal(flow_hash("fs", "alice"), 64, 8)
    assert deal(flow_hash("fs", "alice"), 64, 8) != deal(flow_hash("fs", "bob"), 64, 8)
    assert sorted(deal(5, 4, 4)) == [0, 1, 2, 3], "a hand as large as the deck is the deck"


def test_requests_run_up_to_the_limit_then_queue_then_are_refused() -> None:
    level = QueueSet(limit=2, queues=1, hand=1, queue_length_limit=2)
    assert [level.offer(request("a"), 0) for _ in range(5)] == [
        EXECUTE,
        EXECUTE,
        QUEUED,
        QUEUED,
        QUEUE_FULL,
    ]
    assert (level.executing, level.waiting, level.rejected) == (2, 2, 1)


def test_a_level_without_queues_refuses_what_exceeds_its_seats() -> None:
    level = QueueSet(limit=1, queues=0, hand=0, queue_length_limit=0)
    assert level.offer(request("a"), 0) == EXECUTE
    assert level.offer(request("b"), 0) == CONCURRENCY_LIMIT


def test_a_finished_request_starts_the_next_waiting_one() -> None:
    level = QueueSet(limit=1, queues=4, hand=2, queue_length_limit=10)
    first, second = request("a"), request("a", at=1)
    assert level.offer(first, 0) == EXECUTE
    assert level.offer(second, 1) == QUEUED
    assert level.finish(first, 5) == [second]
    assert second.started == 5 and level.executing == 1 and level.waiting == 0
    assert level.finish(second, 6) == []
    assert level.seats_in_use == 0


def test_a_heavy_flow_fills_only_its_own_queues() -> None:
    """The heavy flow's hand is full; a flow dealt other queues still gets in."""
    level = QueueSet(limit=1, queues=8, hand=1, queue_length_limit=2)
    heavy, light = (
        "heavy",
        next(
            f"light-{i}"
            for i in range(100)
            if deal(flow_hash("schema", f"light-{i}"), 8, 1)
            != deal(flow_hash("schema", "heavy"), 8, 1)
        ),
    )
    outcomes = [level.offer(request(heavy), 0) for _ in range(5)]
    assert outcomes == [EXECUTE, QUEUED, QUEUED, QUEUE_FULL, QUEUE_FULL]
    assert level.offer(request(light), 0) == QUEUED


def test_queues_are_served_in_turn() -> None:
    """Two flows in different queues: after the heavy one queued three requests and the light
    one one, the light one's request is not last: the queues alternate."""
    level = QueueSet(limit=1, queues=2, hand=1, queue_length_limit=10)
    flows = {deal(flow_hash("schema", f"f{i}"), 2, 1)[0]: f"f{i}" for i in range(20)}
    heavy, light = flows[0], flows[1]
    running = request("starter")
    assert level.offer(running, 0) == EXECUTE
    waiting = [request(heavy, at=t) for t in (1, 2, 3)] + [request(light, at=4)]
    for item in waiting:
        assert level.offer(item, item.arrived) == QUEUED
    order = []
    current = running
    for now in range(10, 14):
        (current,) = level.finish(current, now)
        order.append(current.distinguisher)
    assert order == [heavy, light, heavy, heavy]


def test_a_withdrawn_request_leaves_its_queue() -> None:
    level = QueueSet(limit=1, queues=1, hand=1, queue_length_limit=5)
    running, late, gone = request("a"), request("b"), request("c")
    level.offer(running, 0)
    level.offer(late, 0)
    level.offer(gone, 0)
    assert level.withdraw(late, timed_out=True)
    assert level.withdraw(gone, timed_out=False)
    assert not level.withdraw(running, timed_out=True), "executing, not waiting"
    assert (level.timed_out, level.cancelled, level.waiting) == (1, 1, 0)
    assert level.finish(running, 1) == []


def test_a_request_wider_than_the_limit_runs_alone() -> None:
    level = QueueSet(limit=2, queues=1, hand=1, queue_length_limit=5)
    wide = request("a", seats=5)
    assert level.offer(wide, 0) == EXECUTE
    narrow = request("a")
    assert level.offer(narrow, 0) == QUEUED
    assert level.finish(wide, 1) == [narrow]


def test_new_parameters_start_what_now_fits_and_deal_again() -> None:
    level = QueueSet(limit=1, queues=1, hand=1, queue_length_limit=5)
    running, waiting = request("a"), request("b")
    level.offer(running, 0)
    level.offer(waiting, 0)
    assert level.configure(2, 4, 2, 5, now=3) == [waiting]
    assert len(level.queues) == 4 and waiting.started == 3


@pytest.mark.parametrize(
    ("stored", "query", "seats"),
    [
        pytest.param(0, {}, 1, id="empty"),
        pytest.param(120, {}, 3, id="from-the-store-twice-the-objects"),
        pytest.param(5000, {"limit": "500"}, 10, id="paged-capped-at-10"),
        pytest.param(5000, {"limit": "100"}, 2, id="paged"),
        pytest.param(350, {"resourceVersion": "0"}, 4, id="from-the-cache"),
        pytest.param(350, {"limit": "50", "labelSelector": "a=b"}, 4, id="selector"),
        pytest.param(350, {"limit": ":"}, 7, id="bad-limit-left-to-the-handler"),
    ],
)
def test_list_seats_as_upstreams_estimate(stored: int, query: dict[str, str], seats: int) -> None:
    assert list_seats(stored, query) == seats
