"""Every scenario in fixtures/vllm-0.33 reproduces its expected.json (to 1e-4 relative)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparktui.engines.vllm.scrape import WANTED, normalise
from sparktui.model.derive import EngineRates
from sparktui.model.promtext import PromParser
from sparktui.model.scrape import EngineScrape
from sparktui.model.tracker import ScrapeTracker
from tests.conftest import VLLM_FIXTURES

SCENARIOS = ["mtp2-steady", "mtp3-poor-pos2", "restart"]
REL = 1e-4


def _expected(scenario: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((VLLM_FIXTURES / scenario / "expected.json").read_text())
    return data


def _scrapes(scenario: str) -> Iterator[tuple[float, EngineScrape]]:
    parser = PromParser(keep=WANTED.__contains__)
    for entry in json.loads((VLLM_FIXTURES / scenario / "scrapes.json").read_text()):
        text = (VLLM_FIXTURES / scenario / entry["file"]).read_text()
        yield entry["t"], normalise(parser.parse(text))


def _tracker(scenario: str, upto: int | None = None) -> ScrapeTracker:
    tracker = ScrapeTracker()
    for index, (t, scrape) in enumerate(_scrapes(scenario)):
        if upto is not None and index > upto:
            break
        tracker.observe(t, scrape)
    return tracker


def _close(actual: float | None, expected: float | None) -> bool:
    if expected is None:
        return actual is None
    return actual is not None and actual == pytest.approx(expected, rel=REL, abs=1e-9)


def _check(rates: EngineRates, want: dict[str, Any]) -> None:
    spec = rates.spec_decode
    assert spec is not None
    ttft, itl = rates.latency["ttft"], rates.latency["itl"]
    actual: dict[str, Any] = {
        "seconds": rates.seconds,
        "generation_tokens_per_s": rates.generation_tokens_per_s,
        "prompt_tokens_per_s": rates.prompt_tokens_per_s,
        "prompt_tokens_computed_per_s": rates.prompt_tokens_computed_per_s,
        "prompt_tokens_cached_per_s": rates.prompt_tokens_cached_per_s,
        "requests_finished_per_s": rates.requests_finished_per_s,
        "prefix_cache_hit_rate": rates.prefix_cache_hit_rate,
        "spec_decode_acceptance_rate": spec.acceptance_rate,
        "spec_decode_mean_acceptance_length": spec.mean_acceptance_length,
        "spec_decode_draft_tokens_per_s": spec.draft_tokens_per_s,
        "spec_decode_accepted_tokens_per_s": spec.accepted_tokens_per_s,
        "ttft_seconds_p50": ttft.p50,
        "ttft_seconds_p90": ttft.p90,
        "ttft_seconds_p99": ttft.p99,
        "ttft_seconds_mean": ttft.mean,
        "itl_seconds_p50": itl.p50,
        "itl_seconds_p90": itl.p90,
        "itl_seconds_p99": itl.p99,
        "itl_seconds_mean": itl.mean,
    }
    mismatches = {k: (v, want[k]) for k, v in actual.items() if not _close(v, want[k])}
    for key in ("spec_decode_per_position_acceptance", "spec_decode_per_position_conditional_acceptance"):
        got = spec.per_position if key.endswith("_position_acceptance") else spec.conditional
        if len(got) != len(want[key]) or not all(_close(g, w) for g, w in zip(got, want[key], strict=True)):
            mismatches[key] = (got, want[key])
    raw = want["raw_deltas"]
    reasons = raw["request_success_by_finished_reason"]
    others = {k: v for k, v in rates.finished_by_reason.items() if k not in reasons}
    if any(rates.finished_by_reason.get(k) != v for k, v in reasons.items()) or any(others.values()):
        mismatches["finished"] = (rates.finished_by_reason, raw["request_success_by_finished_reason"])
    if ttft.count != raw["ttft_count"] or itl.count != raw["itl_count"]:
        mismatches["counts"] = ((ttft.count, itl.count), (raw["ttft_count"], raw["itl_count"]))
    assert not mismatches


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_window_first_to_last_matches_expected(scenario: str) -> None:
    expected = _expected(scenario)
    tracker = _tracker(scenario)
    rates = tracker.rates(expected["model_name"])
    assert rates is not None
    assert rates.reset == expected["window_first_to_last"]["counter_reset"]
    _check(rates, expected["window_first_to_last"]["total"])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_interval_matches_expected(scenario: str) -> None:
    expected = _expected(scenario)
    intervals = _tracker(scenario).interval_rates(expected["model_name"])
    assert len(intervals) == len(expected["intervals"])
    for rates, want in zip(intervals, expected["intervals"], strict=True):
        assert rates.reset == want["counter_reset"], want["from"]
        _check(rates, want["total"])


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("which", ["first_scrape", "last_scrape"])
def test_gauges_match_expected(scenario: str, which: str) -> None:
    expected = _expected(scenario)
    want = expected[which]
    scrapes = list(_scrapes(scenario))
    _t, scrape = scrapes[0] if which == "first_scrape" else scrapes[-1]
    model = scrape.models[expected["model_name"]]
    assert dict(model.kv_usage_by_engine) == pytest.approx(want["kv_cache_usage_perc"])
    assert model.kv_usage_max == pytest.approx(want["kv_cache_usage_perc_max_over_engines"])
    assert model.kv_usage_mean == pytest.approx(want["kv_cache_usage_perc_mean_over_engines"])
    assert model.running == want["num_requests_running_sum"]
    assert model.waiting == want["num_requests_waiting_sum"]
    assert model.engines == tuple(expected["engines"])


def test_sliding_window_over_the_last_ten_seconds_equals_the_interval_sums() -> None:
    expected = _expected("mtp2-steady")
    rates = _tracker("mtp2-steady").rates(expected["model_name"], window_s=10.0)
    assert rates is not None
    assert rates.seconds == 10.0
    last_ten = expected["intervals"][-10:]
    generated = sum(i["total"]["raw_deltas"]["generation_tokens"] for i in last_ten)
    assert rates.generation_tokens_per_s == pytest.approx(generated / 10.0)


def test_kv_capacity_comes_from_cache_config_info() -> None:
    _t, scrape = next(_scrapes("mtp2-steady"))
    config = scrape.cache_config["0"]
    assert config.labels["num_gpu_blocks"] == "61440"
    size = config.labels.get("kv_cache_size_tokens")
    expected_capacity = float(size) if size not in (None, "None") else 61440 * 16
    assert scrape.kv_capacity_tokens == expected_capacity


def test_disable_log_stats_is_up_without_engine_stats() -> None:
    tracker = ScrapeTracker()
    for t, scrape in _scrapes("disable-log-stats"):
        assert not scrape.has_engine_stats
        assert scrape.process_start is not None
        tracker.observe(t, scrape)
    assert tracker.rates() is None


def test_restart_is_detected_by_process_start_even_if_no_counter_drops(tmp_path: Path) -> None:
    scrapes = list(_scrapes("mtp2-steady"))
    tracker = ScrapeTracker()
    t0, first = scrapes[0]
    t1, second = scrapes[1]
    tracker.observe(t0, first)
    moved = EngineScrape(
        models=second.models,
        cache_config=second.cache_config,
        process_start=(second.process_start or 0) + 100,
    )
    tracker.observe(t1, moved)
    rates = tracker.rates()
    assert rates is not None and rates.reset
    # After a reset every counter contributes its new value, not the difference.
    total = second.models[next(iter(second.models))].counters["generation_tokens"]
    assert rates.generation_tokens_per_s == pytest.approx(total / (t1 - t0))


def test_tracker_keeps_each_answer_until_the_next_scrape_and_no_longer() -> None:
    scrapes = list(_scrapes("mtp2-steady"))
    tracker = ScrapeTracker()
    for t, scrape in scrapes[:3]:
        tracker.observe(t, scrape)
    window, last = tracker.rates(window_s=30.0), tracker.last_interval_rates()
    assert window is not None and last is not None
    assert tracker.rates(window_s=30.0) is window and tracker.last_interval_rates() is last
    assert tracker.rates(window_s=1.0) is not window  # another window is its own question
    t, scrape = scrapes[3]
    tracker.observe(t, scrape)
    fresh = tracker.last_interval_rates()
    assert fresh is not None and fresh is not last
    (t2, s2), (t3, s3) = scrapes[2], scrapes[3]
    direct = ScrapeTracker()
    direct.observe(t2, s2)
    direct.observe(t3, s3)
    assert fresh == direct.last_interval_rates()  # the new answer is the new interval's, not a stale one
