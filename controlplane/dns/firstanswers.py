"""The first answer this server gave for each Service's name, told as an Event on the Service.

``kubelab story`` ends a Service's chain with its DNS record: the moment the name first
resolved, which is when the cluster DNS answered it, not when the Service was written (the
zone is computed at query time from the informers' caches, so a record has no life of its
own before someone asks).  CoreDNS records nothing of the kind; this server tells it once per
Service (keyed by UID, so a Service deleted and created again is told again) as a ``Normal``
``Answered`` Event whose note is the question and the addresses given.

Bounded on purpose: only positive answers to a Service's own name
(``NAME.NAMESPACE.svc.DOMAIN``, not endpoint or SRV names), at most once per Service while
the UID is remembered; the memory is an LRU of ``capacity`` UIDs, and a restarted server tells
each Service's next answer again (the note says "since this server started").  ``answered``
only queues through the recorder, so a query never waits on the API.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

import dns.name
import dns.rrset

from controlplane.dns.source import ClusterState
from kube.api.kinds.core_v1.service import Service

REASON = "Answered"
DEFAULT_CAPACITY = 10_000


class EventSink(Protocol):
    """Where first answers are told (``kube.client.events.EventRecorder``); never blocks."""

    def event(self, obj: Service, type: str, reason: str, message: str) -> None: ...


class FirstAnswers:
    def __init__(
        self,
        state: ClusterState,
        origin: dns.name.Name,
        events: EventSink,
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        self.state = state
        self.origin = origin
        self.events = events
        self.capacity = capacity
        self._told: OrderedDict[str, None] = OrderedDict()

    def answered(self, qname: dns.name.Name, answer: list[dns.rrset.RRset]) -> None:
        """Tell ``answer`` to ``qname`` if it is the first for a Service's own name."""
        if not answer or not qname.is_subdomain(self.origin):
            return
        labels = [label.decode() for label in qname.relativize(self.origin).labels]
        if len(labels) != 3 or labels[2] != "svc":
            return
        service = self.state.service(labels[1], labels[0])
        uid = service.metadata.uid if service is not None else None
        if service is None or not uid or uid in self._told:
            return
        self._told[uid] = None
        while len(self._told) > self.capacity:
            self._told.popitem(last=False)
        records = "; ".join(_records(rrset) for rrset in answer)
        note = f"Answered {qname.to_text()} {records} (first answer since this server started)"
        self.events.event(service, "Normal", REASON, note)


def _records(rrset: dns.rrset.RRset) -> str:
    kind = dns.rdatatype.to_text(rrset.rdtype)
    return f"{kind} {', '.join(sorted(rdata.to_text() for rdata in rrset))}"
