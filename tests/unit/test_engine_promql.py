"""Each engine's numbers as PromQL (``Engine.numbers``, for ``snapshot --compare``) ask only for series
its reading keeps, so they cannot drift from the scrape tables they are written from."""

from __future__ import annotations

import re

import pytest

from sparktui.engines import registry
from sparktui.engines.base import PromNumber
from sparktui.engines.nim import V1_NAMES
from sparktui.sources.promql import render

SERIES_NAME = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\{")  # a name before its matchers, once rendered
COMPARED = ("vllm", "sglang", "trtllm", "nim", "llamacpp")


def sample_names(number: PromNumber) -> set[str]:
    """The sample names ``number``'s PromQL asks Prometheus for."""
    return set(SERIES_NAME.findall(render(number, 'instance="a:1"', 30.0, ["instance", "model_name"])))


@pytest.mark.parametrize("kind", COMPARED)
def test_every_number_asks_only_for_series_the_engines_reading_keeps(kind: str) -> None:
    engine = registry()[kind]
    assert engine.numbers
    for number in engine.numbers:
        names = sample_names(number)
        assert names, number.key
        assert names <= set(engine.series), (number.key, names - set(engine.series))
        assert all(engine.reading.wanted(name) for name in names), number.key


@pytest.mark.parametrize("kind", COMPARED)
def test_each_engines_numbers_have_distinct_keys(kind: str) -> None:
    keys = [number.key for number in registry()[kind].numbers]
    assert len(set(keys)) == len(keys)


def test_sglang_gauges_are_taken_once_per_engine_never_summed_over_ranks() -> None:
    numbers = {number.key: number.promql for number in registry()["sglang"].numbers}
    for key in ("running", "waiting", "kv_usage", "prefix_cache_hit_rate"):
        assert "max by ({by}, dp_rank)" in numbers[key], key
    assert numbers["running"].startswith("sum by ({by}) (max by ({by}, dp_rank)")


def test_nims_numbers_are_vllms_with_its_1x_names_as_fallbacks() -> None:
    vllm = {number.key: number for number in registry()["vllm"].numbers}
    nim = registry()["nim"].numbers
    assert [number.key for number in nim] == list(vllm)
    generation = next(number for number in nim if number.key == "generation_tokens_per_s")
    assert sample_names(generation) == {"vllm:generation_tokens_total", "generation_tokens_total"}
    assert "generation_tokens_total" in V1_NAMES
    unprefixed = {name for number in nim for name in sample_names(number) if not name.startswith("vllm:")}
    assert unprefixed and unprefixed <= set(V1_NAMES)


def test_llamacpp_compares_what_its_metrics_export_and_nothing_else() -> None:
    """Its KV usage and sleep state come from /slots and /props, which Prometheus does not scrape; it
    exports no latency histograms and counts no finished requests or preemptions."""
    keys = {number.key for number in registry()["llamacpp"].numbers}
    assert {"generation_tokens_per_s", "prompt_tokens_computed_per_s", "running", "per_position"} <= keys
    assert not keys & {"kv_usage", "requests_finished_per_s", "preemptions_per_s", "prefix_cache_hit_rate"}
    assert not any(key.startswith(("ttft", "itl", "e2e")) for key in keys)
