"""Plain-text tables for command output: a header and rows in left-aligned columns.

What ``kubectl get`` and ``kubeadm token list`` print, for the commands that list things
(``kubelab lab nodes``, ``kubelab images list|cached``, ``kubelab token list``, ``kubelab scheduler
explain``).  Each column is as wide as its widest cell, columns are ``gap`` spaces apart and
lines carry no trailing spaces, so output reads the same whatever the cells hold and tests can
compare it line by line.  Rows are text already: formatting a cell (a size, a duration,
``<none>``) is the caller's business, aligning cells is this module's.
"""

from __future__ import annotations

from collections.abc import Sequence


def aligned(rows: Sequence[Sequence[str]], gap: int = 2) -> list[str]:
    """``rows`` (the header first) as lines of aligned columns; every row has the header's
    number of cells (``ValueError`` otherwise)."""
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    separator = " " * gap
    return [
        separator.join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
