"""A llama.cpp router's loaded models' own numbers, read through it (``/metrics?model=X&autoload=false``):
what the poll plan asks (only what loads and wakes nothing, bounded), and how the fleet state shows it
(each model's rates on its own reset-safe history, the instance's their sum; a 400 is no problem).
Bodies are the real router's (``tests/data/llamacpp-11434``)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from sparktui.engines import readings
from sparktui.engines.llamacpp import MODEL_READS, ROUTER_PLAN, model_metrics_paths
from sparktui.headless.snapshot import render_snapshot
from sparktui.model.fleet import FleetState, InstanceView
from sparktui.model.observations import FetchKind, HttpResult
from sparktui.model.status import State
from sparktui.sources.collector import NodeCollector
from tests.support.router_data import FLEET, LLAMA, URL, child_metrics, models_body, ok, router_observation


def poll(
    state: FleetState, t: float, models: bytes, per_model: tuple[tuple[str, HttpResult], ...] | None
) -> InstanceView:
    state.apply(router_observation(t, models, per_model))
    (node,) = state.view(t, window_s=None)
    (instance,) = node.instances
    return instance


def test_the_plan_asks_each_loaded_or_sleeping_model_with_autoload_false_its_id_encoded() -> None:
    body = models_body(**{"a": "loaded", "b": "unloaded", "c": "loading", "org/d&x=1": "sleeping"})
    asked = model_metrics_paths(body)
    assert [model for model, _ in asked] == ["a", "org/d&x=1"]
    for model, path in asked:
        parts = urlsplit(path)
        assert parts.path == "/metrics"
        assert parse_qs(parts.query, strict_parsing=True) == {"model": [model], "autoload": ["false"]}
    assert ROUTER_PLAN.model_metrics is model_metrics_paths and not ROUTER_PLAN.metrics


def test_the_plan_reads_at_most_model_reads_models_a_poll_and_nothing_of_a_body_that_is_no_list() -> None:
    many = models_body(**{f"m{index}": "loaded" for index in range(3 * MODEL_READS)})
    assert [model for model, _ in model_metrics_paths(many)] == [f"m{index}" for index in range(MODEL_READS)]
    for garbage in (b"", b"not json", b"[]", b'{"data": 1}'):
        assert model_metrics_paths(garbage) == ()


def test_a_routers_instance_shows_each_loaded_models_rates_and_their_sum() -> None:
    state = FleetState(FLEET, readings())
    loaded = models_body(a="loaded", b="sleeping", c="unloaded")
    view = poll(state, 0.0, loaded, (("a", ok(child_metrics(10, 0, 0))), ("b", ok(child_metrics(5, 0, 20)))))
    assert view.rates is None  # one scrape
    view = poll(
        state, 10.0, loaded, (("a", ok(child_metrics(110, 50, 300, processing=1))), ("b", ok(child_metrics(5, 0, 20))))
    )
    numbers = {n.model: n for n in view.model_numbers}
    assert set(numbers) == {"a", "b"}
    a_rates, b_rates = numbers["a"].rates, numbers["b"].rates
    assert a_rates is not None and b_rates is not None
    assert a_rates.generation_tokens_per_s == pytest.approx(30.0)
    assert a_rates.prompt_tokens_per_s == pytest.approx(15.0)  # computed 100 and cached 50 over 10 s
    assert b_rates.generation_tokens_per_s == pytest.approx(0.0)
    assert view.rates is not None and view.rates.generation_tokens_per_s == pytest.approx(30.0)
    assert (view.running, numbers["a"].running) == (1, 1)
    assert view.status.state is State.UP, view.status
    assert view.model_name is None  # a router's numbers are not one model's
    text = render_snapshot(state.view(10.0, window_s=None))
    assert "      a: generation 30.0 tok/s   prompt 15.0 tok/s   running 1   waiting 0" in text


def test_a_model_that_unloads_and_loads_again_gives_no_negative_or_bogus_rate() -> None:
    """Its counters start from 0 in its new child: a reset of its own history, counted from 0, never a
    drop of the instance's (the other model's counters are untouched)."""
    state = FleetState(FLEET, readings())
    both = models_body(a="loaded", b="loaded")
    poll(state, 0.0, both, (("a", ok(child_metrics(0, 0, 1000))), ("b", ok(child_metrics(0, 0, 500)))))
    poll(state, 10.0, models_body(a="unloaded", b="loaded"), (("b", ok(child_metrics(0, 0, 600))),))
    view = poll(state, 20.0, both, (("a", ok(child_metrics(0, 0, 40))), ("b", ok(child_metrics(0, 0, 700)))))
    numbers = {n.model: n.rates for n in view.model_numbers}
    a_rates, b_rates = numbers["a"], numbers["b"]
    assert a_rates is not None and b_rates is not None
    assert a_rates.reset and a_rates.generation_tokens_per_s == pytest.approx(40 / 20)  # from its own 0
    assert b_rates.generation_tokens_per_s == pytest.approx(200 / 20)
    assert view.rates is not None and view.rates.generation_tokens_per_s == pytest.approx(240 / 20)
    assert all(rate is None or rate >= 0 for rate in (view.rates.prompt_tokens_per_s,))


def test_a_model_gone_since_v1_models_is_a_400_and_no_problem_another_answer_is_one() -> None:
    state = FleetState(FLEET, readings())
    gone = ok(b'{"error":{"code":400,"message":"model is not loaded"}}', status=400)
    view = poll(state, 0.0, models_body(a="loaded"), (("a", gone),))
    assert view.status.state is State.UP and view.metrics_problem is None, view.status
    assert view.model_numbers == () and view.rates is None
    broken = HttpResult(url=f"{URL}/metrics?model=a&autoload=false", kind=FetchKind.TIMEOUT, error="timed out")
    view = poll(state, 1.0, models_body(a="loaded"), (("a", broken),))
    assert view.status.state is State.DEGRADED
    assert view.status.reasons == ("router: /metrics of a: timed out",)
    view = poll(state, 2.0, models_body(a="loaded"), (("a", ok(b"not prometheus {")),))
    assert view.metrics_problem is not None and view.metrics_problem.startswith("a: /metrics")


def test_a_router_with_nothing_loaded_shows_no_numbers_and_says_why() -> None:
    state = FleetState(FLEET, readings())
    poll(state, 0.0, models_body(a="loaded"), (("a", ok(child_metrics(0, 0, 10))),))
    view = poll(state, 10.0, models_body(a="unloaded"), ())
    assert view.model_numbers == () and view.rates is None and view.running is None
    assert "no model loaded: its numbers are its loaded models'" in render_snapshot(state.view(10.0, window_s=None))


async def test_the_collector_asks_each_answering_models_metrics_bounded_and_always_with_autoload_false() -> None:
    """A router of thirty loaded models and two unloaded ones, polled twice through the real collector:
    each poll asks at most ``MODEL_READS`` models' ``/metrics``, each with ``autoload=false`` and its id
    encoded; never the router's ``/metrics`` without a model, nor any ``/slots``; the answers ride in
    the observation by model."""
    names = {f"m/{index}": "loaded" for index in range(30)} | {"u1": "unloaded", "u2": "unloaded"}
    asked: list[httpx.URL] = []

    def serve(request: httpx.Request) -> httpx.Response:
        asked.append(request.url)
        path = request.url.path
        if path == "/health":
            return httpx.Response(200, json={"status": "ok"})
        if path == "/props":
            return httpx.Response(200, content=(LLAMA / "router-props.json").read_bytes())
        if path == "/v1/models":
            return httpx.Response(200, content=models_body(**names))
        if path == "/metrics" and request.url.params.get("autoload") == "false":
            return httpx.Response(200, content=child_metrics(1, 0, 2))
        return httpx.Response(500, text=f"not asked of a router: {request.url}")

    collector = NodeCollector(FLEET.nodes[0], FLEET)
    async with httpx.AsyncClient(transport=httpx.MockTransport(serve)) as client:
        observations = [await collector.poll(client) for _ in range(2)]
    per_model = [url for url in asked if url.path == "/metrics"]
    assert len(per_model) == 2 * MODEL_READS
    for url in per_model:
        assert url.params.get("autoload") == "false" and url.params.get("model") in names
        assert names[url.params["model"]] == "loaded"
    assert not [url for url in asked if url.path == "/slots"]
    (router_obs,) = observations[-1].vllm
    assert router_obs.metrics is None and router_obs.model_metrics is not None
    assert [model for model, _ in router_obs.model_metrics] == [f"m/{index}" for index in range(MODEL_READS)]
    assert all(answer.ok for _, answer in router_obs.model_metrics)
