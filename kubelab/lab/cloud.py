"""The lab as a small cloud (``--cloud-provider lab``).

The lab (``kubelab lab``) is a router namespace whose bridge ``lab0`` is the underlay, and a
network namespace per node.  Seen as a cloud:

- **instances** are the nodes the cloud config lists whose network namespace exists; their
  provider ID is ``lab://<lab>/<node>``, their addresses the InternalIP the config gives plus
  the Hostname, their zone and instance type as the config assigns them (the lab alternates
  zones), the region the config's.  ``kubelab lab node rm`` removes a namespace, so its
  instance disappears.  The lab cannot shut an instance down and keep it, so none is ever
  reported shut down.
- **routes** are routes in the router namespace, marked with routing protocol
  :data:`ROUTE_PROTOCOL` so only ours are listed: ``<podCIDR> via <node's internal IP>``.
  Nodes send what is not theirs to the router, so pod-to-pod traffic across nodes follows
  exactly the routes the route controller made.  A route whose gateway is no configured node
  is listed as a blackhole (the controller deletes it).
- **load balancers** are addresses from the pool (``10.240.0.200-10.240.0.250`` in the lab)
  put on the router's ``lab0`` (so the client namespace reaches them on the underlay), with
  DNAT in the router's ``nat`` table to the Service's NodePort on the target nodes, spread by
  ``statistic --mode random``, and masquerade so replies come back through the router.  The
  router's rules are the load balancers' only record: the dispatch rule of each port carries
  ``lb=<name>`` in a comment and its address, so a restarted provider finds every load
  balancer (and its address) again and never allocates a second.  For
  ``externalTrafficPolicy: Local`` the targets are only the nodes whose
  ``healthCheckNodePort`` ``/healthz`` answers 200 (they have local endpoints); the provider
  probes them from the router every ``healthCheckInterval`` seconds and rewrites the rules
  when the answer changes, as a cloud's health checker does.

Rules are written through :mod:`node.iptables` (``nsenter`` into the router namespace,
one ``iptables-restore --noflush`` per change); netlink work goes through pyroute2, on a
socket a worker thread opens inside the router namespace (:func:`node.netns.call_in_netns`:
no fork beside the gRPC threads).  Both sit behind :class:`RouterNetwork`, which tests replace.

The cloud config (JSON or YAML) is written by the lab; it is re-read when it changes, so
nodes added later are known without a restart::

    lab: hlab
    region: lab
    routerNetns: /run/netns/hlab-router   # absent: this namespace is the router
    bridge: lab0
    loadBalancerPool: 10.240.0.200-10.240.0.250
    healthCheckInterval: 2
    nodes:
      - {name: node1, netns: /run/netns/hlab-node1, internalIP: 10.240.0.11,
         zone: lab-a, instanceType: lab.standard}

On VMs (Vagrant) the config has no ``routerNetns`` (the control-plane VM, where the provider
runs, is the router; its ``bridge`` is the private network's interface) and no node
``netns`` (a VM exists while listed).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import hashlib
import ipaddress
import logging
import os
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import yaml

from controlplane.cloud.provider import (
    ClientBuilder,
    Clusters,
    InstanceMetadata,
    InstanceNotFound,
    Instances,
    InstancesV2,
    LoadBalancer,
    NotImplementedByProvider,
    Route,
    Routes,
    Zone,
    Zones,
)
from controlplane.cloud.registry import register_cloud_provider
from kube.api.kinds.core_v1.node import Node, NodeAddress
from kube.api.kinds.core_v1.service import LoadBalancerIngress, LoadBalancerStatus, Service
from node.iptables import Iptables, RestoreIptables
from node.netns import call_in_netns, socket_in_netns

PROVIDER_NAME = "lab"
ROUTE_PROTOCOL = 200
"""The routing protocol number that marks the routes this provider owns."""
DISPATCH = "KUBELAB-LB"
POSTROUTING = "KUBELAB-LB-POST"
MASQ_MARK = "0x4000/0x4000"
_LB_COMMENT = re.compile(r'--comment "?lb=(\S+?) ')
_LB_DEST = re.compile(r"-d (\d+\.\d+\.\d+\.\d+)/32")

log = logging.getLogger("kubelab.cloud.lab")


@dataclass(frozen=True)
class LabNode:
    name: str
    netns: str | None
    """The node's namespace; None for a VM, which exists while the config lists it."""
    internal_ip: str
    zone: str
    instance_type: str


