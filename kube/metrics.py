"""Prometheus metrics in the text exposition format, without a client library.

Each component keeps a ``Registry`` of counters, gauges and histograms with label names fixed
at creation, and serves ``registry.render()`` at ``/metrics``.  Only what the components use
is here: monotonic counters, settable gauges, and histograms with cumulative buckets.  A value
measured elsewhere (the kubelet's resource metrics, read from cgroups at scrape time) is
``collected`` with the moment it was measured, which the sample line carries as its timestamp,
as upstream's const metrics do.  ``parse`` reads the format back (the metrics-server scraping
kubelets), samples only.
"""

from __future__ import annotations

import bisect
import datetime
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

LabelValues = tuple[str, ...]

DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    pairs = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class _Metric:
    kind = ""

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help
        self.label_names = tuple(labels)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, help, labels)
        self.values: dict[LabelValues, float] = {}
        self.stamps: dict[LabelValues, int] = {}
        """Milliseconds since the epoch of the collected values that carry a timestamp."""

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def collected(self, *labels: str, value: float, at: datetime.datetime) -> None:
        """A value measured elsewhere at ``at`` (a cumulative CPU time read from a cgroup)."""
        self.values[labels] = value
        self.stamps[labels] = math.floor(at.timestamp() * 1000)

    def lines(self) -> list[str]:
        return [
            f"{self.name}{_labels(self.label_names, k)} {_number(v)}"
            + (f" {self.stamps[k]}" if k in self.stamps else "")
            for k, v in sorted(self.values.items())
        ]


class Gauge(Counter):
    kind = "gauge"

    def set(self, *labels: str, value: float) -> None:
        self.values[labels] = value


class Histogram(_Metric):
    kind = "histogram"

    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = DEFAULT_BUCKETS,
    ) -> None:
        super().__init__(name, help, labels)
        self.buckets = tuple(sorted(buckets))
        self.series: dict[LabelValues, tuple[list[int], list[float]]] = {}

    def observe(self, value: float, *labels: str) -> None:
        counts, totals = self.series.setdefault(labels, ([0] * (len(self.buckets) + 1), [0.0]))
        counts[bisect.bisect_left(self.buckets, value)] += 1
        totals[0] += value

    def count(self, *labels: str) -> int:
        counts, _ = self.series.get(labels, ([], [0.0]))
        return sum(counts)

    def lines(self) -> list[str]:
        out = []
        for key, (counts, totals) in sorted(self.series.items()):
            running = 0
            for bound, count in zip((*self.buckets, math.inf), counts, strict=True):
                running += count
                le = f'le="{_number(bound)}"'
                out.append(f"{self.name}_bucket{_labels(self.label_names, key, le)} {running}")
            out.append(f"{self.name}_sum{_labels(self.label_names, key)} {_number(totals[0])}")
            out.append(f"{self.name}_count{_labels(self.label_names, key)} {running}")
        return out


M = TypeVar("M", bound=_Metric)


class Registry:
    """The metrics of one component."""

    def __init__(self) -> None:
        self._metrics: list[_Metric] = []

    def counter(self, name: str, help: str, labels: Sequence[str] = ()) -> Counter:
        return self._add(Counter(name, help, labels))

    def gauge(self, name: str, help: str, labels: Sequence[str] = ()) -> Gauge:
        return self._add(Gauge(name, help, labels))

    def histogram(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = DEFAULT_BUCKETS,
    ) -> Histogram:
        return self._add(Histogram(name, help, labels, buckets))

    def _add(self, metric: M) -> M:
        self._metrics.append(metric)
        return metric

    def render(self) -> str:
        lines: list[str] = []
        for metric in self._metrics:
            lines += metric.header() + metric.lines()
        return "\n".join(lines) + "\n"


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Sample:
    """One sample line: its metric name, labels, value and timestamp (ms; None when absent)."""

    name: str
    labels: dict[str, str]
    value: float
    timestamp: int | None


class ParseError(ValueError):
    """A line that is not a sample of the text format."""


_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?"
    r"\s+(?P<value>\S+)(?:\s+(?P<timestamp>-?\d+))?\s*$"
)
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_UNESCAPE = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}


def _label_pairs(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    at = 0
    while at < len(text.rstrip()):
        match = _LABEL.match(text, at)
        if match is None:
            raise ParseError(f"malformed labels {{{text}}}")
        labels[match[1]] = re.sub(r"\\[\\n\"]", lambda m: _UNESCAPE[m[0]], match[2])
        at = match.end()
    return labels


def parse(text: str) -> Iterator[Sample]:
    """The samples of a text exposition, in order; comments and blank lines skipped.  Raises
    ParseError at the first line that is not a sample."""
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise ParseError(f"not a sample: {line!r}")
        try:
            value = float(match["value"])
        except ValueError:
            raise ParseError(f"not a number: {line!r}") from None
        stamp = match["timestamp"]
        yield Sample(
            match["name"],
            _label_pairs(match["labels"] or ""),
            value,
            int(stamp) if stamp is not None else None,
        )
