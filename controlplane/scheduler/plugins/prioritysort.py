"""PrioritySort: the queue's order, higher priority first and, among equals, the pod that
has waited longest (upstream ``queuesort.PrioritySort``).

The scheduling queue's heap calls ``less`` for every push and pop, so it reads only what
``QueuedPodInfo`` already holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import Handle
from controlplane.scheduler.framework.types import QueuedPodInfo


class PrioritySort:
    NAME: ClassVar[str] = names.PRIORITY_SORT

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Whether ``a`` is scheduled before ``b``."""
        priority_a, priority_b = a.info.priority, b.info.priority
        return priority_a > priority_b or (priority_a == priority_b and a.timestamp < b.timestamp)


def new(args: Mapping[str, Any] | None, handle: Handle) -> PrioritySort:
    return PrioritySort()
