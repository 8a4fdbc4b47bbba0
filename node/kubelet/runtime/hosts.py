"""A pod's hostname and its kubelet-managed /etc/hosts (upstream ``kubelet_pods.go``).

``pod_hostname`` is upstream's ``GeneratePodHostNameAndDomain``: ``spec.hostname`` or the
pod's name cut to 63 characters (without a trailing ``-`` or ``.``), and, with a
``spec.subdomain``, the domain ``<subdomain>.<ns>.svc.<cluster domain>``.  The sandbox's
hostname and the hosts file both come from it.

``write_etc_hosts`` writes the managed hosts file (``makeHostsFile``): the localhost lines,
one line per pod IP naming the pod (``<ip>\\t<host>.<domain>\\t<host>`` with a subdomain),
then the ``hostAliases``.  It goes to ``<pod dir>/etc-hosts`` and is bind-mounted into
every container.  Host-network pods see the node's own /etc/hosts, so they get none.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kube.api.kinds.core_v1.pod import HostAlias, Pod
from node.kubelet.runtime.options import NodeRuntimeOptions

MAX_HOSTNAME = 63
_HEADER = (
    "# Kubernetes-managed hosts file.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)


def pod_hostname(pod: Pod, options: NodeRuntimeOptions) -> tuple[str, str]:
    """The pod's hostname and its domain ("" without a subdomain)."""
    spec = pod.spec
    hostname = (spec.hostname if spec else None) or pod.metadata.name or ""
    if len(hostname) > MAX_HOSTNAME:
        hostname = hostname[:MAX_HOSTNAME].rstrip("-.")
    subdomain = spec.subdomain if spec else None
    domain = ""
    if subdomain:
        domain = f"{subdomain}.{pod.metadata.namespace}.svc.{options.cluster_domain}"
    return hostname, domain


def hosts_content(
    pod_ips: Sequence[str], hostname: str, domain: str, aliases: Sequence[HostAlias]
) -> str:
    """The managed hosts file's text."""
    names = f"{hostname}.{domain}\t{hostname}" if domain else hostname
    lines = [_HEADER, *(f"{ip}\t{names}\n" for ip in pod_ips)]
    if aliases:
        lines.append("\n# Entries added by HostAliases.\n")
        lines.extend(f"{a.ip}\t" + "\t".join(a.hostnames or ()) + "\n" for a in aliases)
    return "".join(lines)


def etc_hosts_path(options: NodeRuntimeOptions, pod_uid: str) -> Path:
    return options.pod_dir(pod_uid) / "etc-hosts"


def write_etc_hosts(pod: Pod, pod_ips: Sequence[str], options: NodeRuntimeOptions) -> Path | None:
    """Write the pod's hosts file (replacing it whole) and return its path; None for
    host-network pods."""
    spec = pod.spec
    if spec is not None and spec.host_network:
        return None
    hostname, domain = pod_hostname(pod, options)
    content = hosts_content(pod_ips, hostname, domain, (spec.host_aliases if spec else None) or ())
    path = etc_hosts_path(options, pod.metadata.uid or "")
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(content)
    staging.chmod(0o644)
    os.replace(staging, path)
    return path
