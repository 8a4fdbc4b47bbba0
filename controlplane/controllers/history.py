"""What the daemonset and statefulset controllers share: ControllerRevisions, the template
history both keep (upstream ``pkg/controller/history`` and the ``getPatch`` of both
controllers), and the scaling of their ``maxUnavailable`` budgets.

A revision's ``data`` is the patch that restores its template: ``{"spec": {"template": {...,
"$patch": "replace"}}}``.  Its name is ``<owner>-<hash>``, the hash being upstream's
``HashControllerRevision``: FNV-32 of the data as Go's ``json.Marshal`` writes it (keys
sorted, no spaces, HTML characters escaped), followed by the decimal collision count when
there is one, printed in decimal and mapped onto upstream's "safe" alphabet.  When another
revision already holds the name with different data the collision count goes up and the hash
changes.  Pods carry the hash (DaemonSet) or the revision name (StatefulSet) in the
``controller-revision-hash`` label, which is how a revision is known to be live.

Revisions are numbered: the newest has the highest ``revision``; rolling back to an older
template renumbers the equal revision instead of creating a new one.  Truncation deletes the
oldest revisions no pod uses, down to ``revisionHistoryLimit``.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from kube.api import codec
from kube.api.kinds.apps_v1 import ControllerRevision
from kube.api.kinds.core_v1.pod import PodTemplateSpec
from kube.api.labels import Selector
from kube.api.meta_v1 import ObjectMeta, Resource
from kube.api.owners import controller_of, controller_ref
from kube.api.struct import IntOrString
from kube.client.errors import ApiError
from kube.client.interface import ApiClient

CONTROLLER_REVISION_HASH_LABEL = "controller-revision-hash"
"""On revisions: their hash.  On pods: the revision (hash or name) they were made from."""

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_PREFIX = 223
_FNV32_OFFSET, _FNV32_PRIME = 0x811C9DC5, 0x01000193
_EPOCH = datetime.datetime.min.replace(tzinfo=datetime.UTC)


def go_json(value: Any) -> bytes:
    """Go's ``json.Marshal`` of decoded JSON: sorted keys, compact, ``<>&`` escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


def _fnv32(data: bytes) -> int:
    """FNV-1 (not 1a), 32 bits, as Go's ``hash/fnv.New32``."""
    value = _FNV32_OFFSET
    for byte in data:
        value = (value * _FNV32_PRIME) & 0xFFFFFFFF
        value ^= byte
    return value


def safe_encode(text: str) -> str:
    """Upstream ``rand.SafeEncodeString``: each byte mapped onto consonants and digits that
    cannot spell words."""
    return "".join(_SAFE_ALPHABET[b % len(_SAFE_ALPHABET)] for b in text.encode())


def template_patch(template: PodTemplateSpec | None) -> dict[str, Any]:
    """The revision data of a template: the patch that puts it back."""
    raw = codec.to_builtins(template) if template is not None else {}
    return {"spec": {"template": {**raw, "$patch": "replace"}}}


def template_of(revision: ControllerRevision) -> PodTemplateSpec:
    """The template a revision's data restores (upstream ``ApplyRevision``)."""
    raw = dict(((revision.data or {}).get("spec") or {}).get("template") or {})
    raw.pop("$patch", None)
    return msgspec.convert(raw, PodTemplateSpec)


def hash_revision(data: Any, collision_count: int) -> str:
    """Upstream ``HashControllerRevision`` of revision data and the owner's collision count."""
    payload = go_json(data) + str(collision_count).encode()
    return safe_encode(str(_fnv32(payload)))


def revision_name(prefix: str, hash_: str) -> str:
    return f"{prefix[:_MAX_PREFIX]}-{hash_}"


def new_revision(
    parent: Resource,
    template: PodTemplateSpec | None,
    revision: int,
    collision_count: int,
) -> ControllerRevision:
    """An unsaved revision of ``parent``'s template, named and labelled by its hash.

    It carries the template's labels (so the parent's selector finds it) and the parent's
    annotations, as upstream's revisions do.
    """
    data = template_patch(template)
    hash_ = hash_revision(data, collision_count)
    labels = dict(template.labels() if template is not None else {})
    labels[CONTROLLER_REVISION_HASH_LABEL] = hash_
    return ControllerRevision(
        metadata=ObjectMeta(
            name=revision_name(parent.metadata.name or "", hash_),
            namespace=parent.metadata.namespace,
            labels=labels,
            annotations=dict(parent.metadata.annotations or {}) or None,
            owner_references=[controller_ref(parent)],
        ),
        data=data,
        revision=revision,
    )


