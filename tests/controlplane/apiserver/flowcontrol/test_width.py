"""What a request costs its level beyond one seat, and what a refusal tells the client:
upstream's mutating work estimate over the watches a change notifies, and its dropped-requests
tracker behind Retry-After."""

from __future__ import annotations

import pytest

from controlplane.apiserver.endpoints.requestinfo import RequestInfo, parse
from controlplane.apiserver.flowcontrol.controller import (
    DroppedRequests,
    WatchTracker,
    Width,
    mutating_width,
)


@pytest.mark.parametrize(
    ("watches", "width"),
    [
        (0, Width(1)),
        (9, Width(1)),
        (10, Width(1, 0.005)),
        (25, Width(3, 0.005)),
        (100, Width(10, 0.005)),
        (1000, Width(10, 0.05)),
    ],
)
def test_mutating_width(watches: int, width: Width) -> None:
    """One seat per 10 watches from 10 on, at most 10; the events' work (5 ms a seat) is
    spread over the seats held, so a capped request holds them longer."""
    found = mutating_width(watches)
    assert found.seats == width.seats
    assert found.linger == pytest.approx(width.linger)


def test_watches_count_for_the_changes_they_see() -> None:
    tracker = WatchTracker()
    watches = [
        "/api/v1/configmaps?watch=true",  # every namespace
        "/api/v1/namespaces/a/configmaps?watch=true",
        "/api/v1/namespaces/a/configmaps?watch=true&fieldSelector=metadata.name%3Dx",
        "/api/v1/namespaces/a/configmaps?watch=true&fieldSelector=metadata.name%3Dy",
        "/api/v1/namespaces/b/configmaps?watch=true",
        "/api/v1/namespaces/a/secrets?watch=true",
    ]
    infos = [_info("GET", w) for w in watches]
    for info in infos:
        tracker.watching(info, 1)
    assert tracker.interested(_info("PUT", "/api/v1/namespaces/a/configmaps/x")) == 3
    assert tracker.interested(_info("POST", "/api/v1/namespaces/a/configmaps")) == 2
    assert tracker.interested(_info("DELETE", "/api/v1/namespaces/b/configmaps/x")) == 2
    assert tracker.interested(_info("GET", "/api/v1/namespaces/a/configmaps/x")) == 0
    for info in infos:
        tracker.watching(info, -1)
    assert tracker.interested(_info("PUT", "/api/v1/namespaces/a/configmaps/x")) == 0


def _info(method: str, url: str) -> RequestInfo:
    path, _, query = url.partition("?")
    pairs = dict(p.split("=", 1) for p in query.split("&") if p)
    return parse(method, path, {k: v.replace("%3D", "=") for k, v in pairs.items()})


def test_retry_after_doubles_under_sustained_refusals_and_falls_back() -> None:
    dropped = DroppedRequests()
    second = 1_000
    for _ in range(5):  # 5 refusals in one second: counted once the next second begins
        dropped.record(second)
    assert dropped.retry_after == 1
    dropped.record(second + 1)  # 5 in the last second >= 3 * 1: doubled
    assert dropped.retry_after == 2
    for _ in range(3):
        dropped.record(second + 2)
    dropped.record(second + 3)  # 1 + 3 = 4 in the last 2 s, below 6: kept
    assert dropped.retry_after == 2
    for t in range(second + 4, second + 7):
        for _ in range(4):
            dropped.record(t)
    assert dropped.retry_after == 4  # 8 in the last 2 s, 2 s after the last raise
    dropped.record(second + 20)  # nothing in the last 4 s: down by one
    assert dropped.retry_after == 3
    dropped.record(second + 40)
    assert dropped.retry_after == 2


def test_retry_after_is_capped() -> None:
    dropped = DroppedRequests()
    for t in range(1_000, 1_200):
        for _ in range(200):
            dropped.record(t)
    assert dropped.retry_after == 32
