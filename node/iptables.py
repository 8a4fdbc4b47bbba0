"""The one iptables backend: save a table, restore lines into it in one transaction.

Everything on a node that writes iptables rules (the CNI plugin's NAT, the kube-proxy) talks to
the :class:`Iptables` protocol, which has exactly the two operations upstream's proxier relies
on: ``iptables-save`` of one table, and ``iptables-restore --noflush`` of a batch of
restore-format lines as one transaction.  Building the whole change in memory and applying it
at once is what makes rule updates atomic and fast; one subprocess per rule is neither.

:class:`RestoreIptables` runs the ``iptables-{nft,legacy}-save``/``-restore`` commands.  Which
of the two backends a node uses is detected the way upstream's iptables wrapper does it: the
kubelet/kube-proxy hint chains first, then whichever backend already holds more rules, nft when
neither holds any (Debian 12's default).  It refuses to run unless the current network
namespace is one bind-mounted under /run/netns (a lab node's): on the lab machines the host's
own tables must never change, and the initial namespace is never named there.  A machine
that is itself a node (a Vagrant VM) opts in with ``KUBELAB_NODE_IS_THIS_MACHINE=1``.  Given
``netns`` (a path under /run/netns), it runs the commands inside that namespace through
``nsenter --net=PATH`` instead, from wherever the caller is (the cloud provider writes the lab
router's rules that way); the same guard then applies to the target namespace.

:class:`FakeIptables` keeps tables in memory and applies restore lines with the kernel's
all-or-nothing semantics and the checks that matter for correctness (a rule may only jump to a
chain that exists, a chain still referenced or holding rules may not be deleted, declaring a
chain flushes it), so tests of rule writers catch the errors the real command would report.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

NETNS_DIR = "/run/netns"
WAIT_SECONDS = "5"
BACKENDS = ("nft", "legacy")
HINT_CHAINS = ("KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY")
"""Chains kubelets and kube-proxies create in ``mangle`` to say which backend a node uses."""
BUILTIN_CHAINS: dict[str, tuple[str, ...]] = {
    "filter": ("INPUT", "FORWARD", "OUTPUT"),
    "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"),
    "mangle": ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"),
    "raw": ("PREROUTING", "OUTPUT"),
}
TARGETS = frozenset(
    {"ACCEPT", "DROP", "RETURN", "REJECT", "DNAT", "SNAT", "MASQUERADE", "MARK", "REDIRECT"}
)
"""Targets that are not chains (the ones the node's rule writers use)."""
_FAILING_LINE = re.compile(r"\bline:? (\d+)")


class RulesError(Exception):
    """A command that writes or reads packet-filtering rules failed: the command, its stderr,
    and for a batch the input lines and the 1-based number of the failing one.  One shape for
    iptables and nftables, so a proxy's sync loop reports and recovers from both alike."""

    def __init__(
        self,
        command: Sequence[str],
        stderr: str,
        lines: Sequence[str] = (),
        failing_line: int | None = None,
    ) -> None:
        self.command = list(command)
        self.stderr = stderr.strip()
        self.lines = list(lines)
        self.failing_line = failing_line
        where = f" at line {failing_line}: {self.line_text!r}" if self.line_text else ""
        super().__init__(f"{shlex.join(self.command)} failed{where}: {self.stderr}")

    @property
    def line_text(self) -> str:
        """The failing input line, or "" when unknown."""
        if self.failing_line is None or not 1 <= self.failing_line <= len(self.lines):
            return ""
        return self.lines[self.failing_line - 1]

    def context(self, around: int = 3) -> list[str]:
        """The input lines near the failing one, numbered, the failing one marked with ``>``."""
        if self.failing_line is None:
            return []
        first = max(1, self.failing_line - around)
        last = min(len(self.lines), self.failing_line + around)
        return [
            f"{'>' if n == self.failing_line else ' '} {n:6d}  {self.lines[n - 1]}"
            for n in range(first, last + 1)
        ]


class IptablesError(RulesError):
    """A save or restore failed; a restore's lines count the ``*table`` line as 1."""


class Iptables(Protocol):
    """Two operations on one table of the current network namespace."""

    @property
    def backend(self) -> str:
        """``nft`` or ``legacy``: which kernel tables the rules land in."""
        ...

    def save(self, table: str) -> str:
        """The table as ``iptables-save`` prints it; read-only."""
        ...

    def restore(self, table: str, lines: Sequence[str]) -> None:
        """Apply restore-format ``lines`` as one ``--noflush`` transaction: all or nothing.

        Declaring a chain (``:CHAIN - [0:0]``) creates or flushes it; other chains keep their
        rules.  On failure raise :class:`IptablesError` naming the failing line.
        """
        ...


def restore_input(table: str, lines: Sequence[str]) -> list[str]:
    """The full ``iptables-restore`` input for one table, as lines."""
    return [f"*{table}", *lines, "COMMIT"]


Runner = Callable[[list[str], str], "subprocess.CompletedProcess[str]"]


def run_command(argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with ``stdin``, capturing text output; never raises for an exit code."""
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    except OSError as e:
        return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: {e}")


class RestoreIptables:
    """:class:`Iptables` through ``iptables-<backend>-save`` and ``-restore --noflush``.

    ``backend`` None detects it on first use (see the module docstring).  ``runner`` runs a
    command; tests pass a fake.  Commands run only inside a netns named under /run/netns:
    the current one, or ``netns`` (a path directly under /run/netns) entered with nsenter.
    """

    def __init__(
        self, backend: str | None = None, runner: Runner = run_command, netns: str | None = None
    ) -> None:
        if backend is not None and backend not in BACKENDS:
            raise ValueError(f"iptables backend must be one of {', '.join(BACKENDS)}")
        self._backend = backend
        self._run = runner
        self._netns = netns

    @property
    def backend(self) -> str:
        if self._backend is None:
            self._backend = self._detect()
        return self._backend

    def save(self, table: str) -> str:
        argv = [f"iptables-{self.backend}-save", "-t", table]
        done = self._checked(argv, "")
        if done.returncode != 0:
            raise IptablesError(argv, done.stderr)
        return done.stdout

    def restore(self, table: str, lines: Sequence[str]) -> None:
        argv = [f"iptables-{self.backend}-restore", "--noflush", "--wait", WAIT_SECONDS]
        text = restore_input(table, lines)
        done = self._checked(argv, "\n".join(text) + "\n")
        if done.returncode != 0:
            raise IptablesError(argv, done.stderr, text, failing_line(done.stderr))

    def _detect(self) -> str:
        """Upstream's iptables-wrapper choice: a hint chain, else the backend with more rules."""
        saved = {b: self._save_all(b) for b in BACKENDS}
        for backend in BACKENDS:
            if any(f":{chain} " in saved[backend] for chain in HINT_CHAINS):
                return backend
        counts = {b: sum(line.startswith("-") for line in saved[b].splitlines()) for b in saved}
        return "legacy" if counts["legacy"] > counts["nft"] else "nft"

    def _save_all(self, backend: str) -> str:
        done = self._checked([f"iptables-{backend}-save"], "")
        return done.stdout if done.returncode == 0 else ""

    def _checked(self, argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
        return run_on_node(self._run, argv, stdin, self._netns, IptablesError)


def delete_chains(saved: str, chains: Collection[str]) -> list[str]:
    """Restore lines deleting ``chains`` from ``saved`` (an ``iptables-save`` of one table):
    the rules of other chains that jump to them, then the chains, emptied and deleted in the
    same transaction (so chains that refer to each other go together)."""
    wanted = set(chains)
    jumps = [
        "-D" + line[2:]
        for line in saved.splitlines()
        if line.startswith("-A ") and line.split()[1] not in wanted and rule_target(line) in wanted
    ]
    ordered = sorted(wanted)
    return [*jumps, *(f":{c} - [0:0]" for c in ordered), *(f"-X {c}" for c in ordered)]


def run_on_node(
    run: Runner, argv: list[str], stdin: str, netns: str | None, error: type[RulesError]
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in ``netns`` (a path directly under /run/netns, entered with nsenter) or,
    when None, here, only if this namespace may be changed; else raise ``error``."""
    if netns is not None:
        if not is_named_netns(netns):
            raise error(argv, f"refusing to run in {netns}: not a netns under {NETNS_DIR}")
        return run(["nsenter", f"--net={netns}", "--", *argv], stdin)
    if not may_change_current_netns():
        raise error(argv, f"refusing to run outside a netns under {NETNS_DIR}")
    return run(argv, stdin)


def failing_line(stderr: str) -> int | None:
    """The line number an ``iptables-restore`` error names: ``line N failed`` or ``Error
    occurred at line: N`` (nft may name the COMMIT line of the failing transaction)."""
    found = _FAILING_LINE.search(stderr)
    return int(found.group(1)) if found else None


HOST_OPT_IN = "KUBELAB_NODE_IS_THIS_MACHINE"
"""Set to ``1`` where the machine itself is a node (the Vagrant VMs' units set it): its own
network namespace may then be changed.  Never set on a machine that runs labs or tests."""


def may_change_current_netns() -> bool:
    """Whether this process may change its network namespace's rules: the namespace is one
    bind-mounted under /run/netns (a lab node's), or the machine opted in (``HOST_OPT_IN``)."""
    if os.environ.get(HOST_OPT_IN) == "1":
        return True
    current = os.stat("/proc/self/ns/net")
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return False
    for name in names:
        try:
            named = os.stat(os.path.join(NETNS_DIR, name))
        except OSError:
            continue
        if (named.st_dev, named.st_ino) == (current.st_dev, current.st_ino):
            return True
    return False


def is_named_netns(path: str) -> bool:
    """Whether ``path`` is a namespace bind-mounted directly under /run/netns, other than the
    host's own (the one of PID 1)."""
    if os.path.dirname(os.path.normpath(path)) != NETNS_DIR:
        return False
    try:
        target = os.stat(path)
        if target.st_dev == os.stat(NETNS_DIR).st_dev:
            return False  # a plain file, not a namespace bind-mounted there
        host = os.stat("/proc/1/ns/net")
    except PermissionError:
        return True  # PID 1's netns is unreadable here (a container): the nsfs check must do
    except OSError:
        return False
    return (target.st_dev, target.st_ino) != (host.st_dev, host.st_ino)


class FakeIptables:
    """:class:`Iptables` in memory: ``tables[table][chain]`` holds the rules as written.

    Every restore is recorded in ``restores`` as ``(table, lines)``; ``fail_on`` makes a
    restore fail at the first line containing that text, as a kernel rejection would.
    """

    def __init__(self, backend: str = "nft") -> None:
        self.backend = backend
        self.tables: dict[str, dict[str, list[str]]] = {
            table: {chain: [] for chain in chains} for table, chains in BUILTIN_CHAINS.items()
        }
        self.restores: list[tuple[str, list[str]]] = []
        self.saves: list[str] = []
        self.fail_on: str | None = None

    def rules(self, table: str, chain: str) -> list[str]:
        """The rules of one chain (KeyError if it does not exist)."""
        return self.tables[table][chain]

    def save(self, table: str) -> str:
        self.saves.append(table)
        chains = self.tables[table]
        builtin = BUILTIN_CHAINS[table]
        lines = [f"*{table}"]
        lines += [f":{chain} {'ACCEPT' if chain in builtin else '-'} [0:0]" for chain in chains]
        lines += [rule for rules in chains.values() for rule in rules]
        return "\n".join([*lines, "COMMIT", ""])

    def restore(self, table: str, lines: Sequence[str]) -> None:
        self.restores.append((table, list(lines)))
        text = restore_input(table, lines)
        chains = copy.deepcopy(self.tables[table])
        for number, line in enumerate(text[1:-1], start=2):
            problem = self._apply(chains, table, line)
            if problem:
                raise IptablesError(["fake-iptables-restore", "--noflush"], problem, text, number)
        self.tables[table] = chains

    def _apply(self, chains: dict[str, list[str]], table: str, line: str) -> str:
        """Apply one line to ``chains``; the error text, or "" on success."""
        if self.fail_on is not None and self.fail_on in line:
            return "fake failure"
        words = line.split()
        if not words:
            return ""
        if words[0].startswith(":"):
            chains[words[0][1:]] = []
            return ""
        op, chain = words[0], words[1] if len(words) > 1 else ""
        if chain not in chains:
            return f"no chain {chain!r}"
        if op == "-F":
            chains[chain] = []
        elif op == "-X":
            return self._delete_chain(chains, table, chain)
        elif op in ("-A", "-I", "-D"):
            return self._edit_rule(chains, op, chain, words[2:])
        else:
            return f"unknown operation {op!r}"
        return ""

    @staticmethod
    def _delete_chain(chains: dict[str, list[str]], table: str, chain: str) -> str:
        if chain in BUILTIN_CHAINS[table]:
            return f"cannot delete built-in chain {chain}"
        if chains[chain]:
            return f"chain {chain} is not empty"
        if any(rule_target(rule) == chain for rules in chains.values() for rule in rules):
            return f"chain {chain} is still referenced"
        del chains[chain]
        return ""

    @staticmethod
    def _edit_rule(chains: dict[str, list[str]], op: str, chain: str, spec: list[str]) -> str:
        position = 1
        if op == "-I" and spec and spec[0].isdigit():
            position, spec = int(spec[0]), spec[1:]
        rule = " ".join(["-A", chain, *spec])
        target = rule_target(rule)
        if target and target not in TARGETS and target not in chains:
            return f"no chain/target {target!r}"
        if op == "-A":
            chains[chain].append(rule)
        elif op == "-I":
            chains[chain].insert(position - 1, rule)
        elif rule in chains[chain]:
            chains[chain].remove(rule)
        else:
            return "rule to delete does not exist"
        return ""


def rule_target(rule: str) -> str:
    """The chain or target a rule (``-A CHAIN ...``) jumps or goes to, or ""."""
    words = rule.split()
    for flag in ("-j", "-g"):
        if flag in words[:-1]:
            return words[words.index(flag) + 1]
    return ""
