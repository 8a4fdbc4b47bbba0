"""An event sink for tests: what a component told, in order, for components that take a
narrow ``event(obj, type, reason, message)`` sink instead of a whole EventRecorder."""

from __future__ import annotations

from kube.api.meta_v1 import Resource


class Told:
    """Records each event as (object name, reason, message); every one must be Normal."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def event(self, obj: Resource, type: str, reason: str, message: str) -> None:
        assert type == "Normal", (reason, message)
        self.seen.append((obj.metadata.name or "", reason, message))
