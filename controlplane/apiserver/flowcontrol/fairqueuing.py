"""Fair queuing for one priority level: seats, shuffle-sharded queues, dispatch in fair order.

A ``QueueSet`` is a state machine with no clock and no asyncio of its own: callers pass the
time in and get back what changed (the requests to start now, the ones whose wait ran out), so
tests drive it step by step with a fake clock and the request path wraps it in futures
(``controlplane.apiserver.flowcontrol.controller``).

- A level has ``limit`` seats; a request takes ``seats`` of them while it executes.
- A request that cannot start at once is queued (or, for a level whose limit response is
  ``Reject``, refused).  Its flow (schema name and distinguisher) is hashed and dealt ``hand``
  of the level's queues (shuffle sharding, as upstream's dealer), and it joins the shortest of
  them, counting waiting and executing seats; a queue already holding ``queue_length_limit``
  requests refuses it.  So one heavy flow fills only its own few queues and other flows, dealt
  other hands, still find room.
- Whenever seats free up, queues are served in fair order: each queue has a virtual start,
  advanced by the seats of every request it dispatches (an estimated service time of one unit
  per seat; upstream measures the real times), and the non-empty queue with the smallest one
  goes next; a queue that was idle starts no earlier than the level's virtual time, so idleness
  earns no credit.  A request wider than the whole limit still runs, alone.
- A request whose wait runs out, or whose client goes away, is taken out of its queue
  (``withdraw``); the caller keeps the time.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import deque
from collections.abc import Mapping
from typing import Any


def flow_hash(schema: str, distinguisher: str) -> int:
    """A flow's 64-bit hash, from which its hand of queues is dealt."""
    digest = hashlib.sha256(f"{schema}\x00{distinguisher}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def deal(hash_value: int, deck: int, hand: int) -> list[int]:
    """``hand`` distinct queue indexes of ``deck`` chosen by ``hash_value``: each draw takes
    the remainder by the number of cards left, as upstream's shuffle-sharding dealer does."""
    remaining = list(range(deck))
    cards = []
    for _ in range(min(hand, deck)):
        hash_value, pick = divmod(hash_value, len(remaining))
        cards.append(remaining.pop(pick))
    return cards


@dataclasses.dataclass(eq=False)
class Request:
    """One request at a level: waiting in a queue, or executing."""

    flow_schema: str
    distinguisher: str
    seats: int
    arrived: float
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """What the debug dump shows about the request (user, verb, path...)."""
    queue: int = -1
    """The queue it waited in; -1 if it never waited."""
    started: float | None = None


@dataclasses.dataclass(eq=False)
class Queue:
    waiting: deque[Request] = dataclasses.field(default_factory=deque)
    executing: int = 0
    seats_in_use: int = 0
    virtual_start: float = 0.0

    @property
    def waiting_seats(self) -> int:
        return sum(r.seats for r in self.waiting)


# What ``offer`` decided.
EXECUTE = "execute"
QUEUED = "queued"
QUEUE_FULL = "queue-full"
CONCURRENCY_LIMIT = "concurrency-limit"


class QueueSet:
    """The seats and queues of one limited priority level (see the module docstring)."""

    def __init__(self, limit: int, queues: int, hand: int, queue_length_limit: int) -> None:
        self.limit = limit
        self.hand = hand
        self.queue_length_limit = queue_length_limit
        self.queues = [Queue() for _ in range(queues)]
        self.seats_in_use = 0
        self.executing = 0
        self.virtual_time = 0.0
        self.dispatched = 0
        self.rejected = 0
        self.timed_out = 0
        self.cancelled = 0

    @property
    def waiting(self) -> int:
        return sum(len(q.waiting) for q in self.queues)

    @property
    def demand(self) -> int:
        """Seats executing plus seats waiting: what the level would use if it could."""
        return self.seats_in_use + sum(q.waiting_seats for q in self.queues)

    def configure(
        self, limit: int, queues: int, hand: int, queue_length_limit: int, now: float
    ) -> list[Request]:
        """New parameters (a changed PriorityLevelConfiguration); waiting requests are dealt
        again if the number of queues changed.  Returns the requests that can start now."""
        self.limit, self.hand, self.queue_length_limit = limit, hand, queue_length_limit
        if queues != len(self.queues):
            old = sorted((r for q in self.queues for r in q.waiting), key=lambda r: r.arrived)
            self.queues = [Queue() for _ in range(queues)]
            for request in old:
                self._enqueue(request, self._choose(request))
        return self.dispatch(now)

    def offer(self, request: Request, now: float) -> str:
        """Start ``request`` (EXECUTE), queue it (QUEUED) or refuse it (QUEUE_FULL, or
        CONCURRENCY_LIMIT for a level without queues)."""
        if self._fits(request) and self.waiting == 0:
            self._start(request, now)
            return EXECUTE
        if not self.queues:
            self.rejected += 1
            return CONCURRENCY_LIMIT
        index = self._choose(request)
        if len(self.queues[index].waiting) >= self.queue_length_limit:
            self.rejected += 1
            return QUEUE_FULL
        self._enqueue(request, index)
        return QUEUED

    def finish(self, request: Request, now: float) -> list[Request]:
        """``request`` is done: free its seats; returns the requests started in its place."""
        self.seats_in_use -= request.seats
        self.executing -= 1
        if 0 <= request.queue < len(self.queues):
            queue = self.queues[request.queue]
            queue.executing = max(0, queue.executing - 1)
            queue.seats_in_use = max(0, queue.seats_in_use - request.seats)
        return self.dispatch(now)

    def withdraw(self, request: Request, *, timed_out: bool) -> bool:
        """Take a waiting request out of its queue: its wait ran out (``timed_out``) or its
        client went away.  False if it was not waiting (it has been dispatched meanwhile)."""
        for queue in self.queues:
            if request in queue.waiting:
                queue.waiting.remove(request)
                if timed_out:
                    self.timed_out += 1
                else:
                    self.cancelled += 1
                return True
        return False

    def dispatch(self, now: float) -> list[Request]:
        """Start waiting requests, fairest queue first, while seats allow."""
        started: list[Request] = []
        while True:
            candidates = [q for q in self.queues if q.waiting]
            if not candidates:
                return started
            queue = min(candidates, key=lambda q: q.virtual_start)
            request = queue.waiting[0]
            if not self._fits(request):
                return started
            queue.waiting.popleft()
            self.virtual_time = queue.virtual_start
            queue.virtual_start += request.seats
            queue.executing += 1
            queue.seats_in_use += request.seats
            self._start(request, now)
            started.append(request)

    def _fits(self, request: Request) -> bool:
        return self.seats_in_use == 0 or self.seats_in_use + request.seats <= self.limit

    def _start(self, request: Request, now: float) -> None:
        request.started = now
        self.seats_in_use += request.seats
        self.executing += 1
        self.dispatched += 1

    def _choose(self, request: Request) -> int:
        hand = deal(
            flow_hash(request.flow_schema, request.distinguisher), len(self.queues), self.hand
        )
        return min(
            hand,
            key=lambda i: self.queues[i].waiting_seats + self.queues[i].seats_in_use,
        )

    def _enqueue(self, request: Request, index: int) -> None:
        queue = self.queues[index]
        if not queue.waiting:
            queue.virtual_start = max(queue.virtual_start, self.virtual_time)
        request.queue = index
        queue.waiting.append(request)
