"""``kubelab apiserver``: flags, store selection and the serve loop, which ``kubelab server``
reuses.

``--store`` picks the backend: ``sqlite`` (the default, ``<data-dir>/state.db``),
``sqlite:///path/to/file.db``, or ``etcd://host:port[,host:port...]``.  The process serves
until SIGINT or SIGTERM, then stops accepting requests, ends open watches and closes the store.
Heavy imports happen only when the command runs, so ``kubelab --help`` stays instant.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kubelab import component
from kubelab.component import duration, tune_garbage_collector

if TYPE_CHECKING:
    from controlplane.apiserver.server import Running
    from controlplane.storage.interface import Store


def default_data_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/var/lib/kubelab/server")
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "kubelab" / "server"


def _port_range(text: str) -> tuple[int, int]:
    low, sep, high = text.partition("-")
    try:
        first, last = int(low), int(high)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW-HIGH, got {text!r}") from None
    if not sep or not 0 < first <= last < 65536:
        raise argparse.ArgumentTypeError(f"expected LOW-HIGH within 1-65535, got {text!r}")
    return first, last


def _boolean(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _comma_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _authorization_modes(text: str) -> list[str]:
    from controlplane.apiserver.authz import MODES

    modes = _comma_list(text)
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(
            f"unknown authorization mode {', '.join(unknown) or repr(text)}; "
            f"choose from {', '.join(MODES)}"
        )
    if len(set(modes)) != len(modes):
        raise argparse.ArgumentTypeError(f"authorization mode listed twice in {text!r}")
    return modes


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where state and PKI live (default: /var/lib/kubelab/server as "
        "root, else under the user's data directory)",
    )
    parser.add_argument(
        "--bind-address", default="127.0.0.1", help="address to serve HTTPS on (default: 127.0.0.1)"
    )
    parser.add_argument(
        "--secure-port",
        type=int,
        default=6443,
        help="port to serve HTTPS on (default: 6443; 0 picks a free one)",
    )
    parser.add_argument(
        "--advertise-address",
        default=None,
        help="address clients and the kubernetes Service use to reach this "
        "server (default: the bind address)",
    )
    parser.add_argument(
        "--store",
        default="sqlite",
        help="sqlite, sqlite:///FILE or etcd://HOST:PORT[,HOST:PORT] (default: sqlite)",
    )
    parser.add_argument(
        "--service-cluster-ip-range",
        default="10.96.0.0/12",
        help="CIDR Services' ClusterIPs come from (default: 10.96.0.0/12)",
    )
    parser.add_argument(
        "--service-node-port-range",
        type=_port_range,
        default=(30000, 32767),
        help="ports NodePorts come from (default: 30000-32767)",
    )
    parser.add_argument(
        "--max-requests-inflight",
        type=int,
        default=400,
        help="read requests served at once; more get 429 (default: 400)",
    )
    parser.add_argument(
        "--max-mutating-requests-inflight",
        type=int,
        default=200,
        help="write requests served at once; more get 429 (default: 200)",
    )
    parser.add_argument(
        "--etcd-compaction-interval",
        type=duration,
        default=300.0,
        help="how often history is compacted; watches may resume from revisions of the last "
        "interval or two (default: 5m)",
    )
    parser.add_argument(
        "--anonymous-auth",
        type=_boolean,
        default=True,
        help="serve requests without credentials as system:anonymous; false: 401 (default: true)",
    )
    parser.add_argument(
        "--token-auth-file",
        type=Path,
        default=None,
        help='static bearer tokens, CSV lines token,user,uid,"group1,group2"',
    )
    parser.add_argument(
        "--api-audiences",
        type=_comma_list,
        default=[],
        help="audiences a service-account token must name to be accepted "
        "(default: the token issuer)",
    )
    parser.add_argument(
        "--authorization-mode",
        type=_authorization_modes,
        default=["AlwaysAllow"],
        help="comma-separated authorizers asked in order: AlwaysAllow, AlwaysDeny, Node, RBAC "
        "(default: AlwaysAllow; a cluster exposed to others wants Node,RBAC)",
    )
    parser.add_argument(
        "--tls-san",
        action="append",
        default=[],
        help="another name or address for the serving certificate (repeatable)",
    )


def sqlite_path(url: str, data_dir: Path) -> Path:
    """The database file a ``sqlite`` or ``sqlite:///FILE`` store value names."""
    return Path(url.removeprefix("sqlite://")) if url != "sqlite" else data_dir / "state.db"


async def open_store(url: str, data_dir: Path) -> Store:
    """The store a ``--store`` value names."""
    if url == "sqlite" or url.startswith("sqlite://"):
        from controlplane.storage.sqlite import SQLiteStore

        return await SQLiteStore.open(sqlite_path(url, data_dir))
    if url.startswith("etcd://"):
        from controlplane.storage.etcd import EtcdStore

        endpoints = [e for e in url.removeprefix("etcd://").split(",") if e]
        return await EtcdStore.open(endpoints)
    raise SystemExit(f"--store: unknown store {url!r} (sqlite, sqlite:///FILE or etcd://...)")


@contextlib.asynccontextmanager
async def serving(args: argparse.Namespace, data_dir: Path) -> AsyncIterator[Running]:
    """The API server the flags describe, serving until the block ends."""
    from controlplane.apiserver.server import APIServer, ServerConfig, serve

    config = ServerConfig(
        data_dir=data_dir,
        bind_address=args.bind_address,
        secure_port=args.secure_port,
        advertise_address=args.advertise_address,
        service_cluster_ip_range=args.service_cluster_ip_range,
        service_node_port_range=args.service_node_port_range,
        extra_sans=args.tls_san,
        compaction_interval=args.etcd_compaction_interval,
        max_requests_inflight=args.max_requests_inflight,
        max_mutating_requests_inflight=args.max_mutating_requests_inflight,
        anonymous_auth=args.anonymous_auth,
        token_auth_file=args.token_auth_file,
        api_audiences=args.api_audiences,
        authorization_modes=args.authorization_mode,
    )
    store = await open_store(args.store, data_dir)
    try:
        running = await serve(APIServer(store, config))
        tune_garbage_collector()
        logging.getLogger("kubelab.apiserver").info(
            "serving on https://%s:%d; admin kubeconfig: %s",
            config.bind_address,
            running.port,
            data_dir / "admin.kubeconfig",
        )
        print(
            f"kubelab apiserver: serving on https://{config.bind_address}:{running.port}",
            flush=True,
        )
        try:
            yield running
        finally:
            await running.stop()
    finally:
        await store.close()


def prepare_data_dir(args: argparse.Namespace) -> Path:
    data_dir: Path = args.data_dir or default_data_dir()
    data_dir.mkdir(parents=True, exist_ok=True)
    if args.store.startswith("sqlite"):
        sqlite_path(args.store, data_dir).parent.mkdir(parents=True, exist_ok=True)
    return data_dir


async def serve_until_stopped(args: argparse.Namespace, stop: asyncio.Event) -> int:
    async with serving(args, prepare_data_dir(args)):
        await stop.wait()
    return 0


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)
    return lambda args: component.run(lambda stop: serve_until_stopped(args, stop))
