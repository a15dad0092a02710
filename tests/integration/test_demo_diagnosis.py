"""Each demo scenario, stepped, opens its catalogue finding within the time the rule promises and
clears it after recovery (issue 7). The incident's findings are covered in tests/integration/test_demo_incident.py.

Polls are every ``DT`` simulated seconds with the host sampler running over SSH, as in the dashboard;
the promise of a detector rule is ``open_after`` polls after the first poll that can see the fault,
and ``clear_after_s`` after the condition ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import pytest

from sparktui.config import load_catalogue, parse_config
from sparktui.demo.fleet import DemoFleet
from sparktui.demo.scenarios import SCENARIOS
from sparktui.diagnosis.catalogue import Rule
from sparktui.diagnosis.engine import DiagnosisEngine, last_intervals
from sparktui.engines import READINGS
from sparktui.model.fleet import FleetState
from sparktui.model.status import State
from sparktui.sources.http import make_client
from sparktui.sources.poller import FleetPoller
from tests.integration.test_demo_ssh import HostFeed

DT = 2.0
WINDOW_S = 20.0  # the view's window, as on the node screen


class Diagnosed:
    """The demo fleet polled every ``DT`` s and diagnosed; remembers when each finding opened and cleared."""

    def __init__(
        self, fleet: DemoFleet, poller: FleetPoller, state: FleetState, feed: HostFeed, dt: float = DT
    ) -> None:
        self.fleet, self.poller, self.state, self.feed, self.dt = fleet, poller, state, feed, dt
        self.catalogue = load_catalogue()
        self.engine = DiagnosisEngine(self.catalogue)
        self.opened: dict[tuple[str, str], float] = {}  # (node, rule id) -> elapsed when last opened
        self.cleared: dict[tuple[str, str], float] = {}
        self.active: set[tuple[str, str]] = set()

    def rule(self, rule_id: str) -> Rule:
        return next(r for r in self.catalogue.rules if r.id == rule_id)

    async def step(self) -> None:
        await self.fleet.advance(self.dt)
        with contextlib.suppress(AssertionError):  # a node that is off sends no frame to wait for
            await self.feed.settle()
        for observation in await self.poller.poll_all():
            self.state.apply(observation)
        now_active: set[tuple[str, str]] = set()
        for view in self.state.view(self.fleet.now, window_s=WINDOW_S):
            intervals = last_intervals(self.state.nodes[view.name])
            for finding in self.engine.evaluate(view, None, self.fleet.now, intervals):
                now_active.add((view.name, finding.id))
        for key in now_active - self.active:
            self.opened[key] = self.fleet.elapsed
        for key in self.active - now_active:
            self.cleared[key] = self.fleet.elapsed
        self.active = now_active

    async def run_until(self, elapsed_s: float, done: Callable[[], bool] = lambda: False) -> None:
        while self.fleet.elapsed < elapsed_s and not done():
            await self.step()


@contextlib.asynccontextmanager
async def stepped(scenario: str, seed: int = 21, dt: float = DT) -> AsyncIterator[Diagnosed]:
    fleet = DemoFleet(seed=seed, scenario=SCENARIOS[scenario])
    await fleet.start()
    spec = parse_config(fleet.config_toml(), source="demo.toml")
    state = FleetState(spec, readings=READINGS)
    feed = HostFeed(fleet, spec, tuple(n.name for n in spec.nodes), state)
    try:
        async with make_client() as client:
            await feed.start()
            yield Diagnosed(fleet, FleetPoller(spec, client, clock=lambda: fleet.now), state, feed, dt)
    finally:
        await feed.close()
        await fleet.stop()


@pytest.fixture
async def diagnosed(request: pytest.FixtureRequest) -> AsyncIterator[Diagnosed]:
    async with stepped(request.param) as found:
        yield found


@pytest.mark.slow
async def test_a_healthy_fleet_polled_every_second_opens_no_finding_for_seven_minutes() -> None:
    """No false alarm from ordinary traffic: seed 2 once opened decode-stall at 373 s, when a long
    prompt's prefill held a running slot for seconds while the other requests decoded."""
    async with stepped("healthy", seed=2, dt=1.0) as healthy:
        await healthy.run_until(420.0)
    assert healthy.opened == {}


def _param(rule: Rule, name: str) -> float:
    return float(rule.params[name])


@pytest.mark.parametrize("diagnosed", ["wedged"], indirect=True)
@pytest.mark.slow
async def test_a_wedged_engine_opens_engine_wedged_in_time_and_a_restart_clears_it(diagnosed: Diagnosed) -> None:
    key = ("spark1", "engine-wedged")
    rule = diagnosed.rule("engine-wedged")
    wedged_at = 15.0  # the scenario's event
    await diagnosed.run_until(wedged_at + 60.0, done=lambda: key in diagnosed.active)
    # The first poll after the wedge sees an interval with no token; open_after polls later it opens.
    promised = wedged_at + DT + _param(rule, "open_after") * DT
    assert key in diagnosed.active, f"engine-wedged not open by {diagnosed.fleet.elapsed:g} s"
    assert diagnosed.opened[key] <= promised, (diagnosed.opened[key], promised)
    assert diagnosed.active == {key}  # nothing else on the healthy nodes

    await diagnosed.run_until(diagnosed.fleet.elapsed + 10.0)
    assert key in diagnosed.active  # the wedge does not heal by itself
    diagnosed.fleet.node("spark1").instances[0].restart(load_s=10.0)
    restarted_at = diagnosed.fleet.elapsed
    await diagnosed.run_until(restarted_at + 120.0, done=lambda: key in diagnosed.cleared)
    assert key in diagnosed.cleared, "engine-wedged stayed open after the restart"
    assert diagnosed.cleared[key] <= restarted_at + DT + _param(rule, "clear_after_s") + DT
    await diagnosed.run_until(diagnosed.fleet.elapsed + 30.0)
    assert key not in diagnosed.active


