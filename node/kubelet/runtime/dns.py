"""A pod's resolver settings: upstream's ``pkg/kubelet/network/dns`` (``GetPodDNS``).

The policy picks a base:

- ``ClusterFirst`` (the default; for hostNetwork pods it means ``Default``) and
  ``ClusterFirstWithHostNet``: the cluster DNS servers, the search path
  ``<ns>.svc.<domain> svc.<domain> <domain>`` followed by the node's own search domains,
  and ``ndots:5``.  With no ``--cluster-dns`` the pod falls back to ``Default``, with a
  warning (upstream's ``MissingClusterDNS`` event);
- ``Default``: the node's resolv.conf (``options.resolv_conf``) as it is;
- ``None``: nothing.

Then ``spec.dnsConfig`` is merged in (servers and searches appended without duplicates,
options by name with the pod's winning), and the result cut to what resolvers accept: 3
servers, 32 search domains, none longer than 253 characters, a search line of at most 2048
characters (upstream's ``DNSConfigForming`` warning when anything is cut).  Warnings are
returned, for the caller to record as events; reading the node's resolv.conf is the only
I/O, and a missing one reads as empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kube.api.kinds.core_v1.pod import Pod
from node.cri.pb import api_pb2 as pb
from node.kubelet.runtime.options import NodeRuntimeOptions

MAX_NAMESERVERS = 3
MAX_SEARCH_PATHS = 32
MAX_SEARCH_LINE_CHARS = 2048
MAX_SEARCH_PATH_CHARS = 253
DEFAULT_OPTIONS = ("ndots:5",)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def parse_resolv_conf(text: str) -> tuple[list[str], list[str], list[str]]:
    """Nameservers, search domains and options of a resolv.conf (upstream
    ``parseResolvConf``): the last ``search`` line wins, trailing dots and "." dropped;
    options deduplicated by name, the last value kept."""
    servers: list[str] = []
    searches: list[str] = []
    options: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";", 1)[0].split()
        if not fields:
            continue
        keyword, args = fields[0], fields[1:]
        if keyword == "nameserver" and args:
            servers.append(args[0])
        elif keyword == "search":
            searches = [s.removesuffix(".") for s in args if s != "."]
        elif keyword == "options":
            for option in args:
                options[option.split(":", 1)[0]] = option
    return servers, searches, list(options.values())


def _read_host(path: Path) -> tuple[list[str], list[str], list[str]]:
    try:
        return parse_resolv_conf(path.read_text())
    except OSError:
        return [], [], []


def _policy(pod: Pod, has_cluster_dns: bool) -> tuple[str, str | None]:
    """``cluster``, ``host`` or ``none``, and the fallback warning if any."""
    spec = pod.spec
    policy = (spec.dns_policy if spec else None) or "ClusterFirst"
    host_network = bool(spec and spec.host_network)
    if policy == "None":
        return "none", None
    if policy == "Default" or (policy == "ClusterFirst" and host_network):
        return "host", None
    if not has_cluster_dns:
        warning = (
            f"pod: {pod.metadata.name}_{pod.metadata.namespace}({pod.metadata.uid}). kubelet "
            f'does not have ClusterDNS IP configured and cannot create Pod using "{policy}" '
            'policy. Falling back to "Default" policy.'
        )
        return "host", warning
    return "cluster", None


def _merge_options(existing: Iterable[str], pod: Pod) -> list[str]:
    merged: dict[str, str] = {}
    for option in existing:
        name, _, value = option.partition(":")
        merged[name] = value
    dns = pod.spec.dns_config if pod.spec else None
    for pod_option in (dns.options if dns else None) or ():
        merged[pod_option.name or ""] = pod_option.value or ""
    return [f"{name}:{value}" if value else name for name, value in merged.items()]


def _fit_searches(searches: list[str]) -> tuple[list[str], bool]:
    """Searches within the resolvers' limits, and whether anything was cut."""
    fitted = [s for s in searches[:MAX_SEARCH_PATHS] if len(s) <= MAX_SEARCH_PATH_CHARS]
    while fitted and len(" ".join(fitted)) > MAX_SEARCH_LINE_CHARS:
        fitted.pop()
    return fitted, fitted != searches


def dns_config(pod: Pod, options: NodeRuntimeOptions) -> tuple[pb.DNSConfig, str | None]:
    """The sandbox's DNS config and a warning to record on the pod (None when all is well;
    several warnings are joined with "; ")."""
    policy, fallback = _policy(pod, bool(options.cluster_dns))
    warnings = [fallback] if fallback else []
    servers: list[str] = []
    searches: list[str] = []
    resolver_options: list[str] = []
    if policy != "none":
        servers, searches, resolver_options = _read_host(options.resolv_conf)
    if policy == "cluster":
        servers = list(options.cluster_dns)
        domain = options.cluster_domain
        if domain:
            namespace = pod.metadata.namespace or "default"
            searches = _unique([f"{namespace}.svc.{domain}", f"svc.{domain}", domain, *searches])
        resolver_options = list(DEFAULT_OPTIONS)
    dns = pod.spec.dns_config if pod.spec else None
    if dns is not None:
        servers = _unique([*servers, *(dns.nameservers or ())])
        searches = _unique([*searches, *(dns.searches or ())])
        resolver_options = _merge_options(resolver_options, pod)
    if len(servers) > MAX_NAMESERVERS:
        servers = servers[:MAX_NAMESERVERS]
        warnings.append(
            "Nameserver limits were exceeded, some nameservers have been omitted, the applied "
            f"nameserver line is: {' '.join(servers)}"
        )
    searches, cut = _fit_searches(searches)
    if cut:
        warnings.append(
            "Search Line limits were exceeded, some search paths have been omitted, the "
            f"applied search line is: {' '.join(searches)}"
        )
    config = pb.DNSConfig(servers=servers, searches=searches, options=resolver_options)
    return config, "; ".join(warnings) or None
