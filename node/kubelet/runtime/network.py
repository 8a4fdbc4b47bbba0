"""What a new sandbox's CNI ADD made, read from the runtime, for the kubelet's events.

Upstream's kubelet leaves the pod network to the runtime and records nothing of it; the
runtime does know: containerd's verbose PodSandboxStatus carries, in its ``info`` JSON, the
CNI result of the sandbox's ADD (``cniResult``: go-cni's Result, interfaces by name, each
with its IPs, MAC and the netns it is in, empty for the host's: the bridge, a veth's host
end).  The kubelet
turns that into one ``AddedInterface`` Event (the reason Multus gives the same fact), so
``kubelab story`` can show which interface and address a pod got and which host link carries
it, without anyone scraping a log.  A runtime that says nothing (another runtime, a
hostNetwork pod) yields no interfaces and no event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

INFO_KEY = "info"
LOOPBACK = "lo"
"""The loopback plugin's interface, in every pod: not worth telling."""


@dataclass(frozen=True)
class Interface:
    name: str
    ips: tuple[str, ...]
    in_pod: bool
    """In the pod's network namespace (the pod's end); False: on the host."""


def cni_interfaces(info: Mapping[str, str]) -> list[Interface]:
    """The interfaces of the sandbox's CNI result, pod ends first; [] when there is none or
    the runtime's detail is not JSON of that shape."""
    try:
        result = json.loads(info.get(INFO_KEY, "null") or "null")
    except ValueError:
        return []
    interfaces = result.get("cniResult") if isinstance(result, dict) else None
    found = interfaces.get("Interfaces") if isinstance(interfaces, dict) else None
    if not isinstance(found, dict):
        return []
    listed = [_interface(name, config) for name, config in found.items() if name != LOOPBACK]
    return sorted(listed, key=lambda i: (not i.in_pod, i.name))


def _interface(name: str, config: Any) -> Interface:
    config = config if isinstance(config, dict) else {}
    ips = tuple(
        str(ip["IP"])
        for ip in config.get("IPConfigs") or ()
        if isinstance(ip, dict) and ip.get("IP")
    )
    return Interface(name, ips, bool(config.get("Sandbox")))


def added_interface_message(interfaces: list[Interface]) -> str | None:
    """The event's message: ``Add eth0 [10.244.1.5] from CNI; on the host cni0, veth...``."""
    pod_ends = [i for i in interfaces if i.in_pod]
    if not pod_ends:
        return None
    added = ", ".join(f"{i.name} [{', '.join(i.ips)}]" for i in pod_ends)
    host_ends = [i.name for i in interfaces if not i.in_pod]
    on_host = f"; on the host {', '.join(host_ends)}" if host_ends else ""
    return f"Add {added} from CNI{on_host}"
