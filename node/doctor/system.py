"""Checks of the node's system: kernel, sysctls, commands, cgroups, runtime, files.

From kubeadm's node preflight: ``ip_forward`` and ``bridge-nf-call-iptables`` at 1 (a missing
``bridge-nf-call-iptables`` means br_netfilter is not loaded), swap off, the commands a node
runs (``conntrack``, ``ip``, ``iptables``, ``mount``, ``nsenter`` required; ``ebtables``,
``ethtool``, ``socat``, ``tc``, ``touch`` optional; here containerd and runc take crictl's
place, since this kubelet speaks CRI itself), the cgroup controllers of its system
verification, a valid node name, and the container runtime answering.  From k3s'
``check-config.sh``: the kernel options a node needs.  From this project's labs:
``route_localnet`` (NodePorts on 127.0.0.1), containerd's cgroup driver matching the
kubelet's (cgroupfs: this kubelet writes cgroupfs paths), the CNI configuration the runtime
reads, resolv.conf loops (a pod's resolver that points back at a loopback or at the cluster
DNS itself), and the node's certificates.

Sysctls set wrong are repaired by ``--fix`` (each is per network namespace, and the value is
the one the node needs whatever else it runs); nothing else here is, since each of the rest
needs a person (a kernel module, a package, a restart of containerd, a new certificate).
"""

from __future__ import annotations

import ipaddress
import json
import re
import tomllib
from typing import Any

from cryptography import x509

from kube.api.names import is_dns1123_subdomain
from node.doctor.access import sysctl_path
from node.doctor.check import Check, Context, Finding, Status, passed

REQUIRED_COMMANDS = ("conntrack", "ip", "iptables", "mount", "nsenter", "containerd", "runc")
OPTIONAL_COMMANDS = ("ebtables", "ethtool", "socat", "tc", "touch")
CGROUP_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "pids")
KERNEL_OPTIONS = (
    "NAMESPACES", "NET_NS", "PID_NS", "IPC_NS", "UTS_NS", "CGROUPS", "CGROUP_CPUACCT",
    "CGROUP_DEVICE", "CGROUP_FREEZER", "CGROUP_SCHED", "CPUSETS", "MEMCG", "KEYS", "VETH",
    "BRIDGE", "BRIDGE_NETFILTER", "IP_NF_FILTER", "IP_NF_TARGET_MASQUERADE", "IP_NF_NAT",
    "NF_NAT", "NF_CONNTRACK", "NETFILTER_XT_MATCH_ADDRTYPE", "NETFILTER_XT_MATCH_CONNTRACK",
    "NETFILTER_XT_MATCH_COMMENT", "NETFILTER_XT_MATCH_MULTIPORT", "NETFILTER_XT_MATCH_STATISTIC",
    "NETFILTER_XT_MARK", "NF_TABLES", "POSIX_MQUEUE", "OVERLAY_FS",
)  # fmt: skip
"""k3s' generally necessary options, less the IPVS match (no proxy mode here uses IPVS), plus
the matches and tables kube-proxy's rules use."""
CERT_WARN_FRACTION = 0.2
"""Warn when less than this part of a certificate's lifetime is left: a kubelet rotates its
certificates at 70-90% of their lifetime, so one this close to its end did not rotate."""


def sysctl_check(name: str, sysctl: str, want: str, status: Status, why: str, absent: str) -> Check:
    """``sysctl`` must read ``want``; otherwise ``status`` saying ``why``, repaired by
    writing ``want``; ``absent`` is the fix when the sysctl does not exist at all."""
    path = sysctl_path(sysctl)

    async def run(context: Context) -> Finding:
        value = context.host.read(path)
        if value is None:
            return Finding(Status.FAIL, f"{path} does not exist", absent)
        if value.strip() == want:
            return passed(f"{sysctl} = {want}")
        return Finding(
            status,
            f"{sysctl} = {value.strip()}: {why}",
            f"sysctl -w {sysctl}={want}",
            lambda: context.host.write(path, want),
        )

    return Check(name, path, run)


