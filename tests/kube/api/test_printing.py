"""Ages read as kubectl prints them."""

from __future__ import annotations

import datetime

import pytest

from kube.api.printing import age, human_duration, short_human_duration

CASES = [
    (0, "0s"),
    (-0.5, "0s"),
    (-5, "<invalid>"),
    (59, "59s"),
    (119, "119s"),
    (120, "2m"),
    (200, "3m20s"),
    (600, "10m"),
    (3 * 3600 - 1, "179m"),
    (3 * 3600, "3h"),
    (5 * 3600 + 60 * 7, "5h7m"),
    (30 * 3600, "30h"),
    (3 * 86400, "3d"),
    (3 * 86400 + 3600 * 5, "3d5h"),
    (100 * 86400, "100d"),
    (3 * 365 * 86400 + 10 * 86400, "3y10d"),
    (9 * 365 * 86400, "9y"),
]


@pytest.mark.parametrize(("seconds", "text"), CASES, ids=[t for _, t in CASES])
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(datetime.timedelta(seconds=seconds)) == text


def test_age_without_timestamp() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    assert age(None, now) == "<unknown>"
    assert age(now - datetime.timedelta(seconds=42), now) == "42s"


SHORT_CASES = [
    (-0.5, "0s"),
    (-5, "<invalid>"),
    (59.9, "59s"),
    (119, "1m"),
    (3599, "59m"),
    (3600, "1h"),
    (23 * 3600 + 3599, "23h"),
    (3 * 86400 + 3600 * 5, "3d"),
    (364 * 86400, "364d"),
    (365 * 86400, "1y"),
    (3 * 365 * 86400 + 10 * 86400, "3y"),
]


@pytest.mark.parametrize(("seconds", "text"), SHORT_CASES, ids=[t for _, t in SHORT_CASES])
def test_short_human_duration(seconds: float, text: str) -> None:
    assert short_human_duration(datetime.timedelta(seconds=seconds)) == text
