"""The log view (``l`` on the node screen) with Pilot: search and its highlight, n/N, follow, wrap, the
instance filter and the failure-signature highlight, on log buffers filled the way the stream fills them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rich.segment import Segment
from textual.widgets import Static

from sparktui.model.logbuffer import KERNEL_LOG, LogBuffer
from sparktui.ui.app import SparkApp
from sparktui.ui.log_screen import LogScreen, LogView
from sparktui.ui.node_screen import NodeScreen
from tests.support.ui_data import fed_app
from tests.support.wait import wait_until

T0 = datetime(2026, 11, 26, 10, 0, 0, tzinfo=UTC)
SIGNATURE = (
    "ValueError: Free memory on device cuda:0 (4.75/119.67 GiB) on startup is less than desired GPU memory "
    "utilization (0.9, 107.7 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
)


def _buffer(lines: int, start: int = 0) -> LogBuffer:
    buffer = LogBuffer()
    for n in range(start, start + lines):
        buffer.append(T0 + timedelta(seconds=n), f"INFO request {n} done" + (" needle" if n % 25 == 7 else ""))
    return buffer


def _app(buffers: dict[str, LogBuffer]) -> SparkApp:
    app = fed_app()
    app.monitor.log_buffers["spark1"] = buffers  # nothing streamed in these tests
    return app


async def _open_logs(app: SparkApp, pilot: object) -> LogScreen:
    await pilot.press("enter", "l")  # type: ignore[attr-defined]
    await wait_until(lambda: isinstance(app.screen, LogScreen), what="the log view")
    screen = app.screen
    assert isinstance(screen, LogScreen)
    await pilot.pause()  # type: ignore[attr-defined]
    return screen


def _rows(view: LogView) -> list[list[Segment]]:
    """The view's rows as drawn now, segment by segment."""
    return [list(view.render_line(y)) for y in range(view.scrollable_content_region.height)]


def _plain(row: list[Segment]) -> str:
    return "".join(segment.text for segment in row)


def _styled(row: list[Segment], text: str, colour: str) -> bool:
    """Whether ``text`` is drawn in one segment whose style carries ``colour``."""
    return any(text in s.text and s.style is not None and colour.lower() in str(s.style).lower() for s in row)


async def test_search_highlights_every_match_and_n_and_shift_n_step_through_them() -> None:
    app = _app({"gptoss": _buffer(300)})
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _open_logs(app, pilot)
        view = screen.view
        await pilot.press("slash", *"needle", "enter")
        await pilot.pause()
        reader = screen.reader
        assert len(reader.matches) == 12  # lines 7, 32, … 282
        first = reader.current_match
        assert first is not None and reader.shown[first.line].line.text.endswith("282 done needle")
        visible = [row for row in _rows(view) if "needle" in _plain(row)]
        assert visible and all(
            _styled(row, "needle", app.colours["status-warn"]) or _styled(row, "needle", app.colours["status-loading"])
            for row in visible
        )
        assert not reader.follow.on  # reading a match is reading the past
        await pilot.press("N")
        await pilot.pause()
        match = reader.current_match
        assert match is not None and reader.shown[match.line].line.text == "INFO request 257 done needle"
        assert any("request 257 done needle" in _plain(row) for row in _rows(view))  # scrolled to it
        assert any(_styled(row, "needle", app.colours["status-loading"]) for row in _rows(view) if "257" in _plain(row))
        await pilot.press("n", "n")
        await pilot.pause()
        last = reader.current_match
        assert (
            last is not None and reader.shown[last.line].line.text == "INFO request 7 done needle"
        )  # round to the first
        assert any("request 7 done needle" in _plain(row) for row in _rows(view))
        title = str(screen.query_one("#log-title", Static).content)
        assert 'search "needle": 1 of 12 matches' in title


async def test_escape_cancels_the_search_then_clears_it_then_goes_back_to_the_node() -> None:
    app = _app({"gptoss": _buffer(50)})
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _open_logs(app, pilot)
        await pilot.press("slash", *"needle", "enter", "slash", *"xyz")
        await pilot.pause()
        assert screen.reader.query == "xyz"  # the field opens with the search so far, selected: typing replaces it
        await pilot.press("escape")
        assert screen.reader.query == "needle" and app.focused is None
        await pilot.press("escape")
        assert screen.reader.query == "" and screen.reader.matches == []
        await pilot.press("escape")
        await wait_until(lambda: isinstance(app.screen, NodeScreen), what="back on the node screen")


async def test_follow_stops_on_scroll_up_and_end_brings_it_back_with_the_new_lines() -> None:
    buffer = _buffer(200)
    app = _app({"gptoss": buffer})
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _open_logs(app, pilot)
        view = screen.view
        assert screen.reader.follow.on and view.is_vertical_scroll_end
        assert "INFO request 199 done" in _plain(_rows(view)[-1])
        await pilot.press("pageup")
        assert not screen.reader.follow.on
        top = view.scroll_y
        for n in range(200, 210):
            buffer.append(T0 + timedelta(seconds=n), f"INFO request {n} done")
        app.refresh_views(force=True)
        await pilot.pause()
        assert view.scroll_y == top  # the reader's place is kept
        assert "10 new lines" in str(screen.query_one("#log-title", Static).content)
        await pilot.press("end")
        await pilot.pause()
        assert screen.reader.follow.on and view.is_vertical_scroll_end
        assert "INFO request 209 done" in _plain(_rows(view)[-1])
        await pilot.press("up")
        assert not screen.reader.follow.on
        await pilot.press("F")
        assert screen.reader.follow.on
        await pilot.press("k")  # vim's keys too
        assert not screen.reader.follow.on
        await pilot.press("G")
        assert screen.reader.follow.on and view.is_vertical_scroll_end


