"""The shared column printer: widths from the widest cell, the gap asked for, no trailing
spaces, and rows that disagree with the header refused."""

from __future__ import annotations

import pytest

from kube.table import aligned


def test_columns_are_as_wide_as_their_widest_cell() -> None:
    rows = [("NAME", "READY", "TAINTS"), ("node1", "True", "a=b:NoSchedule"), ("n2", "False", "")]
    assert aligned(rows) == [
        "NAME   READY  TAINTS",
        "node1  True   a=b:NoSchedule",
        "n2     False",
    ]


def test_the_gap_is_the_callers() -> None:
    assert aligned([["A", "B"], ["ccc", "d"]], gap=3) == ["A     B", "ccc   d"]


def test_a_header_alone_and_nothing_at_all() -> None:
    assert aligned([("TOKEN", "TTL")]) == ["TOKEN  TTL"]
    assert aligned([]) == []


@pytest.mark.parametrize("row", [("x",), ("x", "y", "z")], ids=["short", "long"])
def test_rows_must_match_the_header(row: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="zip"):
        aligned([("A", "B"), row])
