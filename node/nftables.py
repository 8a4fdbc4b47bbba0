"""nftables for one table: run a script as one transaction, list the table's chains and sets.

The nftables kube-proxy (and whatever else on a node writes nftables rules) talks to the
:class:`Nftables` protocol, the two operations upstream's knftables offers it: run a batch of
``nft`` commands as one atomic transaction (``nft -f -``: all of it applies or none), and list
the names of one kind of object in the table it owns.  Everything happens in that one table,
so rules of other tables (iptables-nft's ``ip nat`` and ``ip filter``, other agents' own
tables) are never touched.

:class:`SubprocessNftables` runs ``nft``, under the same guard as
:class:`~node.iptables.RestoreIptables`: only inside a network namespace bind-mounted under
/run/netns (a lab node's), or in ``netns`` through ``nsenter``, or where the machine opted in
as a node.  :class:`FakeNftables` keeps tables in memory and applies scripts with the kernel's
all-or-nothing semantics and the checks that catch ordering mistakes (rules and map elements
may only name chains and sets that exist, a chain still holding rules or referenced may not
be deleted, an element to delete must exist, an element may not silently change its value).
"""

from __future__ import annotations

import copy
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from node.iptables import RulesError, Runner, run_command, run_on_node

KINDS = ("chains", "sets", "maps")
_FAILING_LINE = re.compile(r"^/dev/stdin:(\d+):", re.MULTILINE)
_CHAIN_REFERENCE = re.compile(r"\b(?:jump|goto) ([^\s,}]+)")
_SET_REFERENCE = re.compile(r"@([^\s,}]+)")
_LISTED_TABLE = re.compile(r'^table \S+ "?([^\s"]+)"? \{$')
_LISTED_OBJECT = re.compile(r'^\t(chain|set|map) "?([^\s"]+)"? \{$')


class NftablesError(RulesError):
    """An ``nft`` command failed; a script's lines count from 1."""


class Nftables(Protocol):
    """One table (``family`` and ``table``, its name) of the current network namespace."""

    @property
    def family(self) -> str: ...

    @property
    def table(self) -> str: ...

    def run(self, lines: Sequence[str]) -> None:
        """Apply ``lines`` (``nft`` commands) as one transaction: all or nothing.  On failure
        raise :class:`NftablesError` naming the failing line."""
        ...

    def list_names(self, kind: str) -> list[str]:
        """The names of the table's ``chains``, ``sets`` or ``maps`` (none when the table
        does not exist); read-only."""
        ...


def failing_line(stderr: str) -> int | None:
    """The first script line ``nft -f -`` names in an error (``/dev/stdin:N:COLS: Error``)."""
    found = _FAILING_LINE.search(stderr)
    return int(found.group(1)) if found else None


def listed_names(listing: str, table: str, kind: str) -> list[str]:
    """The names of the ``kind`` objects (chain, set, map) of ``table`` in ``nft list``
    output: a ``table FAMILY NAME {`` block per table, a ``\tKIND NAME {`` line per object."""
    found: list[str] = []
    current = ""
    for line in listing.splitlines():
        if opened := _LISTED_TABLE.match(line):
            current = opened[1]
        elif (listed := _LISTED_OBJECT.match(line)) and (current, listed[1]) == (table, kind):
            found.append(listed[2])
    return found


