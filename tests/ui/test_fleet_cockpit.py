"""The fleet screen at a glance: levels on the cells, banners by severity, columns that use the
width, charts and lists in the spare rows, and totals that say "–" rather than 0."""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text
from textual.color import Color
from textual.widget import Widget
from textual.widgets import Static

from sparktui.diagnosis.alerts import default_rules
from sparktui.model.replicas import model_replicas
from sparktui.model.specs import AlertRuleSpec, Thresholds
from sparktui.model.units import NO_DATA, fmt_number, fmt_seconds
from sparktui.ui.app import SparkApp, make_app
from sparktui.ui.chart import ChartPanel
from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.kiosk_screen import BannerRow
from sparktui.ui.table import RowTable
from tests.support.ui_data import NOW, ONE_TICK_S, Clock, fed_app, feed, fire_node_down, fleet_spec
from tests.support.wait import wait_until


def _app(**update: object) -> SparkApp:
    clock = Clock()
    app = make_app(fleet_spec().model_copy(update=update), collect=False, clock=clock)
    feed(app, clock)
    return app


def _cell(app: SparkApp, node: str, column: str) -> Text | str:
    table = app.screen.query_one("#fleet", RowTable)
    row = next(i for i in range(table.row_count) if table.row_keys[i].startswith(f"{node}/"))
    index = [c.key for c in table.columns].index(column)
    return table.get_row_at(row)[index]


async def test_a_number_past_its_threshold_is_coloured_and_one_within_is_not() -> None:
    app = _app(thresholds=Thresholds(kv_usage_warn=0.01, waiting_warn=1000))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        kv = _cell(app, "spark1", "kv")
        assert isinstance(kv, Text) and app.colours["status-warn"] in str(kv.style)
    calm = _app(thresholds=Thresholds(kv_usage_warn=1.0))
    async with calm.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        kv = _cell(calm, "spark1", "kv")
        assert not isinstance(kv, Text) or calm.colours["status-warn"] not in str(kv.style)


