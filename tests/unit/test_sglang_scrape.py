"""SGLang's ``/metrics`` read into the neutral scrape, checked against the scenarios its expositions were
made from: ``tests/data/sglang-0.5.23/`` holds expositions written by SGLang 0.5.23's own metrics code
(``make_expositions.py``) and the scenarios that drove it (``scenarios.json``). What a correct reading
shows is derived here from the scenarios, independently of sparktui's reading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sparktui.engines import registry
from sparktui.engines.sglang.scrape import SERIES, normalise
from sparktui.model.counters import CounterHistory, flatten
from sparktui.model.derive import derive_rates
from sparktui.model.promtext import parse
from sparktui.model.scrape import ModelScrape, ScrapeProblem

DATA = Path(__file__).resolve().parents[1] / "data" / "sglang-0.5.23"
SCENARIOS: dict[str, Any] = json.loads((DATA / "scenarios.json").read_text())
CASES = [(name, i) for name, s in SCENARIOS.items() if not name.startswith("_") for i in range(len(s["phases"]))]


def read(name: str, phase: int) -> ModelScrape:
    text = (DATA / f"{name}-{SCENARIOS[name]['phases'][phase]['name']}.txt").read_text()
    (model,) = normalise(parse(text)).models.values()
    return model


def requests_until(name: str, phase: int) -> list[dict[str, Any]]:
    """Every request the scenario finished up to and including ``phase`` (the counters are totals)."""
    return [r for p in SCENARIOS[name]["phases"][: phase + 1] for r in p["requests"]]


def engines_of(name: str, phase: int) -> dict[str, dict[str, Any]]:
    """Each data-parallel engine's state: its lowest rank's stats (every rank logs the same batch)."""
    out: dict[str, dict[str, Any]] = {}
    for rank in sorted(SCENARIOS[name]["phases"][phase]["ranks"], key=lambda r: (r["tp_rank"], r["pp_rank"])):
        out.setdefault(str(rank.get("dp_rank", 0)), rank)
    return out


@pytest.mark.parametrize(("name", "phase"), CASES)
def test_the_token_and_request_counts_are_the_scenarios_totals(name: str, phase: int) -> None:
    model = read(name, phase)
    requests = requests_until(name, phase)
    aborted = sum(1 for r in requests if r.get("aborted"))
    cached = sum(r["cached"] for r in requests)
    assert model.model_name == SCENARIOS[name]["model_name"]
    assert model.counters["prompt_tokens"] == sum(r["prompt"] for r in requests)
    assert model.counters["generation_tokens"] == sum(r["generated"] for r in requests)
    assert model.counters["prompt_tokens_cached"] == cached
    assert model.counters["prompt_by_source:local_compute"] == sum(r["prompt"] - r["cached"] for r in requests)
    assert model.counters["finished:completed"] == len(requests) - aborted
    assert model.counters["finished:abort"] == aborted
    for tier in ("device", "host"):
        split = [r["cached_by_source"][tier] for r in requests if "cached_by_source" in r]
        if sum(split):
            assert model.counters[f"cached_by_tier:{tier}"] == sum(split)


@pytest.mark.parametrize(("name", "phase"), CASES)
def test_the_latency_histograms_hold_every_request_streaming_or_not(name: str, phase: int) -> None:
    model = read(name, phase)
    requests = requests_until(name, phase)
    ttft, e2e = model.histograms["ttft"], model.histograms["e2e"]
    assert ttft.count == e2e.count == len(requests)
    assert ttft.sum == pytest.approx(sum(r["ttft_s"] for r in requests))
    assert e2e.sum == pytest.approx(sum(r["e2e_s"] for r in requests))
    assert ttft.cumulative[-1] == len(requests)
    assert model.histograms["itl"].count == sum(r["generated"] - 1 for r in requests)  # one per token after the first


@pytest.mark.parametrize(("name", "phase"), CASES)
def test_each_engines_gauges_are_read_once_however_many_ranks_log_them(name: str, phase: int) -> None:
    model = read(name, phase)
    engines = engines_of(name, phase)
    assert model.engines == tuple(sorted(engines))
    assert model.running == sum(e["running"] for e in engines.values())
    assert model.waiting == sum(e["queued"] for e in engines.values())
    assert model.kv_usage_by_engine == {k: e["token_usage"] for k, e in engines.items()}
    assert model.prefix_hit_rate_by_engine == {k: e["cache_hit_rate"] for k, e in engines.items()}


def test_two_tensor_parallel_ranks_are_one_engine_not_twice_the_requests() -> None:
    model = read("tp2", 0)
    (rank0, rank1) = SCENARIOS["tp2"]["phases"][0]["ranks"]
    assert rank0["running"] == rank1["running"] == 4
    assert model.running == 4 and model.kv_usage_by_engine == {"0": 0.5}


def test_data_parallel_engines_add_their_requests_and_keep_their_own_kv_usage() -> None:
    model = read("dp2", 0)
    assert model.running == 3 + 1
    assert model.kv_usage_by_engine == {"0": 0.6, "1": 0.2}
    assert model.kv_usage_max == 0.6  # the busiest engine's, never a sum over engines


def test_the_kv_pool_is_used_free_and_evictable_tokens() -> None:
    scrape = normalise(parse((DATA / "single-t0.txt").read_text()))
    (rank,) = SCENARIOS["single"]["phases"][0]["ranks"]
    pool = rank["kv_used_tokens"] + rank["kv_available_tokens"] + rank["kv_evictable_tokens"]
    assert scrape.cache_config["0"].labels == {"kv_cache_size_tokens": str(pool)}
    assert rank["kv_used_tokens"] / pool == rank["token_usage"]  # what token_usage is a share of


def test_speculative_decoding_is_as_sglang_reports_it_with_no_counts_to_window() -> None:
    spec = read("spec", 0)
    (rank,) = SCENARIOS["spec"]["phases"][0]["ranks"]
    assert spec.reported == {
        "spec_accept_length": rank["spec_accept_length"],
        "spec_accept_rate": rank["spec_accept_rate"],
    }
    assert not any(key.startswith("spec_") for key in spec.counters)
    assert "spec_positions" in spec.lacks
    assert read("single", 0).reported == {}  # served at 0 by a server that does not speculate


def test_the_rates_of_a_window_are_the_second_phases_requests() -> None:
    history = CounterHistory()
    history.add(100.0, flatten(read("single", 0)))
    latest = read("single", 1)
    history.add(105.0, flatten(latest))
    deltas = history.window()
    assert deltas is not None
    rates = derive_rates(deltas, latest)
    assert rates is not None
    second = SCENARIOS["single"]["phases"][1]
    assert rates.generation_tokens_per_s == pytest.approx(sum(r["generated"] for r in second["requests"]) / 5)
    assert rates.prompt_tokens_per_s == pytest.approx(sum(r["prompt"] for r in second["requests"]) / 5)
    assert rates.requests_finished_per_s == pytest.approx(len(second["requests"]) / 5)
    assert rates.finished_by_reason == {"completed": 2, "abort": 1}
    ttft = rates.latency["ttft"]
    assert ttft.count == len(second["requests"])


def test_the_engine_asks_ready_not_the_health_that_generates_and_filters_metrics() -> None:
    engine = registry()["sglang"]
    assert engine.polling.health_path == "/ready"
    assert engine.polling.info_path == "/server_info"
    assert set(engine.polling.metrics_filter) == set(SERIES) == set(engine.series)
    text = (DATA / "single-t0.txt").read_text()
    kept = [line for line in text.splitlines() if line and not line.startswith("#")]
    names = {line.split("{", 1)[0].split(" ", 1)[0] for line in kept}
    assert {"sglang:prompt_tokens_total", "sglang:num_running_reqs", "sglang:token_usage"} <= names & set(SERIES)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('sglang:num_running_reqs{tp_rank="x"} 1\n', "tp_rank='x', which is not a whole number"),
        ('sglang:token_usage{tp_rank="0"} 1.5\n', "sglang:token_usage is"),
        ('sglang:num_running_reqs{tp_rank="0"} NaN\n', "NaN"),
        ("sglang:prompt_tokens_total -3\n", "sglang:prompt_tokens_total is -3"),
        ('sglang:time_to_first_token_seconds_bucket{le="1"} 1\n', "no +Inf bucket"),
        (
            'sglang:time_to_first_token_seconds_bucket{le="1"} 2\n'
            'sglang:time_to_first_token_seconds_bucket{le="+Inf"} 1\n',
            "not cumulative",
        ),
        ('sglang:time_to_first_token_seconds_bucket{le="x"} 1\n', "bad bucket bound"),
        ("".join(f'sglang:prompt_tokens_total{{model_name="m{i}"}} 1\n' for i in range(9)), "model_name labels"),
        ("".join(f'sglang:num_running_reqs{{dp_rank="{i}"}} 1\n' for i in range(65)), "dp_rank values"),
        ("vllm:num_requests_running 1\n", "no sglang: metric"),
    ],
)
def test_a_number_that_cannot_be_is_one_line_naming_it(text: str, reason: str) -> None:
    with pytest.raises(ScrapeProblem) as caught:
        normalise(parse(text))
    assert reason in str(caught.value) and "\n" not in str(caught.value)
