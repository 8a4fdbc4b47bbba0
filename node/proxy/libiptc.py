"""The kube-proxy's ``libiptc`` iptables backend: restore-format lines applied through
python-iptables instead of an ``iptables-restore`` subprocess.

:class:`LibiptcIptables` implements :class:`node.iptables.Iptables`, so the proxier builds the
same restore-format ruleset for either backend.  ``restore`` gives the transaction
``iptables-restore --noflush`` gives, because it makes the same libiptc calls that
``iptables-legacy-restore`` makes (which is libiptc too): one handle on the table
(``iptc_init``), every line applied to that in-memory copy, one ``iptc_commit`` at the end.  A
line that fails leaves the handle uncommitted and it is thrown away, so the kernel sees all
of the lines or none of them.  All lines are parsed before the table is touched, and the
xtables lock (``/run/xtables.lock``, shared by every namespace) is held from reading the
table to the commit, as ``iptables-restore --wait`` does.

**Legacy tables only.**  python-iptables drives libiptc, which reads and writes the legacy
(``ip_tables``) kernel tables.  Debian 12's default ``iptables`` is the nft backend: its
``iptables -t nat -S`` does not show these rules (it only warns that legacy tables exist),
but they are active all the same.  Read them with ``iptables-legacy-save``, which is what
:meth:`LibiptcIptables.save` runs, and never mix this backend with an nft one on one node.

libiptc acts on the network namespace of the calling process, so the backend refuses to run
anywhere but in a namespace bind-mounted under ``/run/netns`` (a lab node's), the same guard
:class:`node.iptables.RestoreIptables` has: a test run by mistake on the host must not touch
the host's tables.  It uses python-iptables' per-process table cache with ``autocommit`` off,
so nothing else in the process should use python-iptables with ``autocommit`` on.

The rule parser (:func:`build_rule`) covers the rule syntax the kube-proxy emits: ``-s/-d``
(optionally negated), ``-p``, ``-i/-o``, ``-m MODULE --option [value]`` for any xtables match
(comment, tcp, udp, sctp, statistic, recent, addrtype, mark, conntrack, multiport, ...),
``-j`` to a chain, a verdict or a target extension with its options (DNAT, SNAT, MARK,
MASQUERADE, REJECT, REDIRECT, LOG: python-iptables' ``Target.STANDARD_TARGETS``, which it
builds without opening every table of the namespace), and ``-g``.  Whether an option takes a
value is read from the extension itself, as iptables' getopt does, so a flag (``--set``,
``--random-fully``) never swallows the next word.  Anything else is an error naming the line.
Building rules needs no privileges; only ``restore`` and ``save`` touch the kernel.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import iptc
from iptc.errors import XTablesError

from node.iptables import NETNS_DIR, IptablesError, may_change_current_netns, restore_input

BACKEND = "legacy"
SAVE_COMMAND = "iptables-legacy-save"
RESTORE_COMMAND = "libiptc-restore"
"""How errors name the restore: there is no such command, the transaction runs in process."""
XTABLES_LOCK = os.environ.get("XTABLES_LOCKFILE", "/run/xtables.lock")
LOCK_WAIT_SECONDS = 5.0

# Verdicts are the standard target with a name, never an extension to load.
_VERDICTS = frozenset({"ACCEPT", "DROP", "RETURN", "QUEUE"})
# Protocols whose match iptables loads implicitly for `-p PROTO --dport ...`.
_IMPLICIT_PROTOCOL_MATCHES = frozenset({"tcp", "udp", "sctp"})
# Rule-level options: the attribute of iptc.Rule they set (negatable with "!").
_RULE_ATTRIBUTES = {
    "-s": "src",
    "--source": "src",
    "-d": "dst",
    "--destination": "dst",
    "-p": "protocol",
    "--protocol": "protocol",
    "-i": "in_interface",
    "--in-interface": "in_interface",
    "-o": "out_interface",
    "--out-interface": "out_interface",
}
_MATCH_OPTIONS = frozenset({"-m", "--match"})
_JUMP_OPTIONS = frozenset({"-j", "--jump"})
_GOTO_OPTIONS = frozenset({"-g", "--goto"})
_VALUED_RULE_OPTIONS = frozenset(_RULE_ATTRIBUTES) | _MATCH_OPTIONS | _JUMP_OPTIONS | _GOTO_OPTIONS
# Restore-format commands (long and short spellings) and the short one each stands for.
_COMMANDS = {
    "-A": "-A",
    "--append": "-A",
    "-I": "-I",
    "--insert": "-I",
    "-D": "-D",
    "--delete": "-D",
    "-F": "-F",
    "--flush": "-F",
    "-X": "-X",
    "--delete-chain": "-X",
}
# Errors python-iptables raises for a bad rule or a refused libiptc call.
_IPTC_ERRORS = (iptc.IPTCError, XTablesError, ValueError, AttributeError, TypeError, IndexError)
# Characters that make shlex.split differ from str.split.
_QUOTING = frozenset("'\"\\")
# xtables' XTTYPE_NONE: an option of the new-style API that takes no value.
_XTTYPE_NONE = 0


class RuleError(ValueError):
    """A rule specification this backend cannot express (unknown option, missing value...)."""


@dataclass(frozen=True)
class Command:
    """One restore-format line, parsed: what to do to which chain.

    ``op`` is ``":"`` (declare a chain), ``"-A"``, ``"-I"``, ``"-D"``, ``"-F"`` or ``"-X"``;
    ``policy`` is the declared policy (``"-"`` for user chains); ``position`` is the 0-based
    insert position of ``-I``; ``spec`` is the rule specification of ``-A/-I/-D``.
    """

    op: str
    chain: str
    spec: tuple[str, ...] = ()
    policy: str = "-"
    position: int = 0


def parse_line(line: str) -> Command:
    """Parse one restore-format line; :class:`RuleError` if it is not one this backend runs."""
    if _QUOTING.isdisjoint(line):
        words = line.split()  # what shlex.split gives for such a line, many times faster
    else:
        try:
            words = shlex.split(line)
        except ValueError as e:
            raise RuleError(f"unbalanced quoting: {e}") from None
    if not words:
        raise RuleError("empty line")
    op, *rest = words
    if op.startswith(":"):
        if len(rest) > 2 or not op[1:]:
            raise RuleError("a chain line is ':CHAIN POLICY [packets:bytes]'")
        return Command(":", op[1:], policy=rest[0] if rest else "-")
    if op not in _COMMANDS:
        raise RuleError(f"unsupported command {op!r}")
    if not rest:
        raise RuleError(f"{op} needs a chain")
    op = _COMMANDS[op]
    chain, *spec = rest
    if op in ("-F", "-X"):
        if spec:
            raise RuleError(f"{op} takes only a chain")
        return Command(op, chain)
    position = 0
    if op == "-I" and spec and spec[0].isdigit():
        if int(spec[0]) < 1:
            raise RuleError("rule numbers start at 1")
        position = int(spec[0]) - 1
        spec = spec[1:]
    if op == "-D" and spec and spec[0].isdigit():
        raise RuleError("-D by rule number is not supported; give the rule")
    return Command(op, chain, tuple(spec), position=position)


def build_rule(spec: Sequence[str], is_chain: Callable[[str], bool]) -> iptc.Rule:
    """The ``iptc.Rule`` for a rule specification, checked as iptables checks it.

    ``is_chain`` says whether a ``-j``/``-g`` name is a chain of the table (then it is a jump);
    otherwise the name is a target extension.  Raises :class:`RuleError` naming the problem.
    """
    rule = iptc.Rule()
    module: Any = None  # the match or target the next --option belongs to
    invert = False
    words = list(spec)
    index = 0
    try:
        while index < len(words):
            word = words[index]
            index += 1
            if word == "!":
                if invert:
                    raise RuleError("'!' twice")
                invert = True
                continue
            if word in _VALUED_RULE_OPTIONS:
                if index >= len(words):
                    raise RuleError(f"{word} needs a value")
                value = words[index]
                index += 1
                if word in _RULE_ATTRIBUTES:
                    setattr(rule, _RULE_ATTRIBUTES[word], "!" + value if invert else value)
                elif invert:
                    raise RuleError(f"{word} cannot be negated")
                elif word in _MATCH_OPTIONS:
                    _final_check(module)
                    module = iptc.Match(rule, value)
                    rule.add_match(module)
                else:
                    if rule.target is not None:
                        raise RuleError("more than one target")
                    _final_check(module)
                    module = _target(rule, value, is_chain, goto=word in _GOTO_OPTIONS)
            elif word.startswith("--") and len(word) > 2:
                option = word[2:]
                owner = _owner(rule, module, option)
                if owner is not module:
                    _final_check(module)
                    module = owner
                if _takes_value(module, option):
                    if index >= len(words):
                        raise RuleError(f"{word} needs a value")
                    value = words[index]
                    index += 1
                else:
                    value = ""
                module.parse(option, "!" + value if invert else value)
            else:
                raise RuleError(f"unknown option {word!r}")
            invert = False
        if invert:
            raise RuleError("'!' at the end")
        _final_check(module)
        if rule.target is None:
            rule.target = iptc.Target(rule, "")  # no -j: the standard "continue" target
    except _IPTC_ERRORS as e:
        if isinstance(e, RuleError):
            raise
        raise RuleError(_describe(e)) from None
    return rule


def _final_check(module: Any) -> None:
    """Run an extension's own final check (x6_fcheck) once its options are all parsed.

    xtables keeps one state per extension (its flags and current buffer), shared by every
    match of that kind, so the check runs while this module is still the latest of its kind.
    ``Rule.final_check`` instead re-reads every parameter back through shlex and re-parses it
    to restore that state: a third of the restore time.
    """
    if module is not None:
        module._final_check()


def _target(rule: iptc.Rule, name: str, is_chain: Callable[[str], bool], *, goto: bool) -> Any:
    """Set and return the rule's target: a verdict, a jump to a chain, or an extension."""
    if goto and not is_chain(name):
        raise RuleError(f"-g needs a chain, {name!r} is none")
    if name in _VERDICTS or is_chain(name):
        # The standard target carrying the verdict or chain name; iptc.Target("") takes this
        # path without looking the name up in every table of the process's netns.
        target = iptc.Target(rule, "", goto=goto)
        target.standard_target = name
    elif name in iptc.Target.STANDARD_TARGETS:
        target = iptc.Target(rule, name)
    else:
        # python-iptables would open every table of the netns to look for a chain of that
        # name; the targets the kube-proxy uses are all in its STANDARD_TARGETS.
        raise RuleError(f"no chain or supported target {name!r}")
    rule.target = target
    return target


