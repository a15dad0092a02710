"""Reset-safe counter history (``../shared/reference/vllm/formulas.md`` §1).

Each scrape's counters (and histogram buckets, flattened) are turned into *corrected* cumulative
values that never decrease: a reset (process restart, detected by any counter dropping or by
``process_start_time_seconds`` changing) contributes the new raw value, as Prometheus ``increase()``
does. A window's increase is then one subtraction of two corrected points, whatever happened in
between, so any window over the kept history costs O(series), not O(scrapes).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sparktui.model.vllm import HistogramSample, ModelScrape


@dataclass(frozen=True, slots=True)
class Point:
    t: float
    values: Mapping[str, float]
    reset: bool  # a reset happened between the previous point and this one


@dataclass(frozen=True, slots=True)
class Deltas:
    """Counter increases over a window of ``seconds`` (reset-safe)."""

    seconds: float
    values: Mapping[str, float]
    reset: bool

    def get(self, key: str) -> float | None:
        return self.values.get(key)

    def total(self, prefix: str) -> float | None:
        """Sum of the increases of every key starting with ``prefix`` (None when there is none)."""
        found = [v for k, v in self.values.items() if k.startswith(prefix)]
        return sum(found) if found else None

    def labelled(self, key: str) -> dict[str, float]:
        """``{label value: increase}`` for a labelled counter stored as ``key:value``."""
        prefix = key + ":"
        return {k[len(prefix) :]: v for k, v in self.values.items() if k.startswith(prefix)}


_HIST_PREFIX = "h:"


def hist_bucket_key(name: str, bound: float) -> str:
    return f"{_HIST_PREFIX}{name}:le:{bound!r}"


def flatten(model: ModelScrape) -> dict[str, float]:
    """Counters and histogram buckets of one model scrape as one flat mapping of counters."""
    flat = dict(model.counters)
    for name, hist in model.histograms.items():
        for bound, cumulative in zip(hist.bounds, hist.cumulative, strict=True):
            flat[hist_bucket_key(name, bound)] = cumulative
        flat[f"{_HIST_PREFIX}{name}:sum"] = hist.sum
        flat[f"{_HIST_PREFIX}{name}:count"] = hist.count
    return flat


def histogram_deltas(deltas: Deltas, name: str, bounds: Iterable[float]) -> HistogramSample | None:
    """Rebuild a histogram of increases over the window; None if it was not scraped at both ends."""
    values = deltas.values
    count = values.get(f"{_HIST_PREFIX}{name}:count")
    total = values.get(f"{_HIST_PREFIX}{name}:sum")
    if count is None or total is None:
        return None
    kept: list[float] = []
    cumulative: list[float] = []
    for bound in bounds:
        value = values.get(hist_bucket_key(name, bound))
        if value is not None:
            kept.append(bound)
            cumulative.append(value)
    return HistogramSample(bounds=tuple(kept), cumulative=tuple(cumulative), sum=total, count=count)


class CounterHistory:
    """Corrected cumulative counters of one scrape target (or one model on it) over time."""

    def __init__(self, max_age_s: float = 900.0, max_points: int = 2000) -> None:
        self._points: deque[Point] = deque(maxlen=max_points)
        self._max_age_s = max_age_s
        self._raw: Mapping[str, float] | None = None
        self._process: float | None = None

    def __len__(self) -> int:
        return len(self._points)

    @property
    def latest(self) -> Point | None:
        return self._points[-1] if self._points else None

    def add(self, t: float, raw: Mapping[str, float], process_start: float | None = None) -> Point:
        """Record one scrape taken at ``t`` (seconds, any monotonic clock)."""
        prev_raw, prev = self._raw, self.latest
        if prev is not None and t <= prev.t:
            # A scrape that is not newer than the last one (clock step, replay glitch): start over.
            self._points.clear()
            prev_raw, prev = None, None
        if prev_raw is None or prev is None:
            point = Point(t=t, values=dict(raw), reset=False)
        else:
            restarted = process_start is not None and self._process is not None and process_start != self._process
            reset = restarted or any(value < prev_raw[key] for key, value in raw.items() if key in prev_raw)
            corrected = dict(prev.values)  # series that vanished keep their last corrected value
            for key, value in raw.items():
                before = prev_raw.get(key)
                increase = value if reset or before is None else value - before
                corrected[key] = prev.values.get(key, 0.0) + increase
            point = Point(t=t, values=corrected, reset=reset)
        self._points.append(point)
        self._raw = raw
        self._process = process_start
        horizon = t - self._max_age_s
        while len(self._points) > 2 and self._points[0].t < horizon:
            self._points.popleft()
        return point

    def window(self, seconds: float | None = None) -> Deltas | None:
        """Increases from the oldest point at most ``seconds`` old (all kept, if None) to the latest.

        None until two points exist.
        """
        if len(self._points) < 2:
            return None
        last = self._points[-1]
        first_index = 0
        if seconds is not None:
            start = last.t - seconds
            first_index = len(self._points) - 2
            while first_index > 0 and self._points[first_index - 1].t >= start:
                first_index -= 1
        return self._between(first_index, len(self._points) - 1)

    def last_interval(self) -> Deltas | None:
        if len(self._points) < 2:
            return None
        return self._between(len(self._points) - 2, len(self._points) - 1)

    def intervals(self) -> list[Deltas]:
        """Every consecutive-scrape interval kept, oldest first (for per-interval history)."""
        return [self._between(i - 1, i) for i in range(1, len(self._points))]

    def _between(self, first_index: int, last_index: int) -> Deltas:
        first, last = self._points[first_index], self._points[last_index]
        reset = any(self._points[i].reset for i in range(first_index + 1, last_index + 1))
        values = {key: value - first.values.get(key, 0.0) for key, value in last.values.items()}
        return Deltas(seconds=last.t - first.t, values=values, reset=reset)
