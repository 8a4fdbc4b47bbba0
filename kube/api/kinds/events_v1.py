"""events.k8s.io/v1: the Event as the newer events API shows it, over core v1's objects.

Upstream serves one resource in two groups: an event written as a core/v1 Event is read back
here and the other way round, because both are stored as core/v1 Events under core's key
(``storage_group``, see ``kube.api.scheme``).  ``to_core`` and ``from_core`` convert as
upstream's ``pkg/apis/events/v1`` conversion: ``regarding`` is core's ``involvedObject``,
``note`` its ``message``, ``reportingController`` its ``reportingComponent``, and core's
``source``, ``firstTimestamp``, ``lastTimestamp`` and ``count`` live on as the
``deprecated*`` fields.

What this group adds is stricter validation of new writes: every event passes core's checks
(``validate_event``, with the reporter named ``reportingController``), and one created here
must also be a new-style event (``validate_create``: an eventTime, a type, a well-formed
series, none of the deprecated fields).  Upstream validates its internal object, so the paths
of these errors use core's names (``message``, ``firstTimestamp``), as upstream's do.

Tables and field selectors are core's: upstream prints and selects the internal object, and
maps this group's selector names (``regarding.name``, ``reportingController``) onto core's.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from kube.api.errors import ROOT, ErrorList, Path
from kube.api.kinds.core_v1 import cluster as core
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.meta_v1 import Resource
from kube.api.printing import Column
from kube.api.scheme import SCHEME, kind
from kube.api.struct import MicroTime, Time, meta

EVENT_TYPES = core.EVENT_TYPES


class EventSeries(core.EventSeries):
    """A run of isomorphic events: how many, and when the last was seen."""


def _series(series: core.EventSeries | None, cls: type[core.EventSeries]) -> Any:
    if series is None:
        return None
    return cls(count=series.count, last_observed_time=series.last_observed_time)


def to_core(event: Event) -> core.Event:
    """An events.k8s.io/v1 Event as it is stored (upstream's ``Convert_v1_Event_To_core_Event``)."""
    return core.Event(
        api_version=core.Event.API_VERSION,
        kind=core.Event.KIND,
        metadata=event.metadata,
        involved_object=event.regarding,
        reason=event.reason,
        message=event.note,
        source=event.deprecated_source,
        first_timestamp=event.deprecated_first_timestamp,
        last_timestamp=event.deprecated_last_timestamp,
        count=event.deprecated_count,
        type=event.type,
        event_time=event.event_time,
        series=_series(event.series, core.EventSeries),
        action=event.action,
        related=event.related,
        reporting_component=event.reporting_controller,
        reporting_instance=event.reporting_instance,
    )


def from_core(event: core.Event) -> Event:
    """A stored core/v1 Event as events.k8s.io/v1 shows it."""
    return Event(
        api_version=Event.API_VERSION,
        kind=Event.KIND,
        metadata=event.metadata,
        event_time=event.event_time,
        series=_series(event.series, EventSeries),
        reporting_controller=event.reporting_component,
        reporting_instance=event.reporting_instance,
        action=event.action,
        reason=event.reason,
        regarding=event.involved_object,
        related=event.related,
        note=event.message,
        type=event.type,
        deprecated_source=event.source,
        deprecated_first_timestamp=event.first_timestamp,
        deprecated_last_timestamp=event.last_timestamp,
        deprecated_count=event.count,
    )


def _as_core(column: Column) -> Column:
    """One of core's event columns, printing this group's events."""
    return Column(
        column.name,
        lambda o, now: column.cell(to_core(o), now),
        type=column.type,
        format=column.format,
        priority=column.priority,
        description=column.description,
    )


def _regarding(field: str) -> Any:
    """A field selector on ``regarding.<field>`` (core's ``involvedObject.<field>``)."""
    return lambda o: getattr(o.regarding, field) if o.regarding else None


# Upstream's AddFieldLabelConversionsForEvent: this group's names for core's selectable fields.
_REFERENCE_FIELDS = {
    "kind": "kind",
    "namespace": "namespace",
    "name": "name",
    "uid": "uid",
    "apiVersion": "api_version",
    "resourceVersion": "resource_version",
    "fieldPath": "field_path",
}


@kind(
    group="events.k8s.io",
    version="v1",
    plural="events",
    short_names=("ev",),
    columns=tuple(_as_core(c) for c in core.Event.kind_info.columns),
    field_selectors={
        "reason": lambda o: o.reason,
        **{f"regarding.{name}": _regarding(attr) for name, attr in _REFERENCE_FIELDS.items()},
        "reportingController": lambda o: o.reporting_controller,
        "source": lambda o: (
            (o.deprecated_source.component if o.deprecated_source else None)
            or o.reporting_controller
        ),
        "type": lambda o: o.type,
    },
    storage_group="",
)
class Event(Resource):
    """A report of something that happened to an object (events.k8s.io/v1)."""

    event_time: Annotated[
        MicroTime | None, meta(doc="When the event was first observed; required.", proto=2)
    ] = None
    series: Annotated[
        EventSeries | None, meta(doc="Data about the run of events this one belongs to.", proto=3)
    ] = None
    reporting_controller: Annotated[
        str | None,
        meta(
            doc="The controller that emitted the event, e.g. kubernetes.io/kubelet.",
            proto=4,
            omitempty=True,
        ),
    ] = None
    reporting_instance: Annotated[
        str | None,
        meta(doc="The ID of the controller instance, e.g. kubelet-xyzf.", proto=5, omitempty=True),
    ] = None
    action: Annotated[
        str | None,
        meta(doc="What was done, or what failed, to the object.", proto=6, omitempty=True),
    ] = None
    reason: Annotated[
        str | None,
        meta(doc="Why the action was taken, in UpperCamelCase.", proto=7, omitempty=True),
    ] = None
    regarding: Annotated[
        ObjectReference | None, meta(doc="The object this event is about.", proto=8)
    ] = None
    related: Annotated[
        ObjectReference | None, meta(doc="A secondary object of more complex actions.", proto=9)
    ] = None
    note: Annotated[
        str | None,
        meta(
            doc="A human-readable description of the status of this operation.",
            proto=10,
            omitempty=True,
        ),
    ] = None
    type: Annotated[str | None, meta(doc="Normal or Warning.", proto=11, omitempty=True)] = None
    deprecated_source: Annotated[
        core.EventSource | None, meta(doc="core/v1's source; deprecated.", proto=12)
    ] = None
    deprecated_first_timestamp: Annotated[
        Time | None, meta(doc="core/v1's firstTimestamp; deprecated.", proto=13, omitempty=True)
    ] = None
    deprecated_last_timestamp: Annotated[
        Time | None, meta(doc="core/v1's lastTimestamp; deprecated.", proto=14, omitempty=True)
    ] = None
    deprecated_count: Annotated[
        int | None, meta(doc="core/v1's count; deprecated.", proto=15, omitempty=True)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        core.validate_event(to_core(self), "reportingController", path, errors)

    def validate_create(self, errors: ErrorList) -> None:
        """What upstream checks of an event created through this group, beyond ``validate``."""
        _validate_series(self, errors)
        if self.event_time is None:
            errors.required(ROOT.child("eventTime"))
        if self.type not in EVENT_TYPES:
            errors.invalid(ROOT.child("type"), "", f"has invalid value: {self.type or ''}")
        for name, value in (
            ("firstTimestamp", self.deprecated_first_timestamp),
            ("lastTimestamp", self.deprecated_last_timestamp),
            ("count", self.deprecated_count),
            ("source", _source_set(self.deprecated_source)),
        ):
            if value:
                errors.invalid(ROOT.child(name), "", "needs to be unset")

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        """Upstream's ``ValidateEventUpdate`` for this group: what an event reports is fixed
        once reported; only its series (and metadata) move on."""
        if self.series != old.series:
            _validate_series(self, errors)
        new_core, old_core = to_core(self), to_core(old)
        for name, attr in (
            ("involvedObject", "involved_object"),
            ("reason", "reason"),
            ("message", "message"),
            ("source", "source"),
            ("firstTimestamp", "first_timestamp"),
            ("lastTimestamp", "last_timestamp"),
            ("count", "count"),
            ("type", "type"),
        ):
            value = getattr(new_core, attr)
            if value != getattr(old_core, attr):
                errors.immutable(ROOT.child(name), value)


def _source_set(source: core.EventSource | None) -> bool:
    return source is not None and bool(source.component or source.host)


def _validate_series(event: Event, errors: ErrorList) -> None:
    if event.series is None:
        return
    if (event.series.count or 0) < 2:
        errors.invalid(ROOT.child("series.count"), "", "should be at least 2")
    if not event.series.last_observed_time:
        errors.required(ROOT.child("series.lastObservedTime"))


SCHEME.add_conversion(core.Event, Event, from_core)
SCHEME.add_conversion(Event, core.Event, to_core)