def _owner(rule: iptc.Rule, module: Any, option: str) -> Any:
    """The match or target an option belongs to: the latest module, or the implicit protocol
    match iptables loads for ``-p tcp --dport 80`` without ``-m tcp``."""
    if module is not None and _knows(module, option):
        return module
    protocol = rule.protocol
    if protocol in _IMPLICIT_PROTOCOL_MATCHES and not any(m.name == protocol for m in rule.matches):
        match = iptc.Match(rule, protocol)
        if _knows(match, option):
            rule.add_match(match)
            return match
    owner = "no match or target" if module is None else module.name
    raise RuleError(f"unknown option --{option} ({owner})")


def _option_entries(module: Any) -> Iterator[tuple[str, bool]]:
    """(name, takes a value) of each option the extension declares, from either xtables API."""
    ext = module._module  # python-iptables keeps the xtables_match/_target struct here
    entries = getattr(ext, "x6_options", None)
    if entries:
        for entry in entries:
            if not entry.name:
                return
            yield entry.name.decode(), entry.type != _XTTYPE_NONE
        return
    entries = getattr(ext, "extra_opts", None)
    if entries:
        for entry in entries:
            if not entry.name:
                return
            yield entry.name.decode(), entry.has_arg != 0


def _knows(module: Any, option: str) -> bool:
    return any(name == option for name, _ in _option_entries(module))


