"""The dashboard at 64 nodes: do polls finish within their interval, does any node starve, and does
the UI stay responsive to keys?

    python benchmarks/bench_scale.py [--nodes 64] [--seconds 30] [--write docs/performance.md]

``sparktui demo --serve-only --nodes N`` runs in its own process (1 s poll interval, every node with
its SSH server). In this process the dashboard itself (``make_app``, live collection: HTTP polls, host
sampler and log streams over SSH) runs under ``App.run_test(headless=True, size=(160, 48))``. After a
warm-up (every node polled twice) and for ``--seconds``:

- every poll of a node (``NodeCollector.poll``, wrapped here) is timed from its start to its result;
  the share of polls that took longer than the interval, and the time between two results of a node;
- the results per node over the run (starvation: the fewest against the most);
- keys are pressed on the fleet screen (down and up through the table, enter to open the highlighted
  node, escape back) with a random pause between presses, each as a ``Key`` event handed to the
  terminal driver (``Pilot.press``'s own path, without its wait for the process to go idle, which at
  64 nodes takes most of a second a key). A key's latency is the time from the press to the first
  frame that shows the change: frames are drawn into a virtual
  terminal (``benchmarks/_screen.py``) and the change is read from it (the highlighted row's colour
  on the new row, the node screen's title line, the fleet's summary line).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import cpu_s, demo_fleet, machine_line, quantile, stop_on_sigterm, write_section
from _screen import ScreenRecorder
from textual import events

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.config import load_config  # noqa: E402
from sparktui.model.observations import NodeObservation  # noqa: E402
from sparktui.sources.collector import NodeCollector  # noqa: E402
from sparktui.ui.app import SparkApp, make_app  # noqa: E402
from sparktui.ui.fleet_screen import FleetScreen  # noqa: E402
from sparktui.ui.table import RowTable  # noqa: E402

QUICK_ARGS = ("--seconds", "10")  # benchmarks/run_all.py --quick
SIZE = (160, 48)
TARGET_KEY_MS = 100.0
KEY_TIMEOUT_S = 5.0
WARMUP_TIMEOUT_S = 60.0
CHARACTERS = {"enter": "\r", "escape": "\x1b"}  # what the terminal sends (Key.character)
STEPS = 8  # rows walked down and up (the first rows: no scrolling)


def key_cycle(rows: int) -> tuple[str, ...]:
    """Down and up through the first rows, opening the node reached at each end. Never a key that
    changes nothing (down on the last row), which no frame would show."""
    steps = min(STEPS, rows - 1)
    return ("down",) * steps + ("enter", "escape") + ("up",) * steps + ("enter", "escape")


@dataclass
class PollLog:
    """Every poll of every node: (start, end) on the monotonic clock."""

    polls: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def install(self) -> None:
        poll = NodeCollector.poll

        async def timed_poll(collector: NodeCollector, *args: Any, **kwargs: Any) -> NodeObservation:
            start = time.monotonic()
            found = await poll(collector, *args, **kwargs)
            self.polls.setdefault(collector.node.name, []).append((start, time.monotonic()))
            return found

        NodeCollector.poll = timed_poll  # type: ignore[method-assign,assignment]

    def count(self, node: str) -> int:
        return len(self.polls.get(node, ()))


@dataclass(frozen=True, slots=True)
class KeySample:
    key: str
    pressed: float  # monotonic
    latency_s: float | None  # None: no frame showed the change within KEY_TIMEOUT_S


@dataclass(frozen=True, slots=True)
class ScaleResult:
    nodes: int
    interval_s: float
    seconds: float  # measured, after the warm-up
    durations: list[float]  # every poll's start to result, seconds
    gaps: list[float]  # between two results of one node, seconds
    per_node: dict[str, int]  # results in the measured seconds
    samples: list[KeySample]
    frames: int
    ticks: list[tuple[float, float]]  # the render ticks (refresh_views) of the measured seconds: start, end
    applies: list[float]  # each observation applied to the model (the app's sink), seconds
    cpu_pct: float  # this process: the dashboard and its collection
    demo_cpu_pct: float
    poll_errors: list[str]


def _fleet_table(app: SparkApp) -> RowTable:
    screen = app.screen
    assert isinstance(screen, FleetScreen), f"expected the fleet screen, found {type(screen).__name__}"
    return screen.query_one("#fleet", RowTable)


def _row_y(table: RowTable, row: int) -> int:
    """The terminal line a table row is drawn on (the header takes the table's first line)."""
    return table.region.y + 1 + row - round(table.scroll_offset.y)


def send_key(app: SparkApp, key: str) -> None:
    """A key press as the terminal driver delivers it, and as ``Pilot.press`` does, without Pilot's wait
    for the process to go idle after each key (at 64 nodes that wait is most of a second)."""
    driver = app._driver
    assert driver is not None
    driver.send_message(events.Key(key, CHARACTERS.get(key)).set_sender(app))


async def _press(app: SparkApp, screen: ScreenRecorder, key: str) -> KeySample:
    """Press ``key`` and wait for the first frame whose picture shows what the key does."""
    list(screen.drain())
    nodes = len(app.views)
    shows: Callable[[], bool]
    if key in ("down", "up"):
        table = _fleet_table(app)
        x = table.region.x + 2
        before = table.cursor_row
        after = max(0, min(table.row_count - 1, before + (1 if key == "down" else -1)))
        cursor = screen.background_at(x, _row_y(table, before))
        y_before, y_after = _row_y(table, before), _row_y(table, after)

        def shows() -> bool:
            return screen.background_at(x, y_after) == cursor and (
                y_before == y_after or screen.background_at(x, y_before) != cursor
            )

    elif key == "enter":
        screen_now = app.screen
        assert isinstance(screen_now, FleetScreen)
        view = screen_now.highlighted()
        assert view is not None, "no node is highlighted on the fleet screen"
        title = f"{view.name} ("

        def shows() -> bool:
            return screen.line(0).lstrip().startswith(title)

    else:

        def shows() -> bool:
            return screen.line(0).lstrip().startswith(f"{nodes} nodes")

    started = time.monotonic()
    send_key(app, key)
    while time.monotonic() - started < KEY_TIMEOUT_S:
        for frame in screen.drain():
            if frame.t >= started and shows():
                return KeySample(key, started, frame.t - started)
        await asyncio.sleep(0.005)
    return KeySample(key, started, None)


def _time_the_loop_work(app: SparkApp) -> tuple[list[tuple[float, float]], list[float]]:
    """Time the two pieces of the dashboard's own work on the event loop: the render tick
    (``refresh_views``: views, history, diagnosis, alerts, the screen's widgets) and applying an
    observation to the model (parsing the scrape). Wrapped on the instance, before it mounts."""
    ticks: list[tuple[float, float]] = []
    applies: list[float] = []
    refresh_views, apply_observation = app.refresh_views, app.monitor.observation

    def timed_refresh(force: bool = False) -> None:
        start = time.monotonic()
        refresh_views(force)
        ticks.append((start, time.monotonic()))

    def timed_observation(observation: NodeObservation) -> None:
        start = time.perf_counter()
        apply_observation(observation)
        applies.append(time.perf_counter() - start)

    app.refresh_views = timed_refresh  # type: ignore[method-assign]
    app.monitor.observation = timed_observation  # type: ignore[method-assign]
    return ticks, applies


async def _run(config: Path, seconds: float, demo_pid: int, seed: int) -> ScaleResult:
    fleet = load_config(config)
    log = PollLog()
    log.install()
    app = make_app(fleet, freeze_gc=True)  # as the CLI's dashboard runs
    screen = ScreenRecorder(app, *SIZE)
    ticks, applies = _time_the_loop_work(app)
    rng = random.Random(seed)
    async with app.run_test(headless=True, size=SIZE):
        names = [n.name for n in fleet.nodes]
        deadline = time.monotonic() + WARMUP_TIMEOUT_S
        while min(log.count(n) for n in names) < 2:
            if time.monotonic() > deadline:
                starved = [n for n in names if log.count(n) < 2]
                raise SystemExit(f"bench_scale: {len(starved)} nodes were not polled twice within the warm-up")
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        list(screen.drain())
        table = _fleet_table(app)
        if table.cursor_row != 0:
            raise SystemExit("bench_scale: the fleet table's cursor should start on the first row")
        x = table.region.x + 2
        stripes = {screen.background_at(x, _row_y(table, r)) for r in (1, 2)}
        if screen.background_at(x, _row_y(table, table.cursor_row)) in stripes:
            raise SystemExit("bench_scale: the highlighted row is not drawn in its own colour; cannot see the cursor")
        keys = key_cycle(table.row_count)
        frames0, cpu0, demo_cpu0 = len(screen.frames), cpu_s(os.getpid()), cpu_s(demo_pid)
        started = time.monotonic()
        samples: list[KeySample] = []
        i = 0
        while time.monotonic() - started < seconds:
            samples.append(await _press(app, screen, keys[i % len(keys)]))
            i += 1
            await asyncio.sleep(rng.uniform(0.05, 0.3))
        ended = time.monotonic()
        wall = ended - started
        cpu, demo_cpu = cpu_s(os.getpid()) - cpu0, cpu_s(demo_pid) - demo_cpu0
        frames = len(screen.frames) - frames0
        poll_errors = list(app.poll_errors)
    durations: list[float] = []
    gaps: list[float] = []
    per_node: dict[str, int] = {}
    for name in names:
        polls = [(s, e) for s, e in log.polls.get(name, ()) if started <= e <= ended]
        per_node[name] = len(polls)
        durations += [e - s for s, e in polls]
        ends = [e for _, e in polls]
        gaps += [b - a for a, b in itertools.pairwise(ends)]
    return ScaleResult(
        nodes=len(names),
        interval_s=fleet.poll_interval_s,
        seconds=wall,
        durations=durations,
        gaps=gaps,
        per_node=per_node,
        samples=samples,
        frames=frames,
        ticks=[(s, e) for s, e in ticks if started <= s <= ended],
        applies=applies,
        cpu_pct=cpu / wall * 100,
        demo_cpu_pct=demo_cpu / wall * 100,
        poll_errors=poll_errors,
    )


def measure(nodes: int, seconds: float, seed: int) -> ScaleResult:
    with demo_fleet(nodes) as demo:
        return asyncio.run(_run(demo.config, seconds, demo.pid, seed))


def _ms(value: float) -> str:
    return "–" if math.isnan(value) else f"{value * 1000:.0f} ms"  # NaN: nothing was measured


def report(r: ScaleResult, command: str) -> str:
    durations, gaps, per_node, samples = r.durations, r.gaps, r.per_node, r.samples
    interval, seconds = r.interval_s, r.seconds
    over = sum(1 for d in durations if d > interval)
    share_over = over / len(durations) * 100 if durations else float("nan")
    fewest, most = min(per_node.values()), max(per_node.values())
    expected = seconds / interval
    lines = [
        f"## The dashboard at {r.nodes} nodes: polls, starvation, keys (issue: performance, deliverable 3)",
        "",
        "Targets: at 64 nodes every poll completes within its interval (p99 of the poll time), no node "
        "starves, and a key shows its effect on screen within 100 ms (p99).",
        "",
        "How: `sparktui demo --nodes N` in its own process; in this one the dashboard (`make_app`, live "
        "collection: HTTP polls every second, host sampler and log streams over SSH) under "
        f"`App.run_test(headless=True, size={SIZE})`. Each node's poll is timed from start to result "
        "(`NodeCollector.poll` wrapped by the benchmark). Keys go down and up through the fleet table, "
        "enter on a node and escape back, with a random 50-300 ms pause between presses, each handed to "
        "the terminal driver as `Pilot.press` does (without Pilot's wait for idle between keys); a key's "
        "latency runs from the press to the first frame whose picture shows the change. Every frame the "
        "app renders is turned into terminal bytes as a real terminal's would be and drawn into a virtual "
        "terminal (`benchmarks/_screen.py`), which is then read: the highlighted row's colour on the new "
        "row, the node screen's title, the fleet's summary line. Not counted: the tty write and the "
        "terminal emulator's paint.",
        "",
        f"Command: `{command}`",
        "",
        "| nodes | seconds | polls | poll time p50 / p99 / max | polls over the interval | time between two "
        "results of a node p99 / max | results per node, fewest / most (expected) | dashboard CPU | demo CPU |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {r.nodes} | {seconds:.0f} | {len(durations)} | {_ms(quantile(durations, 0.5))} / "
        f"{_ms(quantile(durations, 0.99))} / {_ms(max(durations, default=float('nan')))} | {over} "
        f"({share_over:.1f} %) | {_ms(quantile(gaps, 0.99))} / {_ms(max(gaps, default=float('nan')))} | "
        f"{fewest} / {most} ({expected:.0f}) | {r.cpu_pct:.0f} % of a core | {r.demo_cpu_pct:.0f} % of a core |",
        "",
        "| key | presses | key to screen p50 | p99 | max | no frame within 5 s |",
        "|---|---|---|---|---|---|",
    ]
    kinds = {"down/up in the fleet table": ("down", "up"), "enter (open the node)": ("enter",)}
    kinds["escape (back to the fleet)"] = ("escape",)
    every: list[float] = []
    for label, keys in kinds.items():
        chosen = [s for s in samples if s.key in keys]
        seen = [s.latency_s for s in chosen if s.latency_s is not None]
        every += seen
        lines.append(
            f"| {label} | {len(chosen)} | {_ms(quantile(seen, 0.5))} | {_ms(quantile(seen, 0.99))} | "
            f"{_ms(max(seen, default=float('nan')))} | {len(chosen) - len(seen)} |"
        )
    missed = sum(1 for s in samples if s.latency_s is None)
    slow = [s for s in samples if s.latency_s is None or s.latency_s > TARGET_KEY_MS / 1000]
    behind_tick = sum(
        1
        for s in slow
        if any(start < s.pressed + (s.latency_s or KEY_TIMEOUT_S) and end > s.pressed for start, end in r.ticks)
    )
    tick_s = [end - start for start, end in r.ticks]
    lines.append(
        f"| **every key** | {len(samples)} | {_ms(quantile(every, 0.5))} | **{_ms(quantile(every, 0.99))}** | "
        f"{_ms(max(every, default=float('nan')))} | {missed} |"
    )
    p99_poll = quantile(durations, 0.99)
    p99_key = quantile(every + [KEY_TIMEOUT_S] * missed, 0.99)
    starving = fewest < 0.9 * expected
    verdicts = [
        f"poll time p99 {_ms(p99_poll)} {'within' if p99_poll <= interval else 'OVER'} the {interval:g} s interval",
        f"{'a node starved' if starving else 'no node starved'} (fewest results {fewest} of about {expected:.0f})",
        f"key to screen p99 {_ms(p99_key)} {'meets' if p99_key < TARGET_KEY_MS / 1000 else 'misses'} the "
        f"{TARGET_KEY_MS:.0f} ms target",
    ]
    lines += [
        "",
        "; ".join(verdicts) + f". {r.frames} frames rendered over the run.",
        "",
        f"The dashboard's own work on the event loop: the render tick (every {max(0.5, interval):g} s: views, "
        f"history, diagnosis, alerts, the screen's widgets) took {_ms(quantile(tick_s, 0.5))} p50, "
        f"{_ms(quantile(tick_s, 0.99))} p99, {_ms(max(tick_s, default=float('nan')))} max; applying one "
        f"observation to the model {quantile(r.applies, 0.5) * 1000:.2f} ms p50, "
        f"{quantile(r.applies, 0.99) * 1000:.1f} ms p99. Of the {len(slow)} keys over {TARGET_KEY_MS:.0f} ms, "
        f"{behind_tick} waited on a render tick.",
    ]
    errors = r.poll_errors
    if errors:
        lines.append(f"Collection errors during the run: {len(errors)}, the first: {errors[0]}")
    lines += ["", f"Measured on {machine_line()}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=30.0, help="measured seconds after the warm-up")
    ap.add_argument("--seed", type=int, default=1, help="of the random pauses between key presses")
    ap.add_argument("--write", type=Path, help="replace the bench_scale section of this markdown file")
    args = ap.parse_args()
    stop_on_sigterm()  # run_all.py's timeout: the finally blocks stop what this started
    if args.nodes < 3 or args.seconds <= 0:
        raise SystemExit("bench_scale: --nodes must be at least 3 and --seconds positive")
    command = f"python benchmarks/bench_scale.py --nodes {args.nodes} --seconds {args.seconds:g}"
    body = report(measure(args.nodes, args.seconds, args.seed), command)
    print(body)
    if args.write:
        write_section(args.write, "bench_scale", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
