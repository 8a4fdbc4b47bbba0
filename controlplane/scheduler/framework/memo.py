"""Plugins' answers per node, reused across scheduling cycles while nothing they read changed."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from controlplane.scheduler.framework.parts import Recent
from controlplane.scheduler.framework.types import NodeInfo

V = TypeVar("V")


class NodeMemo(Generic[V]):
    """Last answers per node (one Score plugin's scores, or the first rejection among the
    keyed Filter plugins), reused while neither the node nor the pod's key changed.

    Filter and Score run for hundreds of nodes per pod, and between two cycles almost every
    node is unchanged (only the one the last pod went to, and the one whose pod the watch
    confirmed, move).  A plugin that names what it reads of the pod (``filter_cache_key``,
    ``score_cache_key``: a hashable such as the pod's requests) lets the framework reuse a
    node's answer while the node's ``generation`` and that key are what they were; every
    change to a NodeInfo bumps its generation.  Answers computed on what-if states
    (nominated pods, preemption) never pass through here.

    Answers are kept for the ``keys`` keys used most recently: a key that comes back (the
    domains a spread constraint rejects take turns as pods land) finds its answers again.
    """

    __slots__ = ("_tables",)

    def __init__(self, keys: int = 1) -> None:
        self._tables: Recent[Hashable, dict[str, tuple[int, V]]] = Recent(lambda _: {}, keys)

    def reuse(
        self,
        nodes: list[NodeInfo],
        key: Hashable | None,
        compute: Callable[[list[NodeInfo]], list[V] | None],
    ) -> list[V]:
        """``compute`` over ``nodes``, asking it only about nodes without a reusable answer;
        a ``None`` from ``compute`` (a failure) is passed on as an empty list."""
        if key is None:
            return compute(nodes) or []
        entries = self._tables.get(key)
        get = entries.get
        answers: list[Any] = [
            entry[1]
            if (entry := get(node.name)) is not None and entry[0] == node.generation
            else _STALE
            for node in nodes
        ]
        fresh = [node for node, answer in zip(nodes, answers, strict=True) if answer is _STALE]
        if not fresh:
            return answers
        computed = compute(fresh)
        if computed is None:
            return []
        found = iter(computed)
        for i, node in enumerate(nodes):
            if answers[i] is _STALE:
                answer = answers[i] = next(found)
                entries[node.name] = (node.generation, answer)
        return answers


_STALE = object()
