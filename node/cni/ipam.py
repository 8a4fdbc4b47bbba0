"""Host-local style IP address management for one node's podCIDR.

State lives in plain files so that it survives plugin processes (each CNI call is a fresh
process) and needs no daemon: under ``<data_dir>/networks/<network>/`` every allocated address
is one file named after the IP and holding ``<container id>\\n<ifname>``, next to
``last_reserved_ip`` (allocation continues after it, round robin, so a freed address is not
handed out again at once while stale conntrack entries for it may still live) and ``lock``.
Every read-modify-write of the directory holds an exclusive ``fcntl.flock`` on ``lock``, which
serialises concurrent plugin processes of the node.

The range is the subnet minus its network address, its broadcast address and the gateway (the
bridge's address, the first host by default).  Contracts: :meth:`HostLocalIPAM.allocate` is
idempotent per (container id, ifname); :meth:`HostLocalIPAM.release` is idempotent and
releases every address of the pair, so no address can leak through retries.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LAST_RESERVED = "last_reserved_ip"
LOCK = "lock"


class IPAMError(Exception):
    """The allocation could not be done (bad range, exhausted range)."""


class RangeExhausted(IPAMError):
    """Every address of the range is allocated."""


class HostLocalIPAM:
    """Addresses of ``subnet`` for network ``network``, stored under ``data_dir``."""

    def __init__(
        self,
        data_dir: Path,
        network: str,
        subnet: ipaddress.IPv4Network,
        gateway: ipaddress.IPv4Address | None = None,
    ) -> None:
        if subnet.num_addresses < 4:
            raise IPAMError(f"subnet {subnet} is too small for pods")
        self.subnet = subnet
        self.gateway = gateway if gateway is not None else subnet.network_address + 1
        if self.gateway not in subnet:
            raise IPAMError(f"gateway {self.gateway} is outside subnet {subnet}")
        self.dir = data_dir / "networks" / network

    def allocate(self, container_id: str, ifname: str) -> ipaddress.IPv4Interface:
        """The address of (container_id, ifname), allocating one if it has none yet."""
        owner = _owner(container_id, ifname)
        with self._locked():
            existing = self._find_locked(owner)
            if existing:
                return self._interface(existing[0])
            candidates = list(self._range())
            start = self._resume_index_locked(candidates)
            for offset in range(len(candidates)):
                ip = candidates[(start + offset) % len(candidates)]
                try:
                    fd = os.open(self.dir / str(ip), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    continue
                with os.fdopen(fd, "w") as f:
                    f.write(owner)
                (self.dir / LAST_RESERVED).write_text(str(ip))
                return self._interface(ip)
        raise RangeExhausted(f"no free address left in {self.subnet} for network {self.dir.name}")

    def get(self, container_id: str, ifname: str) -> ipaddress.IPv4Interface | None:
        """The address of (container_id, ifname), or None; read-only."""
        with self._locked():
            existing = self._find_locked(_owner(container_id, ifname))
        return self._interface(existing[0]) if existing else None

    def release(self, container_id: str, ifname: str) -> None:
        """Free every address of (container_id, ifname); idempotent."""
        with self._locked():
            for ip in self._find_locked(_owner(container_id, ifname)):
                (self.dir / str(ip)).unlink(missing_ok=True)

    def allocated(self) -> dict[ipaddress.IPv4Address, str]:
        """Every allocated address and its owner's container id; read-only."""
        with self._locked():
            return {ip: owner.split("\n")[0] for ip, owner in self._entries_locked()}

    def _range(self) -> Iterator[ipaddress.IPv4Address]:
        return (ip for ip in self.subnet.hosts() if ip != self.gateway)

    def _interface(self, ip: ipaddress.IPv4Address) -> ipaddress.IPv4Interface:
        return ipaddress.IPv4Interface(f"{ip}/{self.subnet.prefixlen}")

    def _resume_index_locked(self, candidates: list[ipaddress.IPv4Address]) -> int:
        try:
            last = ipaddress.IPv4Address((self.dir / LAST_RESERVED).read_text().strip())
        except (FileNotFoundError, ValueError):
            return 0
        return candidates.index(last) + 1 if last in candidates else 0

    def _entries_locked(self) -> Iterator[tuple[ipaddress.IPv4Address, str]]:
        for path in self.dir.iterdir():
            try:
                ip = ipaddress.IPv4Address(path.name)
            except ValueError:
                continue
            yield ip, path.read_text()

    def _find_locked(self, owner: str) -> list[ipaddress.IPv4Address]:
        return sorted(ip for ip, content in self._entries_locked() if content == owner)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _owner(container_id: str, ifname: str) -> str:
    return f"{container_id}\n{ifname}"
