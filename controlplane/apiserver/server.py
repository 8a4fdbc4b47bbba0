"""The API server process: HTTPS, the request pipeline, and the non-resource endpoints.

Every request passes the same stages, in upstream's order: limits (body size, in-flight
requests) → authentication → authorization → (for writes, inside the registry) admission →
validation → storage.  Authentication is a chain (``authn``): client certificates (CN = user,
O = groups), bearer tokens (static file, service-account JWTs, bootstrap tokens), else
``system:anonymous`` unless ``--anonymous-auth=false``; then impersonation headers.
Authorization is the union of ``--authorization-mode`` modes (``authz``: AlwaysAllow, the
compatible default, or Node and RBAC).  RBAC, the Node authorizer and the token checks read
watch caches the server keeps of the objects they need, never storage per request; writes of
roles and bindings pass upstream's escalation check (``escalation``); the bootstrap RBAC
policy (``bootstrappolicy``) is reconciled at every start (``reconcile``).

On first start ``serve`` has the server's PKI created under ``<data-dir>/pki`` (a cluster CA,
a serving certificate naming every address clients use and its client certificate towards
kubelets: ``certs.serving``; a client certificate per component: ``certs.identities``) and
``<data-dir>/admin.kubeconfig`` with one kubeconfig per component written beside it.  A request
for a group/version an extension API server answers (a non-local APIService) is proxied to it
once authorized (``aggregator``).  This module wires the pieces; the subpackages hold them
(``endpoints``, ``registry``, ``auth``, ``crd``, ``aggregator``, ``storage``, ``system``,
``certs``).
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import logging
import platform
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from controlplane.apiserver import auth, errors
from controlplane.apiserver.aggregator import autoregister, frontproxy
from controlplane.apiserver.aggregator.available import AvailableConditionController
from controlplane.apiserver.aggregator.proxy import Aggregator
from controlplane.apiserver.auth import admission as builtin_admission
from controlplane.apiserver.auth import (
    authn,
    authz,
    bootstrappolicy,
    escalation,
    reconcile,
    reviews,
)
from controlplane.apiserver.auth.admission import certificates
from controlplane.apiserver.auth.nodeauthz import NodeAuthorizer
from controlplane.apiserver.auth.rbac import RBACAuthorizer
from controlplane.apiserver.auth.tokens import TokenIssuer
from controlplane.apiserver.certs import identities, serving
from controlplane.apiserver.crd import customresources
from controlplane.apiserver.endpoints import apply, audit, discovery, negotiation
from controlplane.apiserver.endpoints.handlers import (
    Request,
    ResourceHandler,
    json_response,
    respond,
    status_response,
)
from controlplane.apiserver.endpoints.openapi import OpenAPIDocuments
from controlplane.apiserver.endpoints.requestinfo import RequestInfo, parse
from controlplane.apiserver.flowcontrol.controller import (
    Classification,
    FlowControl,
    Seat,
    WatchTracker,
    Width,
    list_seats,
    long_running,
    mutating_width,
)
from controlplane.apiserver.registry.componentstatus import HTTPProbe, StoreProbe
from controlplane.apiserver.registry.proxy import KubeletConnector
from controlplane.apiserver.registry.rest import Backends
from controlplane.apiserver.registry.store import Admission, RequestContext, ResourceStore
from controlplane.apiserver.storage.encryption import EncryptedStore, EncryptionConfig
from controlplane.apiserver.storage.watchcache import WatchCache
from controlplane.apiserver.system import bootstrap, clusterinfo, clusterip
from controlplane.apiserver.system.apiserverleases import ApiServerLeases
from controlplane.controllers import command as controller_manager_command
from controlplane.scheduler import command as scheduler_command
from controlplane.storage.interface import Store, Unavailable
from controlplane.storage.metered import MeteredStore
from kube import KUBERNETES_VERSION, __version__
from kube.api.kinds.flowcontrol_v1 import GROUP as FLOWCONTROL_GROUP
from kube.api.kinds.networking_v1 import GROUP as NETWORKING_GROUP
from kube.api.kinds.rbac_v1 import GROUP as RBAC_GROUP
from kube.api.scheme import SCHEME, KindInfo
from kube.clock import Clock, RealClock
from kube.metrics import CONTENT_TYPE, Registry

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024
APISERVICES = ("apiregistration.k8s.io", "v1", "apiservices")
USER = web.RequestKey("user", auth.User)
FLOW = web.RequestKey("flow", Classification)
RELEASE_SEAT = web.RequestKey("release_seat", Seat)
DEBUG_FLOWCONTROL = "/debug/api_priority_and_fairness/"
"""Where the authentication stage leaves the caller on the request."""


DEFAULT_COMPONENT_HEALTH = {
    "scheduler": f"http://127.0.0.1:{scheduler_command.DEFAULT_PORT}/healthz",
    "controller-manager": f"http://127.0.0.1:{controller_manager_command.DEFAULT_PORT}/healthz",
}
"""Where the components ComponentStatus reports serve (upstream: their default secure ports
on 127.0.0.1, which kubelab's serve over plain HTTP)."""


@dataclass
class ServerConfig:
    """What ``kubelab apiserver`` is started with."""

    data_dir: Path
    bind_address: str = "127.0.0.1"
    secure_port: int = 6443
    advertise_address: str | None = None
    service_cluster_ip_range: str = "10.96.0.0/12"
    service_node_port_range: tuple[int, int] = (30000, 32767)
    extra_sans: Sequence[str] = ()
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    bookmark_interval: float = 60.0
    compaction_interval: float = 300.0
    service_ip_repair_interval: float = 10.0
    """How often the default ServiceCIDR is checked and ClusterIPs repaired (``clusterip``)."""
    anonymous_auth: bool = True
    token_auth_file: Path | None = None
    api_audiences: Sequence[str] = ()
    """Audiences a token must name to reach this server (default: the token issuer)."""
    authorization_modes: Sequence[str] = ("AlwaysAllow",)
    kubelet_certificate_authority: Path | None = None
    """The CA kubelets' serving certificates must chain to (None: not checked, as upstream)."""
    admission_plugins: Sequence[str] = tuple(builtin_admission.DEFAULT_PLUGINS)
    """The admission plugins to run (``builtin_admission.enabled`` of the flags)."""
    encryption: EncryptionConfig | None = None
    """``--encryption-provider-config``: how values are encrypted at rest (None: as they are)."""
    audit_policy: audit.Policy | None = None
    """``--audit-policy-file``; events are written only with it and ``audit_log_path``."""
    audit_log_path: str = ""
    audit_log_maxsize: int = 0
    """Megabytes the audit log may reach before it is rotated (0: never)."""
    audit_log_maxbackup: int = 0
    hostname: str = ""
    """What the identity lease's name is derived from (default: the machine's host name)."""
    proxy_client_cert_file: Path | None = None
    """The client certificate presented to extension API servers (with ``proxy_client_key_file``;
    default: the front-proxy client certificate made under ``<data-dir>/pki``, as kubeadm's)."""
    proxy_client_key_file: Path | None = None
    requestheader_client_ca_file: Path | None = None
    """The CA front-proxy client certificates chain to (default: the front-proxy CA made under
    ``<data-dir>/pki``, with ``requestheader_allowed_names`` ``front-proxy-client``)."""
    requestheader_allowed_names: Sequence[str] = ()
    requestheader_username_headers: Sequence[str] = ("X-Remote-User",)
    requestheader_group_headers: Sequence[str] = ("X-Remote-Group",)
    requestheader_extra_headers_prefix: Sequence[str] = ("X-Remote-Extra-",)
    enable_aggregator_routing: bool = False
    """Proxy to an extension server's endpoint addresses rather than its Service's cluster IP."""
    apiservice_check_interval: float = 10.0
    """Seconds between two availability checks of every APIService."""
    component_health: Mapping[str, str] = field(
        default_factory=lambda: dict(DEFAULT_COMPONENT_HEALTH)
    )
    """The /healthz URL of each component ComponentStatus reports (besides the store)."""

    @property
    def advertise(self) -> str:
        if self.advertise_address:
            return self.advertise_address
        if self.bind_address not in ("0.0.0.0", "::"):
            return self.bind_address
        return "127.0.0.1"

    @property
    def kubernetes_service_ip(self) -> str:
        return str(ipaddress.ip_network(self.service_cluster_ip_range)[1])


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


class APIServer:
    """The registry of kinds over one store, served over HTTPS."""

    def __init__(
        self,
        store: Store,
        config: ServerConfig,
        clock: Clock | None = None,
        authenticators: Sequence[auth.Authenticator] = (auth.certificate_authenticator,),
        authorizer: auth.Authorizer | None = None,
        admission: Sequence[Admission] = (),
    ) -> None:
        self.metrics = Registry()
        storage_latency = self.metrics.histogram(
            "etcd_request_duration_seconds",
            "Storage request latency in seconds for each operation (whichever backend).",
            ["operation"],
        )
        self.store: Store = MeteredStore(store, lambda op, s: storage_latency.observe(s, op))
        if config.encryption is not None:
            self.store = EncryptedStore(self.store, config.encryption)
        self.auditor = audit.Auditor(
            config.audit_policy,
            audit.open_log(
                config.audit_log_path, config.audit_log_maxsize, config.audit_log_maxbackup
            )
            if config.audit_policy is not None
            else None,
        )
        self.config = config
        self.clock = clock or RealClock()
        self.authenticators = list(authenticators)
        self.tokens: authn.TokenChain | None = None
        self.stores: dict[tuple[str, str, str], ResourceStore] = {}
        self.leases = ApiServerLeases(
            self, config.advertise, self.store, self.clock, config.hostname or socket.gethostname()
        )
        for info in SCHEME.served():
            key = (info.group, info.version, info.plural)
            self.stores[key] = ResourceStore(
                info, self.store, self.clock, track_fields=apply.record_update
            )
        self.caches = {
            key: WatchCache(self.stores[key])
            for key in (
                ("", "v1", "serviceaccounts"),
                ("", "v1", "pods"),
                ("", "v1", "secrets"),
                ("", "v1", "persistentvolumeclaims"),
                (RBAC_GROUP, "v1", "roles"),
                (RBAC_GROUP, "v1", "clusterroles"),
                (RBAC_GROUP, "v1", "rolebindings"),
                (RBAC_GROUP, "v1", "clusterrolebindings"),
                (NETWORKING_GROUP, "v1", "ipaddresses"),
            )
        }
        self.allocation = bootstrap.ServiceAllocation(
            clusterip.ClusterIPAllocator(
                self.stores[(NETWORKING_GROUP, "v1", "servicecidrs")],
                self.stores[(NETWORKING_GROUP, "v1", "ipaddresses")],
                self.caches[(NETWORKING_GROUP, "v1", "ipaddresses")],
            ),
            config.service_node_port_range,
        )
        self.stores[("", "v1", "services")].hooks.append(self.allocation)
        self._clusterips: asyncio.Task[None] | None = None
        """What authentication, authorization and admission read instead of the store."""
        self.authorization = authz.Union([self._mode(m) for m in config.authorization_modes])
        self.authorizer: auth.Authorizer = authorizer or self.authorization
        admit = builtin_admission.chain(
            builtin_admission.plugins(
                config.admission_plugins, self._cache, self.stores, self.authorizer
            ),
            [
                escalation.prevent_escalation(
                    self.authorizer,
                    self.authorization.rules_for,
                    self.caches[(RBAC_GROUP, "v1", "roles")],
                    self.caches[(RBAC_GROUP, "v1", "clusterroles")],
                ),
                certificates.certificate_requests(self.authorizer),
                *admission,
            ],
        )
        for resource_store in self.stores.values():
            resource_store.admission = [admit]
        self.crds = customresources.Controller(self, self.clock)
        self.aggregator = Aggregator(
            self.stores, self._cache(APISERVICES), None, config.enable_aggregator_routing
        )
        """Routes extension servers' group/versions; its front-proxy identity set by ``serve``."""
        self._autoregistering: asyncio.Task[None] | None = None
        self.backends = Backends(
            self,
            components={
                **{name: HTTPProbe(url) for name, url in config.component_health.items()},
                "etcd-0": StoreProbe(self._read_store),
            },
        )
        """The kubelet client and token issuer subresources use, set by ``serve``."""
        self.handler = ResourceHandler(
            self.lookup,
            self.clock,
            reviews.reviewers(self.authorizer, self.authorization.rules_for, self._token_reviewer),
            self.backends,
            config.bookmark_interval,
        )
        self.handler.caches = self.read_cache
        self._requests = self.metrics.counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out by verb, resource and response code.",
            ["verb", "group", "version", "resource", "subresource", "code"],
        )
        self._latency = self.metrics.histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb and resource.",
            ["verb", "group", "version", "resource", "subresource"],
        )
        self._watches: set[asyncio.Task[object]] = set()
        """The tasks serving open watches, ended when the server stops."""
        self._watchers = self.metrics.gauge(
            "apiserver_longrunning_requests", "Number of watch requests in flight.", ["resource"]
        )
        self._watch_tracker = WatchTracker()
        self.flowcontrol = FlowControl(
            self._cache((FLOWCONTROL_GROUP, "v1", "flowschemas")),
            self._cache((FLOWCONTROL_GROUP, "v1", "prioritylevelconfigurations")),
            config.max_requests_inflight + config.max_mutating_requests_inflight,
            self.clock,
            self.metrics,
        )
        self.port = config.secure_port
        self._ready = False
        self.openapi = OpenAPIDocuments(self.kinds)

    def _cache(self, key: tuple[str, str, str]) -> WatchCache:
        if key not in self.caches:
            self.caches[key] = WatchCache(self.stores[key])
        return self.caches[key]

    def read_cache(self, store: ResourceStore) -> WatchCache:
        """The watch cache reads with a resourceVersion are served from, filled and followed
        from the first such read on (a custom resource's store replaced: a new cache)."""
        info = store.info
        key = (info.group, info.version, info.plural)
        cache = self.caches.get(key)
        if cache is None or cache.store is not store:
            if cache is not None:
                cache.stop()
            cache = self.caches[key] = WatchCache(store)
        cache.launch()
        return cache

    def _mode(self, name: str) -> authz.Mode:
        if name == "AlwaysAllow":
            return authz.AlwaysAllow()
        if name == "AlwaysDeny":
            return authz.AlwaysDeny()
        if name == "RBAC":
            return RBACAuthorizer(
                *(
                    self.caches[(RBAC_GROUP, "v1", plural)]
                    for plural in ("roles", "clusterroles", "rolebindings", "clusterrolebindings")
                )
            )
        if name == "Node":
            return NodeAuthorizer(
                self.caches[("", "v1", "pods")],
                self.caches[("", "v1", "persistentvolumeclaims")],
                bootstrappolicy.NODE_RULES,
            )
        raise ValueError(f"unknown authorization mode {name!r} (one of {', '.join(authz.MODES)})")

    def use_token_issuer(self, issuer: TokenIssuer) -> None:
        """Issue service-account tokens with ``issuer`` and accept bearer tokens: the static
        file's, service-account JWTs verified with the issuer's key, and bootstrap tokens."""
        self.backends.tokens = issuer
        config = self.config
        audiences = list(config.api_audiences) or [issuer.issuer]
        service_accounts = authn.ServiceAccountTokens(
            key=issuer.key.public_key(),
            issuers=[issuer.issuer],
            audiences=audiences,
            clock=self.clock,
            accounts=self.caches[("", "v1", "serviceaccounts")],
            pods=self.caches[("", "v1", "pods")],
            secrets=self.caches[("", "v1", "secrets")],
        )
        token_authenticators: list[authn.TokenAuthenticator] = []
        if config.token_auth_file is not None:
            token_authenticators.append(
                authn.StaticTokens(authn.load_token_file(config.token_auth_file))
            )
        token_authenticators += [
            service_accounts,
            authn.BootstrapTokens(self.caches[("", "v1", "secrets")], self.clock),
        ]
        self.tokens = authn.TokenChain(token_authenticators, audiences, service_accounts)
        self.authenticators.append(self.tokens)

    def _token_reviewer(self) -> reviews.TokenReviewer | None:
        return self.tokens.authenticate if self.tokens is not None else None

    async def compact_forever(self) -> None:
        """Every interval, forget history older than the revision seen one interval ago.

        As upstream's compactor: watches and lists can resume from any revision of the last
        interval or two; older ones get 410 Expired and clients re-list.
        """
        previous = await self.store.current_revision()
        while True:
            await self.clock.sleep(self.config.compaction_interval)
            current = await self.store.current_revision()
            try:
                await self.store.compact(previous)
            except Exception:
                log.exception("compaction to revision %d failed", previous)
            previous = current

    @property
    def url(self) -> str:
        """Where clients reach this server: its advertised address and the port served."""
        return f"https://{_host(self.config.advertise)}:{self.port}"

    def lookup(self, group: str, version: str, plural: str) -> ResourceStore | None:
        return self.stores.get((group, version, plural))

    def kinds(self) -> list[KindInfo]:
        return [s.info for s in self.stores.values()]

    def add_store(self, store: ResourceStore) -> None:
        """Serve a kind defined at run time (a custom resource); built-ins stay as they are."""
        info = store.info
        key = (info.group, info.version, info.plural)
        if SCHEME.by_resource(*key) is None:
            self.stores[key] = store
            self.openapi.forget(info.group, info.version)
            self._autoregister()

    def remove_store(self, key: tuple[str, str, str]) -> None:
        """Stop serving a kind added with ``add_store``."""
        if SCHEME.by_resource(*key) is None and self.stores.pop(key, None) is not None:
            self.openapi.forget(*key[:2])
            self._autoregister()
            cache = self.caches.pop(key, None)
            if cache is not None:
                cache.stop()

    def _autoregister(self) -> None:
        """Bring the local APIServices in line with the kinds served, in the background (the
        custom resource controller changes them from synchronous code)."""
        if not self._ready:
            return  # ``start`` registers them once every kind is in place
        previous = self._autoregistering

        async def run() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            try:
                await autoregister.sync(self.stores[APISERVICES], self.kinds())
            except Exception:
                log.exception("registering the local APIServices failed")

        self._autoregistering = asyncio.get_running_loop().create_task(run())

    def aggregation(self) -> discovery.Aggregation:
        """What the APIServices add to discovery (module ``discovery``)."""
        priorities = self.aggregator.priorities()
        priorities[APISERVICES[0], APISERVICES[1]] = autoregister.APIREGISTRATION_PRIORITY
        remote = [
            (s.spec.group or "", s.spec.version or "")
            for s in self.aggregator.remote_services()
            if s.spec is not None
        ]
        return discovery.Aggregation(priorities, remote, dict(self.aggregator.discovered))

    def end_watches(self) -> None:
        """End every open watch: clients see the stream close and re-watch elsewhere."""
        for task in self._watches:
            task.cancel()

    async def start(self, port: int) -> None:
        """Create the cluster's bootstrap objects for the port served; ready once they exist."""
        self.port = port
        await bootstrap.repair(self, self.allocation)
        await clusterip.ensure_default_cidr(
            self.stores[(NETWORKING_GROUP, "v1", "servicecidrs")],
            self.config.service_cluster_ip_range,
            self.clock.now(),
        )
        await bootstrap.ensure_objects(self, self.config.kubernetes_service_ip, port)
        await reconcile.reconcile(self)
        await self.flowcontrol.start()
        for cache in self.caches.values():
            await cache.start()
        for store in list(self.stores.values()):
            if "watch" in store.info.verbs:  # filled in the background, as upstream's caches
                self.read_cache(store)
        await self.crds.start()
        await autoregister.sync(self.stores[APISERVICES], self.kinds())
        await self.leases.start(port)
        self._clusterips = asyncio.create_task(
            clusterip.keep(
                self.stores[("", "v1", "services")],
                self.stores[(NETWORKING_GROUP, "v1", "ipaddresses")],
                self.stores[(NETWORKING_GROUP, "v1", "servicecidrs")],
                self.config.service_cluster_ip_range,
                self.clock,
                self.config.service_ip_repair_interval,
            ),
            name="clusterip repair",
        )
        self._ready = True

    def stop_repair(self) -> None:
        """Stop keeping the default ServiceCIDR and repairing ClusterIPs."""
        if self._clusterips is not None:
            self._clusterips.cancel()

    # The pipeline.

    def app(self) -> web.Application:
        app = web.Application(
            client_max_size=MAX_BODY, middlewares=[self.auditor.middleware, self._middleware]
        )
        app.on_response_prepare.append(self.auditor.on_prepare)
        app.on_response_prepare.append(_flow_headers)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        info = parse(request.method, request.path, request.query)
        started = time.perf_counter()
        code = 500
        try:
            response = await self._guarded(request, info, handler)
            code = response.status
            return response
        except errors.ApiError as error:
            code = error.code
            return status_response(request, error)
        except web.HTTPException as error:
            code = error.status
            return status_response(
                request, errors.ApiError(error.status, error.reason, error.text or error.reason)
            )
        except Unavailable as error:
            # etcd lost quorum or cannot be reached: retryable, so 503 with Retry-After.
            code = 503
            log.warning("storage unavailable: %s %s: %s", request.method, request.path, error)
            return status_response(
                request, errors.unavailable(f"the storage is unavailable: {error}")
            )
        except Exception:
            log.exception("internal error serving %s %s", request.method, request.path)
            return status_response(
                request, errors.internal("the server could not handle the request")
            )
        finally:
            labels = (info.verb, info.group, info.version, info.resource, info.subresource)
            self._requests.inc(*labels, str(code))
            if info.verb != "watch":
                self._latency.observe(time.perf_counter() - started, *labels)

    async def _guarded(
        self,
        request: web.Request,
        info: RequestInfo,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        if request.content_length is not None and request.content_length > MAX_BODY:
            raise errors.too_large()
        user = await self._authenticate(request)
        request[audit.AUTHENTICATED] = user
        impersonated = authn.impersonate(request, user, self.authorizer)
        if impersonated is not user:
            request[audit.IMPERSONATED] = user = impersonated
        # Priority and fairness between impersonation and authorization, as upstream's chain.
        request[FLOW] = flow = self.flowcontrol.classify(user, info)
        width = self._width(info, request.query)
        async with self.flowcontrol.seat(flow, width, _request_details(user, info)) as seat:
            request[audit.DECISION] = allowed = self.authorizer(user, info)
            self.auditor.authorized(request)
            if not allowed:
                raise auth.forbidden(user, info)
            request[USER] = user
            if info.verb != "watch":
                return await handler(request)
            request[RELEASE_SEAT] = seat  # a watch is set up once its response starts
            self._watchers.inc(info.resource)
            self._watch_tracker.watching(info, 1)
            task = asyncio.current_task()
            assert task is not None
            self._watches.add(task)
            try:
                return await handler(request)
            finally:
                self._watches.discard(task)
                self._watchers.inc(info.resource, amount=-1)
                self._watch_tracker.watching(info, -1)

    def _width(self, info: RequestInfo, query: Mapping[str, str]) -> Width:
        """The seats a request takes: none for a long-running one other than a watch, by its
        size for a list (the objects counted in the resource's watch cache, none if it has
        none yet), by the watches it notifies for a change, one otherwise."""
        if long_running(info) and info.verb != "watch":
            return Width(0)
        if info.verb == "list":
            cache = self.caches.get((info.group, info.version, info.resource))
            return Width(list_seats(len(cache.objects()) if cache is not None else 0, query))
        return mutating_width(self._watch_tracker.interested(info))

    async def _authenticate(self, request: web.Request) -> auth.User:
        for authenticate in self.authenticators:
            user = authenticate(request)
            if inspect.isawaitable(user):
                user = await user
            if user is not None:
                return user
        if not self.config.anonymous_auth:
            raise auth.unauthorized()
        return auth.ANONYMOUS_USER

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        info = parse(request.method, request.path, request.query)
        remote = (
            self.aggregator.remote(info.group, info.version) if info.api_prefix == "apis" else None
        )
        if remote is not None:
            return await self.aggregator.proxy(request, remote, request[USER])
        if info.is_resource_request:
            user = request[USER]
            ctx = RequestContext(
                user=user.name,
                groups=user.groups,
                dry_run=bool(request.query.get("dryRun")),
                field_manager=request.query.get("fieldManager"),
                user_agent=request.headers.get("User-Agent", ""),
                subresource=info.subresource,
                audit_annotations=audit.annotations_of(request),
            )
            return await self.handler.handle(Request(request, info, ctx, user))
        if request.method not in ("GET", "HEAD"):
            raise errors.method_not_allowed(f"{request.method} is not supported on {info.path}")
        return await self._non_resource(request, info)

    # Non-resource endpoints.

    async def _non_resource(self, request: web.Request, info: RequestInfo) -> web.Response:
        path = request.path.rstrip("/") or "/"
        accept = request.headers.get("Accept")
        if path == "/version":
            return json_response(self.version())
        if path in ("/healthz", "/livez", "/readyz") or path.startswith(
            ("/healthz/", "/livez/", "/readyz/")
        ):
            return await self._health(request, path)
        if path.startswith(DEBUG_FLOWCONTROL):
            try:
                dump = self.flowcontrol.dump(
                    path.removeprefix(DEBUG_FLOWCONTROL),
                    request.query.get("includeRequestDetails") == "1",
                )
            except KeyError:
                raise errors.not_routed() from None
            return web.Response(text=dump, content_type="text/plain")
        if path == "/metrics":
            return web.Response(text=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})
        if path == "/api":
            output = negotiation.choose(accept, protobuf=_always, discovery=True)
            if output.as_ == negotiation.DISCOVERY:
                return _discovery_response(
                    discovery.aggregated(self.kinds(), True, self.aggregation())
                )
            address = f"{_host(self.config.advertise)}:{self.port}"
            return respond(discovery.api_versions(address), 200, output)
        if path == "/apis":
            output = negotiation.choose(accept, protobuf=_always, discovery=True)
            if output.as_ == negotiation.DISCOVERY:
                return _discovery_response(
                    discovery.aggregated(self.kinds(), False, self.aggregation())
                )
            groups = discovery.api_group_list(self.kinds(), self.aggregation())
            return respond(groups, 200, output)
        if path.startswith("/openapi/"):
            return self.openapi.respond(request, path)
        if info.api_prefix == "apis" and not info.version:
            group = path.split("/")[2] if path.count("/") == 2 else ""
            found = discovery.api_group(self.kinds(), group, self.aggregation())
            if found is not None:
                return respond(found, 200, _legacy_discovery(accept))
        if info.api_prefix and info.version:
            resources = discovery.api_resource_list(self.kinds(), info.group, info.version)
            if resources.resources:
                return respond(resources, 200, _legacy_discovery(accept))
        if path == "/":
            return json_response(
                {
                    "paths": sorted(
                        {
                            "/api",
                            "/apis",
                            "/healthz",
                            "/livez",
                            "/metrics",
                            "/openapi/v2",
                            "/openapi/v3",
                            "/readyz",
                            "/version",
                        }
                    )
                }
            )
        raise errors.not_routed()

    def version(self) -> dict[str, str]:
        major, minor, _ = KUBERNETES_VERSION.split(".")
        return {
            "major": major,
            "minor": minor,
            "gitVersion": f"v{KUBERNETES_VERSION}+kubelab-{__version__}",
            "gitCommit": "",
            "gitTreeState": "clean",
            "buildDate": "",
            "goVersion": f"python{platform.python_version()}",
            "compiler": platform.python_implementation().lower(),
            "platform": f"linux/{_arch()}",
        }

    async def _health(self, request: web.Request, path: str) -> web.Response:
        endpoint, _, only = path.lstrip("/").partition("/")
        checks: list[tuple[str, bool]] = [("ping", True), ("log", True)]
        checks.append(("etcd", await self._storage_reachable()))
        if endpoint == "readyz":
            checks.append(("bootstrap-objects", self._ready))
        if only:
            checks = [c for c in checks if c[0] == only]
            if not checks:
                raise errors.ApiError(404, "NotFound", f"no check named {only!r}")
        healthy = all(ok for _, ok in checks)
        if "verbose" in request.query or not healthy:
            lines = [
                f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}" for name, ok in checks
            ]
            lines.append(f"{endpoint} check {'passed' if healthy else 'failed'}")
            text = "\n".join(lines) + "\n"
        else:
            text = "ok"
        return web.Response(text=text, status=200 if healthy else 500, content_type="text/plain")

    async def _storage_reachable(self) -> bool:
        try:
            async with asyncio.timeout(2):
                await self._read_store()
        except Exception:
            return False
        return True

    async def _read_store(self) -> object:
        """A read that succeeds only if the store answers (health checks)."""
        return await self.store.list("/registry/health-check/", limit=1)


