"""What every component shares: Go-style durations, as flags and in configuration files."""

from __future__ import annotations

import argparse

import pytest

from kube.component import duration, go_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("0", 0.0, id="zero"),
        pytest.param("15s", 15.0, id="seconds"),
        pytest.param("1m30s", 90.0, id="compound"),
        pytest.param("250ms", 0.25, id="milliseconds"),
        pytest.param("1.5h", 5400.0, id="fraction"),
        pytest.param("-2s", -2.0, id="negative"),
        pytest.param("10us", 1e-5, id="microseconds"),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", [pytest.param(t, id=t or "empty") for t in ("", "5", "s", "5x")])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_duration_flags_are_non_negative() -> None:
    assert duration("5m") == 300.0
    with pytest.raises(argparse.ArgumentTypeError, match="expected a duration"):
        duration("-5m")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0, "0s", id="zero"),
        pytest.param(0.5, "500ms", id="milliseconds"),
        pytest.param(0.0000025, "2.5µs", id="microseconds"),
        pytest.param(3, "3s", id="seconds"),
        pytest.param(1.5, "1.5s", id="fractional-seconds"),
        pytest.param(90, "1m30s", id="minutes"),
        pytest.param(160, "2m40s", id="more-minutes"),
        pytest.param(900, "15m0s", id="whole-minutes"),
        pytest.param(3600, "1h0m0s", id="hours"),
        pytest.param(3661, "1h1m1s", id="hours-minutes-seconds"),
    ],
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
