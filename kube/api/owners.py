"""Owner references: who owns an object, and the controller reference among them.

Controllers adopt and release objects through these helpers, and the garbage collector follows
the same references; an object has at most one controller reference (validation enforces it).
"""

from __future__ import annotations

from kube.api.meta_v1 import OwnerReference, Resource


def controller_ref(owner: Resource, block_owner_deletion: bool = True) -> OwnerReference:
    """A controller reference to ``owner``, as a controller puts on what it creates."""
    return OwnerReference(
        api_version=owner.kind_info.api_version,
        kind=owner.kind_info.kind,
        name=owner.metadata.name,
        uid=owner.metadata.uid,
        controller=True,
        block_owner_deletion=block_owner_deletion,
    )


def controller_of(obj: Resource) -> OwnerReference | None:
    """The reference of the object's controller, if it has one."""
    for ref in obj.metadata.owner_references or ():
        if ref.controller:
            return ref
    return None


def is_owned_by(obj: Resource, owner: Resource) -> bool:
    """Whether any owner reference of ``obj`` names ``owner`` (by uid)."""
    uid = owner.metadata.uid
    return uid is not None and any(r.uid == uid for r in obj.metadata.owner_references or ())


def is_controlled_by(obj: Resource, owner: Resource) -> bool:
    """Whether ``owner`` is the controller of ``obj``."""
    ref = controller_of(obj)
    return ref is not None and ref.uid is not None and ref.uid == owner.metadata.uid


def set_owner(obj: Resource, ref: OwnerReference) -> None:
    """Add ``ref`` to the owners of ``obj``, replacing a reference with the same uid."""
    refs = [r for r in obj.metadata.owner_references or () if r.uid != ref.uid]
    obj.metadata.owner_references = [*refs, ref]


def remove_owner(obj: Resource, uid: str) -> bool:
    """Drop the reference to the owner with ``uid``; whether there was one."""
    refs = obj.metadata.owner_references or []
    kept = [r for r in refs if r.uid != uid]
    if len(kept) == len(refs):
        return False
    obj.metadata.owner_references = kept or None
    return True
