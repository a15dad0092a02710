"""Short histories of the numbers the dashboard draws as sparklines and trends.

``History.record(views, t)`` takes one point per node (and per instance), and one for the whole
fleet (key ``FLEET``: totals of throughput, the worst TTFT p90), from the views of one render tick;
``series()`` returns a new tuple each time (a widget compares by value, so re-assigning a mutated
deque would not redraw). Unknown values are skipped, never recorded as 0.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

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


class History:
    """Bounded series per (node, metric) and (node, instance, metric)."""

    def __init__(self, max_points: int = 600) -> None:
        self.max_points = max_points
        self._series: dict[tuple[str, ...], deque[Point]] = {}

    def _append(self, key: tuple[str, ...], t: float, value: float | None) -> None:
        if value is None:
            return
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = deque(maxlen=self.max_points)
        elif series[-1].t == t:
            series.pop()  # the clock did not move (a redraw, a paused replay): one moment, one point
        series.append(Point(t, float(value)))

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
        points = self._series.get(tuple(key))
        if not points:
            return ()
        if last and last < len(points):  # the tail only: a row's trend asks for 10 of up to 600 points
            return tuple(reversed([p.value for p in islice(reversed(points), last)]))
        return tuple(p.value for p in points)

    def points(self, *key: str) -> tuple[Point, ...]:
        return tuple(self._series.get(tuple(key), ()))
