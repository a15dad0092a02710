"""Edge cases of the derived numbers: quantiles, no traffic, formatting."""

from __future__ import annotations

import math

import pytest

from sparktui.model.counters import CounterHistory
from sparktui.model.derive import histogram_quantile, ratio
from sparktui.model.units import NO_DATA, fmt_pct, fmt_rate, fmt_seconds, fmt_tokens

INF = math.inf


def test_quantile_interpolates_inside_a_bucket() -> None:
    # 10 observations in (0, 1], 10 in (1, 2]: the median is the top of the first bucket.
    assert histogram_quantile(0.5, (1.0, 2.0, INF), (10, 20, 20)) == 1.0
    assert histogram_quantile(0.75, (1.0, 2.0, INF), (10, 20, 20)) == 1.5
    assert histogram_quantile(0.05, (1.0, 2.0, INF), (10, 20, 20)) == pytest.approx(0.1)


def test_quantile_in_the_inf_bucket_is_the_largest_finite_bound() -> None:
    assert histogram_quantile(0.99, (1.0, 2.0, INF), (1, 2, 100)) == 2.0


def test_quantile_of_an_empty_window_is_none_not_zero() -> None:
    assert histogram_quantile(0.5, (1.0, 2.0, INF), (0, 0, 0)) is None


def test_quantile_repairs_non_monotonic_buckets() -> None:
    # A bucket lower than the one before (a torn scrape) is lifted, as Prometheus does.
    # Repaired to (4, 4, 8, 8): rank 6 lies in (2, 4] between cumulative 4 and 8 -> 3.0
    # (unrepaired, the interpolation would start from 3 and give 3.2).
    assert histogram_quantile(0.75, (1.0, 2.0, 4.0, INF), (4, 3, 8, 8)) == pytest.approx(3.0)


def test_ratio_with_zero_denominator_is_no_traffic() -> None:
    assert ratio(0, 0) is None
    assert ratio(5, 0) is None
    assert ratio(None, 3) is None
    assert ratio(1, 4) == 0.25


def test_counter_history_window_survives_a_reset_in_the_middle() -> None:
    history = CounterHistory()
    history.add(0.0, {"c": 100.0})
    history.add(1.0, {"c": 150.0})
    history.add(2.0, {"c": 20.0})  # restarted: counted from 0 again
    history.add(3.0, {"c": 50.0})
    window = history.window()
    assert window is not None
    assert window.values["c"] == 50 + 20 + 30
    assert window.reset
    last = history.last_interval()
    assert last is not None and last.values["c"] == 30 and not last.reset


def test_series_appearing_mid_window_count_from_zero() -> None:
    history = CounterHistory()
    history.add(0.0, {"a": 1.0})
    history.add(1.0, {"a": 2.0, "finished:error": 3.0})
    window = history.window()
    assert window is not None and window.values["finished:error"] == 3.0


def test_old_points_are_dropped_past_the_max_age() -> None:
    history = CounterHistory(max_age_s=10.0)
    for second in range(30):
        history.add(float(second), {"c": float(second)})
    window = history.window()
    assert window is not None and window.seconds <= 11.0


def test_formatting_unknowns_as_a_dash_never_zero() -> None:
    assert fmt_rate(None) == NO_DATA
    assert fmt_pct(None) == NO_DATA
    assert fmt_pct(float("nan")) == NO_DATA
    assert fmt_seconds(None) == NO_DATA
    assert fmt_tokens(None) == NO_DATA
    assert fmt_rate(0.0, " tok/s") == "0.00 tok/s"


def test_formatting_latency_below_the_first_bucket_says_so() -> None:
    assert fmt_seconds(0.15, floor=0.3) == "<300 ms"
    assert fmt_seconds(0.0175) == "17.5 ms"
    assert fmt_seconds(4.3167) == "4.32 s"
    assert fmt_tokens(983040) == "983k"


def test_quantiles_in_one_pass_equal_one_quantile_at_a_time() -> None:
    import random

    from sparktui.model.derive import histogram_quantiles

    def histogram_quantile(q: float, bounds: list[float], cumulative: list[float]) -> float | None:
        """Prometheus's algorithm, one quantile, written out plainly (the reference)."""
        fixed = [max(0.0, *cumulative[: i + 1]) for i in range(len(cumulative))]
        total = fixed[-1]
        if total <= 0:
            return None
        rank, lower, below = q * total, 0.0, 0.0
        for bound, count in zip(bounds, fixed, strict=True):
            if count >= rank:
                if math.isinf(bound):
                    return lower if len(bounds) > 1 else None
                return bound if count == below else lower + (bound - lower) * (rank - below) / (count - below)
            lower, below = bound, count
        return lower

    rng = random.Random(7)
    qs = (0.0, 0.25, 0.5, 0.9, 0.99, 1.0)
    for _ in range(300):
        size = rng.randint(1, 12)
        bounds = [*sorted(rng.sample(range(1, 1000), size - 1)), math.inf]
        counts = [float(rng.randint(0, 5)) for _ in bounds]
        cumulative = [sum(counts[: i + 1]) - (rng.random() < 0.1) for i in range(len(counts))]  # dips, as windows make
        expected = tuple(histogram_quantile(q, bounds, cumulative) for q in qs)
        assert histogram_quantiles(qs, bounds, cumulative) == expected
