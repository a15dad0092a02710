"""Older vLLM servers: the fallback names give the same numbers as the 0.33 names."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from sparktui.engines.vllm.scrape import WANTED, normalise, wanted_sample_names
from sparktui.model.promtext import parse
from sparktui.model.tracker import ScrapeTracker
from tests.conftest import VLLM_FIXTURES

SCENARIO = VLLM_FIXTURES / "mtp2-steady"


def _as_old_server(text: str) -> str:
    """Rewrite a 0.33 scrape with the names of a V1 0.9.1 server (and V0's missing engine label)."""
    text = text.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    text = text.replace("vllm:prefix_cache_", "vllm:gpu_prefix_cache_")
    text = text.replace("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
    return re.sub(r'engine="0",', "", text)


def _rates(rewrite: bool) -> tuple[float | None, float | None, float | None]:
    tracker = ScrapeTracker()
    for entry in json.loads((SCENARIO / "scrapes.json").read_text())[:10]:
        text = (SCENARIO / entry["file"]).read_text()
        tracker.observe(entry["t"], normalise(parse(_as_old_server(text) if rewrite else text)))
    latest = tracker.latest
    assert latest is not None
    rates = tracker.rates()
    assert rates is not None
    model = next(iter(latest.models.values()))
    return rates.prefix_cache_hit_rate, rates.latency["itl"].p90, model.kv_usage_max


def test_old_names_give_the_same_numbers() -> None:
    new, old = _rates(rewrite=False), _rates(rewrite=True)
    assert all(v is not None for v in new)
    assert old == pytest.approx(new)


def test_newest_name_wins_when_both_are_exposed() -> None:
    text = (
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25\n'
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.99\n'
    )
    assert normalise(parse(text)).models["m"].kv_usage_max == 0.25


def test_missing_families_leave_numbers_unknown_not_zero() -> None:
    text = 'vllm:num_requests_running{engine="0",model_name="m"} 3\n'
    model = normalise(parse(text)).models["m"]
    assert model.running == 3
    assert model.waiting is None
    assert model.kv_usage_max is None


def test_models_are_kept_apart_and_engines_summed() -> None:
    text = (
        'vllm:num_requests_running{engine="0",model_name="a"} 3\n'
        'vllm:num_requests_running{engine="1",model_name="a"} 4\n'
        'vllm:num_requests_running{engine="0",model_name="b"} 1\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.2\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="a"} 0.6\n'
    )
    models = normalise(parse(text)).models
    assert models["a"].running == 7
    assert models["b"].running == 1
    assert models["a"].engines == ("0", "1")
    assert models["a"].kv_usage_max == 0.6
    assert models["a"].kv_usage_mean == pytest.approx(0.4)


def test_wanted_names_cover_every_sample_the_normaliser_reads() -> None:
    text = (SCENARIO / "scrape-015.prom").read_text()
    full = normalise(parse(text))
    filtered = normalise(parse(text, keep=WANTED.__contains__))
    assert filtered == full
    assert len(wanted_sample_names()) == len(WANTED)


def _tracker_over(rewrite: Callable[[str], str], count: int = 10) -> ScrapeTracker:
    tracker = ScrapeTracker()
    for entry in json.loads((SCENARIO / "scrapes.json").read_text())[:count]:
        tracker.observe(entry["t"], normalise(parse(rewrite((SCENARIO / entry["file"]).read_text()))))
    return tracker


def _as_v0(text: str) -> str:
    """A V0 server: no prefix-cache counters, its own hit-rate gauge (a ratio) instead."""
    text = "\n".join(line for line in text.splitlines() if "prefix_cache_" not in line)
    model = re.search(r'model_name="([^"]+)"', text)
    assert model is not None
    return (
        _as_old_server(text)
        + "\n# TYPE vllm:gpu_prefix_cache_hit_rate gauge\n"
        + f'vllm:gpu_prefix_cache_hit_rate{{model_name="{model.group(1)}"}} 0.4375\n'
    )


def test_v0_prefix_hit_rate_is_its_own_ratio_gauge() -> None:
    rates = _tracker_over(_as_v0).rates()
    assert rates is not None and rates.prefix_cache_hit_rate == 0.4375


def test_without_the_by_source_counter_computed_prompt_falls_back_to_every_prompt_token() -> None:
    """Before 0.16 there is no prompt_tokens_by_source_total: vLLM's own log line counted every prompt
    token as prefilled, and so does sparktui (formulas.md §2). Checked against the counter's own
    increase, read from the scrape text."""

    def without_source(text: str) -> str:
        return "\n".join(line for line in text.splitlines() if "prompt_tokens_by_source" not in line)

    entries = json.loads((SCENARIO / "scrapes.json").read_text())[:10]
    tracker = _tracker_over(without_source)
    rates = tracker.rates()
    assert rates is not None and rates.prompt_tokens_computed_per_s is not None

    def prompt_total(entry: dict[str, object]) -> float:
        text = (SCENARIO / str(entry["file"])).read_text()
        return sum(float(v) for v in re.findall(r"^vllm:prompt_tokens_total\{[^}]*\} (\S+)$", text, re.M))

    first = next(e for e in entries if e["t"] >= entries[-1]["t"] - rates.seconds - 1e-9)
    expected = (prompt_total(entries[-1]) - prompt_total(first)) / (entries[-1]["t"] - first["t"])
    assert rates.prompt_tokens_computed_per_s == pytest.approx(expected, rel=1e-9)
    assert rates.prompt_tokens_computed_per_s == rates.prompt_tokens_per_s
    with_source = _tracker_over(lambda text: text).rates()
    assert with_source is not None and with_source.prompt_tokens_computed_per_s != with_source.prompt_tokens_per_s
