"""The fabric on screen: a job's ranks side by side below the fleet table when one of them is
highlighted, and the link with its rates in the node screen's GPU panel (tests/data/fabric's two mlx5
readings, 10 s apart, as spark4's fabric)."""

from __future__ import annotations

import io

from rich.console import Console
from textual.widgets import Static

from sparktui.model.observations import HostUpdate
from sparktui.ui.app import SparkApp
from sparktui.ui.node_screen import NodeScreen
from tests.support.fabric import ETHTOOL, fabric_answer
from tests.support.ui_data import NOW, fed_app


def _plain(widget: Static) -> str:
    console = Console(width=150, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def _with_fabric() -> SparkApp:
    app = fed_app()
    for t, text in ((NOW - 10.0, ETHTOOL[0]), (NOW, ETHTOOL[1])):
        app.state.apply_host(HostUpdate("spark4", t, fabric=fabric_answer(text)))
    app.refresh_views()
    return app


async def test_the_fleet_detail_shows_the_jobs_ranks_side_by_side() -> None:
    app = _with_fabric()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("down", "down")  # spark3, the job's head
        await pilot.pause()
        detail = _plain(app.screen.query_one("#detail", Static))
    assert "job qwen235-tp2  –" in detail  # the head refuses connections: its tokens are not known
    assert "spark3 head       –      –  –" in detail
    assert "spark4 worker     –      –  13.0 Gb/s 6.5 %" in detail


async def test_the_node_screen_shows_the_link_with_its_rates() -> None:
    app = _with_fabric()
    async with app.run_test(size=(160, 48)) as pilot:
        app.push_screen(NodeScreen("spark4"))
        await pilot.pause()
        gpu = _plain(app.screen.query_one("#gpu", Static))
    assert "link enp1s0f0np0  up  200 Gb/s" in gpu
    assert "rx 13.0 Gb/s  tx 12.8 Gb/s  6.5 % of the link" in gpu
    assert "drops 364/s  pauses 1,840/s" in gpu
