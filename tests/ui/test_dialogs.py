"""The confirmation warns of what an action would break now (requests in flight), and f8 says where it
saved the screenshot, or why it could not."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Static

from sparktui.model.units import fmt_number
from sparktui.ui.actions_ui import ConfirmAction
from sparktui.ui.app import SparkApp
from sparktui.ui.fleet_screen import FleetScreen
from tests.support.ui_data import fed_app
from tests.support.wait import wait_until


def _plain(widget: Static) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def _svgs(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.svg"))


def _notified(app: SparkApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_the_restart_dialog_warns_of_the_requests_it_would_cut_off() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        spark1 = next(v for v in app.views if v.name == "spark1").instances[0]
        assert spark1.running and spark1.waiting  # the fixture's gptoss is busy
        await pilot.press("r")  # the cursor starts on spark1
        await pilot.pause()
        assert isinstance(app.screen, ConfirmAction)
        warnings = _plain(app.screen.query_one("#confirm-warnings", Static))
        expected = (
            f"spark1/gptoss: {fmt_number(spark1.running)} requests running, "
            f"{fmt_number(spark1.waiting)} waiting will be cut off"
        )
        assert f"⚠ {expected}" in warnings
        assert app.screen.query_one("#confirm-warnings").display
        assert "warning:" not in _plain(app.screen.query_one("#confirm-body", Static))  # said once, on top
        await pilot.press("n")
        await pilot.pause()
        await pilot.press("w")  # a warmup cuts nothing off: no warning line
        await pilot.pause()
        assert isinstance(app.screen, ConfirmAction)
        assert not app.screen.query_one("#confirm-warnings").display


async def test_f8_saves_an_svg_and_says_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = fed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("f8")
        await wait_until(lambda: _svgs(tmp_path), 10, what="the screenshot file")
        (saved,) = _svgs(tmp_path)
        assert saved.parent == tmp_path and saved.name.startswith("sparktui-")
        assert saved.read_text().lstrip().startswith("<svg") and "spark1" in saved.read_text()
        await wait_until(
            lambda: f"screenshot saved: {saved}" in _notified(app), 5, what="a notification with the full path"
        )


async def test_f8_says_why_it_could_not_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # the folder sparktui was started from is removed under it (root can write anywhere else)
    app = fed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("f8")
        await wait_until(
            lambda: any(m.startswith("screenshot not saved: ") for m in _notified(app)), 5, what="the reason"
        )
        (message,) = [m for m in _notified(app) if m.startswith("screenshot not saved: ")]
        assert "No such file or directory" in message and "start sparktui from a folder you can write to" in message
        assert not _svgs(tmp_path)
