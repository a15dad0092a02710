"""Each demo scenario, stepped, shows on the dashboard what it scripts.

The simulation runs in step mode: the observations are stamped with the simulation's clock, so a
minute of scenario costs a few hundred milliseconds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sparktui.config import parse_config
from sparktui.demo.fleet import DemoFleet
from sparktui.demo.scenarios import SCENARIOS
from sparktui.engines import READINGS
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.status import State
from sparktui.sources.canary import CanarySender
from sparktui.sources.http import make_client
from sparktui.sources.poller import FleetPoller


class Stepper:
    """Polls the demo fleet every ``dt`` simulated seconds, as the dashboard would."""

    def __init__(self, fleet: DemoFleet, poller: FleetPoller, state: FleetState) -> None:
        self.fleet, self.poller, self.state = fleet, poller, state

    async def run_until(self, elapsed_s: float, dt: float = 2.0) -> dict[str, NodeView]:
        while self.fleet.elapsed < elapsed_s:
            await self.fleet.advance(dt)
            for obs in await self.poller.poll_all():
                self.state.apply(obs)
        return {v.name: v for v in self.state.view(self.fleet.now, window_s=20.0)}


@pytest.fixture
async def stepper(request: pytest.FixtureRequest) -> AsyncIterator[Stepper]:
    fleet = DemoFleet(seed=21, scenario=SCENARIOS[request.param])
    await fleet.start()
    spec = parse_config(fleet.config_toml(), source="demo.toml")
    try:
        async with make_client() as client:
            poller = FleetPoller(spec, client, clock=lambda: fleet.now)
            yield Stepper(fleet, poller, FleetState(spec, readings=READINGS))
    finally:
        await fleet.stop()


@pytest.mark.parametrize("stepper", ["healthy"], indirect=True)
async def test_healthy_fleet_stays_up(stepper: Stepper) -> None:
    views = await stepper.run_until(60.0)
    assert {name: v.status.state for name, v in views.items()} == dict.fromkeys(views, State.UP)


@pytest.mark.parametrize("stepper", ["wedged"], indirect=True)
async def test_wedged_engine_is_caught_though_health_says_200(stepper: Stepper) -> None:
    views = await stepper.run_until(12.0)
    assert views["spark1"].status.state is State.UP
    views = await stepper.run_until(45.0)
    instance = views["spark1"].instances[0]
    assert instance.status.state is State.DEGRADED
    assert any("wedged" in r and "no token generated" in r for r in instance.status.reasons)


@pytest.mark.parametrize("stepper", ["spec-degradation"], indirect=True)
async def test_spec_degradation_flags_the_last_position(stepper: Stepper) -> None:
    before = await stepper.run_until(8.0)
    rates = before["spark2"].instances[0].rates
    assert rates is not None and rates.spec_decode is not None
    assert rates.spec_decode.weak_last_position is None
    after = await stepper.run_until(40.0)
    rates = after["spark2"].instances[0].rates
    assert rates is not None and rates.spec_decode is not None
    assert rates.spec_decode.weak_last_position == 3
    assert rates.spec_decode.conditional[3] is not None and rates.spec_decode.conditional[3] < 0.2


@pytest.mark.parametrize("stepper", ["kv-pressure"], indirect=True)
@pytest.mark.slow
async def test_kv_pressure_fills_the_cache_and_preempts(stepper: Stepper) -> None:
    views = await stepper.run_until(120.0)
    instance = views["spark1"].instances[0]
    assert instance.kv_usage is not None and instance.kv_usage > 0.6  # from ~0.01 when healthy
    assert instance.waiting is not None and instance.waiting > 10
    assert instance.rates is not None and instance.rates.preemptions
    assert instance.status.state is State.DEGRADED
    assert any("preemptions/s" in r or "KV cache" in r for r in instance.status.reasons)


@pytest.mark.parametrize("stepper", ["node-down"], indirect=True)
@pytest.mark.slow
async def test_node_down_then_back_after_its_model_loads(stepper: Stepper) -> None:
    views = await stepper.run_until(26.0)
    assert views["spark2"].status.state is State.DOWN
    assert views["spark1"].status.state is State.UP  # the rest keep updating
    views = await stepper.run_until(100.0)  # booted at 80 s, vLLM still loading (45 s)
    assert views["spark2"].instances[0].status.state is State.DOWN
    assert views["spark2"].gpu is not None
    views = await stepper.run_until(135.0)
    assert views["spark2"].status.state is State.UP


@pytest.mark.parametrize("stepper", ["engine-dead"], indirect=True)
async def test_dead_engine_is_down_and_takes_its_worker_down(stepper: Stepper) -> None:
    views = await stepper.run_until(14.0)
    assert views["spark3"].status.state is State.DOWN
    worker = views["spark4"].instances[0]
    assert worker.status.state is State.DOWN
    assert worker.status.reasons == ("qwen235: worker of spark3/qwen235, which is down",)


@pytest.mark.parametrize("stepper", ["restart"], indirect=True)
async def test_restart_refuses_while_loading_and_counts_from_zero_after(stepper: Stepper) -> None:
    views = await stepper.run_until(20.0)
    assert views["spark1"].instances[0].status.state is State.DOWN
    assert "connection refused" in views["spark1"].status.summary
    views = await stepper.run_until(60.0)
    assert views["spark1"].instances[0].status.state is State.UP
    whole = stepper.state.nodes["spark1"].instances["qwen36"].tracker.rates()  # since the first poll
    assert whole is not None and whole.reset
    assert whole.generation_tokens_per_s is not None and whole.generation_tokens_per_s > 0


@pytest.mark.parametrize("stepper", ["wedged"], indirect=True)
async def test_a_wedged_engine_freezes_its_gauges_and_hides_new_requests_like_the_real_one(stepper: Stepper) -> None:
    await stepper.run_until(14.0)
    engine = stepper.fleet.node("spark1").instances[0].engine
    await stepper.run_until(16.0)  # wedged at 15 s
    frozen = stepper.state.nodes["spark1"].instances["qwen36"].tracker.latest
    assert frozen is not None
    await stepper.run_until(40.0)
    latest = stepper.state.nodes["spark1"].instances["qwen36"].tracker.latest
    assert latest is not None
    (before,), (after,) = frozen.models.values(), latest.models.values()
    assert (after.running, after.waiting, after.kv_usage_max) == (before.running, before.waiting, before.kv_usage_max)
    assert engine.hidden, "the workload kept sending: those requests wait unseen, in no gauge"


@pytest.mark.parametrize("stepper", ["engine-dead"], indirect=True)
@pytest.mark.slow
async def test_a_dead_engine_answers_503_for_a_second_then_its_server_exits_and_is_restarted(stepper: Stepper) -> None:
    views = await stepper.run_until(11.0, dt=0.5)
    assert "qwen235: engine dead (/health 503)" in views["spark3"].status.reasons
    views = await stepper.run_until(13.0, dt=0.5)
    assert views["spark3"].status.state is State.DOWN
    assert "qwen235: /health connection refused" in views["spark3"].status.reasons
    service = stepper.fleet.node("spark3").instances[0].service
    assert service.manager == "docker" and service.restarts == 1  # exited; docker restarted it at once
    views = await stepper.run_until(200.0)
    assert views["spark3"].status.state is State.UP  # loaded again
    assert service.restarts == 1


@pytest.mark.slow
async def test_an_engine_wedged_while_idle_is_found_by_the_canary_alone_and_clears_when_it_runs_again() -> None:
    """Nothing moves in any number once spark1 is quiet, wedged or not: only the canary's request,
    hanging unseen in the wedged engine, tells the two apart."""
    fleet = DemoFleet(seed=21, scenario=SCENARIOS["wedged-idle"])
    await fleet.start()
    spec = parse_config(fleet.config_toml() + "\n[canary]\ntimeout_s = 1\n", source="demo.toml")
    state = FleetState(spec, readings=READINGS)
    seen: list[tuple[float, bool, int]] = []  # (time, wedged, canaries sent)
    try:
        async with make_client() as client:
            canaries = CanarySender(spec)
            poller = FleetPoller(spec, client, clock=lambda: fleet.now, canaries=canaries)
            try:
                while fleet.elapsed < 240.0:
                    await fleet.advance(1.0)
                    for observation in await poller.poll_all():
                        state.apply(observation)
                        poller.send_canaries(state, observation)
                    await canaries.wait()  # a stepped fleet: let each canary end before time moves on
                    (view,) = [v for v in state.view(fleet.now, window_s=20.0) if v.name == "spark1"]
                    canary = view.instances[0].canary
                    assert canary is not None
                    seen.append((fleet.elapsed, canary.wedged, canary.sent))
            finally:
                await canaries.aclose()
    finally:
        await fleet.stop()
    wedged_at = [t for t, wedged, _ in seen if wedged]
    assert wedged_at, seen[-5:]
    assert 60.0 < wedged_at[0] <= 60.0 + 30.0 + 2.0  # the next canary after the wedge (idle_s 30)
    assert max(wedged_at) < 180.0 + 30.0 + 2.0  # after resume(), the next canary answers
    assert not seen[-1][1]
    assert seen[-1][2] >= 4  # a canary every 30 s of quiet: counted
    assert not any(wedged for t, wedged, _ in seen if t < 60.0)  # quiet is not wedged
