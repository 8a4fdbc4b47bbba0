"""Cron expressions: parsing as Kubernetes does (robfig/cron ParseStandard) and next run times."""

from __future__ import annotations

import datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube.api.cron import CronError, CronSchedule, parse_cron

UTC = datetime.UTC
NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")  # a 30-minute DST shift


def naive(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, us: int = 0
) -> datetime.datetime:
    """A wall-clock time without a zone."""
    return datetime.datetime(year, month, day, hour, minute, second, us)


@pytest.mark.parametrize(
    ("expr", "minutes", "hours", "doms", "months", "dows"),
    [
        ("* * * * *", range(60), range(24), range(1, 32), range(1, 13), range(7)),
        ("0 0 1 1 *", [0], [0], [1], [1], range(7)),
        (
            "*/15 9-17 * * mon-fri",
            [0, 15, 30, 45],
            range(9, 18),
            range(1, 32),
            range(1, 13),
            range(1, 6),
        ),
        (
            "5,10-12 */6 1-31/10 JAN,jul sun",
            [5, 10, 11, 12],
            [0, 6, 12, 18],
            [1, 11, 21, 31],
            [1, 7],
            [0],
        ),
        ("30/10 1/5 ? feb-apr sat", [30, 40, 50], [1, 6, 11, 16, 21], range(1, 32), [2, 3, 4], [6]),
        ("@hourly", [0], range(24), range(1, 32), range(1, 13), range(7)),
        ("@daily", [0], [0], range(1, 32), range(1, 13), range(7)),
        ("@midnight", [0], [0], range(1, 32), range(1, 13), range(7)),
        ("@weekly", [0], [0], range(1, 32), range(1, 13), [0]),
        ("@monthly", [0], [0], [1], range(1, 13), range(7)),
        ("@yearly", [0], [0], [1], [1], range(7)),
        ("@annually", [0], [0], [1], [1], range(7)),
        ("  0\t12  *  *  * ", [0], [12], range(1, 32), range(1, 13), range(7)),
    ],
    ids=[
        "every-minute",
        "new-year",
        "business-quarter-hours",
        "lists-names-steps",
        "start-with-step",
        "hourly",
        "daily",
        "midnight",
        "weekly",
        "monthly",
        "yearly",
        "annually",
        "extra-whitespace",
    ],
)
def test_parse_fields(
    expr: str,
    minutes: range | list[int],
    hours: range | list[int],
    doms: range | list[int],
    months: range | list[int],
    dows: range | list[int],
) -> None:
    schedule = parse_cron(expr)
    assert schedule.minutes == frozenset(minutes)
    assert schedule.hours == frozenset(hours)
    assert schedule.days_of_month == frozenset(doms)
    assert schedule.months == frozenset(months)
    assert schedule.days_of_week == frozenset(dows)


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("* * * * * *", "expected exactly 5 fields, found 6: [* * * * * *]"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* 24 * * *", "end of range (24) above maximum (23): 24"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * * 13 *", "end of range (13) above maximum (12): 13"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("*/2/3 * * * *", "too many slashes: */2/3"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        (
            "* * * foo *",
            'failed to parse int from foo: strconv.Atoi: parsing "foo": invalid syntax',
        ),
        ("-1 * * * *", 'failed to parse int from : strconv.Atoi: parsing "": invalid syntax'),
        ("@every 1h", "unrecognized descriptor: @every 1h"),
        ("@reboot", "unrecognized descriptor: @reboot"),
        (
            "TZ=Nowhere/Land 0 * * * *",
            "provided bad location Nowhere/Land: unknown time zone Nowhere/Land",
        ),
    ],
    ids=[
        "empty",
        "four-fields",
        "six-fields",
        "minute-too-large",
        "hour-too-large",
        "day-zero",
        "month-too-large",
        "weekday-seven",
        "reversed-range",
        "zero-step",
        "two-hyphens",
        "two-slashes",
        "not-a-number",
        "unknown-month-name",
        "negative",
        "every-unsupported",
        "unknown-descriptor",
        "bad-zone",
    ],
)
def test_parse_errors(expr: str, message: str) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(expr)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("* * * * *", naive(2026, 1, 1, 0, 0, 0), naive(2026, 1, 1, 0, 1)),
        ("* * * * *", naive(2026, 1, 1, 0, 0, 59, 999), naive(2026, 1, 1, 0, 1)),
        ("*/15 9-17 * * mon-fri", naive(2026, 11, 21, 12, 0), naive(2026, 11, 23, 9, 0)),
        ("0 0 1 1 *", naive(2026, 12, 31, 23, 59), naive(2027, 1, 1, 0, 0)),
        ("0 0 29 2 *", naive(2026, 3, 1), naive(2028, 2, 29, 0, 0)),
        # Day of month and day of week restricted: either suffices (13th, or a Friday).
        ("0 0 13 * 5", naive(2026, 11, 1), naive(2026, 11, 6, 0, 0)),
        ("0 0 13 * 5", naive(2026, 11, 10), naive(2026, 11, 13, 0, 0)),
        # A stepped field is not a star: odd days or Mondays.
        ("0 0 */2 * 1", naive(2026, 11, 21, 1), naive(2026, 11, 23, 0, 0)),
        # A star makes both required: Mondays only.
        ("0 0 * * 1", naive(2026, 11, 21, 1), naive(2026, 11, 23, 0, 0)),
        ("@weekly", naive(2026, 11, 21, 1), naive(2026, 11, 22, 0, 0)),
        ("@monthly", naive(2026, 11, 21, 1), naive(2026, 12, 1, 0, 0)),
        ("0 0 30 2 *", naive(2026, 1, 1), None),
        # Zones: in the time's own zone, and in the schedule's TZ= zone.
        (
            "0 9 * * *",
            datetime.datetime(2026, 1, 1, 10, tzinfo=NEW_YORK),
            datetime.datetime(2026, 1, 2, 9, tzinfo=NEW_YORK),
        ),
        (
            "CRON_TZ=Asia/Tokyo 0 9 * * *",
            datetime.datetime(2026, 1, 1, tzinfo=UTC),
            datetime.datetime(2026, 1, 2, 9, tzinfo=ZoneInfo("Asia/Tokyo")),
        ),
        ("TZ=UTC 0 9 * * *", naive(2026, 1, 1, 10), datetime.datetime(2026, 1, 2, 9, tzinfo=UTC)),
        # Spring forward: 02:30 does not exist on 2026-03-08 in New York.
        (
            "30 2 * * *",
            datetime.datetime(2026, 3, 7, 3, tzinfo=NEW_YORK),
            datetime.datetime(2026, 3, 9, 2, 30, tzinfo=NEW_YORK),
        ),
        # Fall back: 01:30 happens twice on 2026-11-01; the schedule fires at the first.
        (
            "30 1 * * *",
            datetime.datetime(2026, 10, 31, 3, tzinfo=NEW_YORK),
            datetime.datetime(2026, 11, 1, 1, 30, tzinfo=NEW_YORK),
        ),
        (
            "30 1 * * *",
            datetime.datetime(2026, 11, 1, 1, 30, tzinfo=NEW_YORK),
            datetime.datetime(2026, 11, 2, 1, 30, tzinfo=NEW_YORK),
        ),
        # Inside the repeated hour, a later wall time is taken at its second occurrence.
        (
            "20 1 * * *",
            datetime.datetime(2026, 11, 1, 1, 10, tzinfo=NEW_YORK, fold=1),
            datetime.datetime(2026, 11, 1, 1, 20, tzinfo=NEW_YORK, fold=1),
        ),
    ],
    ids=[
        "next-minute",
        "seconds-dropped",
        "weekend-skipped",
        "year-rollover",
        "leap-day",
        "dom-or-dow-friday",
        "dom-or-dow-13th",
        "stepped-dom-or-dow",
        "star-dom-and-dow",
        "weekly-sunday",
        "monthly-first",
        "never",
        "own-zone",
        "cron-tz-prefix",
        "tz-prefix-naive-is-utc",
        "dst-gap-skipped",
        "dst-repeat-first",
        "dst-repeat-once",
        "dst-repeat-second-occurrence",
    ],
)
def test_next_after(
    expr: str, after: datetime.datetime, expected: datetime.datetime | None
) -> None:
    got = parse_cron(expr).next_after(after)
    assert got == expected
    if got is not None and expected is not None:
        assert (got.utcoffset(), got.fold) == (expected.utcoffset(), expected.fold)


