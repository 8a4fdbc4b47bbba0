"""``kubelab token create``: a bootstrap token for joining a node, as ``kubeadm token create``.

A bootstrap token ``<id>.<secret>`` (6 and 16 characters of ``[a-z0-9]``) lives in the
``kube-system/bootstrap-token-<id>`` Secret of type ``bootstrap.kubernetes.io/token``
(upstream's format, read by the API server's bootstrap-token authenticator).  Marked
``usage-bootstrap-authentication``, it authenticates as ``system:bootstrap:<id>`` in the groups
``system:bootstrappers`` and ``system:bootstrappers:kubelab:default-node-token``, which the
bootstrap policy lets create CertificateSigningRequests and have node client requests approved:
all a kubelet needs to obtain its own ``system:node:<name>`` certificate (TLS bootstrapping).
The token expires after ``--ttl`` (24 h by default; 0 never).  The tokencleaner and
bootstrapsigner controllers read the same Secrets through ``is_token_secret``, ``token_data``
and ``seconds_left``, so the format is known in one place.

``--bootstrap-kubeconfig PATH`` also writes the kubeconfig a kubelet is started with
(``kubelab kubelet --bootstrap-kubeconfig PATH``): the server and CA of ``--kubeconfig`` and the
token, nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import secrets
import string
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kubelab import component

if TYPE_CHECKING:
    from kubelab.api.kinds.core_v1.cluster import Secret
    from kubelab.client.kubeconfig import ClientConfig
    from kubelab.client.rest import Client

BOOTSTRAP_TOKEN_GROUP = "system:bootstrappers:kubelab:default-node-token"
"""The extra group of the tokens this makes (kubeadm's: ``...:kubeadm:default-node-token``);
the bootstrap policy binds it to CSR creation and node client auto-approval."""
SECRET_TYPE = "bootstrap.kubernetes.io/token"
NAMESPACE = "kube-system"
ALPHABET = string.ascii_lowercase + string.digits


SECRET_PREFIX = "bootstrap-token-"


def is_token_secret(obj: object) -> bool:
    """Whether ``obj`` is a bootstrap-token Secret where tokens live (kube-system)."""
    from kubelab.api.kinds.core_v1.cluster import Secret

    return (
        isinstance(obj, Secret) and obj.type == SECRET_TYPE and obj.metadata.namespace == NAMESPACE
    )


def token_data(secret: Secret) -> dict[str, str]:
    """A bootstrap-token Secret's data as text (values that are not UTF-8 are mangled, never
    raised on: a token with them is refused by what reads it)."""
    return {key: value.decode(errors="replace") for key, value in secret.decoded_data().items()}


def seconds_left(data: Mapping[str, str], now: datetime.datetime) -> float | None:
    """Seconds until the token of ``data`` (``token_data``) expires: ``None`` if it never does,
    0 if it has, and 0 too for an ``expiration`` that is not RFC 3339 with a zone (upstream
    treats such a token as expired)."""
    text = data.get("expiration")
    if not text:
        return None
    try:
        expires = datetime.datetime.fromisoformat(text)
    except ValueError:
        return 0.0
    if expires.tzinfo is None:
        return 0.0
    return max((expires - now).total_seconds(), 0.0)


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
    from kubelab.api.kinds.core_v1.cluster import Secret
    from kubelab.api.meta_v1 import ObjectMeta

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
    client: Client, ttl: float, description: str = "", groups: Sequence[str] = ()
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
    from kubelab.client import kubeconfig

    if config.ca_pem is None:
        raise SystemExit("kubelab token: the kubeconfig names no certificate authority")
    return kubeconfig.render(config.server, config.ca_pem, "tls-bootstrap-token-user", token=token)


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
    component.add_client_flags(create_parser, qps=5.0, burst=10)
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


async def run_create(args: argparse.Namespace) -> int:
    from kubelab.client import kubeconfig

    async with component.client_from_flags(args, "token") as client:
        token = await create(client, args.ttl, args.description, args.groups)
        if args.bootstrap_kubeconfig is not None:
            kubeconfig.write(args.bootstrap_kubeconfig, bootstrap_kubeconfig(client.config, token))
    print(token, flush=True)
    return 0


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)
    return lambda args: asyncio.run(run_create(args))