def _takes_value(module: Any, option: str) -> bool:
    return any(name == option and takes for name, takes in _option_entries(module))


def _describe(error: BaseException) -> str:
    """python-iptables' messages, which embed bytes reprs, made readable."""
    return str(error).replace("b'", "'")


class LibiptcIptables:
    """:class:`node.iptables.Iptables` over libiptc (python-iptables); legacy tables only.

    ``restore`` is one transaction with the semantics of ``iptables-restore --noflush``;
    ``save`` is read-only (``iptables-legacy-save -t TABLE``).  Both refuse to run outside a
    network namespace bind-mounted under ``/run/netns``.  Not thread-safe: python-iptables
    keeps one handle per table per process; the proxier calls it from one thread at a time.
    """

    backend = BACKEND

    def __init__(
        self, *, lock_path: str = XTABLES_LOCK, lock_wait: float = LOCK_WAIT_SECONDS
    ) -> None:
        self.lock_path = lock_path
        self.lock_wait = lock_wait

    def save(self, table: str) -> str:
        """The table as ``iptables-legacy-save -t TABLE`` prints it; read-only."""
        argv = [SAVE_COMMAND, "-t", table]
        _refuse_outside_named_netns(argv)
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise IptablesError(argv, done.stderr)
        return done.stdout

    def restore(self, table: str, lines: Sequence[str]) -> None:
        """Apply ``lines`` to ``table`` in one commit, as ``iptables-restore --noflush``.

        On any failure nothing is committed and :class:`IptablesError` names the failing line;
        its ``lines`` and ``failing_line`` count the ``*table`` header as line 1, as
        iptables-restore does, so errors read the same from either backend.
        """
        command = [RESTORE_COMMAND, "--noflush", "-t", table]
        _refuse_outside_named_netns(command)
        text = restore_input(table, lines)
        parsed: list[tuple[int, Command]] = []
        for number, line in enumerate(text[1:-1], start=2):
            if not _is_command(line):
                continue
            try:
                parsed.append((number, parse_line(line)))
            except RuleError as e:
                raise IptablesError(command, str(e), text, number) from None
        with self._xtables_lock(command):
            try:
                handle = iptc.Table(table, autocommit=False)
                handle.refresh()  # drop a cached handle: start from the kernel's table
            except _IPTC_ERRORS as e:
                raise IptablesError(command, f"can't open table: {_describe(e)}", text) from None
            try:
                for number, command_line in parsed:
                    try:
                        _apply(handle, command_line)
                    except _IPTC_ERRORS as e:
                        raise IptablesError(command, _describe(e), text, number) from None
                try:
                    handle.commit()
                except _IPTC_ERRORS as e:
                    raise IptablesError(
                        command, f"commit failed: {_describe(e)}", text, len(text)
                    ) from None
            finally:
                handle.close()  # autocommit is off: frees the handle, commits nothing

    @contextmanager
    def _xtables_lock(self, command: list[str]) -> Iterator[None]:
        """Hold the xtables lock every iptables command takes, waiting up to ``lock_wait``."""
        fd = os.open(self.lock_path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            deadline = time.monotonic() + self.lock_wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise IptablesError(
                            command, f"xtables lock {self.lock_path} held over {self.lock_wait}s"
                        ) from None
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)  # releases the lock


