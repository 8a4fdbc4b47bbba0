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
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kube import component
from kube.component import boolean, duration, tune_garbage_collector

if TYPE_CHECKING:
    from controlplane.apiserver.endpoints.audit import Policy
    from controlplane.apiserver.server import Running
    from controlplane.apiserver.storage.encryption import EncryptionConfig
    from controlplane.storage.etcd import EtcdTLS
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


def _comma_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _authorization_modes(text: str) -> list[str]:
    from controlplane.apiserver.auth.authz import MODES

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


def _admission_plugins(args: argparse.Namespace) -> list[str]:
    from controlplane.apiserver.auth.admission import enabled

    try:
        return enabled(args.enable_admission_plugins, args.disable_admission_plugins)
    except ValueError as error:
        raise SystemExit(f"kubelab apiserver: {error}") from None


def _encryption_config(text: str) -> EncryptionConfig:
    from controlplane.apiserver.storage.encryption import ConfigError, load

    try:
        return load(Path(text))
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _audit_policy(text: str) -> Policy:
    from controlplane.apiserver.endpoints.audit import PolicyError, load_policy

    try:
        return load_policy(Path(text))
    except PolicyError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_flags(
    parser: argparse.ArgumentParser, *, authorization_mode: Sequence[str] = ("AlwaysAllow",)
) -> None:
    """The API server's flags; ``authorization_mode`` is the default of
    ``--authorization-mode`` (upstream's AlwaysAllow for the API server alone, Node,RBAC for
    ``kubelab server`` as for k3s and kubeadm clusters)."""
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
        "--etcd-cafile", type=Path, default=None, help="talk TLS to etcd, trusting this CA"
    )
    parser.add_argument(
        "--etcd-certfile", type=Path, default=None, help="client certificate for etcd (PEM)"
    )
    parser.add_argument("--etcd-keyfile", type=Path, default=None, help="its key (PEM)")
    parser.add_argument(
        "--anonymous-auth",
        type=boolean,
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
        default=list(authorization_mode),
        help="comma-separated authorizers asked in order: AlwaysAllow, AlwaysDeny, Node, RBAC "
        f"(default: {','.join(authorization_mode)}; AlwaysAllow lets every authenticated user "
        "do anything)",
    )
    parser.add_argument(
        "--enable-admission-plugins",
        type=_comma_list,
        default=[],
        help="admission plugins to run besides the default ones (NamespaceLifecycle, "
        "LimitRanger, ServiceAccount, Priority, DefaultTolerationSeconds, ResourceQuota); "
        "also NodeRestriction",
    )
    parser.add_argument(
        "--disable-admission-plugins",
        type=_comma_list,
        default=[],
        help="default admission plugins not to run",
    )
    parser.add_argument(
        "--encryption-provider-config",
        type=_encryption_config,
        default=None,
        metavar="FILE",
        help="an EncryptionConfiguration: resources stored encrypted (aescbc, aesgcm, "
        "secretbox) and the keys, the first of which encrypts (default: no encryption)",
    )
    parser.add_argument(
        "--audit-policy-file",
        type=_audit_policy,
        default=None,
        metavar="FILE",
        help="an audit.k8s.io/v1 Policy: which requests are logged and at what level",
    )
    parser.add_argument(
        "--audit-log-path",
        default="",
        help="where audit events go as JSON lines ('-': standard output; default: nowhere)",
    )
    parser.add_argument(
        "--audit-log-maxsize",
        type=int,
        default=0,
        help="megabytes the audit log may reach before it is rotated (default: 0, never)",
    )
    parser.add_argument(
        "--audit-log-maxbackup",
        type=int,
        default=0,
        help="rotated audit logs to keep (default: 0, every one)",
    )
    parser.add_argument(
        "--kubelet-certificate-authority",
        type=Path,
        default=None,
        help="the CA kubelets' serving certificates are verified with when the server "
        "connects to them for logs, exec and port-forward (default: none, not verified)",
    )
    parser.add_argument(
        "--proxy-client-cert-file",
        type=Path,
        default=None,
        help="the client certificate presented to extension API servers when proxying "
        "(default: the front-proxy client certificate made under <data-dir>/pki)",
    )
    parser.add_argument("--proxy-client-key-file", type=Path, default=None, help="its key (PEM)")
    parser.add_argument(
        "--requestheader-client-ca-file",
        type=Path,
        default=None,
        help="the CA whose client certificates may name the user in request headers "
        "(default: the front-proxy CA made under <data-dir>/pki)",
    )
    parser.add_argument(
        "--requestheader-allowed-names",
        type=_comma_list,
        default=[],
        help="common names a front-proxy certificate may carry (default: any; with the "
        "front-proxy CA kubelab makes: front-proxy-client)",
    )
    for name, default in (
        ("username-headers", "X-Remote-User"),
        ("group-headers", "X-Remote-Group"),
        ("extra-headers-prefix", "X-Remote-Extra-"),
    ):
        parser.add_argument(
            f"--requestheader-{name}",
            type=_comma_list,
            default=[default],
            help=f"request header {name.replace('-', ' ')} to read (default: {default})",
        )
    parser.add_argument(
        "--enable-aggregator-routing",
        type=boolean,
        default=False,
        help="proxy to an extension API server's endpoint addresses instead of its Service's "
        "cluster IP (default: false)",
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


async def open_store(url: str, data_dir: Path, args: argparse.Namespace | None = None) -> Store:
    """The store a ``--store`` value names (TLS to etcd from ``args``' ``--etcd-*file``)."""
    if url == "sqlite" or url.startswith("sqlite://"):
        from controlplane.storage.sqlite import SQLiteStore

        return await SQLiteStore.open(sqlite_path(url, data_dir))
    if url.startswith("etcd://"):
        from controlplane.storage.etcd import EtcdStore

        endpoints = [e for e in url.removeprefix("etcd://").split(",") if e]
        return await EtcdStore.open(endpoints, tls=_etcd_tls(args))
    raise SystemExit(f"--store: unknown store {url!r} (sqlite, sqlite:///FILE or etcd://...)")


def _etcd_tls(args: argparse.Namespace | None) -> EtcdTLS | None:
    from controlplane.storage.etcd import EtcdTLS

    if args is None or args.etcd_cafile is None:
        if args is not None and (args.etcd_certfile or args.etcd_keyfile):
            raise SystemExit("--etcd-certfile/--etcd-keyfile need --etcd-cafile")
        return None
    if (args.etcd_certfile is None) != (args.etcd_keyfile is None):
        raise SystemExit("--etcd-certfile and --etcd-keyfile go together")
    return EtcdTLS(args.etcd_cafile, args.etcd_certfile, args.etcd_keyfile)


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
        kubelet_certificate_authority=args.kubelet_certificate_authority,
        admission_plugins=_admission_plugins(args),
        encryption=args.encryption_provider_config,
        audit_policy=args.audit_policy_file,
        audit_log_path=args.audit_log_path,
        audit_log_maxsize=args.audit_log_maxsize,
        audit_log_maxbackup=args.audit_log_maxbackup,
        proxy_client_cert_file=args.proxy_client_cert_file,
        proxy_client_key_file=args.proxy_client_key_file,
        requestheader_client_ca_file=args.requestheader_client_ca_file,
        requestheader_allowed_names=args.requestheader_allowed_names,
        requestheader_username_headers=args.requestheader_username_headers,
        requestheader_group_headers=args.requestheader_group_headers,
        requestheader_extra_headers_prefix=args.requestheader_extra_headers_prefix,
        enable_aggregator_routing=args.enable_aggregator_routing,
    )
    if "AlwaysAllow" in config.authorization_modes:
        logging.getLogger("kubelab.apiserver").warning(
            "--authorization-mode %s: every authenticated user may do anything, every "
            "service account and node included; --authorization-mode Node,RBAC grants each "
            "only its roles",
            ",".join(config.authorization_modes),
        )
    store = await open_store(args.store, data_dir, args)
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
