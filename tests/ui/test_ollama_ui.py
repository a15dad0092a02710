"""An Ollama on the screens: the fleet row says "N/M models loaded"; the node screen lists each model
with what it holds, says why its numbers are "–", and shows what its models hold in the memory bar's
legend ("models held")."""

from __future__ import annotations

import io
import json

from rich.console import Console
from textual.widgets import Static

from sparktui.config import parse_config
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.ui.app import SparkApp, make_app
from sparktui.ui.node_screen import NodeScreen
from sparktui.ui.table import RowTable
from tests.support.ollama_data import CONFIG, EXPIRES, MODELS, PS, serving_sample
from tests.support.ui_data import Clock
from tests.support.wait import wait_until


def _ok(body: bytes) -> HttpResult:
    return HttpResult(url="http://10.0.0.1:11434", kind=FetchKind.OK, status=200, body=body, elapsed_s=0.01)


def ollama_app() -> SparkApp:
    """Two polls of an Ollama holding gemma3 (of gemma3 and qwen3:8b), on a GB10 serving host."""
    clock = Clock()
    app = make_app(parse_config(CONFIG, source="test.toml"), collect=False, clock=clock)
    for t in (0.0, 1.0):
        clock.t = t
        app.state.apply_host(HostUpdate(node="spark1", t=t, sample=serving_sample()))
        served = ServerObservation(
            name="ollama",
            health=_ok(b"Ollama is running"),
            metrics=_ok(json.dumps(PS).encode()),
            version=_ok(b'{"version":"0.12.6"}'),
            models=_ok(json.dumps(MODELS).encode()),
        )
        app.state.apply(NodeObservation(node="spark1", t=t, wall=EXPIRES - 60 + t, vllm=(served,)))
        app.refresh_views()
    return app


def _plain(widget: Static) -> str:
    console = Console(width=150, record=True, file=io.StringIO())
    console.print(widget.content)
    return " ".join(console.export_text().split())


async def test_the_fleet_row_says_how_many_models_are_loaded() -> None:
    app = ollama_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#fleet", RowTable)
        keys = [c.key for c in table.columns]
        (row,) = [table.get_row_at(i) for i in range(table.row_count)]
        assert str(row[keys.index("model")]) == "1/2 models loaded"


async def test_the_node_screen_says_what_each_model_holds_and_why_its_numbers_are_dashes() -> None:
    app = ollama_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_node("spark1")
        await wait_until(lambda: isinstance(app.screen, NodeScreen), what="spark1's screen")
        await pilot.pause()
        requests = _plain(app.screen.query_one("#requests", Static))
        assert "running – waiting –" in requests
        assert "Ollama exports no request or token counters" in requests
        assert "models: gemma3 loaded (6.1 GiB, 81% in GPU memory, context 4096), qwen3:8b unloaded" in requests
        assert "finished" not in requests
        throughput = _plain(app.screen.query_one("#throughput", Static))
        assert "generation – prompt – (Ollama exports no request or token counters)" in throughput
        assert "models held 6.1 GiB" in _plain(app.screen.query_one("#memory", Static))
