"""Actions of sparktui's own on an instance (or a whole node), as the model and the diagnosis hold them.

While an action runs, and for ``ACTION_SETTLE_S`` after it ends, what the action itself causes is not a
fault: a restart's first request waits for the JIT with no token (no wedge), and its warmup's cold
requests are not the fixed engine's latency. The monitor core tells both the fleet state and the
diagnosis when an action starts and ends (``Monitor.action_started`` / ``action_ended``).
"""

from __future__ import annotations

from dataclasses import dataclass

ACTION_SETTLE_S = 30.0


@dataclass(slots=True)
class ActionHold:
    """Actions running on an instance (or the whole node) and when the last one ended."""

    running: int = 0
    ended_at: float | None = None

    def started(self) -> None:
        self.running += 1

    def ended(self, now: float) -> None:
        self.running = max(0, self.running - 1)
        self.ended_at = now

    def holds(self, now: float) -> bool:
        return self.running > 0 or (self.ended_at is not None and now - self.ended_at < ACTION_SETTLE_S)
