"""The one tick rule of every live consumer (``sparktui.monitor.schedule``): a grid that never drifts,
missed slots skipped, and the dashboard's rounds that follow the polls."""

from __future__ import annotations

import pytest

from sparktui.monitor.schedule import TICK_FALLBACK, TICK_ON_ARRIVAL, TickRounds, next_due


def test_on_time_the_next_slot_is_one_interval_on() -> None:
    assert next_due(10.0, 10.5, 1.0) == 11.0
    assert next_due(10.0, 11.0, 1.0) == 11.0  # exactly at the next slot: it is still due


@pytest.mark.parametrize(("now", "expected"), [(11.2, 12.0), (13.9, 14.0), (17.0, 18.0)])
def test_an_overrun_skips_the_missed_slots_and_stays_on_the_grid(now: float, expected: float) -> None:
    due = next_due(10.0, now, 1.0)
    assert due == pytest.approx(expected)
    assert due > now  # never a slot in the past: no burst of ticks after a stall
    assert due - 10.0 == pytest.approx(round(due - 10.0))  # on the grid of the first slot


def test_a_grid_of_slots_does_not_drift_however_late_each_wake_is() -> None:
    due, interval = 0.0, 0.5
    for step in range(1, 1001):
        woke = due + 0.01 * (step % 7)  # each wake-up a little late, never past the next slot
        due = next_due(due, woke, interval)
    assert due == pytest.approx(1000 * interval)


def test_rounds_follow_the_arrivals_after_most_of_a_period() -> None:
    rounds = TickRounds(2.0)
    assert not rounds.round_due(0.0)  # before the first tick the timer's tick draws everything
    rounds.ticked(10.0)
    assert not rounds.round_due(10.0 + TICK_ON_ARRIVAL * 2.0 - 0.01)
    assert rounds.round_due(10.0 + TICK_ON_ARRIVAL * 2.0)
    assert rounds.timer_period_s == pytest.approx(2.0 * TICK_FALLBACK)


def test_a_recordings_rounds_are_its_own_ticks() -> None:
    rounds = TickRounds(1.0, follows_arrivals=False)
    rounds.ticked(0.0)
    assert not rounds.round_due(100.0)
    assert rounds.timer_period_s == 1.0
