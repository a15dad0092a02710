"""The node screen as an incident cockpit, on the demo fleet's ``incident`` (real HTTP and SSH servers,
12x real time: the ``incident`` fixture of ``conftest.py``): at 160x48 the findings, the memory ledger,
the GPU and the live log tail are on screen without scrolling; at 80x24 no two panels overlap and the
rest scrolls into view. An instance that is not serving shows "–" and why, never its last numbers."""

from __future__ import annotations

import io
import itertools
import re
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console
from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Sparkline, Static

from sparktui.model.logbuffer import LogBuffer
from sparktui.model.observations import HostUpdate
from sparktui.model.status import State
from sparktui.ui.app import SparkApp
from sparktui.ui.log_screen import LogView
from sparktui.ui.node_screen import NodeScreen
from tests.support.screen_text import screen_rows
from tests.support.ui_data import NOW, ONE_TICK_S, fed_app, with_failed_start_log
from tests.support.wait import wait_until

PANELS = ("#findings", "#memory", "#gpu", "#throughput-panel", "#requests", "#latency", "#tail-panel")


def _plain(widget: Static) -> str:
    console = Console(width=150, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def _spark1_down_with_findings_and_logs(app: SparkApp) -> bool:
    view = next((v for v in app.views if v.name == "spark1"), None)
    return (
        view is not None
        and view.instances[0].status.state is State.DOWN
        and bool(app.findings.get("spark1"))
        and view.host_memory is not None
        and sum(len(b) for b in app.log_buffers("spark1").values()) > 0
    )


async def _open_spark1(app: SparkApp, pilot: object) -> NodeScreen:
    await wait_until(lambda: _spark1_down_with_findings_and_logs(app), 60, what="spark1 down, with findings and logs")
    await pilot.press("1")  # type: ignore[attr-defined]
    await wait_until(lambda: isinstance(app.screen, NodeScreen), what="spark1's node screen")
    screen = app.screen
    assert isinstance(screen, NodeScreen)
    await wait_until(lambda: bool(screen.query_one("#tail", LogView).reader.shown), what="the log tail's first lines")
    await pilot.pause()  # type: ignore[attr-defined]
    return screen


T0 = datetime(2026, 11, 26, 9, 0, 0, tzinfo=UTC)


def _requests_done(buffer: LogBuffer, numbers: range) -> None:
    for n in numbers:
        buffer.append(T0 + timedelta(seconds=n), f"INFO request {n} done")


async def _open_node(app: SparkApp, pilot: Pilot[None], name: str) -> NodeScreen:
    app.open_node(name)
    await wait_until(lambda: isinstance(app.screen, NodeScreen), what=f"{name}'s node screen")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, NodeScreen)
    return screen


def _visible(widget: Widget) -> Region:
    """The part of a widget on screen: its region clipped by every scrolling container above it."""
    region = widget.region
    for ancestor in widget.ancestors:
        if isinstance(ancestor, VerticalScroll):
            region = region.intersection(ancestor.region)
    return region


async def test_at_160x48_the_cockpit_shows_findings_memory_gpu_and_the_log_tail_without_scrolling(
    incident: SparkApp,
) -> None:
    app = incident
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open_spark1(app, pilot)
        _assert_on_screen_unscrolled(screen, PANELS)
        tail = screen.query_one("#tail", LogView)
        assert tail.reader.follow.on and tail.is_vertical_scroll_end  # the newest lines
        # spark1's vLLM is down: no live-looking numbers, and nothing said of its speculative decoding.
        assert not screen.query_one("#spec").display
        assert not screen.query_one("#gen-spark", Sparkline).display
        assert re.search(r"–  qwen36 is (down|loading)", _plain(screen.query_one("#latency", Static)))  # a crash loop
        requests = _plain(screen.query_one("#requests", Static))
        assert re.match(r"Requests\s+–\n", requests) and "running" not in requests


def _assert_on_screen_unscrolled(screen: NodeScreen, selectors: tuple[str, ...]) -> None:
    assert screen.query_one("#upper").scroll_y == 0
    for selector in selectors:
        panel = screen.query_one(selector)
        assert panel.display, selector
        region = panel.region
        assert region.height > 2 and _visible(panel) == region, f"{selector} is cut or off screen: {region}"
        assert screen.region.contains_region(region), f"{selector} is outside the screen: {region}"


