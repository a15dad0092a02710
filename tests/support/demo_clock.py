"""The demo's ``incident`` fleet with its clock running faster than the wall clock, for the dashboard
tests that recover it with keys."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sparktui.config import parse_config
from sparktui.demo.fleet import DemoFleet
from sparktui.demo.scenarios import SCENARIOS
from sparktui.model.fleet import InstanceView
from sparktui.model.specs import FleetSpec

TICK_S = 0.05


@contextlib.asynccontextmanager
async def running_incident(speed: float) -> AsyncIterator[tuple[DemoFleet, FleetSpec]]:
    """The incident (seed 21) started, its clock ``speed`` times the wall clock's, and its config with
    a 0.25 s poll; stopped on the way out. A tick of the clock moves the simulation by at most twice its
    due share: the demo, its clock and the dashboard share one event loop, so on a machine too busy to
    tick on time the incident slows down with the dashboard that watches it, and the tests' "in time"
    (and "over so many polls") holds in the simulation's seconds. (Not once its share: steps of exactly
    0.3 simulated seconds against the 0.25 s poll left the warmup's cold request in too few polls, on
    an idle machine, 2 runs in 3.)"""
    fleet = DemoFleet(seed=21, scenario=SCENARIOS["incident"])
    await fleet.start()
    clock = asyncio.create_task(fleet.run_clock(tick_s=TICK_S, speed=speed, max_step_s=2 * TICK_S * speed))
    try:
        spec = parse_config(fleet.config_toml(), source="demo.toml").model_copy(update={"poll_interval_s": 0.25})
        yield fleet, spec
    finally:
        clock.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await clock
        await fleet.stop()


def launch_ready(instance: InstanceView) -> bool:
    """Launch readiness true (or no longer computed: the instance serves again)."""
    return instance.launch is None or bool(instance.launch.ready)