async def test_wrap_toggles_between_cut_lines_that_scroll_sideways_and_wrapped_rows() -> None:
    buffer = LogBuffer()
    buffer.append(T0, "start")
    buffer.append(T0, "long " + "x" * 300 + " END")
    app = _app({"gptoss": buffer})
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open_logs(app, pilot)
        view = screen.view
        assert not view.wrap
        assert view.virtual_size.width > view.scrollable_content_region.width  # cut, scrolls sideways
        assert not any("END" in _plain(row) for row in _rows(view))
        await pilot.press("e")
        await pilot.pause()
        assert view.wrap
        rows = [_plain(row).rstrip() for row in _rows(view) if _plain(row).strip()]
        assert len(rows) > 2 and rows[-1].endswith("END")  # the long line takes several rows
        assert "wrap on" in str(screen.query_one("#log-title", Static).content)
        await pilot.press("e")
        await pilot.pause()
        assert not view.wrap and not any("END" in _plain(row) for row in _rows(view))


async def test_a_wrapped_line_goes_on_under_its_message_and_json_breaks_between_its_tokens() -> None:
    body = '{"model":"RedHatAI/Qwen3.6-35B-A3B-NVFP4","messages":[{"role":"user","content":"Hi"}],"max_tokens":16}'
    buffer = LogBuffer()
    buffer.append(T0, f"INFO request {body} {body} END")
    app = _app({"gptoss": buffer})
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open_logs(app, pilot)
        view = screen.view
        await pilot.press("e")
        await pilot.pause()
        rows = [_plain(row).rstrip() for row in _rows(view) if _plain(row).strip()]
        indent = len(screen.reader.shown[0].text) - len(screen.reader.shown[0].line.text)  # "HH:MM:SS "
        assert (len(rows) > 2 and rows[0].endswith("INFO request")) or '"model"' in rows[0], rows
        assert all(row.startswith(" " * indent) and row[indent] != " " for row in rows[1:]), rows
        assert sum('"max_tokens":' in row for row in rows) == 2 and rows[-1].endswith("END"), rows
        await pilot.press("slash", *"max_tokens", "enter")  # a match on a later row of the line is shown
        await pilot.pause()
        assert any("max_tokens" in _plain(row) for row in _rows(view))


@pytest.mark.slow
async def test_signature_lines_are_drawn_in_the_critical_colour_and_others_are_not() -> None:
    buffer = LogBuffer()
    buffer.append(T0, "INFO Starting vLLM API server on http://0.0.0.0:8000")
    buffer.append(T0, SIGNATURE)
    app = _app({"gptoss": buffer})
    async with app.run_test(size=(160, 30)) as pilot:
        screen = await _open_logs(app, pilot)
        rows = _rows(screen.view)
        crit = app.colours["status-crit"]
        assert not _styled(rows[0], "Starting vLLM", crit)
        assert _styled(rows[1], "Free memory on device", crit)


async def test_the_instance_filter_cycles_through_the_instances_of_the_node() -> None:
    app = _app({"gptoss": _buffer(5), "asr": _buffer(5, start=100)})
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _open_logs(app, pilot)
        assert {e.instance for e in screen.reader.shown} == {"gptoss", "asr"}
        assert "all instances" in str(screen.query_one("#log-title", Static).content)
        await pilot.press("i")
        await pilot.pause()
        assert {e.instance for e in screen.reader.shown} == {"gptoss"}
        assert all(_plain(row).startswith("[gptoss]") for row in _rows(screen.view) if _plain(row).strip())


async def test_the_instance_key_is_off_when_the_node_has_one_instance() -> None:
    app = _app({"gptoss": _buffer(5)})
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _open_logs(app, pilot)
        assert "next_instance" not in {b.binding.action for b in screen.active_bindings.values() if b.enabled}
        await pilot.press("i")
        assert screen.reader.only is None


async def test_b_shows_the_kernel_log_alone_and_every_log_again() -> None:
    kernel = LogBuffer()
    kernel.append(T0 + timedelta(seconds=2), "NVRM: Xid (PCI:000f:01:00): 43, pid=4127, name=python3, Ch 00000008")
    app = _app({"gptoss": _buffer(5), KERNEL_LOG: kernel})
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _open_logs(app, pilot)
        assert {e.instance for e in screen.reader.shown} == {"gptoss", KERNEL_LOG}
        await pilot.press("b")
        await pilot.pause()
        assert {e.instance for e in screen.reader.shown} == {KERNEL_LOG}
        assert "[kernel]" in str(screen.query_one("#log-title", Static).content)
        shown = [_plain(row) for row in _rows(screen.view) if _plain(row).strip()]
        assert len(shown) == 1 and shown[0].startswith("[kernel] ") and "Xid" in shown[0]
        await pilot.press("b")
        await pilot.pause()
        assert {e.instance for e in screen.reader.shown} == {"gptoss", KERNEL_LOG}


async def test_the_kernel_key_is_off_on_a_node_without_a_kernel_log() -> None:
    app = _app({"gptoss": _buffer(5), "asr": _buffer(5, start=100)})
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _open_logs(app, pilot)
        assert "kernel_log" not in {b.binding.action for b in screen.active_bindings.values() if b.enabled}
        await pilot.press("b")
        assert screen.reader.only is None
