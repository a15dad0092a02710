"""Reset-safe counter history (``docs/metrics.md``, the "counters" step).

Each scrape's counters (and histogram buckets, flattened) are turned into *corrected* cumulative
values that never decrease: a reset (process restart, detected by any counter dropping or by
``process_start_time_seconds`` changing) contributes the new raw value, as Prometheus ``increase()``
does. A window's increase is then one subtraction of two corrected points, whatever happened in
between, so any window over the kept history costs O(series), not O(scrapes). A window's increases are
subtracted as they are read (``Increases``): a derivation reads a few counters and the buckets of the
histograms it shows, not every key.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from sparktui.model.scrape import HistogramSample, ModelScrape


def group_keys(keys: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The keys that hold a ``:``, grouped by what comes before the first one, each group in order:
    ``labelled("finished")`` reads its group instead of testing every key of the point."""
    groups: dict[str, list[str]] = {}
    for key in keys:
        head, colon, _rest = key.partition(":")
        if colon:
            found = groups.get(head)
            if found is None:
                groups[head] = [key]
            else:
                found.append(key)
    return {head: tuple(found) for head, found in groups.items()}


@dataclass(frozen=True, slots=True)
class Point:
    t: float
    values: Mapping[str, float]
    reset: bool  # a reset happened between the previous point and this one
    # ``group_keys(values)``: shared by consecutive points with the same keys (made once per key set)
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class Increases(Mapping[str, float]):
    """Each counter's increase from one point to a later one, subtracted when it is read: a key of the
    later point minus the same key of the earlier one (0 where the earlier point lacks it)."""

    __slots__ = ("_first", "_last")

    def __init__(self, first: Mapping[str, float], last: Mapping[str, float]) -> None:
        self._first = first
        self._last = last

    def __getitem__(self, key: str) -> float:
        return self._last[key] - self._first.get(key, 0.0)

    def __iter__(self) -> Iterator[str]:
        return iter(self._last)

    def __len__(self) -> int:
        return len(self._last)

    def __contains__(self, key: object) -> bool:
        return key in self._last

    def increase(self, key: str) -> float | None:
        """The increase of ``key``; None when the later point does not hold it."""
        last = self._last.get(key)
        return None if last is None else last - self._first.get(key, 0.0)

    def increases(self, keys: Iterable[str]) -> list[float | None]:
        """``increase`` of each of ``keys``, in one call (a histogram's buckets)."""
        last, first = self._last.get, self._first.get
        return [None if (value := last(key)) is None else value - first(key, 0.0) for key in keys]


@dataclass(frozen=True, slots=True)
class Deltas:
    """Counter increases over a window of ``seconds`` (reset-safe)."""

    seconds: float
    values: Mapping[str, float]
    reset: bool
    groups: Mapping[str, tuple[str, ...]] | None = None  # ``group_keys(values)``, when known

    def get(self, key: str) -> float | None:
        values = self.values
        return values.increase(key) if isinstance(values, Increases) else values.get(key)

    def get_all(self, keys: Iterable[str]) -> list[float | None]:
        """``get`` of each of ``keys``."""
        values = self.values
        return values.increases(keys) if isinstance(values, Increases) else [values.get(key) for key in keys]

    def total(self, prefix: str) -> float | None:
        """Sum of the increases of every key starting with ``prefix`` (None when there is none)."""
        found = [v for k, v in self.values.items() if k.startswith(prefix)]
        return sum(found) if found else None

    def labelled(self, key: str) -> dict[str, float]:
        """``{label value: increase}`` for a labelled counter stored as ``key:value``."""
        prefix = key + ":"
        values = self.values
        if self.groups is None or ":" in key:
            return {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}
        return {k[len(prefix) :]: values[k] for k in self.groups.get(key, ())}


_HIST_PREFIX = "h:"


def hist_bucket_key(name: str, bound: float) -> str:
    return f"{_HIST_PREFIX}{name}:le:{bound!r}"


