"""Objects as ``meta.k8s.io/v1 Table``: the server side of ``kubectl get``.

Cells come from the kind's printer columns (kube.api.printing); each row carries the
object as PartialObjectMetadata by default (``includeObject=Metadata``), which is where kubectl
finds the namespace for ``-A`` and the labels for ``--show-labels``.  A watch sends one-row
tables, with the column definitions only in the first.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from controlplane.apiserver import errors
from kube.api import codec
from kube.api.meta_v1 import (
    ListMeta,
    PartialObjectMetadata,
    Resource,
    Table,
    TableColumnDefinition,
    TableRow,
)
from kube.api.scheme import KindInfo

INCLUDE = ("None", "Metadata", "Object")


def _row_object(obj: Resource, include: str) -> object:
    if include == "None":
        return None
    if include == "Object":
        return codec.to_builtins(obj)
    return codec.to_builtins(PartialObjectMetadata(metadata=obj.metadata))


def columns(info: KindInfo) -> list[TableColumnDefinition]:
    return [
        TableColumnDefinition(
            name=c.name,
            type=c.type,
            format=c.format,
            description=c.description,
            priority=c.priority,
        )
        for c in info.columns
        if c.defined
    ]


def table(
    info: KindInfo,
    objects: Sequence[Resource],
    now: datetime.datetime,
    *,
    include: str = "Metadata",
    with_columns: bool = True,
    list_meta: ListMeta | None = None,
) -> Table:
    """A Table of ``objects`` rendered at ``now``."""
    if include not in INCLUDE:
        raise errors.bad_request(
            f'includeObject: Unsupported value: "{include}": supported values: '
            + ", ".join(f'"{i}"' for i in INCLUDE)
        )
    rows = [
        TableRow(cells=[c.cell(obj, now) for c in info.columns], object=_row_object(obj, include))
        for obj in objects
    ]
    return Table(
        metadata=list_meta or ListMeta(),
        column_definitions=columns(info) if with_columns else [],
        rows=rows,
    )
