"""Frames a second, and what each one redraws, on the fleet screen and a node screen; a chart's cost.

    python benchmarks/bench_frames.py [--nodes 8] [--seconds 20] [--write docs/performance.md]

A fresh ``sparktui demo --serve-only --nodes N`` serves the endpoints; the dashboard (``make_app``,
live collection, headless ``App.run_test`` at 160x48 with its compositor) watches it, first with a
config of the vLLM endpoints alone (``bench_peers``'s equal work), then with everything, on the fleet
screen, then on the first node's screen. Over the window it counts the compositor's frames and every
widget's repaint requests by where they came from: the render tick (``refresh_views``), a poll's
arrival (``_draw_arrivals``) or anything else. A poll round should cost one frame.

Then one chart of the fleet screen (20 rows of 76 columns under a line of figures, in a bordered
panel), updated and rendered 200 times with new values, as Textual's ``Static`` would draw it and as
``ChartPanel`` (``sparktui/ui/chart.py``) draws it: CPU time a chart, the rows included.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
from _common import demo_fleet, machine_line, write_section
from bench_peers import vllm_only_config
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from sparktui.config import load_config
from sparktui.ui.app import SparkApp, make_app
from sparktui.ui.chart import ChartPanel
from sparktui.ui.render import column_rows

SECTION = "bench_frames"
HEADING = """## Frames a second on the fleet and node screens (issue 23)

What a poll round costs the screen: one frame, in which each row and panel that changed is drawn once.

