"""The one nftables backend: list a table, apply a script with ``nft -f`` as one transaction.

Whatever on a node writes nftables rules (the NetworkPolicy agent) talks to the
:class:`Nftables` protocol, which has the two operations a rule writer needs: ``nft list
table`` of one table, and ``nft -f -`` of a whole script, which the kernel commits as one
transaction (all of it or nothing).  A writer that replaces its table with ``add table``,
``delete table`` and the new definition in one script changes the rules atomically: no packet
ever sees the table missing or half written, and a restarted writer keeps enforcing the old
rules until its first script replaces them.

:class:`CommandNftables` runs the ``nft`` command, under the same guard as
:mod:`node.iptables`: only inside a network namespace bind-mounted under /run/netns (a lab
node's), or one entered with ``nsenter --net=PATH`` given ``netns``, or on a machine that
opted in with ``KUBELAB_NODE_IS_THIS_MACHINE=1``; the host's own rules never change.

:class:`FakeNftables` keeps tables in memory and applies scripts with the kernel's
all-or-nothing semantics and the checks that catch a writer's mistakes: ``delete table`` of a
table that does not exist fails, and inside a table every ``@set`` a rule reads and every chain
it jumps or goes to must be defined there.  It understands the statements writers of this
project emit (``add table``, ``delete table``, ``table F NAME { set ... { ... } chain ... {
... } }``), not nft's whole grammar.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from node.iptables import NETNS_DIR, is_named_netns, may_change_current_netns

_FAILING_LINE = re.compile(r"^/dev/stdin:(\d+):", re.MULTILINE)


class NftablesError(Exception):
    """``nft`` failed: the command, its stderr, and for a script its lines and the 1-based
    number of the failing one (nft names it as ``/dev/stdin:LINE:COLUMNS: Error: ...``)."""

    def __init__(self, command: Sequence[str], stderr: str, lines: Sequence[str] = ()) -> None:
        self.command = list(command)
        self.stderr = stderr.strip()
        self.lines = list(lines)
        found = _FAILING_LINE.search(self.stderr)
        self.failing_line = int(found.group(1)) if found else None
        where = f" at line {self.failing_line}: {self.line_text!r}" if self.line_text else ""
        super().__init__(f"{shlex.join(self.command)} failed{where}: {self.stderr}")

    @property
    def line_text(self) -> str:
        """The failing script line, or "" when unknown."""
        if self.failing_line is None or not 1 <= self.failing_line <= len(self.lines):
            return ""
        return self.lines[self.failing_line - 1]


class Nftables(Protocol):
    """What rule writers need of nftables."""

    def list_table(self, family: str, table: str) -> str:
        """``nft list table FAMILY TABLE``; "" when the table does not exist."""
        ...

    def apply(self, script: str) -> None:
        """``nft -f -`` of ``script``: one transaction; :class:`NftablesError` if refused
        (then nothing of it took effect)."""
        ...


Runner = Callable[[list[str], str], subprocess.CompletedProcess[str]]


def run_command(argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)


class CommandNftables:
    """:class:`Nftables` through the ``nft`` command (``runner`` runs it; tests pass a fake),
    in the current netns or, given ``netns`` (a path directly under /run/netns), in that one."""

    def __init__(self, runner: Runner = run_command, netns: str | None = None) -> None:
        self._run = runner
        self._netns = netns

    def list_table(self, family: str, table: str) -> str:
        argv = ["nft", "list", "table", family, table]
        done = self._checked(argv, "")
        if done.returncode == 0:
            return done.stdout
        if "No such file or directory" in done.stderr:
            return ""
        raise NftablesError(argv, done.stderr)

    def apply(self, script: str) -> None:
        argv = ["nft", "-f", "-"]
        done = self._checked(argv, script)
        if done.returncode != 0:
            raise NftablesError(argv, done.stderr, script.splitlines())

    def _checked(self, argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
        if self._netns is not None:
            if not is_named_netns(self._netns):
                raise NftablesError(
                    argv, f"refusing to run in {self._netns}: not a netns under {NETNS_DIR}"
                )
            return self._run(["nsenter", f"--net={self._netns}", "--", *argv], stdin)
        if not may_change_current_netns():
            raise NftablesError(argv, f"refusing to run outside a netns under {NETNS_DIR}")
        return self._run(argv, stdin)


@dataclass
class FakeTable:
    """One table of :class:`FakeNftables`: its sets' and chains' lines as written."""

    sets: dict[str, list[str]] = field(default_factory=dict)
    chains: dict[str, list[str]] = field(default_factory=dict)


_SET_REFERENCE = re.compile(r"@([^\s,}]+)")
_CHAIN_REFERENCE = re.compile(r"\b(?:jump|goto) (\S+)")


class FakeNftables:
    """:class:`Nftables` in memory: ``tables[(family, name)]`` (see the module docstring).

    Every applied script is recorded in ``scripts``; ``fail_on`` makes a script fail at its
    first line containing that text, as a kernel rejection would.
    """

    def __init__(self) -> None:
        self.tables: dict[tuple[str, str], FakeTable] = {}
        self.scripts: list[str] = []
        self.fail_on: str | None = None

    def list_table(self, family: str, table: str) -> str:
        found = self.tables.get((family, table))
        if found is None:
            return ""
        out = [f"table {family} {table} {{"]
        for kind, blocks in (("set", found.sets), ("chain", found.chains)):
            for name, lines in blocks.items():
                out += [f"\t{kind} {name} {{", *(f"\t\t{line}" for line in lines), "\t}"]
        return "\n".join([*out, "}"]) + "\n"

    def apply(self, script: str) -> None:
        lines = script.splitlines()
        tables = {key: FakeTable(dict(t.sets), dict(t.chains)) for key, t in self.tables.items()}
        number = 0
        try:
            while number < len(lines):
                number = self._statement(tables, lines, number) + 1
        except ValueError as error:
            stderr = f"/dev/stdin:{number + 1}:1-1: Error: {error}"
            raise NftablesError(["nft", "-f", "-"], stderr, lines) from None
        self.tables = tables
        self.scripts.append(script)

    def _statement(self, tables: dict[tuple[str, str], FakeTable], lines: list[str], i: int) -> int:
        """Applies the statement starting at line ``i``; returns the index of its last line."""
        words = self._words(lines[i])
        if not words:
            return i
        match words:
            case ["add", "table", family, name]:
                tables.setdefault((family, name), FakeTable())
                return i
            case ["delete", "table", family, name]:
                if tables.pop((family, name), None) is None:
                    raise ValueError(f"Could not process rule: No such file or directory: {name}")
                return i
            case ["table", family, name, "{"]:
                table = tables.setdefault((family, name), FakeTable())
                end = self._table_body(table, lines, i + 1)
                self._check_references(table)
                return end
        raise ValueError(f"syntax error, unexpected {words[0]}")

    def _table_body(self, table: FakeTable, lines: list[str], i: int) -> int:
        while i < len(lines):
            words = self._words(lines[i])
            match words:
                case ["}"]:
                    return i
                case ["set" | "chain" as kind, name, "{", *rest]:
                    blocks = table.sets if kind == "set" else table.chains
                    if rest and rest[-1] == "}":
                        body = " ".join(rest[:-1])
                        blocks[name] = [part.strip() for part in body.split(";") if part.strip()]
                    else:
                        blocks[name] = []
                        i += 1
                        while self._words(lines[i]) != ["}"]:
                            blocks[name].append(lines[i].strip())
                            i += 1
                case []:
                    pass
                case _:
                    raise ValueError(f"syntax error, unexpected {words[0]}")
            i += 1
        raise ValueError("syntax error, unexpected end of file")

    def _words(self, line: str) -> list[str]:
        if self.fail_on is not None and self.fail_on in line:
            raise ValueError(f"Could not process rule: {line.strip()}")
        return line.split()

    @staticmethod
    def _check_references(table: FakeTable) -> None:
        for lines in table.chains.values():
            for line in lines:
                for name in _SET_REFERENCE.findall(line):
                    if name not in table.sets:
                        raise ValueError(
                            f"Could not process rule: No such file or directory: @{name}"
                        )
                for name in _CHAIN_REFERENCE.findall(line):
                    if name not in table.chains:
                        raise ValueError(
                            f"Could not process rule: No such file or directory: {name}"
                        )
