"""The confirmation warns of what an action would break now (requests in flight) and shows all of a fix
(every step, "y runs it") at any size, and f8 says where it saved the screenshot, or why it could not."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Static

from sparktui.actions.plans import FixPlan, plan_fix
from sparktui.model.units import fmt_duration, fmt_number
from sparktui.ui.actions_ui import SCROLL_KEYS, ConfirmAction
from sparktui.ui.app import SparkApp
from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.lists import KeyedScroll
from tests.support.screen_text import screen_rows
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


def _fix_dialog(app: SparkApp) -> ConfirmAction:
    plan = plan_fix(app.fleet, "spark1", ["drop-caches", "restart", "warmup"], finding=FIX_FINDING, views=app.views)
    assert isinstance(plan, FixPlan)
    dialog = ConfirmAction(plan)
    app.push_screen(dialog)
    return dialog


FIX_FINDING = "page-cache-blocks-start"
STEPS = ("step 1/3: drop-caches spark1", "step 2/3: restart spark1/gptoss", "step 3/3: warmup spark1/gptoss")


async def test_the_fix_dialog_at_80x24_scrolls_to_every_step_with_y_runs_it_always_shown() -> None:
    app = fed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        dialog = _fix_dialog(app)
        await pilot.pause()
        page = dialog.query_one("#confirm-scroll", KeyedScroll)
        assert page.max_scroll_y > 0  # three steps do not fit 24 rows: they scroll, and it says so
        await wait_until(lambda: SCROLL_KEYS in "\n".join(screen_rows(app)), what="the keys that scroll")
        seen: list[str] = []
        while True:
            rows = screen_rows(app)
            text = "\n".join(rows)
            assert "y runs it, n or escape cancels" in text and f"fix spark1: {FIX_FINDING}?" in text, text
            seen += rows
            if page.scroll_y >= page.max_scroll_y:
                break
            before = page.scroll_y
            await pilot.press("pagedown")
            await wait_until(lambda: page.scroll_y > before, what="the page to scroll")  # noqa: B023
            await pilot.pause()
        shown = "\n".join(seen)
        for step in STEPS:
            assert step in shown
        assert f"timeout: {fmt_duration(dialog.plan.timeout_s)} overall" in shown  # the end of the plan


@pytest.mark.parametrize("size", [(120, 40), (160, 48)], ids=["120x40", "160x48"])
async def test_the_fix_dialog_is_whole_at_120x40_and_160x48(size: tuple[int, int]) -> None:
    app = fed_app()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        dialog = _fix_dialog(app)
        await pilot.pause()
        assert dialog.query_one("#confirm-scroll", KeyedScroll).max_scroll_y == 0
        text = "\n".join(screen_rows(app))
        assert SCROLL_KEYS not in text
        for step in (*STEPS, "y runs it, n or escape cancels", "timeout: 29m30s overall"):
            assert step in text


async def test_the_fix_dialogs_wrapped_rows_keep_their_indent_and_json_its_names() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        _fix_dialog(app)
        await pilot.pause()
        rows = [row.strip().strip("█").rstrip() for row in screen_rows(app)]
        start = next(i for i, row in enumerate(rows) if "over HTTP: POST" in row)
        command = [rows[start]]
        for row in rows[start + 1 :]:
            if "timeout:" in row:
                break
            command.append(row)
        assert len(command) > 1  # the warm-up's JSON body wraps at 160x48
        indent = len(command[0]) - len(command[0].lstrip())
        assert all(len(row) - len(row.lstrip()) == indent for row in command), command
        assert any('"max_tokens"' in row for row in command), command


async def test_the_action_log_shows_a_reports_lines_as_they_are_and_wraps_them_under_their_indent() -> None:
    app = fed_app()
    long_line = "warmup: POST " + '{"model":"RedHatAI/Qwen3.6-35B-A3B-NVFP4","max_tokens":3,"stream":true}' * 2
    app.action_log.append(("09:00:00", ("restart spark1/gptoss: ok", "[bold]not markup[/bold]", long_line)))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("a")
        await pilot.pause()
        rows = [row.rstrip() for row in screen_rows(app)]
        assert any("[bold]not markup[/bold]" in row for row in rows), rows
        start = next(i for i, row in enumerate(rows) if "warmup: POST" in row)
        indent = rows[start].index("warmup")
        wrapped = rows[start + 1 : start + 3]
        assert all(row[indent - 1] == " " and row[indent] not in " │" for row in wrapped), rows
