"""A real llama.cpp router (``--models-dir``) as an instance of the fleet: sparktui shows each model and
where it is (unloaded, loaded, sleeping, failed) from what wakes nothing, each loaded or sleeping
model's own numbers (its ``/metrics`` through the router with ``?model=X&autoload=false``), and never
loads or wakes a model by looking at it: no ``/metrics`` without ``autoload=false`` (it loads the model
it names), no ``/slots`` (it wakes a sleeping child), no canary (it would name a model and load it);
``/v1/models`` and ``/props`` every poll."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from sparktui.config import parse_config
from sparktui.headless.snapshot import collect, render_snapshot
from sparktui.headless.watch import Watcher
from sparktui.model.fleet import InstanceView
from sparktui.model.scrape import ModelLoad
from sparktui.model.specs import FleetSpec
from sparktui.model.status import State
from tests.integration.test_real_llamacpp import prompt
from tests.integration.test_real_llamacpp_router import (
    LOAD_TIMEOUT_S,
    TEST_TIMEOUT_S,
    complete,
    router,
    statuses,
    values,
    wait_for,
)
from tests.support.llama_server import LlamaModels, LlamaServer
from tests.support.wait import wait_until

pytestmark = pytest.mark.llamacpp
SLEEP_IDLE_S = 2


def fleet_of(server: LlamaServer) -> FleetSpec:
    """The router as one instance, polled every 0.3 s, with canaries on and due after 5 s of silence:
    a canary sent to a router would load a model, so none may go."""
    return parse_config(
        "poll_interval_s = 0.3\n[canary]\nidle_s = 5\ninterval_s = 5\n"
        '[[nodes]]\nname = "box"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
        f'[[nodes.vllm]]\nname = "router"\nengine = "llamacpp"\nport = {server.port}\n',
        source="router.toml",
    )


def instance_of(watcher: Watcher) -> InstanceView | None:
    views = watcher.monitor.views
    return views[0].instances[0] if views and views[0].instances else None


def loads(watcher: Watcher) -> dict[str, ModelLoad]:
    found = instance_of(watcher)
    return {m.id: m.load for m in found.models} if found is not None else {}


async def test_snapshot_shows_a_routers_models_each_unloaded_and_asks_nothing_that_loads_one(
    tmp_path: Path, llama_models: LlamaModels
) -> None:
    async with router(tmp_path, llama_models) as (server, _client):
        monitor, _now = await collect(fleet_of(server), polls=3, interval_s=0.3)
        (view,) = monitor.views
        (instance,) = view.instances
        assert instance.status.state is State.UP, instance.status
        assert instance.status.reasons == ("router: loads models on demand: 0 of 3 loaded",)
        assert [(m.id, m.load) for m in instance.models] == [(n, ModelLoad.UNLOADED) for n in ("a", "b", "bad")]
        assert instance.rates is None and instance.running is None  # "–": a router's numbers are its models'
        assert "models: a unloaded, b unloaded, bad unloaded" in render_snapshot(monitor.views)
        assert "spawning server instance" not in server.log_text()


async def test_watch_follows_a_model_loaded_then_asleep_and_wakes_nothing(
    tmp_path: Path, llama_models: LlamaModels
) -> None:
    async with router(tmp_path, llama_models, "--sleep-idle-seconds", str(SLEEP_IDLE_S)) as (server, client):
        watcher = Watcher(fleet_of(server), out=io.StringIO())
        stop = asyncio.Event()
        watching = asyncio.create_task(watcher.run(stop=stop, drain_s=0.1))
        try:
            await wait_until(lambda: len(loads(watcher)) == 3, TEST_TIMEOUT_S, what="the router's three models")
            # Past a canary's due time (idle 5 s) with nothing loaded: no canary went, nothing loaded.
            ticks = watcher.monitor.ticks
            await wait_until(lambda: watcher.monitor.ticks >= ticks + 20, TEST_TIMEOUT_S, what="six seconds of ticks")
            assert set(loads(watcher).values()) == {ModelLoad.UNLOADED}
            assert "spawning server instance" not in server.log_text()

            await complete(client, server, "a")  # the operator's request loads a
            await wait_until(
                lambda: loads(watcher).get("a") in (ModelLoad.LOADED, ModelLoad.SLEEPING),
                TEST_TIMEOUT_S,
                what="a shown loaded",
            )
            await wait_until(
                lambda: loads(watcher).get("a") is ModelLoad.SLEEPING,
                TEST_TIMEOUT_S,
                what=f"a shown asleep after {SLEEP_IDLE_S} s idle",
                detail=lambda: f"{loads(watcher)}",
            )
            ticks = watcher.monitor.ticks
            await wait_until(lambda: watcher.monitor.ticks >= ticks + 10, TEST_TIMEOUT_S, what="ten more ticks")
            assert loads(watcher) == {"a": ModelLoad.SLEEPING, "b": ModelLoad.UNLOADED, "bad": ModelLoad.UNLOADED}
            found = instance_of(watcher)
            assert found is not None and found.status.reasons == (
                "router: loads models on demand: 0 of 3 loaded; a sleeping",
            )
        finally:
            stop.set()
            await watching
        assert server.log_text().count("spawning server instance with name=") == 1  # a, by the request alone
        assert "exiting sleeping state" not in server.log_text()  # nothing sparktui read woke a


async def test_a_model_that_fails_to_load_is_shown_failed_with_its_exit_code(
    tmp_path: Path, llama_models: LlamaModels
) -> None:
    async with router(tmp_path, llama_models) as (server, client):
        answer = await client.post(f"{server.url}/models/load", json={"model": "bad"})
        assert answer.status_code == 200, answer.text

        async def ended() -> bool:
            return bool((await statuses(client, server))["bad"].get("failed"))

        await wait_until(ended, LOAD_TIMEOUT_S, what="bad's child exited")
        monitor, _now = await collect(fleet_of(server), polls=2, interval_s=0.3)
        (instance,) = monitor.views[0].instances
        bad = next(m for m in instance.models if m.id == "bad")
        assert (bad.load, bad.detail) == (ModelLoad.FAILED, "exit code 1")
        assert instance.status.reasons == ("router: loads models on demand: 0 of 3 loaded; bad failed (exit code 1)",)


def counted(watcher: Watcher, model: str) -> tuple[float, float] | None:
    """The generated and prompt tokens sparktui counted of ``model`` over everything it kept of it."""
    tracker = watcher.monitor.state.nodes["box"].instances["router"].tracker
    rates = tracker.rates(model, window_s=None)
    if rates is None or rates.generation_tokens_per_s is None or rates.prompt_tokens_per_s is None:
        return None
    # A rate over the window times the window: the count, to a rounding of the float division.
    return round(rates.generation_tokens_per_s * rates.seconds, 6), round(rates.prompt_tokens_per_s * rates.seconds, 6)


async def test_a_loaded_models_own_tokens_are_read_through_the_router_and_polling_loads_and_wakes_nothing(
    tmp_path: Path, llama_models: LlamaModels
) -> None:
    """a, loaded by the operator, then sent two requests of exact counts (token-id prompts, ``ignore_eos``):
    sparktui counts a's generated and prompt tokens as the requests imply, the instance gains rates, and
    a stays read while it sleeps. Over every poll, b is never loaded, a never woken: one child spawned
    (a's, by the load), no "exiting sleeping state" in the router's log."""
    requests = [(prompt(12, 4000), 30), (prompt(20, 5000), 45)]
    async with router(tmp_path, llama_models, "--sleep-idle-seconds", str(SLEEP_IDLE_S)) as (server, client):
        answer = await client.post(f"{server.url}/models/load", json={"model": "a"})
        assert answer.status_code == 200, answer.text
        await wait_for(client, server, "a", "loaded")
        watcher = Watcher(fleet_of(server), out=io.StringIO())
        stop = asyncio.Event()
        watching = asyncio.create_task(watcher.run(stop=stop, drain_s=0.1))
        try:
            await wait_until(lambda: counted(watcher, "a") == (0, 0), TEST_TIMEOUT_S, what="a read twice, idle")
            for tokens, n_predict in requests:
                body = {"model": "a", "prompt": tokens, "n_predict": n_predict, "ignore_eos": True}
                response = await client.post(f"{server.url}/completion", json={**body, "temperature": 0.0})
                assert response.status_code == 200, response.text
                assert response.json()["tokens_predicted"] == n_predict
            expected = (30 + 45, 12 + 20)
            await wait_until(
                lambda: counted(watcher, "a") == expected,
                TEST_TIMEOUT_S,
                what=f"a's tokens counted {expected}",
                detail=lambda: f"counted {counted(watcher, 'a')}",
            )
            found = instance_of(watcher)
            assert found is not None and found.rates is not None  # the instance's rates: its models' sum
            assert [n.model for n in found.model_numbers] == ["a"]
            summed = watcher.monitor.state.nodes["box"].instances["router"].tracker.summed_rates(None)
            assert summed is not None and summed.generation_tokens_per_s is not None
            assert summed.generation_tokens_per_s * summed.seconds == pytest.approx(30 + 45)
            await wait_for(client, server, "a", "sleeping")
            ticks = watcher.monitor.ticks
            await wait_until(lambda: watcher.monitor.ticks >= ticks + 20, TEST_TIMEOUT_S, what="twenty more ticks")
            assert loads(watcher) == {"a": ModelLoad.SLEEPING, "b": ModelLoad.UNLOADED, "bad": ModelLoad.UNLOADED}
            assert counted(watcher, "a") == expected  # still read while asleep, its counters kept
            found = instance_of(watcher)
            assert found is not None and [n.model for n in found.model_numbers] == ["a"]
            assert found.status.state is State.UP, found.status
        finally:
            stop.set()
            await watching
        assert await values(client, server) == {"a": "sleeping", "b": "unloaded", "bad": "unloaded"}
        log = server.log_text()
        assert log.count("spawning server instance with name=") == 1  # a, by the operator's load
        assert "exiting sleeping state" not in log  # nothing sparktui read woke a