@dataclass(frozen=True)
class LabConfig:
    lab: str
    router_netns: str | None
    """The router's namespace; None where the provider's own is the router (the control-plane
    VM under Vagrant)."""
    nodes: tuple[LabNode, ...]
    pool: tuple[str, ...]
    region: str = "lab"
    bridge: str = "lab0"
    health_check_interval: float = 2.0

    def node(self, name: str) -> LabNode | None:
        return next((n for n in self.nodes if n.name == name), None)

    def node_by_ip(self, ip: str) -> LabNode | None:
        return next((n for n in self.nodes if n.internal_ip == ip), None)


def _pool(text: str) -> tuple[str, ...]:
    first, _, last = text.partition("-")
    start = ipaddress.IPv4Address(first.strip())
    end = ipaddress.IPv4Address(last.strip()) if last else start
    if end < start:
        raise ValueError(f"loadBalancerPool {text!r}: the range ends before it starts")
    return tuple(str(ipaddress.IPv4Address(i)) for i in range(int(start), int(end) + 1))


def parse_config(text: str) -> LabConfig:
    """The cloud config; ValueError naming what is wrong."""
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError("the lab cloud config must be a mapping")
    try:
        nodes = tuple(
            LabNode(
                name=str(n["name"]),
                netns=str(n["netns"]) if n.get("netns") else None,
                internal_ip=str(ipaddress.IPv4Address(n["internalIP"])),
                zone=str(n.get("zone", "")),
                instance_type=str(n.get("instanceType", "")),
            )
            for n in data.get("nodes") or ()
        )
        return LabConfig(
            lab=str(data["lab"]),
            router_netns=str(data["routerNetns"]) if data.get("routerNetns") else None,
            nodes=nodes,
            pool=_pool(str(data["loadBalancerPool"])),
            region=str(data.get("region", "lab")),
            bridge=str(data.get("bridge", "lab0")),
            health_check_interval=float(data.get("healthCheckInterval", 2.0)),
        )
    except KeyError as missing:
        raise ValueError(f"the lab cloud config lacks {missing}") from None
    except (TypeError, ipaddress.AddressValueError) as error:
        raise ValueError(f"the lab cloud config is malformed: {error}") from None


class RouterNetwork(Protocol):
    """What the provider changes in the router namespace (blocking calls)."""

    def list_routes(self) -> list[tuple[str, str]]:
        """Our routes as (destination CIDR, gateway)."""
        ...

    def replace_route(self, cidr: str, gateway: str) -> None: ...

    def delete_route(self, cidr: str) -> None: ...

    def add_address(self, ip: str) -> None:
        """Put ``ip``/32 on the bridge; idempotent."""
        ...

    def delete_address(self, ip: str) -> None: ...

    def addresses(self) -> set[str]: ...

    def iptables(self) -> Iptables: ...

    def http_status(self, ip: str, port: int, path: str, timeout: float) -> int | None:
        """The status of ``GET path`` from the router, or None if it did not answer."""
        ...