def sort_revisions(revisions: Iterable[ControllerRevision]) -> list[ControllerRevision]:
    """Oldest first: by revision number, then creation time, then name."""
    return sorted(
        revisions,
        key=lambda r: (r.revision or 0, r.metadata.creation_timestamp or _EPOCH, r.metadata.name),
    )


def next_revision(revisions: Sequence[ControllerRevision]) -> int:
    """One more than the highest revision number (1 for the first)."""
    return max((r.revision or 0 for r in revisions), default=0) + 1


def equal_revision(a: ControllerRevision, b: ControllerRevision) -> bool:
    """Whether two revisions hold the same template."""
    return bool(a.data == b.data)


def owned_revisions(
    revisions: Iterable[ControllerRevision], owner: Resource, selector: Selector
) -> tuple[list[ControllerRevision], list[ControllerRevision]]:
    """The revisions ``owner`` controls, and the orphans its selector matches (to adopt)."""
    owned, orphans = [], []
    for revision in revisions:
        ref = controller_of(revision)
        if ref is None:
            if revision.metadata.deletion_timestamp is None and selector.matches(
                revision.metadata.labels
            ):
                orphans.append(revision)
        elif ref.uid == owner.metadata.uid:
            owned.append(revision)
    return owned, orphans


class History:
    """Reads and writes one owner kind's revisions through the API.

    Every method is idempotent with respect to its target state, except ``create``, which may
    bump ``collision_count`` when it has to rename.
    """

    def __init__(self, client: ApiClient) -> None:
        self.client = client

    async def adopt(self, owner: Resource, revision: ControllerRevision) -> ControllerRevision:
        """Make ``owner`` the controller of an orphan revision (the uid guards against a
        revision recreated under the same name)."""
        ref = codec.to_builtins(controller_ref(owner))
        body = {"metadata": {"ownerReferences": [ref], "uid": revision.metadata.uid}}
        return await self.client.patch(
            ControllerRevision,
            revision.metadata.name or "",
            revision.metadata.namespace,
            body,
            patch_type="strategic",
        )

    async def create(
        self, parent: Resource, revision: ControllerRevision, collision_count: list[int]
    ) -> ControllerRevision:
        """Create ``revision``, or return the existing one holding the same data.

        ``collision_count`` is a one-item box the caller reads back: each name taken by
        different data increments it and the name is recomputed.
        """
        while True:
            hash_ = hash_revision(revision.data, collision_count[0])
            candidate = msgspec.structs.replace(
                revision,
                metadata=msgspec.structs.replace(
                    revision.metadata,
                    name=revision_name(parent.metadata.name or "", hash_),
                    labels={
                        **(revision.metadata.labels or {}),
                        CONTROLLER_REVISION_HASH_LABEL: hash_,
                    },
                ),
            )
            try:
                return await self.client.create(candidate)
            except ApiError as error:
                if not error.already_exists:
                    raise
            existing = await self.client.get(
                ControllerRevision, candidate.metadata.name or "", candidate.metadata.namespace
            )
            if existing.data == candidate.data:
                return existing
            collision_count[0] += 1

    async def renumber(self, revision: ControllerRevision, number: int) -> ControllerRevision:
        """Give an existing revision a new revision number (a rollback to it)."""
        if revision.revision == number:
            return revision
        return await self.client.update(msgspec.structs.replace(revision, revision=number))

    async def delete_oldest(
        self,
        revisions: Sequence[ControllerRevision],
        live: Callable[[ControllerRevision], bool],
        count: int,
    ) -> None:
        """Delete up to ``count`` of the oldest revisions that are not ``live``."""
        for revision in sort_revisions(revisions):
            if count <= 0:
                return
            if live(revision):
                continue
            try:
                await self.client.delete(
                    ControllerRevision, revision.metadata.name or "", revision.metadata.namespace
                )
            except ApiError as error:
                if not error.not_found:
                    raise
            count -= 1


def scaled_count(value: IntOrString | None, total: int, default: int) -> int:
    """An int-or-percent rollout budget (``maxUnavailable``) of ``total``, percentages rounded
    up (upstream ``GetScaledValueFromIntOrPercent(..., true)``); ``default`` when unset."""
    if value is None:
        return default
    if isinstance(value, int):
        return value
    if value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)
