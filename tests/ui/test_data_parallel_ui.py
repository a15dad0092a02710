"""A data-parallel instance on the screens: the node screen's engine table (none for one engine), the
KV line of one kind with the busiest engine named, and the imbalance marker on the fleet row."""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text
from textual.widgets import Static

from sparktui.model.units import fmt_pct, fmt_rate, fmt_seconds
from sparktui.ui.app import SparkApp
from sparktui.ui.node_screen import NodeScreen
from sparktui.ui.render import IMBALANCED
from sparktui.ui.table import RowTable
from tests.support.dp_data import EXPECTED
from tests.support.ui_data import dp_fleet_app
from tests.support.wait import wait_until

ENGINES = EXPECTED["engines"]
PER_ENGINE = EXPECTED["window_first_to_last"]["per_engine"]
LAST = EXPECTED["last_scrape"]


def _plain(widget: Static, width: int = 150) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def _node(app: SparkApp, pilot: object, node: str) -> NodeScreen:
    app.open_node(node)
    await wait_until(lambda: isinstance(app.screen, NodeScreen) and app.screen.node == node, what=f"{node}'s screen")
    await pilot.pause()  # type: ignore[attr-defined]
    screen = app.screen
    assert isinstance(screen, NodeScreen)
    return screen


async def test_the_node_screen_shows_one_row_per_engine_with_the_imbalanced_ones_marked() -> None:
    app = dp_fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _node(app, pilot, "spark-dp")
        panel = screen.query_one("#engines", Static)
        assert panel.display
        assert screen.region.contains_region(panel.region) and screen.query_one("#upper").scroll_y == 0
        lines = _plain(panel, width=panel.content_region.width).splitlines()
        at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["engine", "gen"])
        assert "imbalanced: engine 0, 1 off" in " ".join(" ".join(lines[:at]).split())
        header, rows = lines[at].split(), [line.split() for line in lines[at + 1 :]]
        assert [row[0] for row in rows] == ENGINES
        for row in rows:
            engine = row[0]
            assert row[header.index("gen")] == fmt_rate(PER_ENGINE[engine]["generation_tokens_per_s"], "")
            assert row[header.index("share") - 1].startswith(IMBALANCED)  # "gen t/s" is two words
            assert fmt_pct(LAST["kv_cache_usage_perc"][engine]) in row
            line = " ".join(row)  # at 160 columns every column shows: the TTFT quantiles too
            for q in ("p50", "p90", "p99"):
                assert fmt_seconds(PER_ENGINE[engine][f"ttft_seconds_{q}"]) in line
            assert fmt_pct(PER_ENGINE[engine]["prefix_cache_hit_rate"]) in line
        assert screen.query_one("#tail-panel").region.height >= 7  # the log tail keeps room
        busiest = max(ENGINES, key=lambda e: LAST["kv_cache_usage_perc"][e])
        kv = _plain(screen.query_one("#kv", Static))
        assert f"busiest engine {busiest}: {fmt_pct(LAST['kv_cache_usage_perc'][busiest])}" in kv


async def test_a_single_engine_node_has_no_engine_table() -> None:
    app = dp_fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _node(app, pilot, "spark1")
        assert not screen.query_one("#engines", Static).display
        assert "busiest" not in _plain(screen.query_one("#kv", Static))


async def test_on_a_narrow_screen_the_engine_table_keeps_engine_generation_share_and_kv() -> None:
    app = dp_fleet_app()
    async with app.run_test(size=(90, 40)) as pilot:
        screen = await _node(app, pilot, "spark-dp")
        panel = screen.query_one("#engines", Static)
        text = _plain(panel, width=panel.content_region.width)
        lines = text.splitlines()
        at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["engine", "gen"])
        header, rows = lines[at], lines[at + 1 :]
        assert header.split()[:4] == ["engine", "gen", "t/s", "share"] and "KV" in header.split()
        assert [row.split()[0] for row in rows] == ENGINES
        assert all(len(line.rstrip()) <= panel.content_region.width for line in lines)


async def test_the_fleet_row_of_an_imbalanced_instance_is_marked_and_its_detail_names_the_engines() -> None:
    app = dp_fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#fleet", RowTable)
        index = [c.key for c in table.columns].index("gen")
        cells = {table.row_keys[i].split("/")[0]: table.get_row_at(i)[index] for i in range(table.row_count)}
        marked = cells["spark-dp"]
        assert isinstance(marked, Text) and marked.plain.endswith(IMBALANCED)
        assert app.colours["status-warn"] in str(marked.style)
        assert IMBALANCED not in str(cells["spark1"])
        while app.screen.highlighted() is None or app.screen.highlighted().name != "spark-dp":  # type: ignore[attr-defined]
            await pilot.press("down")
        await pilot.pause()
        detail = _plain(app.screen.query_one("#detail", Static))
        assert "2 engines, generation" in detail and "imbalanced: engine 0, 1" in detail
        assert "busiest engine 1" in detail
