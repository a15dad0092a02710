"""One clock everywhere (issue 18): every time an operator reads is local wall-clock time with its
zone, from ``units.fmt_clock``; the monitor core maps its tick clock to the wall clock in one place."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest

from sparktui.config import catalogue_for, load_catalogue, parse_config
from sparktui.diagnosis.engine import DiagnosisEngine
from sparktui.engines import readings
from sparktui.model.fleet import FleetState
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation
from sparktui.model.units import NO_DATA, fmt_clock
from sparktui.monitor.core import Monitor

WALL = 1780137000.0  # 2026-05-30 10:30:00 UTC

CONFIG = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "qwen"
port = 8001
container = "qwen36"
"""
FLEET = parse_config(CONFIG, source="test.toml")


@pytest.fixture
def berlin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The machine's local zone is Central European (summer time on WALL's day)."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_time_reads_as_local_time_with_its_zone(berlin: None) -> None:
    assert fmt_clock(WALL) == "12:30:00 CEST"
    assert fmt_clock(WALL, date=True) == "2026-05-30 12:30:00 CEST"
    assert fmt_clock(WALL + 200 * 86400) == "11:30:00 CET"  # winter time, the zone says so


def test_a_zone_can_be_given_and_a_nameless_zone_shows_its_offset() -> None:
    assert fmt_clock(WALL, tz=UTC) == "10:30:00 UTC"
    assert fmt_clock(WALL, tz=timezone(timedelta(hours=-7))) == "03:30:00 UTC-07:00"


@pytest.mark.parametrize("wall", [None, float("nan"), 1e300])
def test_no_time_is_the_no_data_dash(wall: float | None) -> None:
    assert fmt_clock(wall) == NO_DATA


def refused() -> HttpResult:
    return HttpResult(url="u", kind=FetchKind.REFUSED, error="connection refused")


def test_the_monitor_maps_its_tick_clock_to_wall_time_from_what_it_observed() -> None:
    monitor = Monitor(FLEET, catalogue_for(FLEET.diagnosis))
    assert monitor.wall_at(5.0) is None  # nothing observed yet: no mapping
    monitor.observation(
        NodeObservation("spark1", t=100.0, wall=WALL, vllm=(ServerObservation("qwen", refused(), None),))
    )
    assert monitor.wall_at(112.5) == WALL + 12.5
    monitor.observation(NodeObservation("spark1", t=200.0, wall=WALL + 1000.0))  # the newest says
    assert monitor.wall_at(200.0) == WALL + 1000.0


def test_evidence_times_and_quoted_log_lines_read_on_the_same_local_clock(berlin: None) -> None:
    """The findings screen showed clearings as 00:12:33 (a monotonic time) and evidence as 09:06:09 UTC."""
    state = FleetState(FLEET, readings())
    engine = DiagnosisEngine(load_catalogue())
    dead = HttpResult(url="u", kind=FetchKind.OK, status=503, body=b"", elapsed_s=0.01)
    line = LogLine(0, datetime.fromtimestamp(WALL - 60, UTC), "vllm: error: unrecognized arguments: serve")
    for t, lines in ((50.0, [line]), (51.0, [])):
        # The poll's own wall time is off by an hour; the caller's mapping (wall of ``now``) is the one used.
        state.apply(NodeObservation("spark1", t=t, wall=WALL - 3600, vllm=(ServerObservation("qwen", dead, None),)))
        (view,) = state.view(t)
        findings = {f.id: f for f in engine.evaluate(view, {"qwen": lines}, t, wall=WALL + (t - 51.0))}
    assert findings["serve-twice"].evidence[0] == "2026-05-30 12:29:00 CEST  vllm: error: unrecognized arguments: serve"
    evidence = findings["engine-dead"].evidence
    assert evidence == (
        "qwen: engine dead (/health 503) (at 12:30:00 CEST)",
        "holding since 12:29:59 CEST (2 polls in a row)",
    )
