"""Standard cron schedules: parsing and the next time one fires.

A CronJob's ``schedule`` is read exactly as Kubernetes reads it (``cron.ParseStandard`` of
robfig/cron v3): five fields ``minute hour day-of-month month day-of-week``, each a comma list of
``*``/``?``, single values, ranges ``a-b`` and steps ``x/n``; month and weekday names (``jan``,
``mon``, any case); the descriptors ``@yearly``, ``@annually``, ``@monthly``, ``@weekly``,
``@daily``, ``@midnight`` and ``@hourly``; an optional ``TZ=<zone>`` or ``CRON_TZ=<zone>`` prefix.
Day of month and day of week combine as in cron: when either is unrestricted (``*``) both must
hold, otherwise either suffices.  Error messages are upstream's, because the API server reports
them verbatim for an invalid ``spec.schedule``.

``CronSchedule.next_after`` is what the CronJob controller asks: the first minute strictly after
a given time at which the schedule fires, in the wall-clock time of the schedule's zone (or of the
time given), skipping wall times a DST change makes nonexistent.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from zoneinfo import ZoneInfo

_UTC = datetime.UTC
_MINUTE = datetime.timedelta(minutes=1)
_SEARCH_YEARS = 5  # as upstream: a schedule with no match within five years never fires

_MONTH_NAMES = {
    name: i + 1
    for i, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
    )
}
_DAY_NAMES = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}


class CronError(ValueError):
    """A schedule that is not a valid standard cron expression."""


@dataclass(frozen=True)
class _Field:
    low: int
    high: int
    names: dict[str, int] | None = None


_FIELDS = (
    _Field(0, 59),  # minute
    _Field(0, 23),  # hour
    _Field(1, 31),  # day of month
    _Field(1, 12, _MONTH_NAMES),  # month
    _Field(0, 6, _DAY_NAMES),  # day of week, Sunday = 0
)


@dataclass(frozen=True)
class CronSchedule:
    """The set of minutes a cron expression fires at.

    ``dom_star``/``dow_star`` record whether day of month or day of week was written
    unrestricted, which decides how the two combine.  ``location`` is the zone of a ``TZ=``
    prefix; without one, times are read in the zone of the time passed to ``next_after``.
    """

    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]
    dom_star: bool = False
    dow_star: bool = False
    location: ZoneInfo | None = None

    def matches(self, when: datetime.datetime) -> bool:
        """Whether the schedule fires at the minute of ``when`` (its wall-clock fields)."""
        return (
            when.minute in self.minutes
            and when.hour in self.hours
            and when.month in self.months
            and self._day_matches(when)
        )

    def _day_matches(self, when: datetime.datetime) -> bool:
        dom = when.day in self.days_of_month
        dow = (when.isoweekday() % 7) in self.days_of_week
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def next_after(self, after: datetime.datetime) -> datetime.datetime | None:
        """The first firing time strictly after ``after``, or None if there is none in reach.

        An aware ``after`` is read in the schedule's ``TZ=`` zone if it has one, else in its own
        zone, and the result carries that zone; a naive ``after`` is plain wall-clock time (UTC
        when the schedule has a zone).  The result is at a whole minute.
        """
        if self.location is not None:
            if after.tzinfo is None:
                after = after.replace(tzinfo=_UTC)
            after = after.astimezone(self.location)
        tz = after.tzinfo
        wall = after.replace(tzinfo=None, second=0, microsecond=0) + _MINUTE
        limit = wall.year + _SEARCH_YEARS
        while wall.year <= limit:
            if wall.month not in self.months:
                wall = _first_of_next_month(wall)
            elif not self._day_matches(wall):
                wall = wall.replace(hour=0, minute=0) + datetime.timedelta(days=1)
            elif wall.hour not in self.hours:
                wall = wall.replace(minute=0) + datetime.timedelta(hours=1)
            elif wall.minute not in self.minutes:
                wall += _MINUTE
            elif tz is None:
                return wall
            else:
                found = _resolve(wall, tz, after)
                if found is not None:
                    return found
                wall += _MINUTE
        return None


def _first_of_next_month(wall: datetime.datetime) -> datetime.datetime:
    if wall.month == 12:
        return datetime.datetime(wall.year + 1, 1, 1)
    return datetime.datetime(wall.year, wall.month + 1, 1)


def _resolve(
    wall: datetime.datetime, tz: datetime.tzinfo, after: datetime.datetime
) -> datetime.datetime | None:
    """The wall time in ``tz`` that exists and falls after ``after``, the earlier if twice."""
    start = after.astimezone(_UTC)
    for fold in (0, 1):
        candidate = wall.replace(tzinfo=tz, fold=fold)
        instant = candidate.astimezone(_UTC)
        exists = instant.astimezone(tz).replace(tzinfo=None) == wall
        if exists and instant > start:
            return candidate
    return None


_DESCRIPTORS = {
    "@yearly": ("0", "0", "1", "1", "*"),
    "@annually": ("0", "0", "1", "1", "*"),
    "@monthly": ("0", "0", "1", "*", "*"),
    "@weekly": ("0", "0", "*", "*", "0"),
    "@daily": ("0", "0", "*", "*", "*"),
    "@midnight": ("0", "0", "*", "*", "*"),
    "@hourly": ("0", "*", "*", "*", "*"),
}


def parse_cron(expr: str) -> CronSchedule:
    """Parse a standard cron expression; raise ``CronError`` with upstream's message."""
    if not expr:
        raise CronError("empty spec string")
    location = None
    if expr.startswith(("TZ=", "CRON_TZ=")):
        zone_spec, _, expr = expr.partition(" ")
        zone = zone_spec.split("=", 1)[1]
        location = _load_location(zone)
        expr = expr.strip()
    if expr.startswith("@"):
        if expr not in _DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {expr}")
        fields: list[str] | tuple[str, ...] = _DESCRIPTORS[expr]
    else:
        fields = expr.split()
        if len(fields) != len(_FIELDS):
            raise CronError(
                f"expected exactly {len(_FIELDS)} fields, found {len(fields)}: [{' '.join(fields)}]"
            )
    parsed = [_parse_field(text, spec) for text, spec in zip(fields, _FIELDS, strict=True)]
    return CronSchedule(
        minutes=parsed[0][0],
        hours=parsed[1][0],
        days_of_month=parsed[2][0],
        months=parsed[3][0],
        days_of_week=parsed[4][0],
        dom_star=parsed[2][1],
        dow_star=parsed[4][1],
        location=location,
    )


