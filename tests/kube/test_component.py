"""What every component shares: Go-style durations, as flags and in configuration files."""

from __future__ import annotations

import argparse

import pytest

from kube.component import duration, parse_duration


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
