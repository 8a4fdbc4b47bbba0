"""Plugins' answers per node, reused across scheduling cycles while nothing they read changed."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from controlplane.scheduler.framework.parts import Recent
from controlplane.scheduler.framework.types import NodeInfo

V = TypeVar("V")


class _Answers(Generic[V]):
    """One key's answers, by node generation, and each node's latest generation answered."""

    __slots__ = ("by_generation", "latest")

    def __init__(self) -> None:
        self.by_generation: dict[int, V] = {}
        self.latest: dict[str, int] = {}


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

    Generations come from one counter, so a generation names one node in one state: answers
    are looked up by generation alone (one dictionary lookup a node, the hot loop), and a
    node's previous answer is dropped when it gets a new one.

    Answers are kept for the ``keys`` keys used most recently: a key that comes back (the
    domains a spread constraint rejects take turns as pods land) finds its answers again.
    """

    __slots__ = ("_tables",)

    def __init__(self, keys: int = 1) -> None:
        self._tables: Recent[Hashable, _Answers[V]] = Recent(lambda _: _Answers(), keys)

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
        table = self._tables.get(key)
        get = table.by_generation.get
        answers: list[Any] = [get(node.generation, _STALE) for node in nodes]
        fresh = [node for node, answer in zip(nodes, answers, strict=True) if answer is _STALE]
        if not fresh:
            return answers
        computed = compute(fresh)
        if computed is None:
            return []
        by_generation, latest = table.by_generation, table.latest
        found = iter(computed)
        for i, node in enumerate(nodes):
            if answers[i] is _STALE:
                answer = answers[i] = next(found)
                previous = latest.get(node.name)
                if previous is not None:
                    by_generation.pop(previous, None)
                latest[node.name] = node.generation
                by_generation[node.generation] = answer
        return answers


_STALE = object()