@dataclass
class Running:
    """A started server: stop it with ``await running.stop()``."""

    server: APIServer
    runner: web.AppRunner
    port: int
    pki: serving.PKI
    compactor: asyncio.Task[None]
    available: asyncio.Task[None]
    stopped: asyncio.Event = field(default_factory=asyncio.Event)

    async def stop(self) -> None:
        self.compactor.cancel()
        self.available.cancel()
        await asyncio.gather(self.available, return_exceptions=True)
        await self.server.aggregator.close()
        await self.server.leases.stop()
        self.server.stop_repair()
        self.server.end_watches()
        self.server.crds.stop()
        self.server.flowcontrol.stop()
        for cache in self.server.caches.values():
            cache.stop()
        await self.runner.cleanup()
        self.server.auditor.close()
        self.stopped.set()


async def serve(server: APIServer) -> Running:
    """Start serving HTTPS on the configured address (port 0: any free port)."""
    config = server.config
    pki = serving.ensure(
        config.data_dir / "pki",
        [
            config.advertise,
            config.kubernetes_service_ip,
            *config.extra_sans,
            *([config.bind_address] if config.bind_address not in ("0.0.0.0", "::") else []),
        ],
    )
    kubelet_ca = (
        config.kubelet_certificate_authority.read_bytes()
        if config.kubelet_certificate_authority is not None
        else None
    )
    server.backends.kubelets = KubeletConnector(kubelet_ca, pki.kubelet_client)
    server.use_token_issuer(TokenIssuer.load_or_create(config.data_dir / "pki"))
    front_proxy = frontproxy.configure(config, pki)
    server.aggregator.identity = front_proxy.identity
    server.authenticators.insert(0, front_proxy.authenticator)
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(
        runner,
        config.bind_address,
        config.secure_port,
        ssl_context=pki.server_context(front_proxy.ca_file),
        reuse_address=True,
    )
    await site.start()
    port = int(runner.addresses[0][1])
    try:
        await server.start(port)
        await clusterinfo.publish(server, server.url, pki.ca.cert_pem)
        await frontproxy.publish(server, pki.ca.cert_pem, front_proxy.requestheader)
    except BaseException:
        await runner.cleanup()
        raise
    identities.write_kubeconfigs(config.data_dir, pki.ca, server.url)
    compactor = asyncio.create_task(server.compact_forever(), name="compactor")
    available = AvailableConditionController(
        server.aggregator, server.stores, server.clock, config.apiservice_check_interval
    )
    # Ready once every APIService has its condition, as upstream's autoregister-completion
    # readiness check waits for the local ones.
    await available.sync_all()
    checking = asyncio.create_task(available.run(), name="apiservice-availability")
    return Running(server, runner, port, pki, compactor, checking)


