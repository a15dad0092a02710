"""SVG snapshots of every screen and dialog at 80x24 and 160x48 in the dark theme, and of the fleet and
node screens in the light theme too, from deterministic data (``tests/support/ui_data.py``, and spark1's
log written here). Update with
``pytest tests/snapshots/test_snapshots.py --snapshot-update`` after a deliberate change, and look at
the pictures (``rsvg-convert``; add ``xml:space="preserve"`` to the ``<svg>`` tag first, or it drops
runs of spaces) before committing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from textual.pilot import Pilot

from sparktui.model.drift import DriftReport
from sparktui.model.logbuffer import LogBuffer
from sparktui.ui.app import SparkApp
from sparktui.ui.fleet_views import DriftScreen
from tests.support.ui_data import ONE_TICK_S, fed_app
from tests.ui.test_views import app_with_a_slow_node_down_rule
from tests.unit.test_drift import ROWS

SnapCompare = Callable[..., bool]

# Each screen as the operator reaches it: the keys pressed from the fleet screen.
SCREENS: dict[str, tuple[str, ...]] = {
    "fleet": (),
    "node": ("enter",),
    "logs": ("enter", "l", "slash", *"free memory", "enter"),  # a search: the signature line, its match lit
    "findings": ("f",),
    "drift": (),  # pushed with a report that differs (below)
    "alerts": ("exclamation_mark",),
    "help": ("question_mark",),
    "confirm": ("down", "r"),  # restart spark2's vllm-gemma4.service: the exact command, y/n
    "action-log": ("a",),
}  # the kiosk's pages: test_kiosk_snapshots.py
SIZES = {"80x24": (80, 24), "160x48": (160, 48)}
CASES = [(screen, size, "spark-dark") for screen in SCREENS for size in SIZES] + [
    (screen, size, "spark-light") for screen in ("fleet", "node") for size in SIZES
]


def _with_log(app: SparkApp) -> SparkApp:
    """spark1's log: a start that fails on a known signature, then a serving engine."""
    t0 = datetime(2026, 11, 26, 9, 0, 0, tzinfo=UTC)
    buffer = LogBuffer()
    lines = [
        "Started vllm-gptoss.service - vLLM openai/gpt-oss-120b.",
        "(APIServer pid=4242) INFO [api_server.py:1885] vLLM API server version 0.33.0",
        "(EngineCore_DP0 pid=4301) ValueError: Free memory on device cuda:0 (4.75/119.67 GiB) on startup is less "
        "than desired GPU memory utilization (0.9, 107.7 GiB). Decrease GPU memory utilization or reduce GPU "
        "memory used by other processes.",
        "vllm-gptoss.service: Main process exited, code=exited, status=1/FAILURE",
        "Started vllm-gptoss.service - vLLM openai/gpt-oss-120b.",
        "(APIServer pid=4420) INFO [api_server.py:1885] vLLM API server version 0.33.0",
    ]
    lines += [
        f'(APIServer pid=4420) INFO:     192.168.1.{20 + n}:5{n:04d} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
        for n in range(30)
    ]
    for n, line in enumerate(lines):
        buffer.append(t0 + timedelta(seconds=n), line)
    app.monitor.log_buffers["spark1"] = {"gptoss": buffer}
    return app


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Log times are shown in local time: the snapshots are made in UTC wherever they run."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _app(screen: str, theme: str) -> SparkApp:
    if screen == "alerts":
        return app_with_a_slow_node_down_rule(render_every_s=ONE_TICK_S)  # firing, pending and quiet rules
    app = fed_app(theme=theme, render_every_s=ONE_TICK_S)
    return _with_log(app) if screen in ("node", "logs") else app  # the node screen's log tail, the log view


def _before(screen: str) -> Callable[[Pilot[None]], object]:
    async def run_before(pilot: Pilot[None]) -> None:
        if screen == "drift":  # the fed fleet has no two instances that disagree: a report that has
            pilot.app.push_screen(DriftScreen(DriftReport(ROWS, {})))
        for key in SCREENS[screen]:
            await pilot.press(key)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize(("screen", "size", "theme"), CASES, ids=[f"{s}-{z}-{t}" for s, z, t in CASES])
def test_screens(snap_compare: SnapCompare, screen: str, size: str, theme: str, utc: None) -> None:
    assert snap_compare(_app(screen, theme), terminal_size=SIZES[size], run_before=_before(screen))