Command: `python benchmarks/bench_frames.py --write docs/performance.md`"""
QUICK_ARGS = ("--seconds", "5")
WARMUP_S = 6.0
CHART_UPDATES = 200
CHART_ROWS, CHART_COLUMNS = 20, 76


class Counts:
    """Frames and repaint requests, by the draw they came from, while ``counting`` holds."""

    def __init__(self) -> None:
        self.frames = 0
        self.repaints: collections.Counter[str] = collections.Counter()
        self.draw = ["other"]
        self.counting = False

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        saved: list[tuple[type, str, Any]] = []

        def wrap(cls: type, name: str, make: Callable[[Any], Any]) -> None:
            original = getattr(cls, name)
            saved.append((cls, name, original))
            setattr(cls, name, make(original))

        def frame(original: Any) -> Any:
            def counted(screen: Screen[Any], *args: Any, **kwargs: Any) -> Any:
                self.frames += self.counting
                return original(screen, *args, **kwargs)

            return counted

        def drawing(kind: str) -> Callable[[Any], Any]:
            def make(original: Any) -> Any:
                def within(app: SparkApp, *args: Any, **kwargs: Any) -> Any:
                    self.draw.append(kind)
                    try:
                        return original(app, *args, **kwargs)
                    finally:
                        self.draw.pop()

                return within

            return make

        def repaint(original: Any) -> Any:
            def counted(widget: Widget, *args: Any, **kwargs: Any) -> Any:
                if self.counting:
                    self.repaints[f"{self.draw[-1]}: {type(widget).__name__}#{widget.id or '-'}"] += 1
                return original(widget, *args, **kwargs)

            return counted

        wrap(Screen, "_compositor_refresh", frame)
        wrap(SparkApp, "refresh_views", drawing("tick"))
        wrap(SparkApp, "_draw_arrivals", drawing("arrival"))
        wrap(Widget, "refresh", repaint)
        try:
            yield
        finally:
            for cls, name, original in reversed(saved):
                setattr(cls, name, original)


async def _watch(config: Path, seconds: float, node_screen: bool) -> tuple[float, Counts]:
    counts = Counts()
    with counts.installed():
        app = make_app(load_config(config))
        async with app.run_test(size=(160, 48)) as pilot:
            await asyncio.sleep(WARMUP_S)
            if node_screen:
                await pilot.press("enter")
                await asyncio.sleep(2.0)
            process = psutil.Process()
            before, started = sum(process.cpu_times()[:2]), time.monotonic()
            counts.counting = True
            await asyncio.sleep(seconds)
            counts.counting = False
            cpu = (sum(process.cpu_times()[:2]) - before) / (time.monotonic() - started) * 100
    return cpu, counts


def _chart_costs() -> tuple[float, float]:
    """ms of CPU a chart: as a ``Static`` and as a ``ChartPanel``."""

    class Charts(App[None]):
        CSS = (
            f"Static, ChartPanel {{ width: {CHART_COLUMNS + 4}; height: {CHART_ROWS + 3}; "
            "border: round $panel; padding: 0 1; }"
        )

        def compose(self) -> ComposeResult:
            yield Static(id="static")
            yield ChartPanel(id="panel")

    values = [random.Random(7).random() * 100 for _ in range(CHART_UPDATES + CHART_COLUMNS)]
    costs: dict[str, float] = {}

    async def run() -> None:
        app = Charts()
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            static, panel = app.query_one("#static", Static), app.query_one("#panel", ChartPanel)
            whole = Region(0, 0, CHART_COLUMNS + 4, CHART_ROWS + 3)
            head = Text("now 5,120 tok/s   max 5,480 tok/s   over 10m00s")
            for name in ("static", "panel"):
                started = time.process_time()
                for i in range(CHART_UPDATES):
                    rows = column_rows(values[i : i + CHART_COLUMNS], CHART_COLUMNS, CHART_ROWS)
                    if name == "static":
                        static.update(Text("\n").join([head, Text("\n".join(rows), style="green")]), layout=False)
                        static.render_lines(whole)
                    else:
                        panel.show(head, rows, "green")
                        panel.render_lines(whole)
                costs[name] = (time.process_time() - started) / CHART_UPDATES * 1000

    asyncio.run(run())
    return costs["static"], costs["panel"]


def _table(rows: list[tuple[str, float, Counts, float]]) -> list[str]:
    lines = [
        "| dashboard | CPU, % of a core | frames a second | repaints a second: at the tick | at an arrival | other |",
        "|---|---|---|---|---|---|",
    ]
    for name, cpu, counts, seconds in rows:
        by_draw = collections.Counter[str]()
        for key, n in counts.repaints.items():
            by_draw[key.split(":", 1)[0]] += n
        lines.append(
            f"| {name} | {cpu:.1f} | {counts.frames / seconds:.2f} | {by_draw['tick'] / seconds:.1f} | "
            f"{by_draw['arrival'] / seconds:.1f} | {by_draw['other'] / seconds:.1f} |"
        )
    return lines


def _busiest(counts: Counts, seconds: float, most: int = 12) -> str:
    ranked = sorted(counts.repaints.items(), key=lambda kv: -kv[1])[:most]
    return ", ".join(f"{key} {n / seconds:.1f}" for key, n in ranked)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0, help="the counted window of each screen")
    ap.add_argument("--write", type=Path, help="replace this benchmark's section of PATH (docs/performance.md)")
    args = ap.parse_args()
    measured: list[tuple[str, float, Counts, float]] = []
    with demo_fleet(args.nodes) as demo:
        only = vllm_only_config(demo.config, demo.config.with_name("vllm-only.toml"))
        for name, config, node_screen in (
            ("fleet screen, vLLM endpoints only", only, False),
            ("fleet screen, everything", demo.config, False),
            ("node screen, everything", demo.config, True),
        ):
            print(f"bench_frames: {name} ...", file=sys.stderr)
            cpu, counts = asyncio.run(_watch(config, args.seconds, node_screen))
            measured.append((name, cpu, counts, args.seconds))
    static_ms, panel_ms = _chart_costs()
    lines = _table(measured)
    lines += [
        "",
        "The repaints of the node screen, a second: " + _busiest(measured[-1][2], args.seconds) + ".",
        "",
        f"A chart of {CHART_ROWS} rows of {CHART_COLUMNS} columns, updated and rendered {CHART_UPDATES} times "
        f"(`column_rows` included): as a `Static` {static_ms:.2f} ms, as a `ChartPanel` {panel_ms:.2f} ms of CPU.",
        "",
        f"{args.nodes} demo nodes at a 1 s poll, each dashboard headless at 160x48 in this process "
        f"(CPU: this process's, the demo's apart), after a {WARMUP_S:g} s warm-up, counted over {args.seconds:g} s. "
        f"Measured on {machine_line()}.",
    ]
    body = "\n".join(lines)
    print(body)
    if args.write:
        write_section(args.write, SECTION, body, heading=HEADING)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
