"""The roofline on screen: the node screen's throughput panel carries it beside decode tok/s, the
fleet table a BW column where the terminal is wide enough; "–" and the flag to add when vLLM gives no
estimate. The numbers are the model's (model/roofline.py); these tests check they are drawn."""

from __future__ import annotations

import io
import re

from rich.console import Console
from textual.widgets import Static

from sparktui.model.observations import NodeObservation, ServerObservation
from sparktui.model.units import fmt_pct, roofline_parts
from sparktui.ui.app import SparkApp
from sparktui.ui.node_screen import NodeScreen
from sparktui.ui.table import RowTable
from tests.support.fixture_fleet import scenario_scrapes
from tests.support.ui_data import NOW, _ok, fed_app
from tests.support.wait import wait_until


def _plain(widget: Static) -> str:
    console = Console(width=150, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def _with_counters(body: str, scale: float) -> str:
    """A 0.33 scrape (taken without the flag) as a server with it would answer: the counters moved."""
    values = {"flops": 3e12, "read_bytes": 1.2e11, "write_bytes": 4e9}
    for name, per_s in values.items():
        body = re.sub(rf"(vllm:estimated_{name}_per_gpu_total\{{[^}}]*\}}) 0\.0", rf"\g<1> {per_s * scale}", body)
    return body


def _serving_with_the_flag(app: SparkApp) -> None:
    """Two more polls of spark1, its counters moving from 0: the window's increase over its span."""
    steady = scenario_scrapes("mtp2-steady")
    for step, t in enumerate((NOW + 1, NOW + 2)):
        app.clock.t = t  # type: ignore[attr-defined]
        body = _with_counters(steady[step], t)
        observation = ServerObservation("gptoss", _ok("u"), _ok("u", body))
        app.state.apply(NodeObservation(node="spark1", t=t, wall=1e9 + t, vllm=(observation,)))
    app.refresh_views(force=True)


async def test_the_node_screen_shows_the_roofline_beside_decode() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        _serving_with_the_flag(app)
        app.open_node("spark1")
        await wait_until(lambda: isinstance(app.screen, NodeScreen), what="spark1's node screen")
        await pilot.pause()
        roofline = next(v for v in app.views if v.name == "spark1").instances[0].roofline
        assert roofline is not None and roofline.memory_share is not None
        shown = _plain(app.screen.query_one("#throughput", Static))
        for part in roofline_parts(roofline):
            assert part in shown
        assert "generation" in shown.split("memory")[0]  # beside decode tok/s, after it


async def test_without_the_flag_the_node_screen_says_to_add_it() -> None:
    app = fed_app()  # its scrapes were taken from a server without --enable-mfu-metrics
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_node("spark1")
        await wait_until(lambda: isinstance(app.screen, NodeScreen), what="spark1's node screen")
        await pilot.pause()
        shown = " ".join(_plain(app.screen.query_one("#throughput", Static)).split())
        assert "memory bandwidth – (start vLLM with --enable-mfu-metrics)" in shown


async def test_the_fleet_table_has_the_share_where_it_fits() -> None:
    app = fed_app()
    async with app.run_test(size=(170, 48)) as pilot:
        _serving_with_the_flag(app)
        await pilot.pause()
        table = app.screen.query_one("#fleet", RowTable)
        column = [c.key for c in table.columns].index("bw")
        roofline = next(v for v in app.views if v.name == "spark1").instances[0].roofline
        assert roofline is not None and roofline.memory_share is not None
        cells = {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[column]) for i in range(table.row_count)}
        assert cells["spark1"] == fmt_pct(roofline.memory_share, 0) != "–"
        assert cells["spark2"] == "–"  # its server counts nothing: no share, never 0 %
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert "bw" not in [c.key for c in table.columns]  # at 160 the other columns fill the width
