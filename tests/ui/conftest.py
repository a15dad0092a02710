"""Fixtures the Pilot tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sparktui.ui.app import SparkApp, make_app
from tests.support.demo_clock import running_incident

INCIDENT_SPEED = 12.0  # the demo's clock against the wall's


@pytest.fixture
async def incident(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SparkApp]:
    """The dashboard (not yet running) on the demo fleet's ``incident`` scenario at 12x real time, polling
    every 0.25 s; its audit log is ``tmp_path / "audit.log"``."""
    monkeypatch.setenv("SPARKTUI_AUDIT_LOG", str(tmp_path / "audit.log"))
    async with running_incident(INCIDENT_SPEED) as (_, spec):
        yield make_app(spec)
