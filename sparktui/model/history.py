"""Short histories of the numbers the dashboard draws as sparklines and trends.

``History.record(views, t)`` takes one point per node (and per instance), and one for the whole
fleet (key ``FLEET``: totals of throughput, the worst TTFT p90), from the views of one render tick;
``series()`` returns a new tuple each time (a widget compares by value, so re-assigning a mutated
buffer would not redraw). Unknown values are skipped, never recorded as 0.

Each series is a ring of two arrays of doubles (times, values) made at its bound when its first
point comes: 16 bytes a point, taken once, so a dashboard's memory for its sparklines is its full
cost from the first minute instead of growing for ten (a point was a ~70-byte object in a deque).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sparktui.model.fleet import InstanceView, NodeView


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _max(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _ttft_p90(instance: InstanceView) -> float | None:
    latency = instance.rates.latency.get("ttft") if instance.rates else None
    return latency.p90 if latency is not None else None


def _acceptance_length(instance: InstanceView) -> float | None:
    spec = instance.rates.spec_decode if instance.rates else None
    return spec.mean_acceptance_length if spec is not None else None


def _gen(instance: InstanceView) -> float | None:
    return instance.rates.generation_tokens_per_s if instance.rates else None


def _prompt(instance: InstanceView) -> float | None:
    return instance.rates.prompt_tokens_per_s if instance.rates else None


InstanceMetric = Callable[[InstanceView], float | None]
NodeMetric = Callable[[NodeView], float | None]

INSTANCE_METRICS: dict[str, InstanceMetric] = {
    "generation_tps": _gen,
    "prompt_tps": _prompt,
    "kv_usage": lambda i: i.kv_usage,
    "running": lambda i: i.running,
    "waiting": lambda i: i.waiting,
    "ttft_p90": _ttft_p90,
    "acceptance_length": _acceptance_length,
}

NODE_METRICS: dict[str, NodeMetric] = {
    "generation_tps": lambda n: _sum(_gen(i) for i in n.instances),
    "prompt_tps": lambda n: _sum(_prompt(i) for i in n.instances),
    "kv_usage": lambda n: _max(i.kv_usage for i in n.instances),
    "gpu_temp": lambda n: n.gpu.temperature_c if n.gpu else None,
    "gpu_power": lambda n: n.gpu.power_w if n.gpu else None,
    "gpu_util": lambda n: n.gpu.utilization if n.gpu else None,
    "mem_available": lambda n: n.host_memory.mem_available if n.host_memory else None,
    "psi_some": lambda n: n.pressure.some_avg10 if n.pressure else None,
}


FleetMetric = Callable[[Sequence[NodeView]], float | None]

FLEET = "*"  # the key of the fleet-wide series, series(FLEET, "generation_tps"): no node can be named "*"

FLEET_METRICS: dict[str, FleetMetric] = {
    "generation_tps": lambda views: _sum(_gen(i) for n in views for i in n.instances),
    "prompt_tps": lambda views: _sum(_prompt(i) for n in views for i in n.instances),
    "ttft_p90": lambda views: _max(_ttft_p90(i) for n in views for i in n.instances),
    "running": lambda views: _sum(i.running for n in views for i in n.instances),
    "waiting": lambda views: _sum(i.waiting for n in views for i in n.instances),
}


@dataclass(frozen=True, slots=True)
class Point:
    t: float
    value: float


class _Ring:
    """The last ``capacity`` points of one series, oldest first, in two preallocated arrays."""

    __slots__ = ("_len", "_next", "_t", "_v")

    def __init__(self, capacity: int) -> None:
        zeros = bytes(8 * capacity)
        self._t = array("d", zeros)
        self._v = array("d", zeros)
        self._next = 0  # where the next point goes
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def append(self, t: float, value: float) -> None:
        capacity = len(self._t)
        if self._len and self._t[self._next - 1] == t:
            # The clock did not move (a redraw, a paused replay): one moment, one point.
            self._next = (self._next - 1) % capacity
            self._len -= 1
        self._t[self._next] = t
        self._v[self._next] = value
        self._next = (self._next + 1) % capacity
        self._len = min(self._len + 1, capacity)

    def _tail(self, column: array[float], n: int) -> tuple[float, ...]:
        start = (self._next - n) % len(column)
        if start + n <= len(column):
            return tuple(column[start : start + n])
        return tuple(column[start:]) + tuple(column[: self._next])

    def values(self, last: int | None = None) -> tuple[float, ...]:
        return self._tail(self._v, self._len if not last or last > self._len else last)

    def points(self) -> tuple[Point, ...]:
        return tuple(map(Point, self._tail(self._t, self._len), self._tail(self._v, self._len)))


class History:
    """Bounded series per (node, metric) and (node, instance, metric)."""

    def __init__(self, max_points: int = 600) -> None:
        if max_points < 1:
            raise ValueError(f"max_points must be at least 1 (got {max_points})")
        self.max_points = max_points
        self._series: dict[tuple[str, ...], _Ring] = {}

    def _append(self, key: tuple[str, ...], t: float, value: float | None) -> None:
        if value is None:
            return
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Ring(self.max_points)
        series.append(t, float(value))

    def record(self, views: Sequence[NodeView], t: float) -> None:
        for name, fleet_metric in FLEET_METRICS.items():
            self._append((FLEET, name), t, fleet_metric(views))
        for node in views:
            for name, node_metric in NODE_METRICS.items():
                self._append((node.name, name), t, node_metric(node))
            for instance in node.instances:
                for name, instance_metric in INSTANCE_METRICS.items():
                    self._append((node.name, instance.name, name), t, instance_metric(instance))

    def __len__(self) -> int:
        """Points kept over every series (each series holds at most ``max_points``)."""
        return sum(len(points) for points in self._series.values())

    def series(self, *key: str, last: int | None = None) -> tuple[float, ...]:
        """The values of one series, oldest first; ``last``: the newest ``last`` only (a row's trend
        asks for 10 of up to 600)."""
        points = self._series.get(tuple(key))
        return points.values(last) if points else ()

    def points(self, *key: str) -> tuple[Point, ...]:
        points = self._series.get(tuple(key))
        return points.points() if points else ()