# Properties.


def _field(low: int, high: int, names: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    word = st.sampled_from(names) if names else value.map(str)
    single = st.one_of(value.map(str), word)
    span = st.tuples(value, value).map(lambda ab: f"{min(ab)}-{max(ab)}")
    step = st.integers(1, high - low + 1)
    part = st.one_of(
        st.just("*"),
        single,
        span,
        step.map(lambda n: f"*/{n}"),
        st.tuples(value, step).map(lambda vs: f"{vs[0]}/{vs[1]}"),
        st.tuples(span, step).map(lambda ss: f"{ss[0]}/{ss[1]}"),
    )
    return st.lists(part, min_size=1, max_size=3).map(",".join)


MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")

expressions = st.one_of(
    st.tuples(
        _field(0, 59),
        _field(0, 23),
        _field(1, 31),
        _field(1, 12, MONTHS),
        _field(0, 6, DAYS),
    ).map(" ".join),
    st.sampled_from(["@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly"]),
)
zones = st.sampled_from(
    [None, UTC, NEW_YORK, LORD_HOWE, ZoneInfo("Europe/London"), ZoneInfo("Asia/Kolkata")]
)
instants = st.datetimes(
    min_value=naive(2000, 1, 1), max_value=naive(2090, 12, 31), timezones=st.just(UTC)
)


def _local(instant: datetime.datetime, tz: datetime.tzinfo | None) -> datetime.datetime:
    return instant.replace(tzinfo=None) if tz is None else instant.astimezone(tz)


def _wall(when: datetime.datetime) -> datetime.datetime:
    return when.replace(tzinfo=None)


def _absolute(when: datetime.datetime) -> datetime.datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


@settings(max_examples=300, deadline=None)
@given(expressions, instants, zones)
def test_next_after_is_strictly_after_and_matches(
    expr: str, instant: datetime.datetime, tz: datetime.tzinfo | None
) -> None:
    schedule = parse_cron(expr)
    after = _local(instant, tz)
    got = schedule.next_after(after)
    if got is None:
        return
    assert _absolute(got) > _absolute(after)
    assert _wall(got) > _wall(after)
    assert (got.second, got.microsecond) == (0, 0)
    assert got.tzinfo is after.tzinfo
    assert schedule.matches(got)
    assert _local(_absolute(got), tz) == got  # a wall time that exists


@settings(max_examples=200, deadline=None)
@given(expressions, instants, zones)
def test_next_after_skips_no_earlier_match(
    expr: str, instant: datetime.datetime, tz: datetime.tzinfo | None
) -> None:
    """Within two days, every minute between ``after`` and the answer is checked by brute force;
    beyond that, every whole day in between must not be a day the schedule fires on."""
    schedule = parse_cron(expr)
    after = _local(instant, tz)
    got = schedule.next_after(after)
    start = _absolute(after)
    end = _absolute(got) if got is not None else start.replace(year=after.year + 5)
    if end - start <= datetime.timedelta(days=2):
        minute = start.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)
        while minute < end:
            local = _local(minute, tz)
            assert not (_wall(local) > _wall(after) and schedule.matches(local)), local
            minute += datetime.timedelta(minutes=1)
    elif tz in (None, UTC):
        first_run = datetime.time(min(schedule.hours), min(schedule.minutes))
        day = _wall(after).date() + datetime.timedelta(days=1)
        while day < _wall(end).date():
            assert not schedule.matches(datetime.datetime.combine(day, first_run)), day
            day += datetime.timedelta(days=1)


def test_schedule_is_a_value() -> None:
    assert parse_cron("0 0 * * *") == parse_cron("@daily")
    assert isinstance(parse_cron("@daily"), CronSchedule)