async def _swap(context: Context) -> Finding:
    lines = (context.host.read("/proc/swaps") or "").strip().splitlines()[1:]
    if not lines:
        return passed("no swap in use")
    devices = ", ".join(line.split()[0] for line in lines)
    return Finding(
        Status.WARN,
        f"swap is on ({devices}): memory limits and eviction assume pods are never swapped",
        "swapoff -a, and remove the swap entries from /etc/fstab",
    )


async def _commands(context: Context) -> Finding:
    missing = [c for c in REQUIRED_COMMANDS if context.host.which(c) is None]
    optional = [c for c in OPTIONAL_COMMANDS if context.host.which(c) is None]
    if missing:
        return Finding(
            Status.FAIL,
            f"not in PATH: {', '.join(missing)}",
            "install them (Debian: conntrack, iproute2, iptables, mount, util-linux, "
            "containerd, runc)",
        )
    if optional:
        return Finding(
            Status.WARN,
            f"optional commands not in PATH: {', '.join(optional)}",
            "install them (Debian: ebtables, ethtool, socat, iproute2, coreutils)",
        )
    return passed(f"in PATH: {', '.join(REQUIRED_COMMANDS + OPTIONAL_COMMANDS)}")


async def _cgroups(context: Context) -> Finding:
    enabled = {
        fields[0]
        for line in (context.host.read("/proc/cgroups") or "").splitlines()
        if not line.startswith("#") and len(fields := line.split()) == 4 and fields[3] == "1"
    }
    missing = [c for c in CGROUP_CONTROLLERS if c not in enabled]
    if missing:
        return Finding(
            Status.FAIL,
            f"cgroup controllers missing or disabled in /proc/cgroups: {', '.join(missing)}",
            "enable them on the kernel command line (cgroup_enable=...) and reboot",
        )
    return passed(f"enabled: {', '.join(CGROUP_CONTROLLERS)}")


async def _kernel_config(context: Context) -> Finding:
    config = context.host.kernel_config()
    if config is None:
        return Finding(
            Status.WARN,
            "no kernel configuration to read (neither /proc/config.gz nor /boot/config-*)",
            "modprobe configs, or install the kernel's config file, to have it checked",
        )
    have = {
        key.removeprefix("CONFIG_")
        for line in config.splitlines()
        if "=" in line and (key := line.split("=", 1)[0]) and line.split("=", 1)[1] in ("y", "m")
    }
    missing = [o for o in KERNEL_OPTIONS if o not in have]
    if missing:
        return Finding(
            Status.FAIL,
            "kernel options not set: " + ", ".join(f"CONFIG_{o}" for o in missing),
            "run a kernel built with them (y or m)",
        )
    return passed(f"all {len(KERNEL_OPTIONS)} options a node needs are set")


async def _node_name(context: Context) -> Finding:
    name = context.config.node_name
    problems = is_dns1123_subdomain(name)
    if problems:
        return Finding(
            Status.FAIL,
            f"node name {name!r}: {'; '.join(problems)}",
            "start the kubelet with a valid --node-name (lowercase, digits, '-' and '.')",
        )
    return passed(f"node name {name!r} is a valid DNS subdomain")


async def _runtime(context: Context) -> Finding:
    socket = str(context.config.runtime_socket)
    problem = context.host.socket_answers(socket)
    if problem is not None:
        return Finding(
            Status.FAIL,
            f"the container runtime does not answer at {socket}: {problem}",
            "start containerd (and check its log), or pass --container-runtime-endpoint",
        )
    return passed(f"containerd answers at {socket}")


async def _cgroup_driver(context: Context) -> Finding:
    path = str(context.config.containerd_config)
    text = context.host.read(path)
    if text is None:
        return Finding(
            Status.WARN,
            f"{path} does not exist: containerd runs with its defaults (cgroupfs for runc)",
            "pass --containerd-config if containerd reads another file",
        )
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return Finding(Status.FAIL, f"{path} is not valid TOML: {error}", f"correct {path}")
    runtimes = _dig(document, "plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes")
    systemd = sorted(
        name
        for name, runtime in runtimes.items()
        if isinstance(runtime, dict) and _dig(runtime, "options").get("SystemdCgroup") is True
    )
    if systemd:
        return Finding(
            Status.FAIL,
            f"containerd's runtimes {', '.join(systemd)} use the systemd cgroup driver; the "
            "kubelet uses cgroupfs, so pods' cgroups are not where it looks",
            f"set SystemdCgroup = false for them in {path} and restart containerd",
        )
    return passed(f"containerd's runtimes ({', '.join(sorted(runtimes)) or 'defaults'}) and "
                  "the kubelet both use cgroupfs")  # fmt: skip


