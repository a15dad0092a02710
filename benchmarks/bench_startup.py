"""Start-up: ``sparktui --version``, and the dashboard's first full frame of the fleet screen.

    python benchmarks/bench_startup.py [--runs 10] [--nodes 8] [--write docs/performance.md]

``--version``: wall time of ``sparktui --version`` in a fresh process, ``--runs`` times (after one
untimed run that leaves the bytecode caches warm); when it is over its target, ``python -X importtime``
of the same command names the imports that cost most.

First frame: ``sparktui demo --serve-only --nodes 8`` runs in its own process; in a real terminal (a
tmux session of 160x48 on a tmux server that is already running) the benchmark launches
``sparktui --config CONFIG`` and reads the screen with ``capture-pane`` every 20 ms. Two moments are
noted: the fleet table drawn with every node's name (the app is up), and every node's row filled (its
status is known and its model shows: the first poll of every node is on screen), the figure the target
is about.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from _common import SPARKTUI, demo_fleet, machine_line, quantile, stop_on_sigterm, tmux_server, write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.config import load_config  # noqa: E402
from sparktui.model.units import NO_DATA  # noqa: E402
from sparktui.ui.fleet_screen import COLUMNS  # noqa: E402
from sparktui.ui.table import PADDING  # noqa: E402

QUICK_ARGS = ("--runs", "3")  # benchmarks/run_all.py --quick
WIDTH, HEIGHT = 160, 48
TARGET_VERSION_S = 0.3
TARGET_FRAME_S = 1.5
CAPTURE_EVERY_S = 0.02
FRAME_TIMEOUT_S = 30.0
IMPORTTIME = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def time_version(runs: int) -> list[float]:
    command = [str(SPARKTUI), "--version"]
    subprocess.run(command, check=True, capture_output=True)  # untimed: bytecode caches written
    times: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def import_offenders(count: int = 8) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(the top-level packages by their modules' own import time, the single modules by theirs), ms."""
    found = subprocess.run(
        [sys.executable, "-X", "importtime", str(SPARKTUI), "--version"], check=True, capture_output=True, text=True
    )
    by_package: dict[str, float] = defaultdict(float)
    modules: list[tuple[str, float]] = []
    for line in found.stderr.splitlines():
        match = IMPORTTIME.match(line)
        if match is None:
            continue
        own_ms, name = int(match.group(1)) / 1000, match.group(4)
        by_package[name.split(".", 1)[0]] += own_ms
        modules.append((name, own_ms))
    packages = sorted(by_package.items(), key=lambda item: -item[1])[:count]
    return packages, sorted(modules, key=lambda item: -item[1])[:count]


@dataclass(frozen=True, slots=True)
class FrameRun:
    table_s: float | None  # the fleet table with every node's name
    filled_s: float | None  # every node's row filled


def _cell(line: str, key: str) -> str:
    x = PADDING
    for column in COLUMNS:
        if column.key == key:
            return line[x : x + column.width].strip()
        x += column.width + 2 * PADDING
    raise KeyError(key)


def read_screen(screen: str, names: list[str]) -> tuple[bool, bool]:
    """(the fleet table lists every node, every node's row is filled)."""
    rows = {_cell(line, "node"): line for line in screen.splitlines()}
    if not all(name in rows for name in names):
        return False, False
    filled = all(
        "unknown" not in _cell(rows[name], "status") and _cell(rows[name], "model") not in ("", NO_DATA)
        for name in names
    )
    return True, filled


def time_first_frame(tmux: str, config: Path, runs: int) -> list[FrameRun]:
    names = [node.name for node in load_config(config).nodes]
    found: list[FrameRun] = []
    with tmux_server(tmux, "bench-startup") as server:
        for run in range(runs):
            session = f"run{run}"
            started = time.perf_counter()
            server.launch(session, f"{SPARKTUI} --config {config}", WIDTH, HEIGHT)
            table_s: float | None = None
            filled_s: float | None = None
            while filled_s is None and time.perf_counter() - started < FRAME_TIMEOUT_S:
                screen = server.capture(session)
                now = time.perf_counter() - started
                table, filled = read_screen(screen, names)
                if table and table_s is None:
                    table_s = now
                if filled:
                    filled_s = now
                time.sleep(CAPTURE_EVERY_S)
            server.kill(session)
            found.append(FrameRun(table_s, filled_s))
            time.sleep(0.5)  # the dashboard gone, its SSH sessions on the demo closed
    return found