async def test_a_serving_node_at_160x48_shows_every_key_panel_and_its_log_without_scrolling() -> None:
    """All panels full (traffic, speculative decoding, a finding, a log): still one screen."""
    app = fed_app()
    buffer = LogBuffer()
    _requests_done(buffer, range(40))
    buffer.append(
        T0 + timedelta(seconds=40),
        "ValueError: Free memory on device cuda:0 (4.75/119.67 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 107.7 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    )
    app.monitor.log_buffers["spark1"] = {"gptoss": buffer}
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open_node(app, pilot, "spark1")
        app.refresh_views(force=True)  # the finding the log line raises
        await pilot.pause()
        _assert_on_screen_unscrolled(screen, (*PANELS, "#spec"))
        tail = screen.query_one("#tail", LogView)
        assert tail.is_vertical_scroll_end and tail.reader.shown[-1].signature


async def test_lines_arriving_in_the_tail_follow_it_to_the_end_without_reflowing_the_screen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tail has no scrollbar, so its size is nobody's layout: a new line moves it, nothing more."""
    app = fed_app()
    buffer = LogBuffer()
    _requests_done(buffer, range(40))
    app.monitor.log_buffers["spark1"] = {"gptoss": buffer}
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open_node(app, pilot, "spark1")
        tail = screen.query_one("#tail", LogView)
        await wait_until(lambda: bool(tail.reader.shown) and tail.is_vertical_scroll_end, what="the tail at its end")
        layouts: list[str] = []
        original = Widget.refresh

        def refresh(widget: Widget, *regions: Region, **options: bool) -> Widget:
            if options.get("layout"):
                layouts.append(f"{type(widget).__name__}#{widget.id}")
            return original(widget, *regions, **options)

        monkeypatch.setattr(Widget, "refresh", refresh)
        _requests_done(buffer, range(40, 60))
        app.refresh_views(force=True)
        await wait_until(
            lambda: tail.is_vertical_scroll_end and tail.virtual_size.height >= 60, what="the tail at its new end"
        )
        await pilot.pause()
        assert "request 59 done" in tail.reader.shown[-1].text
        assert [w for w in layouts if w.startswith("LogView")] == []


@pytest.mark.slow
async def test_at_80x24_no_two_panels_overlap_and_the_memory_ledger_scrolls_into_view(incident: SparkApp) -> None:
    app = incident
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open_spark1(app, pilot)
        assert screen.has_class("-cols-1")
        shown = [
            w
            for w in screen.query("#title, #reasons, .panel, #tail-panel, KeyFooter")
            if w.display and _visible(w).area
        ]
        assert {"findings", "tail-panel"} <= {w.id for w in shown}
        for first, second in itertools.combinations(shown, 2):
            overlap = _visible(first).intersection(_visible(second))
            assert not overlap.area, f"{first.id} overlaps {second.id}: {overlap}"
        upper = screen.query_one("#upper")
        memory = screen.query_one("#memory")
        upper.scroll_to_widget(memory, animate=False, immediate=True)
        await pilot.pause()
        assert _visible(memory).area > 0


async def test_a_tensor_parallel_worker_shows_no_numbers_of_its_own() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_node("spark4")
        await wait_until(lambda: isinstance(app.screen, NodeScreen), what="spark4's node screen")
        await pilot.pause()
        screen = app.screen
        worker = "qwen235 is a tensor-parallel worker"
        assert worker in _plain(screen.query_one("#throughput", Static))
        assert worker in _plain(screen.query_one("#latency", Static))
        assert _plain(screen.query_one("#kv", Static)).startswith("KV cache  –")
        assert not screen.query_one("#spec").display


async def test_memory_figures_read_over_a_lost_ssh_connection_say_they_are_the_last_good_reading() -> None:
    app = fed_app()
    problem = "ssh: spark1 (192.168.1.11:22): connection refused"
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_node("spark1")
        await wait_until(lambda: isinstance(app.screen, NodeScreen), what="spark1's node screen")
        await pilot.pause()
        screen = app.screen
        assert "last good reading" not in _plain(screen.query_one("#memory", Static))
        app.monitor.host(HostUpdate(node="spark1", t=NOW + 1, problem=problem, connection_lost=True))
        app.refresh_views(force=True)
        await pilot.pause()
        assert f"last good reading; now {problem}" in _plain(screen.query_one("#memory", Static))


async def test_at_80x24_a_findings_wrapped_evidence_keeps_its_indent() -> None:
    """The evidence under a finding's title wrapped to the panel's left edge at 80 columns; its rows keep
    the four columns of indent of its first."""
    app = with_failed_start_log(fed_app(render_every_s=ONE_TICK_S))  # its start failed on too little memory
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("1")
        panel = app.screen.query_one("#findings", Static)
        await wait_until(lambda: panel.display and panel.content_region.height > 0, what="spark1's findings")
        await pilot.pause()
        region = panel.content_region
        rows = [row[region.x : region.right].rstrip() for row in screen_rows(app)[region.y : region.bottom]]
        evidence = next(i for i, row in enumerate(rows) if "ValueError" in row)
        wrapped = [row for row in rows[evidence + 1 :] if row and not row.lstrip().startswith("fix:")]
        assert rows[evidence].startswith("    ") and wrapped, rows  # the evidence wraps at 80 columns
        for row in wrapped[:2]:
            assert row.startswith("    ") and row[4] != " ", rows
