"""The type tree of a declared struct, built once per class.

``msgspec.inspect.type_info`` rebuilds the whole tree (resolving every annotation) on each
call, which costs far more than the walks that read it; patching, field tracking and the
decoder's unknown-field path all read the same trees for every request, so they share these
cached ones.
"""

from __future__ import annotations

import msgspec.inspect as mi

_TREES: dict[type[object], mi.Type] = {}


def type_tree(cls: type[object]) -> mi.Type:
    """The msgspec type tree of ``cls`` (kept for the life of the process)."""
    tree = _TREES.get(cls)
    if tree is None:
        tree = _TREES[cls] = mi.type_info(cls)
    return tree


_FIELDS: dict[int, tuple[mi.StructType, dict[str, mi.Field]]] = {}


def fields_by_name(struct: mi.StructType) -> dict[str, mi.Field]:
    """The fields of a struct type by JSON name."""
    cached = _FIELDS.get(id(struct))
    if cached is None or cached[0] is not struct:
        cached = _FIELDS[id(struct)] = (struct, {f.encode_name: f for f in struct.fields})
    return cached[1]
