"""NIM read as the vLLM it runs: its ``/v1/metrics`` is vLLM's own (2.x), or vLLM's numbers without the
``vllm:`` prefix (1.x). Checked against real vLLM 0.33 scrapes (``tests/data/vllm-0.33/``, written by
vLLM's own metrics code) and the answers their ``expected.json`` gives, computed apart from sparktui."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui.engines import registry
from sparktui.engines.nim import as_vllm
from sparktui.engines.vllm.scrape import normalise as vllm_normalise
from sparktui.model.counters import CounterHistory, flatten
from sparktui.model.derive import derive_rates
from sparktui.model.promtext import parse
from sparktui.model.reading import Answers
from sparktui.model.scrape import ModelScrape
from tests.support.nim_server import as_nim_1x

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm-0.33" / "mtp2-steady"
EXPECTED = json.loads((DATA / "expected.json").read_text())
NIM = registry()["nim"]


def _text(name: str, nim_1x: bool) -> str:
    text = (DATA / name).read_text()
    return as_nim_1x(text) if nim_1x else text


def _model(name: str, nim_1x: bool) -> ModelScrape:
    (model,) = NIM.reading.normalise(parse(_text(name, nim_1x)), Answers()).models.values()
    return model


def test_a_nim_2x_scrape_is_read_exactly_as_the_vllm_it_passes_through() -> None:
    for name in ("scrape-000.prom", "scrape-029.prom"):
        expo = parse((DATA / name).read_text())
        assert NIM.reading.normalise(expo, Answers()) == vllm_normalise(expo)


@pytest.mark.parametrize("nim_1x", [False, True], ids=["2.x", "1.x"])
def test_the_last_scrapes_gauges_are_the_fixtures_answers(nim_1x: bool) -> None:
    model = _model("scrape-029.prom", nim_1x)
    last = EXPECTED["last_scrape"]
    assert model.running == last["num_requests_running_sum"]
    assert model.waiting == last["num_requests_waiting_sum"]
    assert model.kv_usage_by_engine == pytest.approx(last["kv_cache_usage_perc"])


@pytest.mark.parametrize("nim_1x", [False, True], ids=["2.x", "1.x"])
def test_the_windows_rates_are_the_fixtures_answers(nim_1x: bool) -> None:
    history = CounterHistory()
    history.add(0.0, flatten(_model("scrape-000.prom", nim_1x)))
    latest = _model("scrape-029.prom", nim_1x)
    window = EXPECTED["window_first_to_last"]["total"]
    history.add(window["seconds"], flatten(latest))
    deltas = history.window()
    assert deltas is not None
    rates = derive_rates(deltas, latest)
    assert rates is not None
    assert rates.generation_tokens_per_s == pytest.approx(window["generation_tokens_per_s"], rel=1e-5)
    assert rates.prompt_tokens_per_s == pytest.approx(window["prompt_tokens_per_s"], rel=1e-5)
    assert rates.requests_finished_per_s == pytest.approx(window["requests_finished_per_s"], rel=1e-3)
    ttft = rates.latency["ttft"]
    assert ttft.p90 == pytest.approx(window["ttft_seconds_p90"], rel=1e-4)


def test_nim_1x_has_no_speculative_or_cache_numbers_to_show_and_says_nothing_false() -> None:
    model = _model("scrape-029.prom", nim_1x=True)
    assert not any(key.startswith(("spec_", "prefix_cache")) for key in model.counters)


def test_a_scrape_with_vllm_names_is_not_renamed() -> None:
    expo = parse("vllm:num_requests_running 1\nnum_requests_running 5\n")
    assert as_vllm(expo) is expo


def test_a_scrape_with_neither_names_has_no_engine_numbers_not_zeros() -> None:
    scrape = NIM.reading.normalise(parse("something_else 1\n"), Answers())
    assert not scrape.has_engine_stats and scrape.models == {}


def test_nim_is_polled_at_its_own_routes() -> None:
    plan = NIM.polling
    assert (plan.health_path, plan.metrics_path, plan.info_path) == ("/v1/health/ready", "/v1/metrics", "/v1/version")
    assert plan.metrics_filter == ()  # NIM's front is not known to pass prometheus_client's name[] on
    assert NIM.reading.loading_on_503
    assert NIM.reading.version({"release": "2.0.1", "api": "1.0.0"}) == "2.0.1"
