"""SVG snapshots of every screen and dialog at 80x24 and 160x48 in the dark theme, and of the fleet and
node screens in the light theme too, from deterministic data (``tests/support/ui_data.py``, and spark1's
log written here). Update with
``pytest tests/snapshots/test_snapshots.py --snapshot-update`` after a deliberate change, and look at
the pictures (``rsvg-convert``; add ``xml:space="preserve"`` to the ``<svg>`` tag first, or it drops
runs of spaces) before committing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from textual.pilot import Pilot

from sparktui.model.drift import DriftReport
from sparktui.ui.app import SparkApp
from sparktui.ui.fleet_views import DriftScreen
from tests.support.ui_data import ONE_TICK_S, fed_app, with_failed_start_log
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
    return with_failed_start_log(app) if screen in ("node", "logs") else app  # the node screen's log tail, the log view


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
