"""The sparkline history's ring of preallocated arrays, against a deque of (t, value) pairs."""

from __future__ import annotations

import tracemalloc
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.model.history import History, Point

KEY = ("spark1", "gpu_temp")

# A step is a time increment (0: the clock did not move, the point replaces the last) and a value.
steps = st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.floats(-1e9, 1e9)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(1, 12), steps=steps, last=st.integers(0, 15))
def test_the_ring_keeps_what_a_bounded_deque_keeps(capacity: int, steps: list[tuple[float, float]], last: int) -> None:
    history = History(max_points=capacity)
    expected: deque[tuple[float, float]] = deque(maxlen=capacity)
    t = 0.0
    for dt, value in steps:
        t += dt
        if expected and expected[-1][0] == t:
            expected.pop()
        expected.append((t, value))
        history._append(KEY, t, value)
    assert history.points(*KEY) == tuple(Point(t, v) for t, v in expected)
    assert history.series(*KEY) == tuple(v for _, v in expected)
    tail = list(expected)[-last:] if last else list(expected)
    assert history.series(*KEY, last=last) == tuple(v for _, v in tail)
    assert len(history) == len(expected)


def test_a_repeated_moment_right_after_the_ring_wraps_replaces_the_newest_point() -> None:
    history = History(max_points=3)
    for second in range(3):  # full, and the next point goes to slot 0
        history._append(KEY, float(second), float(second))
    history._append(KEY, 2.0, 20.0)  # the newest is in the last slot, before the wrap
    assert history.points(*KEY) == (Point(0.0, 0.0), Point(1.0, 1.0), Point(2.0, 20.0))
    history._append(KEY, 3.0, 3.0)
    history._append(KEY, 3.0, 30.0)
    assert history.series(*KEY) == (1.0, 20.0, 30.0)


def test_a_series_takes_its_whole_memory_with_its_first_point() -> None:
    history = History(max_points=600)
    tracemalloc.start()
    try:
        history._append(KEY, 0.0, 1.0)
        first, _ = tracemalloc.get_traced_memory()
        for second in range(1, 1200):
            history._append(KEY, float(second), 1.0)
        full, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert first >= 600 * 16  # both arrays, at the bound, at once
    assert full - first < 1024  # nothing more as it fills and wraps


def test_a_history_needs_room_for_a_point() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        History(max_points=0)
