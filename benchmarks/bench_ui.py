"""CPU of the dashboard process on the fleet screen, idle, with N demo nodes at a 1 s interval.

    python benchmarks/bench_ui.py [--nodes 8] [--seconds 30] [--write docs/performance.md]

The demo fleet runs in its own process; the dashboard runs in a real terminal (tmux, 160x48) as
``sparktui --config``; after a warm-up, the dashboard's own CPU time (user + system, psutil) is read
over the measured seconds. Target: under 5 % of one core with 8 nodes.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
from _common import cpu_s, demo_fleet, write_section

QUICK_ARGS = ("--seconds", "10")  # benchmarks/run_all.py --quick
WARMUP_S = 8.0


def _dashboard_pid(tmux: str, socket: str) -> int:
    shell = int(subprocess.check_output([tmux, "-L", socket, "display", "-p", "-t", "bench", "#{pane_pid}"]).strip())
    process = psutil.Process(shell)
    for candidate in [process, *process.children(recursive=True)]:
        if "sparktui" in " ".join(candidate.cmdline()):
            return candidate.pid
    raise RuntimeError("the dashboard process was not found")


def measure(nodes: int, seconds: float) -> dict[str, float]:
    tmux = shutil.which("tmux")
    if tmux is None:
        raise SystemExit("tmux is needed: apt-get install tmux")
    socket = f"bench-ui-{int(time.time())}"
    with demo_fleet(nodes, settle_s=0.0) as demo:
        try:
            command = f"{sys.executable} -m sparktui --config {demo.config}"
            subprocess.run(
                [tmux, "-L", socket, "new-session", "-d", "-s", "bench", "-x", "160", "-y", "48", command], check=True
            )
            time.sleep(WARMUP_S)
            dashboard = psutil.Process(_dashboard_pid(tmux, socket))
            before = cpu_s(dashboard.pid)
            rss_before = dashboard.memory_info().rss
            started = time.monotonic()
            time.sleep(seconds)
            after = cpu_s(dashboard.pid)
            wall = time.monotonic() - started
            rss_after = dashboard.memory_info().rss
            screen = subprocess.check_output([tmux, "-L", socket, "capture-pane", "-p", "-t", "bench"], text=True)
        finally:
            subprocess.run([tmux, "-L", socket, "kill-server"], check=False, capture_output=True)
    if f"{nodes} nodes" not in screen:
        raise SystemExit(f"the dashboard did not show the fleet:\n{screen}")
    cpu = after - before
    return {
        "nodes": nodes,
        "seconds": wall,
        "cpu_pct": cpu / wall * 100,
        "rss_mib": rss_after / 2**20,
        "rss_growth_mib": (rss_after - rss_before) / 2**20,
    }


def report(r: dict[str, float]) -> str:
    return (
        "| nodes | seconds | dashboard CPU | RSS | RSS growth over the run |\n|---|---|---|---|---|\n"
        f"| {r['nodes']:.0f} | {r['seconds']:.0f} | {r['cpu_pct']:.1f} % of a core | {r['rss_mib']:.0f} MiB | "
        f"{r['rss_growth_mib']:+.1f} MiB |\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args()
    table = report(measure(args.nodes, args.seconds))
    print(table)
    if args.write:
        write_section(args.write, "bench_ui", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
