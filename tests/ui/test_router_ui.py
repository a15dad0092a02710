"""A llama.cpp router on the screens: the fleet row keeps "N/M models loaded" and gains its models'
summed rates; the node screen lists each loaded model's own numbers under where each model is."""

from __future__ import annotations

import io

from rich.console import Console
from textual.widgets import Static

from sparktui.ui.app import SparkApp, make_app
from sparktui.ui.node_screen import NodeScreen
from sparktui.ui.table import RowTable
from tests.support.router_data import FLEET, child_metrics, models_body, ok, router_observation
from tests.support.ui_data import Clock
from tests.support.wait import wait_until


def router_app() -> SparkApp:
    """Two polls 10 s apart: a generated 300 tokens and took 150 prompt tokens, b (asleep) nothing."""
    clock = Clock()
    app = make_app(FLEET, collect=False, clock=clock)
    models = models_body(a="loaded", b="sleeping", c="unloaded")
    for t, a in ((0.0, child_metrics(0, 0, 0)), (10.0, child_metrics(100, 50, 300, processing=1))):
        clock.t = t
        app.state.apply(router_observation(t, models, (("a", ok(a)), ("b", ok(child_metrics(5, 0, 20))))))
        app.refresh_views()
    return app


def _plain(widget: Static) -> str:
    console = Console(width=150, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def test_the_fleet_row_keeps_its_models_loaded_and_gains_their_rates() -> None:
    app = router_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#fleet", RowTable)
        keys = [c.key for c in table.columns]
        (row,) = [table.get_row_at(i) for i in range(table.row_count)]
        assert str(row[keys.index("model")]) == "1/3 models loaded"
        assert str(row[keys.index("gen")]).startswith("30.0")


async def test_the_node_screen_lists_each_loaded_models_own_numbers() -> None:
    app = router_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_node("box")
        await wait_until(lambda: isinstance(app.screen, NodeScreen), what="box's screen")
        await pilot.pause()
        text = " ".join(_plain(app.screen.query_one("#requests", Static)).split())
        assert "models: a loaded, b sleeping, c unloaded" in text
        assert "a: generation 30.0 tok/s prompt 15.0 tok/s running 1 waiting 0" in text
        assert "b: generation 0.00 tok/s prompt 0.00 tok/s running 0 waiting 0" in text