def hist_keys(name: str, bounds: tuple[float, ...]) -> tuple[str, str, tuple[str, ...]]:
    """The keys of a histogram in a flat mapping: its count, its sum, and each bucket's
    (``hist_bucket_key``). Cached: a target's histograms keep their name and bounds scrape after scrape,
    and writing each bound with ``repr`` was a tenth of the derivation. Not cached: a bound of 0 (0.0
    and -0.0 are equal keys of the cache but written apart) and more buckets than a real histogram has
    (a hostile endpoint's would fill the cache with long tuples)."""
    if len(bounds) > _CACHED_BUCKETS or 0.0 in bounds:
        return _hist_keys(name, bounds)
    return _cached_hist_keys(name, bounds)


_CACHED_BUCKETS = 100  # vLLM's histograms have at most ~30 buckets


def _hist_keys(name: str, bounds: tuple[float, ...]) -> tuple[str, str, tuple[str, ...]]:
    buckets = tuple(hist_bucket_key(name, bound) for bound in bounds)
    return f"{_HIST_PREFIX}{name}:count", f"{_HIST_PREFIX}{name}:sum", buckets


_cached_hist_keys = lru_cache(maxsize=128)(_hist_keys)


def flatten(model: ModelScrape) -> dict[str, float]:
    """Counters and histogram buckets of one model scrape as one flat mapping of counters."""
    flat = dict(model.counters)
    for name, hist in model.histograms.items():
        count_key, sum_key, bucket_keys = hist_keys(name, hist.bounds)
        flat.update(zip(bucket_keys, hist.cumulative, strict=True))
        flat[sum_key] = hist.sum
        flat[count_key] = hist.count
    return flat


def histogram_deltas(deltas: Deltas, name: str, bounds: Iterable[float]) -> HistogramSample | None:
    """Rebuild a histogram of increases over the window; None if it was not scraped at both ends."""
    bounds = tuple(bounds)
    count_key, sum_key, bucket_keys = hist_keys(name, bounds)
    count, total, *buckets = deltas.get_all((count_key, sum_key, *bucket_keys))
    if count is None or total is None:
        return None
    kept: list[float] = []
    cumulative: list[float] = []
    for bound, value in zip(bounds, buckets, strict=True):
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
            values = dict(raw)
            point = Point(t=t, values=values, reset=False, groups=group_keys(values))
        else:
            restarted = process_start is not None and self._process is not None and process_start != self._process
            earlier, before_of = prev.values, prev_raw.get
            corrected = dict(earlier)  # series that vanished keep their last corrected value
            # One pass adds each increase and stops at the first counter that went down (a reset)...
            reset = restarted
            if not reset:
                for key, value in raw.items():
                    before = before_of(key)
                    if before is None:
                        corrected[key] = earlier.get(key, 0.0) + value
                    elif value < before:
                        reset = True
                        break
                    else:
                        corrected[key] = earlier.get(key, 0.0) + (value - before)
            if reset:  # ...after which every counter counts from zero again: its raw value is its increase
                for key, value in raw.items():
                    corrected[key] = earlier.get(key, 0.0) + value
            # corrected starts as the previous point's keys: the same count is the same keys, in order
            groups = prev.groups if len(corrected) == len(prev.values) else group_keys(corrected)
            point = Point(t=t, values=corrected, reset=reset, groups=groups)
        self._points.append(point)
        self._raw = raw
        self._process = process_start
        horizon = t - self._max_age_s
        while len(self._points) > 2 and self._points[0].t < horizon:
            self._points.popleft()
        return point

    def window(self, seconds: float | None = None, since: float | None = None) -> Deltas | None:
        """Increases from the oldest point at most ``seconds`` old (all kept, if None) to the latest,
        from no point before ``since`` (a window restarted there: None until two points follow it).

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
        if since is not None:
            while first_index < len(self._points) - 1 and self._points[first_index].t < since:
                first_index += 1
            if first_index >= len(self._points) - 1:
                return None
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
        return Deltas(
            seconds=last.t - first.t, values=Increases(first.values, last.values), reset=reset, groups=last.groups
        )
