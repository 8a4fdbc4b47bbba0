"""``kubelab token create|list|delete``: bootstrap tokens for joining nodes, as ``kubeadm token``.

A bootstrap token ``<id>.<secret>`` lives in the ``kube-system/bootstrap-token-<id>`` Secret of
type ``bootstrap.kubernetes.io/token`` (upstream's format, ``kube.api.bootstraptoken``, which
the API server's bootstrap-token authenticator and the tokencleaner and bootstrapsigner
controllers read too).  Marked ``usage-bootstrap-authentication``, a token made here
authenticates as ``system:bootstrap:<id>`` in the groups ``system:bootstrappers`` and
``system:bootstrappers:kubelab:default-node-token``, which the bootstrap policy lets create
CertificateSigningRequests and have node client requests approved: all a kubelet needs to obtain
its own ``system:node:<name>`` certificate (TLS bootstrapping).  The token expires after
``--ttl`` (24 h by default; 0 never).

``--bootstrap-kubeconfig PATH`` also writes the kubeconfig a kubelet is started with
(``kubelab kubelet --bootstrap-kubeconfig PATH``): the server and CA of ``--kubeconfig`` and the
token, nothing else.

``list`` prints kubeadm's table (TOKEN TTL EXPIRES USAGES DESCRIPTION EXTRA GROUPS; nothing
at all when there are no tokens) and reports, on stderr, each token Secret it cannot read, in
kubeadm's words, going on with the others.  ``delete`` takes token ids or whole tokens and
deletes them in order, saying so for each; the first argument that is neither, or the first
refused deletion, ends it with kubeadm's message and status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import secrets
import string
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kube import component
from kube.api.bootstraptoken import (
    NAMESPACE,
    SECRET_PREFIX,
    SECRET_TYPE,
    TOKEN,
    TOKEN_ID,
    expiration,
    extra_groups,
    token_data,
    usages,
)
from kube.api.printing import rfc3339, short_human_duration
from kube.table import aligned

if TYPE_CHECKING:
    from kube.api.kinds.core_v1.cluster import Secret
    from kube.client.interface import ApiClient
    from kube.client.kubeconfig import ClientConfig

BOOTSTRAP_TOKEN_GROUP = "system:bootstrappers:kubelab:default-node-token"
"""The extra group of the tokens this makes (kubeadm's: ``...:kubeadm:default-node-token``);
the bootstrap policy binds it to CSR creation and node client auto-approval."""
ALPHABET = string.ascii_lowercase + string.digits


def generate() -> tuple[str, str]:
    """A new (token id, token secret) pair from a cryptographic random source."""
    return _random(6), _random(16)


def _random(length: int) -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(length))


def token_secret(
    token_id: str,
    secret: str,
    *,
    expires: datetime.datetime | None,
    description: str = "",
    groups: Sequence[str] = (BOOTSTRAP_TOKEN_GROUP,),
) -> Secret:
    """The Secret that makes ``<token_id>.<secret>`` a bootstrap token for authentication."""
    from kube.api.kinds.core_v1.cluster import Secret
    from kube.api.meta_v1 import ObjectMeta

    data = {
        "token-id": token_id,
        "token-secret": secret,
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
        "auth-extra-groups": ",".join(groups),
    }
    if description:
        data["description"] = description
    if expires is not None:
        data["expiration"] = expires.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Secret(
        metadata=ObjectMeta(name=f"{SECRET_PREFIX}{token_id}", namespace=NAMESPACE),
        type=SECRET_TYPE,
        string_data=data,
    )


async def create(
    client: ApiClient, ttl: float, description: str = "", groups: Sequence[str] = ()
) -> str:
    """Create a bootstrap token valid for ``ttl`` seconds (0: forever); ``<id>.<secret>``."""
    token_id, secret = generate()
    expires = (
        datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=ttl) if ttl > 0 else None
    )
    await client.create(
        token_secret(
            token_id,
            secret,
            expires=expires,
            description=description,
            groups=groups or (BOOTSTRAP_TOKEN_GROUP,),
        )
    )
    return f"{token_id}.{secret}"


def bootstrap_kubeconfig(config: ClientConfig, token: str) -> str:
    """A kubeconfig for ``config``'s server and CA that authenticates with ``token``."""
    from kube.client import kubeconfig

    if config.ca_pem is None:
        raise SystemExit("kubelab token: the kubeconfig names no certificate authority")
    return kubeconfig.render(config.server, config.ca_pem, "tls-bootstrap-token-user", token=token)


COLUMNS = ("TOKEN", "TTL", "EXPIRES", "USAGES", "DESCRIPTION", "EXTRA GROUPS")
"""``kubelab token list``'s header, kubeadm's."""


class TokenError(Exception):
    """A token that cannot be listed or deleted; the message is kubeadm's."""


def token_row(secret: Secret, now: datetime.datetime) -> tuple[str, ...]:
    """The ``list`` row of a bootstrap-token Secret (``COLUMNS``); ``TokenError`` if it holds
    no readable token."""
    name = secret.metadata.name or ""
    data = token_data(secret)
    token_id, token_secret = data.get("token-id", ""), data.get("token-secret", "")
    if not token_id:
        raise TokenError(f"bootstrap Token Secret has no token-id data: {name}")
    if name != SECRET_PREFIX + token_id:
        raise TokenError(
            f"bootstrap token name is not of the form '{SECRET_PREFIX}(token-id)'. "
            f'Actual: "{name}". Expected: "{SECRET_PREFIX}{token_id}"'
        )
    if not token_secret:
        raise TokenError(f"bootstrap Token Secret has no token-secret data: {name}")
    token = f"{token_id}.{token_secret}"
    if TOKEN.match(token) is None:
        raise TokenError(
            "bootstrap Token Secret is invalid and couldn't be parsed: "
            f'the bootstrap token "{token}" was not of the form "{TOKEN.pattern}"'
        )
    try:
        expires = expiration(data)
    except ValueError as error:
        raise TokenError(
            f'can\'t parse expiration time of bootstrap token "{name}": {error}'
        ) from None
    return (
        token,
        "<forever>" if expires is None else short_human_duration(expires - now),
        "<never>" if expires is None else rfc3339(expires),
        ",".join(usages(data)) or "<none>",
        data.get("description") or "<none>",
        ",".join(extra_groups(data)) or "<none>",
    )


async def token_rows(
    client: ApiClient, now: datetime.datetime
) -> tuple[list[tuple[str, ...]], list[TokenError]]:
    """The ``list`` rows of every bootstrap token, and why each Secret without a readable
    token was left out."""
    from kube.api.kinds.core_v1.cluster import Secret
    from kube.client.errors import ApiError

    try:
        found = await client.list(Secret, NAMESPACE, field_selector=f"type={SECRET_TYPE}")
    except ApiError as error:
        raise TokenError(f"failed to list bootstrap tokens: {error.message}") from None
    rows: list[tuple[str, ...]] = []
    unreadable: list[TokenError] = []
    for secret in found.items:
        try:
            rows.append(token_row(secret, now))
        except TokenError as error:
            unreadable.append(error)
    return rows, unreadable


def _token_id(text: str) -> str:
    """The token id ``text`` names, itself a token id or a whole token; ``TokenError`` if it is
    neither."""
    if TOKEN_ID.match(text):
        return text
    token = TOKEN.match(text)
    if token is None:
        raise TokenError(
            f'given token didn\'t match pattern "{TOKEN.pattern}" or "{TOKEN_ID.pattern}"'
        )
    return token.group(1)


async def delete(client: ApiClient, token_id: str) -> None:
    """Delete the bootstrap token ``token_id``; ``TokenError`` if the API server refuses."""
    from kube.api.kinds.core_v1.cluster import Secret
    from kube.client.errors import ApiError

    try:
        await client.delete(Secret, SECRET_PREFIX + token_id, NAMESPACE)
    except ApiError as error:
        raise TokenError(
            f'failed to delete bootstrap token "{token_id}": {error.message}'
        ) from None


def _groups(text: str) -> list[str]:
    groups = [g.strip() for g in text.split(",") if g.strip()]
    for group in groups:
        if not group.startswith("system:bootstrappers:"):
            raise argparse.ArgumentTypeError(
                f'group {group!r} must start with "system:bootstrappers:"'
            )
    return groups


def add_flags(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="token_command", metavar="COMMAND", required=True)
    create_parser = commands.add_parser(
        "create",
        help="create a bootstrap token and print it",
        description="Create a bootstrap token (kube-system/bootstrap-token-<id>) and print it.",
    )
    create_parser.add_argument(
        "--ttl",
        type=component.duration,
        default=24 * 3600.0,
        help="how long the token is valid (default: 24h; 0: forever)",
    )
    create_parser.add_argument("--description", default="", help="what the token is for")
    create_parser.add_argument(
        "--groups",
        type=_groups,
        default=[],
        help=f"groups the token authenticates in (default: {BOOTSTRAP_TOKEN_GROUP})",
    )
    create_parser.add_argument(
        "--bootstrap-kubeconfig",
        type=Path,
        help="also write a kubelet's bootstrap kubeconfig with the token here",
    )
    list_parser = commands.add_parser(
        "list",
        help="list the bootstrap tokens",
        description="List the bootstrap tokens (kube-system/bootstrap-token-*).",
    )
    delete_parser = commands.add_parser(
        "delete",
        help="delete bootstrap tokens",
        description="Delete bootstrap tokens, each given by its id ([a-z0-9]{6}) or in full "
        "([a-z0-9]{6}.[a-z0-9]{16}).",
    )
    delete_parser.add_argument("tokens", nargs="*", metavar="TOKEN", help="token id or token")
    for sub in (create_parser, list_parser, delete_parser):
        component.add_client_flags(sub, qps=5.0, burst=10)


async def run_create(args: argparse.Namespace) -> int:
    from kube.client import kubeconfig

    async with component.client_from_flags(args, "token") as client:
        token = await create(client, args.ttl, args.description, args.groups)
        if args.bootstrap_kubeconfig is not None:
            kubeconfig.write(args.bootstrap_kubeconfig, bootstrap_kubeconfig(client.config, token))
    print(token, flush=True)
    return 0


async def run_list(args: argparse.Namespace) -> int:
    async with component.client_from_flags(args, "token") as client:
        rows, unreadable = await token_rows(client, datetime.datetime.now(datetime.UTC))
    for error in unreadable:
        print(error, file=sys.stderr)
    if rows:
        print("\n".join(aligned([COLUMNS, *rows], gap=3)), flush=True)
    return 0


async def run_delete(args: argparse.Namespace) -> int:
    if not args.tokens:
        raise TokenError(
            "missing argument; 'token delete' is missing token of form "
            f'"{TOKEN.pattern}" or "{TOKEN_ID.pattern}"'
        )
    async with component.client_from_flags(args, "token") as client:
        for text in args.tokens:
            token_id = _token_id(text)
            await delete(client, token_id)
            print(f'bootstrap token "{token_id}" deleted', flush=True)
    return 0


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)

    def run(args: argparse.Namespace) -> int:
        command = {"create": run_create, "list": run_list, "delete": run_delete}
        try:
            return asyncio.run(command[args.token_command](args))
        except TokenError as error:
            print(f"kubelab token: {error}", file=sys.stderr)
            return 1

    return run
