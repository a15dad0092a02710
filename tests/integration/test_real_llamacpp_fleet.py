"""A real llama-server as an instance of the fleet (``engine = "llamacpp"``): polled, read and shown by
the same core as vLLM, its numbers those of the requests that drove it, and a server that sleeps when
idle left to sleep: sparktui's polls never keep it awake."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import httpx
import pytest

from sparktui.config import parse_config
from sparktui.engines.llamacpp.scrape import ENDED
from sparktui.headless.snapshot import collect, views_json
from sparktui.headless.watch import Watcher
from sparktui.model.fleet import InstanceView
from sparktui.model.scrape import Sleep
from sparktui.model.specs import FleetSpec
from sparktui.model.status import State
from tests.integration.test_real_llamacpp import TEST_TIMEOUT_S, complete, prompt
from tests.support.llama_server import LlamaModels, LlamaServer, running_llama_server
from tests.support.wait import wait_until

pytestmark = pytest.mark.llamacpp


def fleet_of(server: LlamaServer, *, poll_interval_s: float = 0.5) -> FleetSpec:
    return parse_config(
        f"poll_interval_s = {poll_interval_s}\n"
        '[[nodes]]\nname = "box"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
        f'[[nodes.vllm]]\nname = "llama"\nengine = "llamacpp"\nport = {server.port}\ncanary = false\n',
        source="llama.toml",
    )


def instance_of(watcher: Watcher) -> InstanceView | None:
    views = watcher.monitor.views
    return views[0].instances[0] if views and views[0].instances else None


async def test_snapshot_shows_the_server_as_a_llamacpp_instance_with_its_build_and_model(
    real_llama_server: LlamaServer,
) -> None:
    monitor, _now = await collect(fleet_of(real_llama_server), polls=2, interval_s=0.3)
    (view,) = monitor.views
    (instance,) = view.instances
    assert instance.status.state is State.UP, instance.status
    assert (instance.engine, instance.version) == ("llama.cpp", "b0-unknown")
    assert instance.model_name is not None and instance.model_name.endswith("tiny.gguf")
    assert (instance.running, instance.waiting) == (0, 0)
    assert instance.sleep is Sleep.AWAKE
    (node,) = json.loads(views_json(monitor.views))["nodes"]
    assert node["instances"][0]["engine"] == "llama.cpp"


def counter(watcher: Watcher, key: str) -> float | None:
    """One counter of the instance as the core read it last."""
    latest = watcher.monitor.state.nodes["box"].instances["llama"].tracker.latest
    model = next(iter(latest.models.values()), None) if latest is not None else None
    return model.counters.get(key) if model is not None else None


def generated(watcher: Watcher) -> float | None:
    """The generated tokens as sparktui counts them: the ended requests' and the running ones' so far."""
    return counter(watcher, "generation_tokens")


def ended_count(watcher: Watcher) -> float | None:
    """llama-server's own count, of the requests that ended (``tokens_predicted_total``)."""
    return counter(watcher, ENDED)


async def test_watch_counts_the_tokens_of_running_requests_as_they_come_and_each_one_in_full(
    real_llama_server: LlamaServer,
) -> None:
    server = real_llama_server
    watcher = Watcher(fleet_of(server, poll_interval_s=0.2), out=io.StringIO())
    stop = asyncio.Event()
    watching = asyncio.create_task(watcher.run(stop=stop, drain_s=0.1))
    predicted: list[int] = []
    seen_running = asyncio.Event()

    async def one_after_another(client: httpx.AsyncClient) -> None:
        """2,000-token requests until the watcher saw one run (each fits the slot's 2,048 tokens)."""
        while not seen_running.is_set():
            predicted.append((await complete(client, server, prompt(10, 7000), 2000))["tokens_predicted"])

    try:
        await wait_until(lambda: generated(watcher) is not None, TEST_TIMEOUT_S, what="a first scrape")
        start = generated(watcher)
        async with httpx.AsyncClient(timeout=60.0) as client:
            requests = asyncio.create_task(one_after_another(client))

            def generating() -> bool:
                """A request runs, and the core counts its tokens already: more than the ended requests'."""
                found, counted, ended = instance_of(watcher), generated(watcher), ended_count(watcher)
                rates = found.rates if found is not None else None
                live = counted is not None and ended is not None and counted > ended
                moving = bool(rates and rates.generation_tokens_per_s)
                return found is not None and found.running == 1 and live and moving

            await wait_until(generating, TEST_TIMEOUT_S, what="tokens counted while a request runs")
            during = instance_of(watcher)
            seen_running.set()
            await requests
        assert during is not None and during.kv_usage is not None and during.kv_usage > 0
        await wait_until(lambda: (i := instance_of(watcher)) is not None and i.running == 0, TEST_TIMEOUT_S)
        assert start is not None
        total = start + sum(predicted)
        await wait_until(
            lambda: generated(watcher) == total,
            TEST_TIMEOUT_S,
            what="every generated token counted",
            detail=lambda: f"{generated(watcher)} counted, {start} + {predicted} generated",
        )
    finally:
        stop.set()
        await watching


async def test_a_server_that_sleeps_when_idle_falls_asleep_while_sparktui_watches_it(
    llama_models: LlamaModels, tmp_path: Path
) -> None:
    async with running_llama_server(llama_models.tiny, tmp_path / "llama.log", "--sleep-idle-seconds", "2") as server:
        async with httpx.AsyncClient(timeout=30.0) as client:
            await complete(client, server, prompt(8, 8000), 20)  # a request ran, then it is idle
        watcher = Watcher(fleet_of(server, poll_interval_s=0.3), out=io.StringIO())
        stop = asyncio.Event()
        watching = asyncio.create_task(watcher.run(stop=stop, drain_s=0.1))
        try:

            def asleep() -> bool:
                found = instance_of(watcher)
                return found is not None and found.asleep

            await wait_until(asleep, TEST_TIMEOUT_S, what="the instance shown asleep", interval_s=0.1)
            polls = watcher.monitor.ticks
            await wait_until(lambda: watcher.monitor.ticks >= polls + 5, TEST_TIMEOUT_S, what="five more ticks")
            found = instance_of(watcher)
            assert found is not None and found.asleep and found.status.state is State.UP
            assert any("asleep" in reason for reason in found.status.reasons)
        finally:
            stop.set()
            await watching
        assert "exiting sleeping state" not in server.log_text()  # nothing sparktui read woke it
