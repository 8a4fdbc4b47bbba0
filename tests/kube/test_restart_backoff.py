"""Restart backoff: the delay doubles with each crash in a row, up to a cap, and resets."""

from __future__ import annotations

from kube.backoff import Backoff


def test_the_backoff_doubles_with_each_crash_in_a_row_and_resets_after_a_stable_run() -> None:
    backoff = Backoff(initial=1, maximum=5, stable=60)
    backoff.running("n/c", 1, now=0)
    assert not backoff.due("n/c", 1, now=10)  # first crash: 1 s from now
    assert backoff.due("n/c", 1, now=11)
    backoff.restarted("n/c")
    backoff.running("n/c", 2, now=11)
    assert not backoff.due("n/c", 2, now=12)  # second crash in a row: 2 s
    assert not backoff.due("n/c", 2, now=13.9)
    assert backoff.due("n/c", 2, now=14)
    backoff.restarted("n/c")
    for pid, now in ((3, 15), (4, 30)):  # 4 s, then 8 s capped at 5 s
        backoff.running("n/c", pid, now)
        backoff.due("n/c", pid, now + 1)
        backoff.restarted("n/c")
    backoff.running("n/c", 5, now=40)
    assert not backoff.due("n/c", 5, now=41)
    assert not backoff.due("n/c", 5, now=45.9)
    assert backoff.due("n/c", 5, now=46)  # the cap
    backoff.restarted("n/c")
    backoff.running("n/c", 6, now=50)
    assert not backoff.due("n/c", 6, now=200)  # ran 150 s: back to 1 s
    assert backoff.due("n/c", 6, now=201)
