"""``b``: the bench in the dashboard, an action of the table like the others: behind a confirmation,
refused in read-only and kiosk mode (and audited), audited when it runs (started, then its end), its
node locked meanwhile, with its progress and table live on a screen of its own; escape stops it and
keeps the cases that finished. The palette lists the table's actions."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Static

from sparktui.actions.audit import AuditLog
from sparktui.actions.registry import ACTIONS
from sparktui.config import parse_config
from sparktui.demo.fleet import DemoFleet
from sparktui.model.specs import FleetSpec
from sparktui.sources.bench import BenchJob
from sparktui.ui.app import make_app
from sparktui.ui.bench_ui import BenchScreen, ConfirmBench
from sparktui.ui.commands import FleetCommands
from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.kiosk_screen import KioskScreen
from tests.support.screen_text import screen_rows
from tests.support.ui_data import fed_app
from tests.support.wait import wait_until

pytestmark = pytest.mark.ui


def _text(screen: BenchScreen) -> str:
    """The bench screen's table as it reads."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(screen.query_one("#bench-table", Static).content)
    return console.export_text()


@contextlib.asynccontextmanager
async def demo_spec() -> AsyncIterator[FleetSpec]:
    fleet = DemoFleet(seed=5)
    await fleet.start()
    clock = asyncio.create_task(fleet.run_clock(tick_s=0.05, speed=4.0))
    try:
        yield parse_config(fleet.config_toml(), source="demo.toml")
    finally:
        clock.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await clock
        await fleet.stop()


@pytest.mark.parametrize("mode", ["read-only", "kiosk"])
async def test_read_only_and_the_kiosk_refuse_the_bench_key_and_audit_it(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.log"
    monkeypatch.setenv("SPARKTUI_AUDIT_LOG", str(log))
    app = fed_app(kiosk=True) if mode == "kiosk" else fed_app(read_only=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, KioskScreen if mode == "kiosk" else FleetScreen)  # no confirmation
        await wait_until(lambda: AuditLog(log).records(), what="the refusal in the audit log")
    record = AuditLog(log).records()[0]
    assert (record["event"], record["action"], record["refused_by"]) == ("refused", "bench", mode)


async def test_the_key_asks_first_naming_the_instance_and_n_runs_nothing(tmp_path: Path) -> None:
    async with demo_spec() as spec:
        app = make_app(spec, collect=False)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("b")  # spark1 is highlighted
            await pilot.pause()
            assert isinstance(app.screen, ConfirmBench)
            assert app.screen.job.target_name == "spark1/qwen36"
            assert "Benchmark spark1/qwen36" in str(app.screen.query_one("#bench-confirm-title").render())
            await pilot.press("n")
            await pilot.pause()
            assert isinstance(app.screen, FleetScreen)


async def test_at_80x24_the_bench_confirmation_is_whole_and_its_lines_wrap_under_their_indent() -> None:
    async with demo_spec() as spec:
        app = make_app(spec, collect=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("b")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmBench)
            rows = screen_rows(app)
            assert any("y runs it, n or escape cancels" in row for row in rows), rows
            body = app.screen.query_one("#bench-confirm-body")
            region = body.content_region
            shown = [row[region.x : region.right].rstrip() for row in rows[region.y : region.bottom]]
            assert all(row.startswith("  ") for row in shown if row), shown  # every row, wrapped ones too


async def test_the_screen_shows_progress_and_escape_stops_keeping_what_finished(tmp_path: Path) -> None:
    async with demo_spec() as spec:
        app = make_app(spec, collect=False)
        instance = spec.nodes[0].vllm[0]
        job = BenchJob("spark1/qwen36", instance, ("short", "long"), requests=1)
        async with app.run_test(size=(160, 48)) as pilot:
            screen = BenchScreen(job, folder=tmp_path)
            await app.push_screen(screen)
            await wait_until(lambda: job.progress.cases_done >= 1, 60.0, what="the first case to finish")
            await pilot.pause()
            live = _text(screen)
            assert "Short (64 tok)" in live and "Acceptance by position" in live and "stopped" not in live
            await pilot.press("escape")
            await wait_until(lambda: screen.result is not None, 10.0, what="the stopped run")
            assert screen.result is not None and not screen.result.complete
            assert [c.name for c in screen.result.cases] == ["short"]
            assert isinstance(app.screen, BenchScreen)  # the first escape stops; the table stays
            await pilot.pause()
            assert "stopped early: stopped from the dashboard" in _text(screen) and "Short (64 tok)" in _text(screen)
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, BenchScreen)
    assert screen.saved_to is not None and screen.saved_to.parent == tmp_path
    saved = json.loads(screen.saved_to.read_text())
    assert saved["complete"] is False and [c["name"] for c in saved["cases"]] == ["short"]


async def test_the_bench_from_the_dashboard_is_audited_started_then_its_end_and_locks_its_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``b`` then ``y``: the ``started`` record is on disk before the bench screen sends anything, a
    restart of the node is refused while the bench runs, and the stopped run ends with an ``action``
    record saying how it ended."""
    log = tmp_path / "audit.log"
    monkeypatch.setenv("SPARKTUI_AUDIT_LOG", str(log))
    monkeypatch.chdir(tmp_path)  # the run's JSON is saved in the folder sparktui was started from
    async with demo_spec() as spec:
        app = make_app(spec, collect=False)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("b")  # spark1 is highlighted
            await pilot.pause()
            assert isinstance(app.screen, ConfirmBench)
            await pilot.press("y")
            await wait_until(lambda: isinstance(app.screen, BenchScreen), what="the bench screen")
            started = AuditLog(log).records()
            assert [(r["event"], r["action"], r["node"]) for r in started] == [("started", "bench", "spark1")]
            app.start_action("restart", "spark1")
            busy = "spark1 is busy: bench spark1/qwen36 is running"
            await wait_until(
                lambda: any(busy in str(n.message) for n in app._notifications), what="the restart refused meanwhile"
            )
            await pilot.press("escape")  # stops the bench
            await wait_until(lambda: len(app.action_results) == 1, 30.0, what="the bench's end")
        records = AuditLog(log).records()
    assert [(r["event"], r["action"]) for r in records] == [
        ("started", "bench"),
        ("refused", "restart"),
        ("action", "bench"),
    ]
    assert records[1]["refused_by"] == "runner"
    end = records[2]
    assert end["action_id"] == records[0]["action_id"] and end["result"] == "failed"
    assert str(end["message"]).startswith("bench spark1/qwen36: stopped (")
    assert app.action_results[0].message == end["message"]


async def test_the_palette_lists_the_tables_actions_on_each_node() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        entries = [title for title, _, _ in FleetCommands(app.screen)._entries()]
        for view in app.views:
            listed = [t.removesuffix(f" on {view.name}") for t in entries if t.endswith(f" on {view.name}")]
            assert listed == [a.label for a in ACTIONS if a.in_palette]
