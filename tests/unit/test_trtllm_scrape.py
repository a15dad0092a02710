"""TensorRT-LLM's ``/prometheus/metrics`` read into the neutral scrape, checked against the scenarios its
expositions were written from (``tests/data/trtllm/``: ``make_expositions.py`` writes what
``MetricsCollector`` writes, from its source). What a correct reading shows is derived here from the
scenarios, apart from sparktui's reading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sparktui.engines import registry
from sparktui.engines.trtllm.scrape import normalise
from sparktui.model.counters import CounterHistory, flatten
from sparktui.model.derive import derive_rates
from sparktui.model.promtext import parse
from sparktui.model.reading import Answers
from sparktui.model.scrape import ModelScrape, ScrapeProblem

DATA = Path(__file__).resolve().parents[1] / "data" / "trtllm"
SCENARIOS: dict[str, Any] = json.loads((DATA / "scenarios.json").read_text())
CASES = [(name, i) for name, s in SCENARIOS.items() if not name.startswith("_") for i in range(len(s["phases"]))]
MODEL = "served-model"


def read(name: str, phase: int) -> ModelScrape:
    text = (DATA / f"{name}-{SCENARIOS[name]['phases'][phase]['name']}.txt").read_text()
    return normalise(parse(text), MODEL).models[MODEL]


def requests_until(name: str, phase: int) -> list[dict[str, Any]]:
    return [r for p in SCENARIOS[name]["phases"][: phase + 1] for r in p["requests"]]


@pytest.mark.parametrize(("name", "phase"), CASES)
def test_the_token_and_request_counts_are_the_finished_requests_totals(name: str, phase: int) -> None:
    model = read(name, phase)
    requests = requests_until(name, phase)
    assert model.counters["prompt_tokens"] == sum(r["prompt"] for r in requests)
    assert model.counters["generation_tokens"] == sum(r["generated"] for r in requests)
    assert model.counters["prompt_tokens_cached"] == sum(r["cached"] for r in requests)
    assert model.counters["prompt_by_source:local_compute"] == sum(r["prompt"] - r["cached"] for r in requests)
    for reason in {r["finished_reason"] for r in requests}:
        assert model.counters[f"finished:{reason}"] == sum(1 for r in requests if r["finished_reason"] == reason)
    assert model.histograms["ttft"].count == model.histograms["e2e"].count == len(requests)
    assert model.histograms["e2e"].sum == pytest.approx(sum(r["e2e_s"] for r in requests))


@pytest.mark.parametrize(("name", "phase"), CASES)
def test_the_gauges_are_the_last_iterations(name: str, phase: int) -> None:
    model = read(name, phase)
    stats = SCENARIOS[name]["phases"][phase]["iteration"]
    kv = stats["kvCacheStats"]
    assert (model.running, model.waiting) == (stats["numActiveRequests"], stats["numQueuedRequests"])
    assert model.kv_usage_by_engine == {"0": kv["usedNumBlocks"] / kv["maxNumBlocks"]}
    assert model.prefix_hit_rate_by_engine == {"0": kv["cacheHitRate"]}
    scrape = normalise(parse((DATA / f"{name}-{SCENARIOS[name]['phases'][phase]['name']}.txt").read_text()), MODEL)
    assert scrape.cache_config["0"].labels == {"kv_cache_size_tokens": str(kv["maxNumBlocks"] * kv["tokensPerBlock"])}


def test_speculative_decoding_per_position_is_the_requests_drafted_and_accepted_tokens() -> None:
    model = read("spec", 1)
    requests = requests_until("spec", 1)
    drafted = [sum(r["drafted_per_position"][i] for r in requests) for i in range(3)]
    accepted = [sum(r["accepted_per_position"][i] for r in requests) for i in range(3)]
    assert model.counters["spec_drafts"] == drafted[0]  # every draft proposes position 0
    assert model.counters["spec_draft_tokens"] == sum(drafted)
    assert model.counters["spec_accepted_tokens"] == sum(accepted)
    assert [model.counters[f"spec_accepted_pos:{i}"] for i in range(3)] == accepted
    assert model.reported == {}  # the counters are windowed; the engine's own gauge is not needed


def test_the_window_of_the_second_phase_is_its_requests() -> None:
    history = CounterHistory()
    history.add(0.0, flatten(read("spec", 0)))
    latest = read("spec", 1)
    history.add(10.0, flatten(latest))
    deltas = history.window()
    assert deltas is not None
    rates = derive_rates(deltas, latest)
    assert rates is not None
    second = SCENARIOS["spec"]["phases"][1]["requests"]
    assert rates.generation_tokens_per_s == pytest.approx(sum(r["generated"] for r in second) / 10)
    assert rates.requests_finished_per_s == pytest.approx(len(second) / 10)
    spec = rates.spec_decode
    assert spec is not None
    drafts = sum(r["drafted_per_position"][0] for r in second)
    accepted = [sum(r["accepted_per_position"][i] for r in second) for i in range(3)]
    assert spec.per_position == pytest.approx(tuple(a / drafts for a in accepted))
    assert spec.mean_acceptance_length == pytest.approx(1 + sum(accepted) / drafts)


def test_the_model_is_named_by_v1_models_not_the_undefined_label() -> None:
    text = (DATA / "plain-t0.txt").read_text()
    assert 'model_name="undefined"' in text
    reading = registry()["trtllm"].reading
    scrape = reading.normalise(parse(text), Answers(model_name="meta-llama/Llama-3.1-8B-Instruct"))
    assert list(scrape.models) == ["meta-llama/Llama-3.1-8B-Instruct"]
    assert list(normalise(parse(text), None).models) == ["trtllm"]


def test_trtllm_is_polled_at_prometheus_metrics_and_never_its_json_metrics() -> None:
    plan = registry()["trtllm"].polling
    assert (plan.metrics_path, plan.health_path, plan.info_path) == ("/prometheus/metrics", "/health", "/version")
    assert plan.metrics_filter and all(name.startswith("trtllm_") for name in plan.metrics_filter)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('trtllm_spec_decode_accepted_tokens_total{token_position="x"} 1\n', "token_position='x'"),
        ("trtllm_kv_cache_utilization 1.5\n", "trtllm_kv_cache_utilization is"),
        ("trtllm_num_requests_running NaN\n", "NaN"),
        ("trtllm_prompt_tokens_total -1\n", "trtllm_prompt_tokens_total is -1"),
        ('trtllm_time_to_first_token_seconds_bucket{le="1"} 1\n', "no +Inf bucket"),
        ('trtllm_e2e_request_latency_seconds_bucket{le="nope"} 1\n', "bad bucket bound"),
        ("vllm:num_requests_running 1\n", "no trtllm_ metric"),
    ],
)
def test_a_number_that_cannot_be_is_one_line_naming_it(text: str, reason: str) -> None:
    with pytest.raises(ScrapeProblem) as caught:
        normalise(parse(text), MODEL)
    assert reason in str(caught.value) and "\n" not in str(caught.value)


def test_a_scrape_read_ahead_names_the_model_its_models_answer_serves() -> None:
    """The live source reads each /prometheus/metrics body ahead, in a worker thread
    (``FleetState.preread``): it is given what a read on arrival is, so the model a trtllm-serve's
    labels call "undefined" is named by its /v1/models there too."""
    from sparktui.config import parse_config
    from sparktui.engines import readings
    from sparktui.model.fleet import FleetState
    from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation

    config = (
        '[[nodes]]\nname = "spark3"\nhost = "10.0.0.3"\n[[nodes.vllm]]\nname = "fp4"\nengine = "trtllm"\nport = 8355\n'
    )
    spec = parse_config(config, source="test.toml")
    models = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "tensorrt_llm"}]})

    def answer(body: str) -> HttpResult:
        return HttpResult(url="http://10.0.0.3:8355", kind=FetchKind.OK, status=200, body=body.encode())

    ahead, on_arrival = FleetState(spec, readings()), FleetState(spec, readings())
    for t, phase in enumerate(("plain-t0",) * 2):
        server = ServerObservation(
            "fp4", answer(""), answer((DATA / f"{phase}.txt").read_text()), models=answer(models) if t == 0 else None
        )
        observation = NodeObservation(node="spark3", t=float(t), wall=1e9 + t, vllm=(server,))
        ahead.preread(observation)
        ahead.apply(observation)
        on_arrival.apply(observation)
    (view,) = ahead.view(1.0, window_s=None)
    assert view.instances[0].model_name == MODEL
    assert ahead.view(1.0, window_s=None) == on_arrival.view(1.0, window_s=None)
