"""Server-side printing: the columns ``kubectl get`` shows for each kind.

kubectl asks the API server for a ``meta.k8s.io/v1 Table`` and prints the cells it gets back, so
the familiar tables (``NAME READY STATUS RESTARTS AGE`` for pods) are rendered here, on the
server.  Each kind declares its columns next to its type; a column is a name, a type and a
function from (object, now) to the cell.  Columns with priority above 0 appear only with
``-o wide``; an undefined column is a cell without a definition.  Ages use upstream's
``HumanDuration`` rounding so they read the same as on a real cluster.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Cell = str | int | float | bool | None


@dataclass(frozen=True)
class Column:
    """One printer column of a kind."""

    name: str
    cell: Callable[[Any, datetime.datetime], Cell]
    type: str = "string"
    format: str = ""
    priority: int = 0
    description: str = ""
    defined: bool = True
    """False for a cell a row carries past the column definitions, as some upstream printers
    append one (IPAddress's age): kubectl prints only the defined columns."""


def human_duration(d: datetime.timedelta) -> str:
    """A duration the way kubectl prints ages: ``45s``, ``3m20s``, ``5h``, ``12d``, ``2y3d``."""
    seconds = int(d.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def short_human_duration(d: datetime.timedelta) -> str:
    """A duration in its largest whole unit (``45s``, ``3m``, ``5h``, ``12d``, ``2y``), as
    upstream's ``ShortHumanDuration`` (``kubeadm token list``'s TTL)."""
    seconds = int(d.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    hours = seconds // 3600
    if hours < 24:
        return f"{hours}h"
    if hours < 24 * 365:
        return f"{hours // 24}d"
    return f"{hours // 24 // 365}y"


def age(timestamp: datetime.datetime | None, now: datetime.datetime) -> str:
    """The age cell for a timestamp (``<unknown>`` when there is none)."""
    if timestamp is None:
        return "<unknown>"
    return human_duration(now - timestamp)


def join_or_none(values: list[str] | None, none: str = "<none>") -> str:
    """Comma-joined values, or kubectl's placeholder when there are none."""
    return ",".join(values) if values else none


NAME_COLUMN = Column(
    "Name",
    lambda o, now: o.metadata.name,
    format="name",
    description="Name must be unique within a namespace.",
)
AGE_COLUMN = Column(
    "Age",
    lambda o, now: age(o.metadata.creation_timestamp, now),
    description="CreationTimestamp is a timestamp representing the server time when this "
    "object was created.",
)


def rfc3339(timestamp: datetime.datetime | None) -> str:
    """A timestamp as default tables show it: UTC, whole seconds (Go's zero time if unset)."""
    if timestamp is None:
        return "0001-01-01T00:00:00Z"
    if timestamp.tzinfo is not None:
        timestamp = timestamp.astimezone(datetime.UTC)
    return timestamp.strftime("%Y-%m-%dT%H:%M:%SZ")


CREATED_AT_COLUMN = Column(
    "Created At",
    lambda o, now: rfc3339(o.metadata.creation_timestamp),
    type="date",
    description=AGE_COLUMN.description,
)
DEFAULT_COLUMNS = (NAME_COLUMN, CREATED_AT_COLUMN)
"""The table of kinds without printers of their own, as upstream's default converter."""