def _is_command(line: str) -> bool:
    """Lines iptables-restore skips: blank ones and comments."""
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _apply(handle: iptc.Table, command: Command) -> None:
    """One parsed line applied to the uncommitted handle, as iptables-restore applies it."""
    if command.op == ":":
        if handle.builtin_chain(command.chain):
            if command.policy != "-":
                handle.set_policy(command.chain, command.policy, (0, 0))
        elif command.policy != "-":
            raise RuleError(f"a user chain has no policy ({command.policy!r})")
        elif handle.is_chain(command.chain):
            handle.flush_entries(command.chain)  # --noflush: a declared user chain is emptied
        else:
            handle.create_chain(command.chain)
    elif command.op == "-F":
        handle.flush_entries(command.chain)
    elif command.op == "-X":
        handle.delete_chain(command.chain)
    else:
        rule = build_rule(command.spec, handle.is_chain)
        if command.op == "-A":
            handle.append_entry(command.chain, rule.rule)
        elif command.op == "-I":
            handle.insert_entry(command.chain, rule.rule, command.position)
        else:
            handle.delete_entry(command.chain, rule.rule, rule.mask)


def _refuse_outside_named_netns(command: list[str]) -> None:
    if not may_change_current_netns():
        raise IptablesError(command, f"refusing to run outside a netns under {NETNS_DIR}")