class SubprocessNftables:
    """:class:`Nftables` through the ``nft`` command; see the module docstring."""

    def __init__(
        self,
        family: str = "ip",
        table: str = "kube-proxy",
        runner: Runner = run_command,
        netns: str | None = None,
    ) -> None:
        self.family = family
        self.table = table
        self._run = runner
        self._netns = netns

    def run(self, lines: Sequence[str]) -> None:
        argv = ["nft", "-f", "-"]
        done = self._checked(argv, "\n".join(lines) + "\n")
        if done.returncode != 0:
            raise NftablesError(argv, done.stderr, lines, failing_line(done.stderr))

    def list_names(self, kind: str) -> list[str]:
        # The text listing: for 110,000 chains, ``--json`` takes three times as long.
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}")
        argv = ["nft", "--terse", "list", kind, self.family]
        done = self._checked(argv, "")
        if done.returncode != 0:
            raise NftablesError(argv, done.stderr)
        return listed_names(done.stdout, self.table, kind[:-1])

    def _checked(self, argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
        return run_on_node(self._run, argv, stdin, self._netns, NftablesError)


@dataclass
class FakeTable:
    """One table in memory: chains (name → rules as written), sets and maps (name → key →
    value, "" for a set's elements), and which chains are base chains."""

    chains: dict[str, list[str]] = field(default_factory=dict)
    base_chains: set[str] = field(default_factory=set)
    sets: dict[str, dict[str, str]] = field(default_factory=dict)
    maps: dict[str, dict[str, str]] = field(default_factory=dict)
    released: set[str] = field(default_factory=set)
    """Chains that map elements deleted by the running (after it: the last) transaction
    pointed to."""
    busy: set[str] = field(default_factory=set)
    late_release: bool = False
    """Behave as kernels before 6.2: a chain released by a transaction is still busy in it
    and in the next one."""

    def containers(self, name: str) -> dict[str, str] | None:
        return self.sets.get(name, self.maps.get(name))


class FakeNftables:
    """:class:`Nftables` in memory, for one table; every table of the family is kept in
    ``tables`` (so a test can see what a cleanup removed).

    Every script is recorded in ``scripts``; ``fail_on`` makes a script fail at the first
    line containing that text, as a kernel rejection would.  ``late_release``: as kernels
    before 6.2, a chain a map element deleted in the same transaction pointed to cannot be
    deleted in it.
    """

    def __init__(
        self, family: str = "ip", table: str = "kube-proxy", *, late_release: bool = False
    ) -> None:
        self.family = family
        self.table = table
        self.late_release = late_release
        self.tables: dict[str, FakeTable] = {}
        self.scripts: list[list[str]] = []
        self.fail_on: str | None = None

    @property
    def current(self) -> FakeTable:
        """This table (KeyError if it does not exist)."""
        return self.tables[self.table]

    def run(self, lines: Sequence[str]) -> None:
        self.scripts.append(list(lines))
        tables = copy.deepcopy(self.tables)
        for table in tables.values():
            table.busy, table.released = table.released, set()
        for number, line in enumerate(lines, start=1):
            problem = "fake failure" if self.fail_on and self.fail_on in line else ""
            problem = problem or self._apply(tables, line)
            if problem:
                raise NftablesError(["fake-nft", "-f", "-"], problem, lines, number)
        self.tables = tables

    def list_names(self, kind: str) -> list[str]:
        table = self.tables.get(self.table)
        if table is None:
            return []
        found: dict[str, dict[str, list[str]] | dict[str, dict[str, str]]] = {
            "chains": table.chains,
            "sets": table.sets,
            "maps": table.maps,
        }
        return sorted(found[kind])

    def _apply(self, tables: dict[str, FakeTable], line: str) -> str:
        words = line.split(None, 4)
        if len(words) < 4 or words[2] != self.family:
            return f"cannot parse {line!r}"
        op, kind, _, table_name = words[:4]
        rest = words[4] if len(words) > 4 else ""
        if kind == "table":
            if op == "add":
                tables.setdefault(table_name, FakeTable(late_release=self.late_release))
            elif op == "delete":
                if tables.pop(table_name, None) is None:
                    return "No such file or directory: table"
            else:
                return f"unknown operation {op!r}"
            return ""
        table = tables.get(table_name)
        if table is None:
            return f"No such file or directory: table {table_name}"
        name, _, body = rest.partition(" ")
        if kind == "chain":
            return _chain(table, op, name, body)
        if kind in ("set", "map"):
            return _container(table, op, kind, name)
        if kind == "rule" and op == "add":
            if name not in table.chains:
                return f"No such file or directory: chain {name}"
            missing = _missing_references(table, body)
            if missing:
                return missing
            table.chains[name].append(body)
            return ""
        if kind == "element":
            return _elements(table, op, name, body)
        return f"unknown command {line!r}"


def _chain(table: FakeTable, op: str, name: str, body: str) -> str:
    if op == "add":
        table.chains.setdefault(name, [])
        if "hook" in body:
            table.base_chains.add(name)
        return ""
    if name not in table.chains:
        return f"No such file or directory: chain {name}"
    if op == "flush":
        table.chains[name] = []
    elif op == "delete":
        if table.chains[name]:
            return f"Device or resource busy: chain {name} holds rules"
        if name in _referenced_chains(table) or (
            table.late_release and name in table.released | table.busy
        ):
            return f"Device or resource busy: chain {name} is referenced"
        del table.chains[name]
        table.base_chains.discard(name)
    else:
        return f"unknown operation {op!r}"
    return ""


def _container(table: FakeTable, op: str, kind: str, name: str) -> str:
    store = table.sets if kind == "set" else table.maps
    if op == "add":
        store.setdefault(name, {})
        return ""
    if name not in store:
        return f"No such file or directory: {kind} {name}"
    if op == "flush":
        store[name] = {}
    elif op == "delete":
        if any(f"@{name}" in rule.split() for rules in table.chains.values() for rule in rules):
            return f"Device or resource busy: {kind} {name} is referenced"
        del store[name]
    else:
        return f"unknown operation {op!r}"
    return ""


def _elements(table: FakeTable, op: str, name: str, body: str) -> str:
    elements = table.containers(name)
    if elements is None:
        return f"No such file or directory: set or map {name}"
    inside = body.strip().removeprefix("{").removesuffix("}")
    for item in (part.strip() for part in inside.split(",")):
        key, _, value = item.partition(" : ")
        if op == "add":
            missing = _missing_references(table, value)
            if missing:
                return missing
            if elements.get(key, value) != value:
                return f"File exists: element {key} of {name}"
            elements[key] = value
        elif op == "delete":
            gone = elements.pop(key, None)
            if gone is None:
                return f"No such file or directory: element {key} of {name}"
            table.released.update(_CHAIN_REFERENCE.findall(gone))
        else:
            return f"unknown operation {op!r}"
    return ""


def _missing_references(table: FakeTable, text: str) -> str:
    for chain in _CHAIN_REFERENCE.findall(text):
        if chain not in table.chains:
            return f"No such file or directory: chain {chain}"
    for name in _SET_REFERENCE.findall(text):
        if table.containers(name) is None:
            return f"No such file or directory: set {name}"
    return ""


def _referenced_chains(table: FakeTable) -> set[str]:
    texts = [rule for rules in table.chains.values() for rule in rules]
    texts += [value for elements in table.maps.values() for value in elements.values()]
    return {chain for text in texts for chain in _CHAIN_REFERENCE.findall(text)}
