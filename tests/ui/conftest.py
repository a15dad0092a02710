"""Fixtures the Pilot tests share."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sparktui.config import parse_config
from sparktui.demo.fleet import DemoFleet
from sparktui.demo.scenarios import SCENARIOS
from sparktui.ui.app import SparkApp, make_app

INCIDENT_SPEED = 12.0  # the demo's clock against the wall's


@pytest.fixture
async def incident(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SparkApp]:
    """The dashboard (not yet running) on the demo fleet's ``incident`` scenario at 12x real time, polling
    every 0.25 s; its audit log is ``tmp_path / "audit.log"``."""
    monkeypatch.setenv("SPARKTUI_AUDIT_LOG", str(tmp_path / "audit.log"))
    fleet = DemoFleet(seed=21, scenario=SCENARIOS["incident"])
    await fleet.start()
    clock = asyncio.create_task(fleet.run_clock(tick_s=0.05, speed=INCIDENT_SPEED))
    try:
        spec = parse_config(fleet.config_toml(), source="demo.toml").model_copy(update={"poll_interval_s": 0.25})
        yield make_app(spec)
    finally:
        clock.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await clock
        await fleet.stop()