def _s(value: float) -> str:
    return f"{value:.2f} s"


def report(version: list[float], frames: list[FrameRun], nodes: int, command: str) -> str:
    version_p50, version_max = quantile(version, 0.5), max(version)
    tables = [f.table_s for f in frames if f.table_s is not None]
    filled = [f.filled_s for f in frames if f.filled_s is not None]
    missed = len(frames) - len(filled)
    frame_p50 = quantile(filled, 0.5)
    frame_max = max(filled, default=float("nan")) if not missed else float("inf")
    lines = [
        "## Start-up (issue: performance, deliverable 5)",
        "",
        f"Targets: `sparktui --version` under {TARGET_VERSION_S:g} s; the first full frame of the fleet "
        f"screen under {TARGET_FRAME_S:g} s.",
        "",
        "How: `--version` is timed as a fresh process each run, after one untimed run (bytecode caches "
        f"warm). The first frame: with `sparktui demo --nodes {nodes}` already serving, `sparktui --config` "
        f"is launched in a {WIDTH}x{HEIGHT} tmux session (on a tmux server already running) and the pane is "
        f"read with `capture-pane` every {CAPTURE_EVERY_S * 1000:.0f} ms, from the launch to the fleet table "
        "listing every node, and to every node's row filled (its status known and its model shown: every "
        "node's first poll on screen).",
        "",
        f"Command: `{command}`",
        "",
        "| what | runs | p50 | max | target | |",
        "|---|---|---|---|---|---|",
        f"| `sparktui --version` | {len(version)} | {_s(version_p50)} | {_s(version_max)} | "
        f"{TARGET_VERSION_S:g} s | {'met' if version_p50 < TARGET_VERSION_S else '**not met**'} |",
        f"| fleet table listing all {nodes} nodes | {len(tables)} | {_s(quantile(tables, 0.5))} | "
        f"{_s(max(tables, default=float('nan')))} | | |",
        f"| **every node's row filled** (first full frame) | {len(filled)} | {_s(frame_p50)} | "
        f"{_s(frame_max) if not missed else f'{missed} not within {FRAME_TIMEOUT_S:g} s'} | {TARGET_FRAME_S:g} s | "
        f"{'met' if frame_p50 < TARGET_FRAME_S else '**not met**'} |",
        "",
    ]
    if version_p50 >= TARGET_VERSION_S or version_max >= TARGET_VERSION_S:
        packages, modules = import_offenders()
        lines += [
            "`--version` is over its target; `python -X importtime` of it, own import time:",
            "",
            "by package: " + ", ".join(f"{name} {ms:.0f} ms" for name, ms in packages),
            "",
            "by module: " + ", ".join(f"`{name}` {ms:.0f} ms" for name, ms in modules),
            "",
        ]
    if filled and frame_p50 >= TARGET_FRAME_S:
        gap = quantile([f.filled_s - f.table_s for f in frames if f.filled_s and f.table_s], 0.5)
        lines += [
            f"The full frame misses its target. The app is up and the table drawn at {_s(quantile(tables, 0.5))} "
            f"(p50); the rows fill {_s(gap)} later: the first polls are spread over the 1 s interval and their "
            "results wait for the next render tick (a 1 s timer of its own) before they are drawn.",
            "",
        ]
    lines.append(f"Measured on {machine_line()}.")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="of each measurement")
    ap.add_argument("--nodes", type=int, default=8, help="demo nodes for the first-frame measurement")
    ap.add_argument("--write", type=Path, help="replace the bench_startup section of this markdown file")
    args = ap.parse_args()
    stop_on_sigterm()  # run_all.py's timeout: the finally blocks stop what this started
    if args.runs < 1 or args.nodes < 1:
        raise SystemExit("bench_startup: --runs and --nodes must be at least 1")
    tmux = shutil.which("tmux")
    if tmux is None:
        raise SystemExit("bench_startup: tmux is needed for the first-frame measurement: apt-get install tmux")
    version = time_version(args.runs)
    with demo_fleet(args.nodes) as demo:
        frames = time_first_frame(tmux, demo.config, args.runs)
    command = f"python benchmarks/bench_startup.py --runs {args.runs}"
    if args.nodes != 8:
        command += f" --nodes {args.nodes}"
    body = report(version, frames, args.nodes, command)
    print(body)
    if args.write:
        write_section(args.write, "bench_startup", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
