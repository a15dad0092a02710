"""Increases read lazily from two corrected points equal the whole subtraction, whatever the history."""

from __future__ import annotations

import random

import pytest

from sparktui.model.counters import CounterHistory, Deltas, Point, group_keys, hist_bucket_key, hist_keys


def subtracted(first: Point, last: Point) -> dict[str, float]:
    """Every key's increase, written out plainly (the reference)."""
    return {key: value - first.values.get(key, 0.0) for key, value in last.values.items()}


def scanned(values: dict[str, float], key: str) -> dict[str, float]:
    prefix = key + ":"
    return {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}


KEYS = ("generation_tokens", "finished:stop", "finished:length", "finished:error", "h:ttft:le:0.1", "a:b:c")


Scrape = tuple[float, dict[str, float], float]


def random_scrapes(rng: random.Random) -> list[Scrape]:
    """Counters that grow, reset, appear and vanish at random: (t, raw counters, process start)."""
    raw = dict.fromkeys(KEYS[:2], 0.0)
    process = 1.0
    scrapes: list[Scrape] = []
    for step in range(30):
        if rng.random() < 0.15:
            raw = {key: rng.random() * 3 for key in raw}  # a reset: every counter from (near) zero
        if rng.random() < 0.2:
            process += rng.choice((0.0, 1.0))  # sometimes a new process start
        for key in rng.sample(KEYS, 2):
            if rng.random() < 0.3:
                raw.pop(key, None)  # the series vanished
            else:
                raw[key] = raw.get(key, 0.0) + rng.random() * 10
        scrapes.append((float(step), dict(raw), process))
    return scrapes


def random_history(rng: random.Random) -> CounterHistory:
    history = CounterHistory(max_points=12)
    for t, raw, process in random_scrapes(rng):
        history.add(t, raw, process)
    return history


def corrected_plainly(scrapes: list[Scrape]) -> list[tuple[dict[str, float], bool]]:
    """Each scrape's corrected counters and reset flag, written out plainly (the reference): a reset
    when the process start changed or any counter went down, then every raw value is an increase."""
    out: list[tuple[dict[str, float], bool]] = []
    prev_raw: dict[str, float] | None = None
    prev_process = 0.0
    for _t, raw, process in scrapes:
        if prev_raw is None:
            out.append((dict(raw), False))
        else:
            reset = process != prev_process or any(v < prev_raw[k] for k, v in raw.items() if k in prev_raw)
            corrected = dict(out[-1][0])
            for key, value in raw.items():
                before = prev_raw.get(key)
                increase = value if reset or before is None else value - before
                corrected[key] = out[-1][0].get(key, 0.0) + increase
            out.append((corrected, reset))
        prev_raw, prev_process = raw, process
    return out


def test_corrected_counters_equal_the_plain_correction_through_resets() -> None:
    for seed in range(40):
        scrapes = random_scrapes(random.Random(seed))
        history = CounterHistory(max_points=len(scrapes))
        for t, raw, process in scrapes:
            history.add(t, raw, process)
        got = [(dict(p.values), p.reset) for p in history._points]
        expected = corrected_plainly(scrapes)
        assert got == expected, seed
        # the same keys in the same order too (labelled counters are listed in that order)
        assert [list(p.values) for p in history._points] == [list(v) for v, _ in expected]


def test_window_increases_equal_the_whole_subtraction_through_resets_and_new_series() -> None:
    for seed in range(40):
        history = random_history(random.Random(seed))
        points = list(history._points)
        for first_index in range(len(points) - 1):
            window = history._between(first_index, len(points) - 1)
            expected = subtracted(points[first_index], points[-1])
            assert dict(window.values.items()) == expected
            assert window.get_all(KEYS) == [expected.get(key) for key in KEYS]
            for key in ("finished", "a", "h", "generation_tokens", "a:b", "nothing"):
                assert window.labelled(key) == scanned(expected, key), (seed, key)


def test_a_labelled_series_appearing_later_is_in_the_labelled_increases() -> None:
    history = CounterHistory()
    history.add(0.0, {"finished:stop": 1.0})
    history.add(1.0, {"finished:stop": 2.0})  # same keys: the grouping is shared with the first point
    history.add(2.0, {"finished:stop": 3.0, "finished:error": 4.0})  # a new key: grouped again
    latest = history.latest
    assert latest is not None and latest.groups == group_keys(latest.values)
    window = history.window()
    assert window is not None and window.labelled("finished") == {"stop": 2.0, "error": 4.0}


def test_labelled_reads_a_plain_mapping_as_before() -> None:
    deltas = Deltas(seconds=1.0, values={"finished:stop": 1.0, "finishedx:y": 2.0}, reset=False)
    assert deltas.labelled("finished") == {"stop": 1.0}
    assert deltas.get("finishedx:y") == 2.0


def test_cached_histogram_keys_are_the_keys_written_out() -> None:
    bounds = (0.001, 0.5, 2.5, float("inf"))
    count, total, buckets = hist_keys("ttft", bounds)
    assert (count, total) == ("h:ttft:count", "h:ttft:sum")
    assert buckets == tuple(hist_bucket_key("ttft", b) for b in bounds)
    # 0.0 and -0.0 are one key of a cache but two series: each keeps its own spelling.
    assert hist_keys("x", (-0.0, 1.0))[2][0] == "h:x:le:-0.0"
    assert hist_keys("x", (0.0, 1.0))[2][0] == "h:x:le:0.0"


def test_bucket_bounds_read_once_are_the_bounds_parsed_anew() -> None:
    from sparktui.engines.vllm.scrape import _bound, _bucket_bound
    from sparktui.model.scrape import ScrapeProblem

    for le in ("0.001", "2.5", "+Inf", "1e3", "-0", "0", "0." + "0" * 60 + "1") * 2:
        assert repr(_bucket_bound("w", le)) == repr(_bound(le))
    for bad in ("NaN", "-Inf", "x", "1_0"):
        for _ in range(2):  # a bad bound is refused every time, not only when first read
            with pytest.raises(ScrapeProblem, match="bad bucket bound"):
                _bucket_bound("w", bad)