def _dig(document: dict[str, Any], *keys: str) -> dict[str, Any]:
    for key in keys:
        value = document.get(key)
        document = value if isinstance(value, dict) else {}
    return document


def cni_conf(context: Context) -> tuple[str, dict[str, Any]] | Finding:
    """The path and content of the CNI configuration the runtime uses (the first in lexical
    order, as containerd and the CNI library pick it), or the fail saying why there is none."""
    conf_dir = str(context.config.cni_conf_dir)
    names = [
        n
        for n in context.host.listdir(conf_dir) or []
        if n.endswith((".conf", ".conflist", ".json"))
    ]
    if not names:
        return Finding(
            Status.FAIL,
            f"no CNI configuration in {conf_dir}: pods cannot get a network",
            "restart the kubelet (it writes the configuration once the Node has a podCIDR), "
            "or put the network's .conflist back",
        )
    path = f"{conf_dir}/{names[0]}"
    try:
        conf = json.loads(context.host.read(path) or "")
    except json.JSONDecodeError as error:
        return Finding(Status.FAIL, f"{path} is not JSON: {error}", f"correct {path}")
    if not isinstance(conf, dict):
        return Finding(Status.FAIL, f"{path} is not a JSON object", f"correct {path}")
    return path, conf


def cni_plugins(conf: dict[str, Any]) -> list[dict[str, Any]]:
    """The plugin entries of a .conflist, or the one plugin of a .conf."""
    plugins = conf.get("plugins", [conf])
    return [p for p in plugins if isinstance(p, dict)] if isinstance(plugins, list) else []


async def _cni_config(context: Context) -> Finding:
    found = cni_conf(context)
    if isinstance(found, Finding):
        return found
    path, conf = found
    plugins = cni_plugins(conf)
    if not plugins or not all(isinstance(p.get("type"), str) and p["type"] for p in plugins):
        return Finding(Status.FAIL, f"{path} names no plugin types", f"correct {path}")
    if not conf.get("cniVersion") or not conf.get("name"):
        return Finding(Status.FAIL, f"{path} has no cniVersion or name", f"correct {path}")
    bin_dir = str(context.config.cni_bin_dir)
    present = set(context.host.listdir(bin_dir) or [])
    missing = [p["type"] for p in plugins if p["type"] not in present]
    if missing:
        return Finding(
            Status.FAIL,
            f"{path} names plugins not in {bin_dir}: {', '.join(missing)}",
            "install the plugins into the CNI bin directory (the kubelet does at start)",
        )
    types = ", ".join(p["type"] for p in plugins)
    return passed(f"{path}: network {conf['name']!r}, cniVersion {conf['cniVersion']}, {types}")


async def _resolv_conf(context: Context) -> Finding:
    path = str(context.config.resolv_conf)
    text = context.host.read(path)
    if text is None:
        return Finding(Status.FAIL, f"{path} does not exist", "pass the kubelet's --resolv-conf")
    servers = [
        words[1]
        for line in text.splitlines()
        if len(words := line.split()) >= 2 and words[0] == "nameserver"
    ]
    loops = [s for s in servers if _loopback(s) or s in context.config.cluster_dns]
    if loops:
        return Finding(
            Status.FAIL,
            f"{path} (what pods with dnsPolicy Default and the cluster DNS forward to) names "
            f"{', '.join(loops)}: inside a pod that is the pod itself or the cluster DNS, "
            "so queries loop",
            "give the kubelet a --resolv-conf naming the real upstream resolvers "
            "(systemd-resolved: /run/systemd/resolve/resolv.conf)",
        )
    if not servers:
        return Finding(
            Status.WARN,
            f"{path} names no nameserver: pods with dnsPolicy Default (and the cluster DNS, "
            "for outside names) resolve nothing outside the cluster",
            "add the upstream resolvers to it, if the node has any",
        )
    return passed(f"{path}: nameservers {', '.join(servers)}")


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