class NetnsRouter:
    """:class:`RouterNetwork` on a real namespace: pyroute2 and iptables through nsenter."""

    def __init__(self, netns: str | None, bridge: str) -> None:
        self.netns = netns
        self.bridge = bridge
        self._iptables = RestoreIptables(netns=netns)

    def _ipr(self) -> Any:
        """An ``IPRoute`` whose netlink socket lives in the router namespace.

        ``IPRoute()`` opens its socket while it is built, so building it inside the namespace
        is enough, and no child process is forked (pyroute2's ``netns=`` forks one).  pyroute2
        keeps a socket per thread: the handle is used only by the thread that built it.
        """
        from pyroute2 import IPRoute

        return IPRoute() if self.netns is None else call_in_netns(Path(self.netns), IPRoute)

    def list_routes(self) -> list[tuple[str, str]]:
        with self._ipr() as ipr:
            found = []
            for msg in ipr.get_routes(family=socket.AF_INET, proto=ROUTE_PROTOCOL):
                dst, gateway = msg.get("RTA_DST"), msg.get("RTA_GATEWAY")
                if dst and msg.get("proto") == ROUTE_PROTOCOL:
                    found.append((f"{dst}/{msg['dst_len']}", gateway or ""))
            return found

    def replace_route(self, cidr: str, gateway: str) -> None:
        with self._ipr() as ipr:
            ipr.route("replace", dst=cidr, gateway=gateway, proto=ROUTE_PROTOCOL)

    def delete_route(self, cidr: str) -> None:
        from pyroute2 import NetlinkError

        with self._ipr() as ipr:
            try:
                ipr.route("del", dst=cidr, proto=ROUTE_PROTOCOL)
            except NetlinkError as error:
                if error.code != errno.ESRCH:
                    raise

    def _bridge_index(self, ipr: Any) -> int:
        found = ipr.link_lookup(ifname=self.bridge)
        if not found:
            raise OSError(errno.ENODEV, f"no {self.bridge} in {self.netns or 'this netns'}")
        return int(found[0])

    def add_address(self, ip: str) -> None:
        from pyroute2 import NetlinkError

        with self._ipr() as ipr:
            try:
                ipr.addr("add", index=self._bridge_index(ipr), address=ip, prefixlen=32)
            except NetlinkError as error:
                if error.code != errno.EEXIST:
                    raise

    def delete_address(self, ip: str) -> None:
        from pyroute2 import NetlinkError

        with self._ipr() as ipr:
            try:
                ipr.addr("del", index=self._bridge_index(ipr), address=ip, prefixlen=32)
            except NetlinkError as error:
                if error.code not in (errno.EADDRNOTAVAIL, errno.ENOENT, errno.ESRCH):
                    raise

    def addresses(self) -> set[str]:
        with self._ipr() as ipr:
            index = self._bridge_index(ipr)
            return {
                str(a.get("IFA_ADDRESS")) for a in ipr.get_addr(family=socket.AF_INET, index=index)
            }

    def iptables(self) -> Iptables:
        return self._iptables

    def http_status(self, ip: str, port: int, path: str, timeout: float) -> int | None:
        try:
            if self.netns is None:
                sock = socket.create_connection((ip, port), timeout)
            else:
                sock = socket_in_netns(Path(self.netns), connect=(ip, port), timeout=timeout)
        except OSError:
            return None
        with sock:
            sock.settimeout(timeout)
            try:
                sock.sendall(f"GET {path} HTTP/1.0\r\nHost: {ip}:{port}\r\n\r\n".encode())
                first = sock.recv(256).split(b"\r\n", 1)[0].split()
            except OSError:
                return None
        return int(first[1]) if len(first) >= 2 and first[1].isdigit() else None


def load_balancer_name(service: Service) -> str:
    """Upstream's default name: ``a`` and the Service's uid without dashes, 32 characters."""
    return "a" + (service.metadata.uid or "").replace("-", "")[:31]


def _chain(lb_name: str, port: str) -> str:
    digest = hashlib.sha256(f"{lb_name}/{port}".encode()).digest()
    return "KLB-" + base64.b32encode(digest).decode()[:16]


@dataclass
class _Balancer:
    """What the provider last applied for one load balancer (memory; the rules are truth)."""

    service: Service
    nodes: list[str]
    healthy: list[str]


