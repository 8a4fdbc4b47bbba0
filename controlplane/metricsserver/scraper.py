"""Scraping the kubelets: every node at once, each within its own timeout.

Each round lists the nodes, picks each one's kubelet address as upstream's
``--kubelet-preferred-address-types`` orders them and its port from the node's status
(``daemonEndpoints.kubeletEndpoint``, as ``--kubelet-use-node-status-port``), and reads
``https://ADDRESS:PORT/metrics/resource`` through a ``Fetch`` (``KubeletClient``: TLS
trusting the kubelets' CA, presenting the metrics-server's own client certificate or bearer
token, which the kubelet authenticates and authorizes as ``nodes/metrics``).  A node that
fails or does not answer within the timeout is left out of the round (and so forgotten by the
storage), logged, as upstream's.

``decode`` reads the Prometheus text as upstream's decoder: the node's cumulative CPU and
working set, each container's (labelled container, pod, namespace) and its start time, a
sample's own timestamp or else the time of the scrape.  Incomplete points are dropped: a node
without CPU or memory, and a whole pod when one of its containers lacks either (zero counts as
missing, as upstream).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp

from controlplane.metricsserver.storage import Batch, PodKey, Point
from kube.api.kinds.core_v1.node import Node
from kube.clock import Clock
from kube.metrics import parse

log = logging.getLogger("kubelab.metrics-server")

DEFAULT_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
DEFAULT_KUBELET_PORT = 10250
PATH = "/metrics/resource"
NANO = 1e9


class ScrapeError(Exception):
    """A kubelet that could not be read: its node and why."""


class Fetch(Protocol):
    async def __call__(self, url: str) -> str:
        """The body of a GET; ScrapeError for anything but a 200."""
        ...


class KubeletClient:
    """``Fetch`` over HTTPS with the metrics-server's credentials: the client certificate of
    ``tls``, or a bearer token (re-read each time: an in-cluster token rotates)."""

    def __init__(self, tls: ssl.SSLContext, token: Callable[[], str] | None = None) -> None:
        self._token = token
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls))

    async def __call__(self, url: str) -> str:
        headers = {"Authorization": f"Bearer {self._token()}"} if self._token else {}
        try:
            async with self._session.get(url, headers=headers) as response:
                body = await response.text()
                if response.status != 200:
                    raise ScrapeError(f"GET {url}: {response.status} {body.strip()[:200]}")
                return body
        except aiohttp.ClientError as error:
            raise ScrapeError(f"GET {url}: {error or type(error).__name__}") from None

    async def close(self) -> None:
        await self._session.close()


def kubelet_url(node: Node, address_types: Sequence[str] = DEFAULT_ADDRESS_TYPES) -> str | None:
    """Where the node's kubelet serves /metrics/resource; None when it has no address of
    the types asked for."""
    status = node.status
    addresses = (status.addresses if status else None) or []
    found = next(
        (a.address for kind in address_types for a in addresses if a.type == kind and a.address),
        None,
    )
    if found is None:
        return None
    endpoints = status.daemon_endpoints if status else None
    kubelet = endpoints.kubelet_endpoint if endpoints else None
    port = (kubelet.port if kubelet else None) or DEFAULT_KUBELET_PORT
    host = f"[{found}]" if ":" in found else found
    return f"https://{host}:{port}{PATH}"


@dataclass
class _Parts:
    timestamp: datetime.datetime | None = None
    cpu_ns: int = 0
    memory: int = 0
    start_time: datetime.datetime | None = None

    def point(self) -> Point | None:
        if self.timestamp is None or not self.cpu_ns or not self.memory:
            return None
        return Point(self.timestamp, self.cpu_ns, self.memory, self.start_time)


@dataclass
class _Pod:
    containers: dict[str, _Parts] = field(default_factory=dict)


def _moment(milliseconds: int | None, default: datetime.datetime) -> datetime.datetime:
    if milliseconds is None:
        return default
    return datetime.datetime.fromtimestamp(milliseconds / 1000, datetime.UTC)


def decode(text: str, node_name: str, scraped_at: datetime.datetime) -> Batch:
    """One kubelet's /metrics/resource as a batch; ParseError on malformed text."""
    node = _Parts()
    pods: dict[PodKey, _Pod] = {}
    for sample in parse(text):
        at = _moment(sample.timestamp, scraped_at)
        if sample.name == "node_cpu_usage_seconds_total":
            node.cpu_ns, node.timestamp = round(sample.value * NANO), at
            continue
        if sample.name == "node_memory_working_set_bytes":
            node.memory, node.timestamp = int(sample.value), at
            continue
        if not sample.name.startswith("container_"):
            continue
        labels = sample.labels
        key = (labels.get("namespace", ""), labels.get("pod", ""))
        parts = pods.setdefault(key, _Pod()).containers.setdefault(
            labels.get("container", ""), _Parts()
        )
        if sample.name == "container_cpu_usage_seconds_total":
            parts.cpu_ns, parts.timestamp = round(sample.value * NANO), at
        elif sample.name == "container_memory_working_set_bytes":
            parts.memory, parts.timestamp = int(sample.value), at
        elif sample.name == "container_start_time_seconds":
            parts.start_time = datetime.datetime.fromtimestamp(sample.value, datetime.UTC)
    batch = Batch()
    point = node.point()
    if point is None:
        log.info("incomplete metrics of node %s", node_name)
    else:
        batch.nodes[node_name] = point
    for key, pod in pods.items():
        points = {name: parts.point() for name, parts in pod.containers.items()}
        complete = {name: p for name, p in points.items() if p is not None}
        if len(complete) == len(points):
            batch.pods[key] = complete
        else:
            log.info("incomplete metrics of pod %s/%s", *key)
    return batch


class Scraper:
    """Reads every node's kubelet; see the module docstring."""

    def __init__(
        self,
        nodes: Callable[[], Sequence[Node]],
        fetch: Fetch,
        clock: Clock,
        *,
        timeout: float,
        address_types: Sequence[str] = DEFAULT_ADDRESS_TYPES,
    ) -> None:
        self.nodes = nodes
        self.fetch = fetch
        self.clock = clock
        self.timeout = timeout
        self.address_types = address_types

    async def scrape(self) -> Batch:
        """One round: the batches of every node that answered, merged."""
        nodes = list(self.nodes())
        results = await asyncio.gather(*(self._one(node) for node in nodes))
        merged = Batch()
        for batch in results:
            if batch is not None:
                merged.nodes.update(batch.nodes)
                merged.pods.update(batch.pods)
        return merged

    async def _one(self, node: Node) -> Batch | None:
        name = node.metadata.name or ""
        url = kubelet_url(node, self.address_types)
        if url is None:
            log.warning("node %s: no address of types %s", name, ",".join(self.address_types))
            return None
        scraped_at = self.clock.now()
        try:
            text = await asyncio.wait_for(self.fetch(url), self.timeout)
            return decode(text, name, scraped_at)
        except (ScrapeError, ValueError) as error:  # ParseError, or a NaN where a count goes
            log.warning("scraping node %s failed: %s", name, error)
        except TimeoutError:
            log.warning("scraping node %s failed: no answer within %gs", name, self.timeout)
        return None