def _load_location(zone: str) -> ZoneInfo:
    try:
        return ZoneInfo(zone)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        raise CronError(f"provided bad location {zone}: unknown time zone {zone}") from None


def _parse_field(text: str, spec: _Field) -> tuple[frozenset[int], bool]:
    """The values a field allows, and whether it was written as an unrestricted star."""
    values: set[int] = set()
    star = False
    for part in text.split(","):
        part_values, part_star = _parse_range(part, spec)
        values |= part_values
        star = star or part_star
    return frozenset(values), star


def _parse_range(expr: str, spec: _Field) -> tuple[set[int], bool]:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = False
    if low_and_high[0] in ("*", "?"):
        start, end, star = spec.low, spec.high, True
    else:
        start = _parse_int_or_name(low_and_high[0], spec.names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _parse_int_or_name(low_and_high[1], spec.names)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _parse_int(range_and_step[1])
        if len(low_and_high) == 1:  # "N/step" means "N-max/step"
            end = spec.high
        if step > 1:
            star = False
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < spec.low:
        raise CronError(f"beginning of range ({start}) below minimum ({spec.low}): {expr}")
    if end > spec.high:
        raise CronError(f"end of range ({end}) above maximum ({spec.high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step)), star


def _parse_int_or_name(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    return _parse_int(text)


def _parse_int(text: str) -> int:
    stripped = text[1:] if text[:1] in "+-" else text
    if not stripped.isascii() or not stripped.isdigit():
        raise CronError(
            f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax'
        )
    number = int(text)
    if number < 0:
        raise CronError(f"negative number ({number}) not allowed: {text}")
    return number