class LabCloud:
    """The lab's cloud: InstancesV2, Instances, Zones, Clusters, Routes and LoadBalancer."""

    def __init__(self, config: LabConfig, path: Path | None = None, router: Any = None) -> None:
        self._config = config
        self._path = path
        self._mtime = path.stat().st_mtime if path is not None else 0.0
        self.router: RouterNetwork = router or NetnsRouter(config.router_netns, config.bridge)
        self._balancers: dict[str, _Balancer] = {}
        self._lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def config(self) -> LabConfig:
        """The config, re-read if its file changed (the lab adds and removes nodes)."""
        if self._path is not None:
            with contextlib.suppress(OSError, ValueError):
                mtime = self._path.stat().st_mtime
                if mtime != self._mtime:
                    self._config = parse_config(self._path.read_text())
                    self._mtime = mtime
        return self._config

    # CloudProvider

    def initialize(self, client_builder: ClientBuilder, stop: asyncio.Event) -> None:
        self._tasks.append(asyncio.create_task(self._health_checks(stop)))

    def load_balancer(self) -> tuple[LoadBalancer | None, bool]:
        return self, True

    def instances(self) -> tuple[Instances | None, bool]:
        return self, True

    def instances_v2(self) -> tuple[InstancesV2 | None, bool]:
        return self, True

    def zones(self) -> tuple[Zones | None, bool]:
        return self, True

    def clusters(self) -> tuple[Clusters | None, bool]:
        return self, True

    def routes(self) -> tuple[Routes | None, bool]:
        return self, True

    def provider_name(self) -> str:
        return PROVIDER_NAME

    def has_cluster_id(self) -> bool:
        return True

    # Instances

    def provider_id(self, node: LabNode) -> str:
        return f"{PROVIDER_NAME}://{self.config.lab}/{node.name}"

    def _instance(self, name: str) -> LabNode:
        node = self.config.node(name)
        if node is None or (node.netns is not None and not os.path.exists(node.netns)):
            raise InstanceNotFound(name)
        return node

    def _by_provider_id(self, provider_id: str) -> LabNode:
        prefix = f"{PROVIDER_NAME}://{self.config.lab}/"
        if not provider_id.startswith(prefix):
            raise InstanceNotFound(provider_id)
        return self._instance(provider_id.removeprefix(prefix))

    def _for_node(self, node: Node) -> LabNode:
        provider_id = node.spec.provider_id if node.spec else None
        if provider_id:
            return self._by_provider_id(provider_id)
        return self._instance(node.metadata.name or "")

    @staticmethod
    def _addresses(node: LabNode) -> list[NodeAddress]:
        return [
            NodeAddress(type="InternalIP", address=node.internal_ip),
            NodeAddress(type="Hostname", address=node.name),
        ]

    async def node_addresses(self, name: str) -> list[NodeAddress]:
        return self._addresses(self._instance(name))

    async def node_addresses_by_provider_id(self, provider_id: str) -> list[NodeAddress]:
        return self._addresses(self._by_provider_id(provider_id))

    async def instance_id(self, name: str) -> str:
        return f"{self.config.lab}/{self._instance(name).name}"

    async def instance_type(self, name: str) -> str:
        return self._instance(name).instance_type

    async def instance_type_by_provider_id(self, provider_id: str) -> str:
        return self._by_provider_id(provider_id).instance_type

    async def instance_exists_by_provider_id(self, provider_id: str) -> bool:
        try:
            self._by_provider_id(provider_id)
        except InstanceNotFound:
            return False
        return True

    async def instance_shutdown_by_provider_id(self, provider_id: str) -> bool:
        self._by_provider_id(provider_id)
        return False

    async def instance_exists(self, node: Node) -> bool:
        try:
            self._for_node(node)
        except InstanceNotFound:
            return False
        return True

    async def instance_shutdown(self, node: Node) -> bool:
        self._for_node(node)
        return False

    async def instance_metadata(self, node: Node) -> InstanceMetadata:
        found = self._for_node(node)
        return InstanceMetadata(
            provider_id=self.provider_id(found),
            instance_type=found.instance_type,
            node_addresses=tuple(self._addresses(found)),
            zone=found.zone,
            region=self.config.region,
        )

    # Zones

    async def get_zone(self) -> Zone:
        raise NotImplementedByProvider("the lab cannot tell which node a process runs on")

    async def get_zone_by_provider_id(self, provider_id: str) -> Zone:
        return Zone(self._by_provider_id(provider_id).zone, self.config.region)

    async def get_zone_by_node_name(self, name: str) -> Zone:
        return Zone(self._instance(name).zone, self.config.region)

    # Clusters

    async def list_clusters(self) -> list[str]:
        return [self.config.lab]

    async def master(self, cluster_name: str) -> str:
        raise InstanceNotFound(f"the lab cloud does not track the API server of {cluster_name}")

    # Routes

    def _check_cluster(self, cluster_name: str) -> None:
        if cluster_name != self.config.lab:
            raise ValueError(
                f"the lab cloud holds cluster {self.config.lab!r}, not {cluster_name!r} "
                "(--cluster-name must be the lab's name)"
            )

    async def list_routes(self, cluster_name: str) -> list[Route]:
        self._check_cluster(cluster_name)
        config = self.config
        routes = []
        for cidr, gateway in await asyncio.to_thread(self.router.list_routes):
            node = config.node_by_ip(gateway)
            routes.append(
                Route(
                    target_node=node.name if node else "",
                    destination_cidr=cidr,
                    name=cidr,
                    blackhole=node is None,
                )
            )
        return routes

    async def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        self._check_cluster(cluster_name)
        node = self.config.node(route.target_node)
        if node is None:
            raise InstanceNotFound(route.target_node)
        await asyncio.to_thread(self.router.replace_route, route.destination_cidr, node.internal_ip)

    async def delete_route(self, cluster_name: str, route: Route) -> None:
        self._check_cluster(cluster_name)
        await asyncio.to_thread(self.router.delete_route, route.destination_cidr)

    # LoadBalancer

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return load_balancer_name(service)

    def _saved(self) -> str:
        return self.router.iptables().save("nat")

    @staticmethod
    def _dispatch_rules(saved: str) -> list[str]:
        return [line for line in saved.splitlines() if line.startswith(f"-A {DISPATCH} ")]

    @classmethod
    def _ips(cls, saved: str) -> dict[str, str]:
        """Load balancer name → its address, from the dispatch rules."""
        found: dict[str, str] = {}
        for rule in cls._dispatch_rules(saved):
            name, dest = _LB_COMMENT.search(rule + " "), _LB_DEST.search(rule)
            if name and dest:
                found[name.group(1)] = dest.group(1)
        return found

    async def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        ip = self._ips(await asyncio.to_thread(self._saved)).get(load_balancer_name(service))
        if ip is None:
            return None, False
        return _status(ip), True

    async def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        async with self._lock:
            return await asyncio.to_thread(
                self._ensure, service, [n.metadata.name or "" for n in nodes]
            )

    async def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        await self.ensure_load_balancer(cluster_name, service, nodes)

    async def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        async with self._lock:
            await asyncio.to_thread(self._delete, service)

    def _ensure(self, service: Service, nodes: list[str]) -> LoadBalancerStatus:
        name = load_balancer_name(service)
        saved = self._saved()
        ips = self._ips(saved)
        ip = ips.get(name) or self._allocate(service, set(ips.values()))
        self.router.add_address(ip)
        healthy = self._healthy(service, nodes)
        self._apply(saved, name, self._rules(service, name, ip, healthy))
        self._balancers[name] = _Balancer(service, nodes, healthy)
        log.info("lab cloud: load balancer %s at %s -> %s", name, ip, ", ".join(healthy) or "-")
        return _status(ip)

    def _allocate(self, service: Service, used: set[str]) -> str:
        wanted = service.spec.load_balancer_ip if service.spec else None
        if wanted:
            if wanted not in self.config.pool:
                raise ValueError(f"loadBalancerIP {wanted} is not in the lab's pool")
            if wanted in used:
                raise ValueError(f"loadBalancerIP {wanted} is taken")
            return wanted
        for ip in self.config.pool:
            if ip not in used:
                return ip
        raise ValueError("the lab's load balancer pool is exhausted")

    def _healthy(self, service: Service, nodes: list[str]) -> list[str]:
        """The targets among ``nodes``: configured ones, and for externalTrafficPolicy Local
        only those whose health check node port says they have local endpoints."""
        config = self.config
        known = [node for node in (config.node(n) for n in sorted(nodes)) if node is not None]
        spec = service.spec
        port = spec.health_check_node_port if spec else None
        if spec is None or spec.external_traffic_policy != "Local" or not port:
            return [n.name for n in known]
        return [
            n.name
            for n in known
            if self.router.http_status(n.internal_ip, port, "/healthz", 1.0) == 200
        ]

    def _rules(
        self, service: Service, name: str, ip: str, targets: list[str]
    ) -> dict[str, list[str]]:
        """Chain → its rules, for every port of the Service (the dispatch rules under
        :data:`DISPATCH`)."""
        config = self.config
        key = f"{service.metadata.namespace}/{service.metadata.name}"
        chains: dict[str, list[str]] = {DISPATCH: []}
        for port in (service.spec.ports if service.spec else None) or ():
            if not port.node_port or not port.port:
                continue
            protocol = (port.protocol or "TCP").lower()
            chain = _chain(name, f"{port.port}/{protocol}")
            chains[DISPATCH].append(
                f"-A {DISPATCH} -d {ip}/32 -p {protocol} -m comment --comment "
                f'"lb={name} svc={key}" -m {protocol} --dport {port.port} -j {chain}'
            )
            rules = [f"-A {chain} -j MARK --set-xmark {MASQ_MARK}"]
            addresses = [n.internal_ip for n in map(config.node, targets) if n is not None]
            for i, address in enumerate(addresses):
                left = len(addresses) - i
                spread = (
                    f"-m statistic --mode random --probability {1 / left:.11f} " if left > 1 else ""
                )
                target = f"{address}:{port.node_port}"
                rules.append(f"-A {chain} -p {protocol} {spread}-j DNAT --to-destination {target}")
            chains[chain] = rules
        return chains

    def _apply(self, saved: str, name: str, wanted: dict[str, list[str]]) -> None:
        """Rewrite the dispatch chain (keeping other load balancers' rules as saved), this
        load balancer's chains, and remove its chains no longer wanted; one restore."""
        mine = f"lb={name} "
        others = [r for r in self._dispatch_rules(saved) if mine not in r + " "]
        old_chains = {
            c for r in self._dispatch_rules(saved) if mine in r + " " for c in [r.split(" -j ")[-1]]
        }
        declared = {line.split()[0][1:] for line in saved.splitlines() if line.startswith(":")}
        lines = [f":{DISPATCH} - [0:0]", f":{POSTROUTING} - [0:0]"]
        lines += [f":{chain} - [0:0]" for chain in wanted if chain != DISPATCH]
        lines += others + wanted[DISPATCH]
        for chain, rules in wanted.items():
            if chain != DISPATCH:
                lines += rules
        lines.append(f"-A {POSTROUTING} -m mark --mark {MASQ_MARK} -j MASQUERADE")
        for chain in sorted(old_chains - set(wanted)):
            if chain in declared:
                lines += [f":{chain} - [0:0]", f"-X {chain}"]
        if f"-A PREROUTING -j {DISPATCH}" not in saved:
            lines.append(f"-A PREROUTING -j {DISPATCH}")
        if f"-A POSTROUTING -j {POSTROUTING}" not in saved:
            lines.append(f"-A POSTROUTING -j {POSTROUTING}")
        self.router.iptables().restore("nat", lines)

    def _delete(self, service: Service) -> None:
        name = load_balancer_name(service)
        saved = self._saved()
        ip = self._ips(saved).get(name)
        self._apply(saved, name, {DISPATCH: []})
        if ip is not None:
            self.router.delete_address(ip)
        self._balancers.pop(name, None)

    async def _health_checks(self, stop: asyncio.Event) -> None:
        """Re-probe the Local load balancers' nodes; rewrite rules whose targets changed."""
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.health_check_interval)
            if stop.is_set():
                return
            for name, balancer in list(self._balancers.items()):
                spec = balancer.service.spec
                if spec is None or spec.external_traffic_policy != "Local":
                    continue
                try:
                    healthy = await asyncio.to_thread(
                        self._healthy, balancer.service, balancer.nodes
                    )
                    if healthy != balancer.healthy:
                        async with self._lock:
                            if self._balancers.get(name) is balancer:
                                await asyncio.to_thread(
                                    self._ensure, balancer.service, balancer.nodes
                                )
                except Exception:
                    log.exception("lab cloud: health check of load balancer %s failed", name)


def _status(ip: str) -> LoadBalancerStatus:
    return LoadBalancerStatus(ingress=[LoadBalancerIngress(ip=ip, ip_mode="VIP")])


def new(config: IO[str] | None) -> LabCloud:
    """The factory: the lab's cloud from its config file."""
    if config is None:
        raise ValueError("the lab provider needs --cloud-config (the lab writes it)")
    name = getattr(config, "name", None)
    path = Path(name) if isinstance(name, str) and os.path.isfile(name) else None
    return LabCloud(parse_config(config.read()), path)


register_cloud_provider(PROVIDER_NAME, new)
