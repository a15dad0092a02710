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
POLL_S = 0.25


@contextlib.asynccontextmanager
async def running_incident(speed: float, paced_by: str | None = None) -> AsyncIterator[tuple[DemoFleet, FleetSpec]]:
    """The incident (seed 21) started, its clock ``speed`` times the wall clock's, and its config with
    a 0.25 s poll; stopped on the way out. With ``paced_by`` (a node's name) the clock waits for the
    dashboard's polls of that node: it starts with the first and runs at most two polls' worth past the
    last, so a dashboard starved of CPU sees as many polls per simulated minute as on an idle machine
    (docs/reliability.md, "The suite under load")."""
    fleet = DemoFleet(seed=21, scenario=SCENARIOS["incident"])
    await fleet.start()
    clock = asyncio.create_task(
        fleet.run_clock(tick_s=TICK_S, speed=speed, paced_by=paced_by, ahead_s=2 * POLL_S * speed)
    )
    try:
        spec = parse_config(fleet.config_toml(), source="demo.toml").model_copy(update={"poll_interval_s": POLL_S})
        yield fleet, spec
    finally:
        clock.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await clock
        await fleet.stop()


def launch_ready(instance: InstanceView) -> bool:
    """Launch readiness true (or no longer computed: the instance serves again)."""
    return instance.launch is None or bool(instance.launch.ready)