@pytest.mark.parametrize("diagnosed", ["spec-degradation"], indirect=True)
@pytest.mark.slow
async def test_a_collapsed_draft_position_opens_its_finding_and_clears_once_it_recovers(diagnosed: Diagnosed) -> None:
    key = ("spark2", "spec-position-collapse")
    rule = diagnosed.rule("spec-position-collapse")
    collapsed_at = 10.0  # the scenario's event
    await diagnosed.run_until(60.0, done=lambda: key in diagnosed.active)
    # Acceptance is a trend read over the view's window: at the latest once the window holds only the
    # collapse, and open_after polls later.
    promised = collapsed_at + WINDOW_S + _param(rule, "open_after") * DT
    assert key in diagnosed.active and diagnosed.opened[key] <= promised, (diagnosed.opened.get(key), promised)

    engine = diagnosed.fleet.node("spark2").instances[0].engine
    engine.acceptance_factor = None  # the model's own acceptance again (num_speculative_tokens fixed)
    recovered_at = diagnosed.fleet.elapsed
    await diagnosed.run_until(recovered_at + 150.0, done=lambda: key in diagnosed.cleared)
    assert key in diagnosed.cleared, "spec-position-collapse stayed open after acceptance recovered"
    promised = recovered_at + WINDOW_S + _param(rule, "clear_after_s") + DT
    assert diagnosed.cleared[key] <= promised, (diagnosed.cleared[key], promised)


@pytest.mark.parametrize("diagnosed", ["node-down"], indirect=True)
@pytest.mark.slow
async def test_a_node_that_loses_power_opens_node_vanished_and_clears_once_it_serves(diagnosed: Diagnosed) -> None:
    key = ("spark2", "node-vanished")
    rule = diagnosed.rule("node-vanished")
    off_at, on_at = 20.0, 80.0  # the scenario's events
    await diagnosed.run_until(off_at + 30.0, done=lambda: key in diagnosed.active)
    promised = off_at + DT + _param(rule, "open_after") * DT
    assert key in diagnosed.active and diagnosed.opened[key] <= promised, (diagnosed.opened.get(key), promised)
    await diagnosed.run_until(on_at - DT)
    # Off is not "loading": the unit's last known state came over the SSH connection that died with it.
    assert ("spark2", "port-refused-loading") not in diagnosed.opened
    assert key in diagnosed.active

    await diagnosed.run_until(on_at + 90.0, done=lambda: key in diagnosed.cleared)
    assert ("spark2", "port-refused-loading") in diagnosed.opened  # booted: now it is loading
    promised = on_at + DT + _param(rule, "clear_after_s") + DT
    assert key in diagnosed.cleared and diagnosed.cleared[key] <= promised, (diagnosed.cleared.get(key), promised)


@pytest.mark.parametrize("diagnosed", ["kv-pressure"], indirect=True)
@pytest.mark.slow
async def test_a_full_kv_cache_that_preempts_opens_kv_pressure_in_time_and_a_restart_clears_it(
    diagnosed: Diagnosed,
) -> None:
    key = ("spark1", "kv-pressure")
    rule = diagnosed.rule("kv-pressure")
    # The rule's promise: open at the poll where the condition has held for open_after polls in a row.
    in_a_row, promised_at = 0, None
    while key not in diagnosed.active:
        assert diagnosed.fleet.elapsed < 300.0, "kv-pressure did not open within 300 s of the flood"
        await diagnosed.step()
        view = {v.name: v for v in diagnosed.state.view(diagnosed.fleet.now)}["spark1"].instances[0]
        interval = last_intervals(diagnosed.state.nodes["spark1"])[view.name]
        full = view.kv_usage is not None and view.kv_usage >= _param(rule, "kv_usage_min")
        preempting = interval is not None and (interval.preemptions or 0.0) >= _param(rule, "preemptions_min")
        in_a_row = in_a_row + 1 if full and preempting else 0
        if in_a_row >= _param(rule, "open_after") and promised_at is None:
            promised_at = diagnosed.fleet.elapsed
    assert promised_at is not None and diagnosed.opened[key] <= promised_at, (diagnosed.opened[key], promised_at)
    # The long sessions hold their blocks: the operator moves them elsewhere and restarts the instance.
    instance = diagnosed.fleet.node("spark1").instances[0]
    instance.engine.load_factor = instance.engine.prompt_factor = instance.engine.output_factor = 1.0
    instance.restart(load_s=10.0)
    restarted_at = diagnosed.fleet.elapsed

    def serving() -> bool:
        view = {v.name: v for v in diagnosed.state.view(diagnosed.fleet.now)}["spark1"]
        return view.instances[0].status.state is State.UP

    await diagnosed.run_until(restarted_at + 60.0, done=lambda: diagnosed.fleet.elapsed > restarted_at and serving())
    assert serving(), "spark1 did not come back after the restart"
    # While it loads there is no KV cache to judge; clear_after_s counts from the first poll that shows one.
    promised = diagnosed.fleet.elapsed + _param(rule, "clear_after_s") + DT
    await diagnosed.run_until(promised + 30.0, done=lambda: key in diagnosed.cleared)
    assert key in diagnosed.cleared and diagnosed.cleared[key] <= promised, (diagnosed.cleared.get(key), promised)