async def _flow_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Name the request's FlowSchema and priority level in its response, and give back the
    seat of a watch, whose setup ends as its response starts."""
    flow = request.get(FLOW)
    if flow is not None:
        response.headers.update(flow.headers())
    seat = request.get(RELEASE_SEAT)
    if seat is not None:
        seat.release()


def _request_details(user: auth.User, info: RequestInfo) -> dict[str, str]:
    """What ``dump_requests?includeRequestDetails=1`` shows of a waiting request."""
    return {
        "UserName": user.name,
        "Verb": info.verb,
        "APIPath": info.path,
        "Namespace": info.namespace,
        "Name": info.name,
        "APIVersion": info.version,
        "Resource": info.resource,
        "SubResource": info.subresource,
    }


def _always() -> bool:
    """The legacy discovery documents have protobuf messages (meta/v1's)."""
    return True


def _legacy_discovery(accept: str | None) -> negotiation.Output:
    """How to answer for a group or a group/version: JSON, YAML or protobuf, no
    transformation (upstream's default endpoint restrictions)."""
    return negotiation.choose(accept, protobuf=_always, transforms=False)


def _discovery_response(document: Any) -> web.Response:
    response = json_response(document)
    response.headers["Content-Type"] = discovery.AGGREGATED_CONTENT_TYPE
    response.headers["Vary"] = "Accept"
    return response


def _arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
