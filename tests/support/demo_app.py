"""The dashboard on a running demo scenario: the demo fleet's real HTTP and SSH servers on loopback,
its clock running faster than real time, the app collecting from it as it does from a real fleet."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sparktui.config import parse_config
from sparktui.demo.fleet import DemoFleet
from sparktui.demo.scenarios import SCENARIOS
from sparktui.ui.app import SparkApp, make_app

SPEED = 12.0  # simulated seconds per real second


@contextlib.asynccontextmanager
async def demo_app(
    scenario: str, *, seed: int = 21, speed: float = SPEED, poll_interval_s: float = 0.25
) -> AsyncIterator[SparkApp]:
    """An app (not yet running: the test runs it with ``run_test``) on the demo fleet playing ``scenario``."""
    fleet = DemoFleet(seed=seed, scenario=SCENARIOS[scenario])
    await fleet.start()
    clock = asyncio.create_task(fleet.run_clock(tick_s=0.05, speed=speed))
    try:
        spec = parse_config(fleet.config_toml(), source="demo.toml")
        yield make_app(spec.model_copy(update={"poll_interval_s": poll_interval_s}))
    finally:
        clock.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await clock
        await fleet.stop()