async def test_critical_alerts_go_to_the_red_banner_and_warnings_to_the_amber_one() -> None:
    rules = (
        AlertRuleSpec(name="node-down", metric="node_down", for_s=30.0, severity="crit"),
        AlertRuleSpec(name="gpu-warm", metric="gpu_temp_c", above=1.0, for_s=0.0),
    )
    app = _app(alerts=rules)
    fire_node_down(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        crit = str(app.screen.query_one("#crit-banner", Static).content)
        warn = str(app.screen.query_one("#warn-banner", Static).content)
        assert "CRIT spark3 node-down" in crit and "gpu-warm" not in crit
        assert "WARN spark1 gpu-warm" in warn and "node-down" not in warn
        assert app.screen.query_one("#warn-banner").has_class("shown")


async def test_the_model_column_grows_with_the_terminal() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        narrow = next(c.width for c in app.screen.query_one("#fleet", RowTable).columns if c.key == "model")
        await pilot.resize_terminal(200, 60)
        await pilot.pause()
        wide = next(c.width for c in app.screen.query_one("#fleet", RowTable).columns if c.key == "model")
        assert wide > narrow
        table = app.screen.query_one("#fleet", RowTable)
        assert sum(c.width + 2 for c in table.columns) <= 200


async def test_charts_fill_a_tall_screen_and_give_way_on_a_short_one() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        charts = screen.query_one("#charts")
        assert charts.display and charts.region.height >= 10
        assert "now" in screen.query_one("#gen-chart", ChartPanel).plain
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert not screen.query_one("#charts").display
        table = screen.query_one("#fleet", RowTable)
        assert table.region.height >= table.row_count + 1  # every row still shows


async def test_open_findings_name_the_key_that_fixes_them() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        findings = [f for found in app.findings.values() for f in found]
        listed = str(app.screen.query_one("#open-findings", Static).content)
        if findings:
            assert findings[0].title in listed
        else:
            assert "none open" in listed


async def test_totals_say_dash_when_no_node_has_rates_and_count_one_node_in_the_singular() -> None:
    spec = fleet_spec()
    spec = spec.model_copy(update={"nodes": spec.nodes[:1]})
    app = make_app(spec, collect=False, clock=Clock())
    async with app.run_test(size=(160, 48)) as pilot:
        app.clock.t = NOW  # type: ignore[attr-defined]
        app.refresh_views()
        await pilot.pause()
        summary = str(app.screen.query_one("#summary", Static).content)
        assert "1 node " in summary
        assert "generation – tok/s" in summary or "generation –" in summary
        assert "0.00" not in summary


async def test_a_tensor_parallel_worker_row_says_dash_not_blank() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        for column in ("gen", "reqs", "kv", "ttft", "accept"):
            assert str(_cell(app, "spark4", column)) == "–", column
        assert str(_cell(app, "spark4", "model")) == "(TP worker)"


async def test_a_node_silent_past_its_stale_limit_shows_no_live_looking_numbers() -> None:
    """A powered-off node kept showing 56°C 60W, a full memory bar and Age 0s (issue 18)."""
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert "°C" in str(_cell(app, "spark1", "gpu")) and "G" in str(_cell(app, "spark1", "mem"))
        app.clock.t = NOW + 120  # type: ignore[attr-defined]  # nothing answered for two minutes
        app.refresh_views()
        await pilot.pause()
        assert str(_cell(app, "spark1", "gpu")) == "–"
        assert str(_cell(app, "spark1", "mem")) == "–"
        age = _cell(app, "spark1", "age")
        assert str(age).startswith("2m") and isinstance(age, Text) and app.colours["status-warn"] in str(age.style)


async def test_without_colour_the_memory_parts_have_their_own_shades(monkeypatch: pytest.MonkeyPatch) -> None:
    """NO_COLOR made every memory segment the same grey (issue 18): each part has its own fill."""
    from sparktui.ui.kiosk_screen import MemoryLine

    monkeypatch.setenv("NO_COLOR", "1")
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert app.no_color
        bar = str(_cell(app, "spark1", "mem")).split(" ")[0]
        assert len(set(bar)) >= 2, bar  # vLLM █ beside cache ▒ (and the rest), not one block
    monkeypatch.setenv("NO_COLOR", "1")
    kiosk = fed_app(kiosk=True)
    async with kiosk.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        drawn = [line.render().plain for line in kiosk.screen.query(MemoryLine) if line.ledger is not None]
        assert drawn and all(len(set(text) & set("█▓▒░·")) >= 2 for text in drawn)


def _row_segments(app: SparkApp, node: str) -> list[tuple[str, Any]]:
    """The drawn segments (text, style) of ``node``'s first row of the fleet table."""
    table = app.screen.query_one("#fleet", RowTable)
    row = next(i for i in range(table.row_count) if table.row_keys[i].startswith(f"{node}/"))
    strip = app.screen._compositor.render_strips()[table.region.y + 1 + row]  # under the header
    return [(segment.text, segment.style) for segment in strip]


@pytest.mark.parametrize("no_color", [True, False], ids=["NO_COLOR", "colour"])
async def test_without_colour_the_down_row_is_the_one_that_stands_out(
    monkeypatch: pytest.MonkeyPatch, no_color: bool
) -> None:
    """Under NO_COLOR the down row was dimmed (its red a grey no brighter than green, its model dim): its
    name and status are in reverse video now, and no other row is; with colour, the status colour does it."""
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert app.no_color is no_color
        status, name = _cell(app, "spark3", "status"), _cell(app, "spark3", "node")
        assert isinstance(status, Text) and isinstance(name, Text) and "down" in status.plain
        assert ("reverse" in str(status.style)) is no_color and ("reverse" in str(name.style)) is no_color
        model = _cell(app, "spark3", "model")
        assert (isinstance(model, Text) and app.colours["dim"] in str(model.style)) is not no_color
        up = _cell(app, "spark1", "status")
        assert isinstance(up, Text) and "reverse" not in str(up.style)
        # as the terminal gets it: the down row's status drawn reversed, no healthy row's anything
        drawn_down = [style for text, style in _row_segments(app, "spark3") if "down" in text]
        assert drawn_down and all(bool(style and style.reverse) is no_color for style in drawn_down)
        assert not any(style and style.reverse for _, style in _row_segments(app, "spark1"))


async def test_the_kiosk_banner_is_amber_for_warnings_and_red_once_anything_is_down() -> None:
    """WARN used the same red banner as CRIT (issue 18), and once anything was critical every line was
    red (issue 36): each line has its own severity's colour."""
    spec = fleet_spec()
    warm = (AlertRuleSpec(name="gpu-warm", metric="gpu_temp_c", above=1.0, for_s=0.0),)
    clock = Clock()
    two = spec.model_copy(update={"nodes": spec.nodes[:2], "alerts": warm})  # spark1 and spark2, both up
    serving_app = make_app(two, collect=False, clock=clock, kiosk=True)
    feed(serving_app, clock)
    async with serving_app.run_test(size=(160, 48)) as pilot:
        serving_app.refresh_views()
        await pilot.pause()
        amber = Color.parse(serving_app.colours["status-warn"])
        rows = _banner_rows(serving_app)
        assert "WARN spark1 gpu-warm" in str(rows[0].content)
        assert all(r.has_class("warn") and r.styles.background == amber for r in rows)
    clock = Clock()
    down = make_app(spec.model_copy(update={"alerts": default_rules() + warm}), collect=False, clock=clock, kiosk=True)
    feed(down, clock)
    fire_node_down(down)  # spark3's node-down fires beside spark1's warning
    async with down.run_test(size=(160, 48)) as pilot:
        down.refresh_views()
        await pilot.pause()
        red, amber = Color.parse(down.colours["status-crit"]), Color.parse(down.colours["status-warn"])
        rows = _banner_rows(down)
        assert "spark3 DOWN" in str(rows[0].content) and rows[0].styles.background == red
        assert any("CRIT spark3 node-down" in str(r.content) and r.styles.background == red for r in rows)
        warned = [r for r in rows if str(r.content).startswith("WARN")]
        assert warned and all(r.styles.background == amber != red for r in warned)


def _banner_rows(app: SparkApp) -> list[BannerRow]:
    banner = app.screen.query_one("#kiosk-banner")
    assert banner.has_class("shown")
    return [r for r in banner.query(BannerRow) if r.has_class("shown")]


async def test_a_model_on_two_nodes_gets_its_merged_latency_and_its_slowest_replica() -> None:
    # spark1 and spark2 serve the same model (their scrapes' model_name): two replicas of it.
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        (found,) = model_replicas(app.views)
        ttft = found.latency["ttft"]
        slowest = found.slowest
        assert slowest is not None and slowest.ttft is not None
        line = str(app.screen.query_one("#replicas", Static).content)
        assert app.screen.query_one("#replicas").display
        assert line.startswith("Qwen3.6-35B-A3B-NVFP4 on 2 replicas")
        assert f"p90 {fmt_seconds(ttft.p90, ttft.floor)}" in line
        assert f"over {fmt_number(ttft.count)} req" in line
        assert f"slowest {slowest.node} p90 {fmt_seconds(slowest.ttft.p90, slowest.ttft.floor)}" in line


async def test_a_model_served_once_adds_no_replica_line() -> None:
    app = _app(nodes=fleet_spec().nodes[:1])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert model_replicas(app.views) == ()
        assert not app.screen.query_one("#replicas").display


async def test_a_new_tick_redraws_the_summary_and_charts_without_reflowing_the_screen() -> None:
    """A panel's update reflows the whole screen when it asks for a layout: the fixed-height panels
    (the summary, the charts) never ask; the replica lines (auto height) only when their height changes,
    and then the panel takes its new height."""
    clock = Clock()
    # No render tick but the test's: one would show the replicas' own lines between the test's steps.
    app = make_app(fleet_spec(), collect=False, clock=clock, render_every_s=ONE_TICK_S)
    feed(app, clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        panels = ("#summary", "#gen-chart", "#ttft-chart", "#replicas")
        # Laid out first: a panel not yet laid out (no width) is updated with a layout, whatever its content.
        await wait_until(lambda: all(screen.query_one(p).content_size.width > 0 for p in panels), 10.0, what="laid out")
        updated: list[str] = []
        layouts: list[str] = []
        for selector in panels:
            panel = screen.query_one(selector)

            def refresh(*regions: Any, _panel: Widget = panel, _id: str = selector, **options: Any) -> Widget:
                updated.append(_id)
                if options.get("layout"):
                    layouts.append(_id)
                return type(_panel).refresh(_panel, *regions, **options)

            panel.refresh = refresh  # type: ignore[method-assign]
        clock.t += 2.0  # a tick later: the charts' span grows, so they redraw
        app.refresh_views()
        await pilot.pause()
        assert {"#gen-chart", "#ttft-chart"} <= set(updated), updated
        assert layouts == [], layouts

        replicas = screen.query_one("#replicas", Static)
        screen._show("#replicas", Text("model a on 2 replicas\nmodel b on 2 replicas"))
        await pilot.pause()
        assert "#replicas" in layouts and replicas.region.height == 2
        layouts.clear()
        screen._show("#replicas", Text("model a on 3 replicas\nmodel b on 2 replicas"))
        await pilot.pause()
        assert layouts == [] and replicas.region.height == 2
        assert "model a on 3 replicas" in str(replicas.render())


@pytest.mark.parametrize("width", [80, 160, 220])
async def test_no_cell_of_the_fleet_table_is_blank(width: int) -> None:
    """A cell with nothing to say says ``–`` (a node with no side services, one with no findings): a blank
    cell reads as cut or not yet drawn."""
    app = fed_app()
    async with app.run_test(size=(width, 48)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#fleet", RowTable)
        keys = [c.key for c in table.columns]
        assert {"svc", "find"} <= set(keys) or width < 160
        for row in range(table.row_count):
            for key, cell in zip(keys, table.get_row_at(row), strict=True):
                shown = cell.plain if isinstance(cell, Text) else str(cell)
                assert shown.strip(), f"{table.row_keys[row]}: {key} is blank"
        svc = _cell(app, "spark2", "svc") if "svc" in keys else NO_DATA
        assert svc == NO_DATA or width < 160  # spark2 runs no side service
