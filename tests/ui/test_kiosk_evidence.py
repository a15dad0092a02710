"""The kiosk shows what its banner says (issue 36): the failing node's memory figures are the reading its
alerts and findings cite, and digits take the colour of the same thresholds as the fleet's cells."""

from __future__ import annotations

import re

from rich.style import Style
from textual.color import Color
from textual.widgets import Static

from sparktui.model.levels import Level, kv_level, memory_level, ttft_level
from sparktui.model.specs import Thresholds
from sparktui.model.status import State
from sparktui.model.units import fmt_gib
from sparktui.ui.app import SparkApp, make_app
from sparktui.ui.kiosk_screen import BannerRow, FigureCell, KioskScreen, MemoryLine, NodeTile
from sparktui.ui.render import LEVEL_VARIABLES
from sparktui.ui.screenshot import stepped_demo
from tests.support.ui_data import Clock, feed, fleet_spec

# The incident at 100 s: spark1's unit crash-loops (DOWN) while page cache holds its memory.
INCIDENT_S = 100.0


def _kiosk(app: SparkApp) -> KioskScreen:
    screen = app.screen
    assert isinstance(screen, KioskScreen)
    return screen


def _show_page(app: SparkApp, node: str) -> KioskScreen:
    screen = _kiosk(app)
    screen.page = 1 + [v.name for v in app.views].index(node)
    screen.update_views(app.views)
    return screen


async def test_the_failing_nodes_page_shows_the_memory_figure_its_banner_cites() -> None:
    """The banner said "MemAvailable 1.6 GiB" while the page's memory read "–": the page took its memory
    from the node only while its engine was up; the host's reading is fresh with the engine down."""
    async with (
        stepped_demo(theme="spark-dark", kiosk=True, scenario="incident", seconds=INCIDENT_S) as app,
        app.run_test(size=(160, 48)) as pilot,
    ):
        await pilot.pause()
        spark1 = next(v for v in app.views if v.name == "spark1")
        assert spark1.status.state is State.DOWN and spark1.host_memory is not None
        screen = _show_page(app, "spark1")
        await pilot.pause()
        banner = [str(r.content) for r in screen.query(BannerRow)]
        cited = [line for line in banner if "MemAvailable" in line]
        assert cited, banner
        memory = screen.query_one("#kiosk-node #fig-mem", FigureCell)
        assert memory.figure.text == fmt_gib(spark1.host_memory.mem_available)
        assert any(f"MemAvailable {memory.figure.text}" in line for line in cited), (memory.figure.text, cited)
        # Critical, so red, as the banner's line is; and the bar of where the memory went is drawn.
        assert memory_level(spark1.host_memory.mem_available, app.fleet.thresholds) is Level.CRIT
        assert memory.colour == app.colours["status-crit"]
        assert screen.query_one("#node-memory", MemoryLine).ledger is not None
        tile = screen.query_one("#tile-spark1 #fig-mem", FigureCell)  # the fleet page's tile says the same
        assert tile.figure == memory.figure
        # The memory figures the node's findings cite of this reading (MemAvailable, of the total, what
        # drop_caches frees, Shmem: the evidence line of launch-readiness, page-cache-blocks-start…) are
        # all on the page. A finding's evidence from an older reading (when it opened) is not this one.
        readings = [
            line.partition(" (at ")[0]
            for f in app.diagnosis.active("spark1")
            for line in f.evidence
            if line.startswith(f"MemAvailable {memory.figure.text} of ")
        ]
        assert readings, [f.evidence for f in app.diagnosis.active("spark1")]
        figures = str(screen.query_one("#node-memory-figures", Static).content)
        quoted = [re.findall(r"\d+\.\d GiB", line) for line in readings]
        assert all(len(cites) == 4 for cites in quoted), readings
        assert any(all(c in figures for c in cites) for cites in quoted), (readings, figures)


def _threshold_app(limits: Thresholds) -> SparkApp:
    clock = Clock()
    app = make_app(fleet_spec().model_copy(update={"thresholds": limits}), collect=False, clock=clock, kiosk=True)
    feed(app, clock)
    return app


def _number_colour(cell: FigureCell) -> Color:
    """The colour the cell's digits are drawn in, large or on one line (the bold part: the label is not)."""
    (style,) = {style for s in cell.render().spans if (style := Style.parse(str(s.style))).bold}
    assert style.color is not None
    return Color.from_rich_color(style.color)


async def test_digits_take_the_colour_of_the_thresholds_the_fleets_cells_use() -> None:
    """KV and TTFT figures past ``kv_usage_warn`` and ``ttft_p90_warn_s`` are amber and a memory figure
    under ``mem_available_crit_gib`` red, on the fleet page's tile and the node's page alike; within
    their thresholds they are plain."""
    hot = Thresholds(kv_usage_warn=0.01, ttft_p90_warn_s=0.001, mem_available_warn_gib=999, mem_available_crit_gib=998)
    calm = Thresholds(kv_usage_warn=1.0, ttft_p90_warn_s=3600)
    for limits, want in ((hot, (Level.WARN, Level.WARN, Level.CRIT)), (calm, (Level.OK, Level.OK, Level.OK))):
        app = _threshold_app(limits)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            spark1 = next(v for v in app.views if v.name == "spark1")
            instance = spark1.instances[0]
            ttft = instance.rates.latency.get("ttft") if instance.rates is not None else None
            assert spark1.host_memory is not None and instance.kv_usage is not None and ttft is not None
            # The levels the fleet's cells are coloured by.
            levels = (
                kv_level(instance.kv_usage, limits),
                ttft_level(ttft.p90, limits),
                memory_level(spark1.host_memory.mem_available, limits),
            )
            assert levels == want
            keys = ("#fig-kv", "#fig-ttft", "#fig-mem")
            tile = _kiosk(app).query_one("#tile-spark1", NodeTile)
            cells = [tile.query_one(key, FigureCell) for key in keys]
            screen = _show_page(app, "spark1")
            await pilot.pause()
            page = screen.query_one("#kiosk-node")
            cells += [page.query_one(key, FigureCell) for key in keys]
            for cell, level in zip(cells, levels + levels, strict=True):
                expected = app.colours[LEVEL_VARIABLES[level]] if level is not Level.OK else ""
                assert cell.colour == expected, (cell.id, level)
                if expected:
                    assert _number_colour(cell) == Color.parse(expected), (cell.id, level)
    assert app.colours["status-warn"] != app.colours["status-crit"]  # a warning amber, not the red of CRIT
