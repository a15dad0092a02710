"""The demo fleet: vLLM 0.33's exact exposition, believable numbers, step mode, real HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from sparktui.config import parse_config
from sparktui.demo.exposition import VllmExposition
from sparktui.demo.fleet import DemoFleet
from sparktui.demo.sim import PROFILES, EngineState
from sparktui.engines import readings
from sparktui.engines.vllm.scrape import normalise
from sparktui.model.fleet import FleetState
from sparktui.model.promtext import Exposition, parse
from sparktui.model.status import State
from sparktui.model.tracker import ScrapeTracker
from sparktui.sources.http import make_client
from sparktui.sources.poller import FleetPoller
from tests.conftest import VLLM_FIXTURES
from tests.support.wait import wait_until


def _shape(expo: Exposition, prefix: str) -> dict[str, set[frozenset[str]]]:
    """Sample name -> the label *names* its series carry (values differ between servers)."""
    out: dict[str, set[frozenset[str]]] = {}
    for name, series in expo.samples.items():
        if name.startswith(prefix):
            out.setdefault(name, set()).update(frozenset(labels) for labels, _ in series)
    return out


def _buckets(expo: Exposition) -> dict[str, list[str]]:
    return {
        name: sorted({labels["le"] for labels, _ in series}, key=float)
        for name, series in expo.samples.items()
        if name.endswith("_bucket")
    }


def test_demo_exposition_has_vllm_033s_names_labels_and_buckets() -> None:
    fixture = parse((VLLM_FIXTURES / "mtp2-steady" / "scrape-015.prom").read_text())
    demo = parse(VllmExposition(PROFILES["qwen36"]).render().decode())  # MTP k=2, max_model_len 131072
    assert _shape(demo, "vllm:") == _shape(fixture, "vllm:")
    assert _buckets(demo) == {k: v for k, v in _buckets(fixture).items() if k.startswith("vllm:")} | {
        k: v for k, v in _buckets(demo).items() if k.startswith("http_")
    }
    fixture_config = next(iter(fixture.get("vllm:cache_config_info")))[0]
    demo_config = next(iter(demo.get("vllm:cache_config_info")))[0]
    assert set(demo_config) == set(fixture_config)
    assert {n for n in demo.names() if n.startswith(("process_", "python_"))} == {
        n for n in fixture.names() if n.startswith(("process_", "python_"))
    }


def test_positions_follow_num_speculative_tokens_and_no_spec_means_no_family() -> None:
    gemma = parse(VllmExposition(PROFILES["gemma4"]).render().decode())
    positions = {labels["position"] for labels, _ in gemma.get("vllm:spec_decode_num_accepted_tokens_per_pos_total")}
    assert positions == {"0", "1", "2", "3"}
    plain = parse(VllmExposition(PROFILES["qwen235"]).render().decode())
    assert not [n for n in plain.names() if n.startswith("vllm:spec_decode")]


def test_same_seed_same_numbers() -> None:
    def counters(fleet: DemoFleet) -> dict[str, float]:
        text = fleet.nodes[0].instances[0].exposition.render().decode()
        scrape = normalise(parse(text))
        return dict(next(iter(scrape.models.values())).counters)

    assert counters(DemoFleet(seed=3)) == counters(DemoFleet(seed=3))
    assert counters(DemoFleet(seed=3)) != counters(DemoFleet(seed=4))


def test_simulated_numbers_are_plausible_for_a_spark() -> None:
    fleet = DemoFleet(seed=11, warmup_s=0)
    instance = fleet.node("spark1").instances[0]
    tracker = ScrapeTracker()
    for second in range(0, 301, 30):
        if second:
            fleet._fast_forward(30.0)
        tracker.observe(float(second), normalise(parse(instance.exposition.render().decode())))
    rates = tracker.rates()
    assert rates is not None and rates.spec_decode is not None
    spec = rates.spec_decode
    # Qwen3.6 MTP=2 on a Spark: position 0 ~0.89, position 1 conditional ~0.63 (context/000).
    assert spec.conditional[0] == pytest.approx(0.89, abs=0.03)
    assert spec.conditional[1] == pytest.approx(0.63, abs=0.04)
    assert spec.mean_acceptance_length == pytest.approx(1 + 0.89 + 0.89 * 0.63, abs=0.08)
    itl = rates.latency["itl"]
    assert itl.p50 is not None and 0.03 < itl.p50 < 0.06  # one engine step: ~55-65 tok/s per stream
    assert rates.requests_finished_per_s is not None and 0.2 < rates.requests_finished_per_s < 1.5
    assert rates.prefix_cache_hit_rate is not None and 0.2 < rates.prefix_cache_hit_rate < 0.8


@pytest.fixture
async def running_fleet() -> AsyncIterator[DemoFleet]:
    fleet = DemoFleet(seed=5)
    await fleet.start()
    yield fleet
    await fleet.stop()


async def _views(fleet: DemoFleet, steps: int = 3, dt: float = 2.0) -> FleetState:
    spec = parse_config(fleet.config_toml(), source="demo.toml")
    state = FleetState(spec, readings())
    async with make_client() as client:
        poller = FleetPoller(spec, client)
        for index in range(steps):
            if index:
                await fleet.advance(dt)
            for obs in await poller.poll_all():
                state.apply(obs)
    return state


async def test_snapshot_of_the_demo_shows_every_node_up_with_numbers(running_fleet: DemoFleet) -> None:
    state = await _views(running_fleet, steps=4, dt=5.0)
    views = {v.name: v for v in state.view(time.monotonic(), window_s=None)}
    assert set(views) == {"spark1", "spark2", "spark3", "spark4"}
    assert all(v.status.state is State.UP for v in views.values()), [v.status for v in views.values()]
    spark1 = views["spark1"].instances[0]
    assert spark1.version == "0.33.0" and spark1.served_models == ("RedHatAI/Qwen3.6-35B-A3B-NVFP4",)
    assert spark1.kv_capacity_tokens == PROFILES["qwen36"].kv_capacity_tokens
    assert spark1.rates is not None and spark1.rates.generation_tokens_per_s
    assert views["spark2"].gpu is not None and views["spark2"].gpu.kind.value == "dgx-spark-prometheus"
    assert views["spark1"].gpu is not None and views["spark1"].gpu.unified_memory
    assert [s.status.state for s in views["spark1"].services] == [State.UP, State.UP]
    assert views["spark4"].instances[0].role == "worker"


async def test_metrics_with_name_filter_serves_only_those_samples_as_vllm_does(running_fleet: DemoFleet) -> None:
    instance = running_fleet.node("spark1").instances[0]
    assert instance.http is not None
    wanted = ["vllm:num_requests_running", "vllm:time_to_first_token_seconds_bucket"]
    async with httpx.AsyncClient() as client:
        full = parse((await client.get(f"{instance.http.url}/metrics")).text)
        only = parse((await client.get(f"{instance.http.url}/metrics", params={"name[]": wanted})).text)
    assert set(only.names()) == set(wanted)
    assert len(only.get("vllm:time_to_first_token_seconds_bucket")) == len(
        full.get("vllm:time_to_first_token_seconds_bucket")
    )
    assert "vllm:time_to_first_token_seconds_count" in full


async def test_restart_refuses_while_loading_then_serves_fresh_counters(running_fleet: DemoFleet) -> None:
    instance = running_fleet.node("spark1").instances[0]
    assert instance.http is not None
    url = instance.http.url
    async with httpx.AsyncClient() as client:
        before = normalise(parse((await client.get(f"{url}/metrics")).text))
        instance.restart(load_s=10.0)
        await running_fleet.advance(1.0)
        with pytest.raises(httpx.ConnectError):
            await client.get(f"{url}/health")
        await running_fleet.advance(10.0)
        assert instance.engine.state is EngineState.UP
        assert (await client.get(f"{url}/health")).status_code == 200
        after = normalise(parse((await client.get(f"{url}/metrics")).text))
    name = PROFILES["qwen36"].served_name
    assert after.process_start is not None
    assert after.models[name].counters["generation_tokens"] < before.models[name].counters["generation_tokens"]


async def test_chat_completion_runs_through_the_engine_and_is_counted(running_fleet: DemoFleet) -> None:
    instance = running_fleet.node("spark1").instances[0]
    assert instance.http is not None
    body = {"model": "x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 12}
    ttft_before = instance.exposition.registry.get_sample_value(
        "vllm:time_to_first_token_seconds_count",
        {"engine": "0", "model_name": PROFILES["qwen36"].served_name},
    )
    async with httpx.AsyncClient(timeout=10) as client:
        request = asyncio.create_task(client.post(f"{instance.http.url}/v1/chat/completions", json=body))
        for _ in range(40):  # step the simulation until the request is answered
            await running_fleet.advance(0.5)
            await asyncio.sleep(0.01)  # the stepped demo: let the request's server run between steps
            if request.done():
                break
        response = await request
    assert response.status_code == 200
    payload = response.json()
    assert payload["usage"]["completion_tokens"] == 12
    assert payload["choices"][0]["finish_reason"] == "length"
    ttft_after = instance.exposition.registry.get_sample_value(
        "vllm:time_to_first_token_seconds_count",
        {"engine": "0", "model_name": PROFILES["qwen36"].served_name},
    )
    assert ttft_after is not None and ttft_before is not None and ttft_after > ttft_before


async def test_streaming_completion_sends_chunks_then_done(running_fleet: DemoFleet) -> None:
    instance = running_fleet.node("spark2").instances[0]
    assert instance.http is not None
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 20, "stream": True}
    clock = asyncio.create_task(running_fleet.run_clock(tick_s=0.02))
    try:
        async with (
            httpx.AsyncClient(timeout=20) as client,
            client.stream("POST", f"{instance.http.url}/v1/chat/completions", json=body) as response,
        ):
            events = [line async for line in response.aiter_lines() if line.startswith("data: ")]
    finally:
        clock.cancel()
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert len(text.split()) == 20
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


async def test_a_paced_clock_waits_for_the_observers_polls_and_never_runs_past_them(running_fleet: DemoFleet) -> None:
    """``run_clock(paced_by=)``: still before the node's first GPU exporter scrape, then at most
    ``ahead_s`` past the last one however fast the clock would run (a starved dashboard's polls)."""
    node = running_fleet.node("spark1")
    assert node.gpu_http is not None
    ahead_s = 3.0
    start = running_fleet.now
    clock = asyncio.create_task(running_fleet.run_clock(tick_s=0.01, speed=1000.0, paced_by="spark1", ahead_s=ahead_s))
    try:
        other = running_fleet.node("spark2").gpu_http
        assert other is not None
        async with httpx.AsyncClient(timeout=20) as client:
            await client.get(f"{other.url}/metrics")  # another node's poll does not pace this clock
            await asyncio.sleep(0.1)  # ten of the clock's ticks, each worth 10 simulated seconds
            assert running_fleet.now == start

            def paced_past(at: float) -> Callable[[], bool]:
                return lambda: running_fleet.now >= at + ahead_s - 1e-6

            for _ in range(3):
                scraped = running_fleet.now
                await client.get(f"{node.gpu_http.url}/metrics")
                await wait_until(paced_past(scraped), 20.0, what="the clock paced")
                await asyncio.sleep(0.05)  # five more ticks: the clock stays where the pace stopped it
                assert running_fleet.now == pytest.approx(scraped + ahead_s)
    finally:
        clock.cancel()


async def test_api_key_is_enforced_on_v1_only(running_fleet: DemoFleet) -> None:
    from dataclasses import replace

    instance = running_fleet.node("spark1").instances[0]
    instance.spec = replace(instance.spec, api_key="k3y")
    assert instance.http is not None
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{instance.http.url}/v1/models")).status_code == 401
        ok = await client.get(f"{instance.http.url}/v1/models", headers={"Authorization": "Bearer k3y"})
        assert ok.status_code == 200
        assert (await client.get(f"{instance.http.url}/metrics")).status_code == 200


async def test_powered_off_node_is_down_and_the_rest_keep_updating(running_fleet: DemoFleet) -> None:
    await running_fleet.power_off("spark2")
    state = await _views(running_fleet, steps=2)
    views = {v.name: v for v in state.view(time.monotonic(), window_s=None)}
    assert views["spark2"].status.state is State.DOWN
    assert views["spark1"].status.state is State.UP
    await running_fleet.power_on("spark2", load_s=0.0)
    state = await _views(running_fleet, steps=2)
    views = {v.name: v for v in state.view(time.monotonic(), window_s=None)}
    assert views["spark2"].status.state is State.UP
