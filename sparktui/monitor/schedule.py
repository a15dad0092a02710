"""When a live consumer ticks the monitor core, and when a node is polled: one rule for every clock.

Two consumers tick the core on a clock of their own (a recording's ticks are its own): ``sparktui
watch`` once per poll interval, and the dashboard at the polls' rhythm. The poller schedules each node's
polls on a grid too. They share these rules:

- ``next_due``: slots lie on a fixed grid (``first + k × interval``), so a tick or a poll never drifts;
  one that overran skips the slots it missed instead of bunching them up (a burst of ticks after a
  stall would evaluate the same data several times and count the rules' ``open_after`` too fast).
- ``TickRounds``: the dashboard's tick follows the polls. The first frame of arrivals at least
  ``on_arrival`` of a render period after the last tick *is* the tick (one frame a round, not one for
  the arrivals and another for the tick a moment later); a timer ticks after ``fallback`` periods
  when nothing arrives (a fleet that is all down still ages).
"""

from __future__ import annotations

from dataclasses import dataclass

TICK_ON_ARRIVAL = 0.9  # arrivals this far into a render period start the next round
TICK_FALLBACK = 1.25  # periods without arrivals after which the timer ticks anyway


def next_due(due: float, now: float, interval: float) -> float:
    """The slot after ``due`` on its grid of ``interval``, or, when that is already past at ``now``
    (the work overran), the first slot of the same grid after ``now``: missed slots are skipped."""
    following = due + interval
    if following >= now:
        return following
    return now + interval - ((now - following) % interval)


@dataclass(slots=True)
class TickRounds:
    """The dashboard's tick rhythm (see the module docstring), on the render timer's clock.

    ``period_s`` is the render period; ``follows_arrivals`` is False where the source carries the
    clock (a recording): then only the recording ticks, and arrivals never start a round."""

    period_s: float
    follows_arrivals: bool = True
    ticked_at: float | None = None  # the timer clock at the last tick

    @property
    def timer_period_s(self) -> float:
        """How often the fallback timer fires: later than a round when arrivals drive the ticks."""
        return self.period_s * TICK_FALLBACK if self.follows_arrivals else self.period_s

    def ticked(self, t: float) -> None:
        self.ticked_at = t

    def round_due(self, t: float) -> bool:
        """Whether arrivals at ``t`` are a new round: the tick, drawn with them."""
        if not self.follows_arrivals or self.ticked_at is None:
            return False
        return t - self.ticked_at >= TICK_ON_ARRIVAL * self.period_s
