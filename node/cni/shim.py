"""The ``kubelab-cni`` executable: a stdlib-only client of the node's CNI agent.

The runtime starts the plugin executable once per ADD/DEL/CHECK, so whatever the executable
imports is paid on every pod start and stop.  The plugin proper needs pyroute2, whose import
alone costs more than the netlink work it does (200+ ms on the lab VM); this shim hands the
call to :mod:`node.cni.agent`, which the kubelet runs in the node's netns with everything
imported, and imports next to nothing itself.  Measured with ``python -X importtime`` under
``python -I -S`` (a 10-12 ms bare start): ``json`` costs about 10-13 ms, ``socket`` and
``typing`` about 4 ms each, nearly all of it the ``re``, ``enum`` and ``functools`` they pull
in; with them a call through the agent took 41 ms.  So the shim uses their C halves directly,
``_json`` (the scanner and string encoder ``json`` itself is built on) and ``_socket``, and
imports typing names only for the type checker: about 1.5 ms of imports, 13 ms a call.

Wire format, one connection per call: the request is the ``CNI_*`` environment as one JSON
object, a newline, then stdin's bytes up to EOF (the shim shuts down its sending side); the
reply is the exit code in decimal, a newline, then the exact bytes to write to stdout.

The agent's socket is the network config's ``agentSocket``, else ``agent.sock`` in its
``dataDir`` (else in the plugin's default data directory).  When the socket is absent, refuses,
or the connection breaks before a full reply, the shim runs the plugin in-process instead
(imported lazily), which is safe because ADD and DEL are idempotent per container id: a call the
agent half-did is simply done again.
"""

from __future__ import annotations

import _json
import _socket
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, NoReturn

DEFAULT_DATA_DIR = "/var/lib/kubelab/cni"
"""The plugin's default ``dataDir``: ``node.cni.plugin.DEFAULT_DATA_DIR`` (a test checks)."""
SOCKET_NAME = "agent.sock"
ENV_PREFIX = "CNI_"


class _Decoding:
    """What ``_json.make_scanner`` reads from a ``json.JSONDecoder``: the plain defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity


# The stub types the context as a scanner; it reads only the attributes above.
_scan: Callable[[str, int], tuple[Any, int]] = _json.make_scanner(_Decoding())  # type: ignore[arg-type]


def parse_json(data: bytes) -> Any:
    """``json.loads`` of UTF-8 ``data``; ValueError when it is not one JSON value."""
    text = data.decode().strip(" \t\n\r")
    try:
        value, end = _scan(text, 0)
    except StopIteration as e:
        raise ValueError(f"no JSON value at {e.value}") from None
    if end != len(text):
        raise ValueError(f"extra data at {end}")
    return value


def agent_socket(config: bytes) -> str | None:
    """The agent's socket path named by the network config; None when the config is unusable."""
    try:
        raw = parse_json(config)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    path = raw.get("agentSocket")
    if isinstance(path, str) and path:
        return path
    data_dir = raw.get("dataDir")
    if not isinstance(data_dir, str) or not data_dir:
        data_dir = DEFAULT_DATA_DIR
    return os.path.join(data_dir, SOCKET_NAME)


def encode_request(env: Mapping[str, str], stdin: bytes) -> bytes:
    """One request: the ``CNI_*`` variables as a JSON line, then the network config."""
    quote = _json.encode_basestring_ascii
    members = (
        f"{quote(name)}: {quote(value)}"
        for name, value in env.items()
        if name.startswith(ENV_PREFIX)
    )
    return ("{" + ", ".join(members) + "}\n").encode() + stdin


def decode_reply(data: bytes) -> tuple[int, bytes] | None:
    """(exit code, stdout bytes) of a reply; None when it is not a whole reply."""
    header, newline, stdout = data.partition(b"\n")
    if not newline or not header.isdigit():
        return None
    return int(header), stdout


def ask_agent(path: str, request: bytes) -> tuple[int, bytes] | None:
    """The agent's reply to ``request``; None when the agent cannot be reached or breaks off."""
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    chunks = []
    try:
        conn.connect(path)
        conn.sendall(request)
        conn.shutdown(_socket.SHUT_WR)
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        conn.close()
    return decode_reply(b"".join(chunks))


def run_in_process(env: Mapping[str, str], stdin: bytes) -> tuple[int, bytes]:
    """The fallback: the plugin itself, in this process."""
    from node.cni.plugin import node_plugin

    reply = node_plugin().run(env, stdin)
    return reply.exit_code, reply.output()


def main() -> NoReturn:
    """Read the call, answer it through the agent or in-process, exit with its code."""
    stdin = sys.stdin.buffer.read()
    path = agent_socket(stdin)
    answer = ask_agent(path, encode_request(os.environ, stdin)) if path else None
    exit_code, stdout = answer if answer is not None else run_in_process(os.environ, stdin)
    sys.stdout.buffer.write(stdout)
    sys.stdout.flush()
    sys.exit(exit_code)


if __name__ == "__main__":
    main()
