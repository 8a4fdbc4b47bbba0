"""What a new sandbox's CNI ADD made, kept by the kubelet and served at ``/debug/sandboxes``.

Upstream's kubelet leaves the pod network to the runtime and records nothing of it; the
runtime does know: containerd's verbose PodSandboxStatus carries, in its ``info`` JSON, the
CNI result of the sandbox's ADD (``cniResult``: go-cni's Result, interfaces by name, each
with its IPs, MAC and the netns it is in, empty for the host's: the bridge, a veth's host
end).  ``kubelab story`` needs it (which sandbox a pod got, when, which interface and address,
which host links carry it), and reads it through the API server's ``nodes/NAME/proxy``.

Why an endpoint and not Events (the first take): two more Events per pod are two more API
writes on every pod's way to Running, competing with the status write the pod waits for;
bench/story.py saw the p50s 10-20% apart with them on a busy 2-core machine (with noise of
the same order), while a record in memory adds no write at all.  Nor is the verbose status
read on that way: the sandbox's time and id are noted as it is made, and its CNI result read
once the pod's status is sent (``RuntimeManager.record_sandbox``).  The log is bounded: the
latest ``capacity`` sandboxes, by pod UID (a pod's new sandbox replaces its old record), so a
story can be told for the pods a node started recently.  A runtime that says nothing (another
runtime, a hostNetwork pod) yields a record without interfaces.
"""

from __future__ import annotations

import datetime
import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

INFO_KEY = "info"
LOOPBACK = "lo"
"""The loopback plugin's interface, in every pod: not worth telling."""
DEFAULT_CAPACITY = 1000


@dataclass(frozen=True)
class Interface:
    name: str
    ips: tuple[str, ...]
    in_pod: bool
    """In the pod's network namespace (the pod's end); False: on the host."""


@dataclass(frozen=True)
class SandboxRecord:
    """One sandbox the kubelet created: for which pod, when, and its network."""

    namespace: str
    name: str
    uid: str
    sandbox_id: str
    created: datetime.datetime
    interfaces: tuple[Interface, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "pod": {"namespace": self.namespace, "name": self.name, "uid": self.uid},
            "sandboxID": self.sandbox_id,
            "created": self.created.isoformat().replace("+00:00", "Z"),
            "interfaces": [
                {"name": i.name, "ips": list(i.ips), "inPod": i.in_pod} for i in self.interfaces
            ],
        }


class SandboxLog:
    """The latest sandboxes, newest last; only the pod workers add (one per pod at a time)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._records: OrderedDict[str, SandboxRecord] = OrderedDict()

    def add(self, record: SandboxRecord) -> None:
        self._records.pop(record.uid, None)
        self._records[record.uid] = record
        while len(self._records) > self.capacity:
            self._records.popitem(last=False)

    def records(self) -> list[SandboxRecord]:
        return list(self._records.values())


def cni_interfaces(info: Mapping[str, str]) -> tuple[Interface, ...]:
    """The interfaces of the sandbox's CNI result, pod ends first, loopback left out; () when
    there is none or the runtime's detail is not JSON of that shape."""
    try:
        result = json.loads(info.get(INFO_KEY, "null") or "null")
    except ValueError:
        return ()
    interfaces = result.get("cniResult") if isinstance(result, dict) else None
    found = interfaces.get("Interfaces") if isinstance(interfaces, dict) else None
    if not isinstance(found, dict):
        return ()
    listed = [_interface(name, config) for name, config in found.items() if name != LOOPBACK]
    return tuple(sorted(listed, key=lambda i: (not i.in_pod, i.name)))


def _interface(name: str, config: Any) -> Interface:
    config = config if isinstance(config, dict) else {}
    ips = tuple(
        str(ip["IP"])
        for ip in config.get("IPConfigs") or ()
        if isinstance(ip, dict) and ip.get("IP")
    )
    return Interface(name, ips, bool(config.get("Sandbox")))
