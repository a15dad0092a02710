"""The monitor core as tests drive it: made for a fleet, with a callback after each tick."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sparktui.config import catalogue_for
from sparktui.diagnosis.engine import Finding
from sparktui.model.specs import FleetSpec
from sparktui.monitor.core import WINDOW_S, Monitor


class OnTick:
    """A ``MonitorObserver`` that calls ``call(now)`` after each tick (views, findings and alerts done)."""

    problem: str | None = None  # it never stops

    def __init__(self, call: Callable[[float], None]) -> None:
        self.call = call

    def tick(self, now: float) -> None:
        self.call(now)

    def findings(self, node: str, active: Sequence[Finding], now: float | None = None) -> None:
        pass

    def alert(self, reason: str, node: str | None = None) -> None:
        pass


def monitor_for(
    fleet: FleetSpec, on_tick: Callable[[Monitor, float], None] | None = None, *, window_s: float = WINDOW_S
) -> Monitor:
    """The core with the fleet's own catalogue thresholds; ``on_tick(monitor, now)`` after each tick."""
    monitor = Monitor(fleet, catalogue_for(fleet.diagnosis), window_s=window_s)
    if on_tick is not None:
        monitor.observers.append(OnTick(lambda now: on_tick(monitor, now)))
    return monitor