async def _certificates(context: Context) -> Finding:
    now = context.host.now()
    found: list[tuple[str, x509.Certificate]] = []
    cert_dir = str(context.config.cert_dir)
    for name in context.host.listdir(cert_dir) or []:
        if name.endswith((".crt", ".pem")):
            text = context.host.read(f"{cert_dir}/{name}") or ""
            found += _pem_certificates(f"{cert_dir}/{name}", text)
    for label, pem in context.kubeconfig_certificates:
        found += _pem_certificates(label, pem)
    if not found:
        return Finding(
            Status.WARN,
            f"no certificates found in {cert_dir} or the kubeconfig",
            "pass the kubelet's --cert-dir",
        )
    expired: list[str] = []
    ending: list[str] = []
    for where, cert in found:
        subject = cert.subject.rfc4514_string()
        start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
        if not start <= now <= end:
            expired.append(
                f"{where} ({subject}): valid {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M}"
            )
        elif (end - now) < (end - start) * CERT_WARN_FRACTION:
            ending.append(f"{where} ({subject}): expires {end:%Y-%m-%d %H:%M}")
    if expired:
        return Finding(
            Status.FAIL,
            "not valid now: " + "; ".join(expired),
            "renew them (a kubelet's client certificate: delete it and restart the kubelet "
            "with a bootstrap kubeconfig); check the clock if they are not valid yet",
        )
    if ending:
        return Finding(
            Status.WARN,
            "near the end of their lifetime (rotation did not happen): " + "; ".join(ending),
            "check the kubelet's certificate rotation in its log; renew them",
        )
    soonest = min(found, key=lambda f: f[1].not_valid_after_utc)
    return passed(
        f"{len(found)} certificates valid; the first to expire, {soonest[0]}, on "
        f"{soonest[1].not_valid_after_utc:%Y-%m-%d}"
    )


def _pem_certificates(where: str, text: str) -> list[tuple[str, x509.Certificate]]:
    blocks = re.findall(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", text, re.S)
    found = []
    for block in blocks:
        try:
            found.append((where, x509.load_pem_x509_certificate(block.encode())))
        except ValueError:
            continue  # not a certificate after all: nothing to check the validity of
    return found


CHECKS = (
    sysctl_check(
        "ip-forward",
        "net.ipv4.ip_forward",
        "1",
        Status.FAIL,
        "the node does not forward pods' packets",
        "a kernel without IPv4 forwarding cannot run a node",
    ),
    sysctl_check(
        "bridge-nf-call-iptables",
        "net.bridge.bridge-nf-call-iptables",
        "1",
        Status.FAIL,
        "bridged pod traffic skips iptables, so pod -> Service -> pod on one node fails",
        "modprobe br_netfilter (and add it to /etc/modules-load.d)",
    ),
    sysctl_check(
        "route-localnet",
        "net.ipv4.conf.all.route_localnet",
        "1",
        Status.WARN,
        "NodePorts on 127.0.0.1 are not reachable (iptables proxy mode)",
        "a kernel without route_localnet: NodePorts on 127.0.0.1 cannot work",
    ),
    Check("swap", "/proc/swaps", _swap),
    Check("commands", "PATH", _commands),
    Check("cgroups", "/proc/cgroups", _cgroups),
    Check("kernel-config", "/proc/config.gz", _kernel_config),
    Check("node-name", "--node-name", _node_name),
    Check("container-runtime", "the runtime's socket", _runtime),
    Check("cgroup-driver", "containerd's config", _cgroup_driver),
    Check("cni-config", "the CNI conf and bin dirs", _cni_config),
    Check("resolv-conf", "the kubelet's --resolv-conf", _resolv_conf),
    Check("certificates", "the kubelet's certificates", _certificates),
)
