"""Which of many label selectors match a label set, without trying each: what upstream's
``pkg/util/selectors`` keeps for the HPA controller, to find pods that two HPAs would scale.

Each selector has a key (an HPA's ``namespace/name``) and applies within one namespace.  One
that requires a label to have one of some values (``app=web``, ``tier in (a,b)``) is filed
under each such (namespace, label, value), and is only tried for label sets that have one of
those pairs; any other (``!legacy``, the empty selector) is tried for every label set of its
namespace.  With an HPA per Deployment, finding the HPAs over a pod tries one selector, not
all of the namespace's.
"""

from __future__ import annotations

from collections.abc import Mapping

from kube.api.labels import Selector

Bucket = tuple[str, ...]
"""(namespace,) for selectors tried everywhere in it, (namespace, label, value) otherwise."""


def _buckets(namespace: str, selector: Selector) -> list[Bucket]:
    requirement = selector.restricting()
    if requirement is None:
        return [(namespace,)]
    return [(namespace, requirement.key, value) for value in requirement.values]


class SelectorIndex:
    """Selectors by key; ``matching`` says which of a namespace's match some labels."""

    def __init__(self) -> None:
        self._selectors: dict[str, tuple[str, Selector]] = {}
        self._buckets: dict[Bucket, set[str]] = {}

    def put(self, key: str, namespace: str, selector: Selector) -> None:
        """File ``selector`` under ``key``, in place of what was there."""
        if self._selectors.get(key) == (namespace, selector):
            return
        self.remove(key)
        self._selectors[key] = (namespace, selector)
        for bucket in _buckets(namespace, selector):
            self._buckets.setdefault(bucket, set()).add(key)

    def remove(self, key: str) -> None:
        filed = self._selectors.pop(key, None)
        if filed is None:
            return
        for bucket in _buckets(*filed):
            keys = self._buckets[bucket]
            keys.discard(key)
            if not keys:
                del self._buckets[bucket]

    def matching(self, namespace: str, labels: Mapping[str, str]) -> set[str]:
        """The keys of the selectors of ``namespace`` that match ``labels``."""
        candidates = set(self._buckets.get((namespace,), ()))
        for label, value in labels.items():
            candidates.update(self._buckets.get((namespace, label, value), ()))
        return {key for key in candidates if self._selectors[key][1].matches(labels)}
