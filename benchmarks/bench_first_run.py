"""A newcomer's first run: the README's first command on a fresh venv, from Enter to living numbers.

    python benchmarks/bench_first_run.py [--runs 3] [--write docs/performance.md]

The README's first command is ``python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/sparktui
demo``. This benchmark makes a fresh venv in a temporary directory and installs this checkout into it
the same way (``pip install --no-cache-dir -e .``, what running needs only, from the package index as a
fresh machine would), timing the install once. Then, ``--runs`` times, it launches that venv's
``sparktui demo`` in a 160x48 tmux session (on a tmux server already running) and reads the pane with
``capture-pane`` every 20 ms: the first frame is the fleet header drawn ("4 nodes"), living numbers are
the header's fleet generation rate shown as a number (it reads "–" until two scrapes of a vLLM exist).
The demo process starts its own simulated fleet, so the figure is the whole of what a newcomer waits.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _common import machine_line, quantile, stop_on_sigterm, tmux_server, write_section

ROOT = Path(__file__).resolve().parent.parent
QUICK_ARGS = ("--runs", "1")  # benchmarks/run_all.py --quick
WIDTH, HEIGHT = 160, 48
TARGET_LIVING_S = 10.0  # issue 24: living numbers within 10 s of the command, after the install
CAPTURE_EVERY_S = 0.02
TIMEOUT_S = 60.0
HEADER = re.compile(r"^\s*\d+ nodes?\b")
LIVING = re.compile(r"│ generation [0-9]")


@dataclass(frozen=True, slots=True)
class Run:
    frame_s: float | None  # the fleet header drawn
    living_s: float | None  # the header's generation rate a number


def install(venv: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-cache-dir", "--disable-pip-version-check", "-e", str(ROOT)],
        check=True,
    )
    return time.perf_counter() - started


def packages(venv: Path) -> int:
    listed = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format=freeze", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return len([line for line in listed.splitlines() if line.strip()])


def time_demo(tmux: str, venv: Path, runs: int) -> list[Run]:
    found: list[Run] = []
    with tmux_server(tmux, "bench-first-run") as server:
        for run in range(runs):
            session = f"run{run}"
            started = time.perf_counter()
            server.launch(session, f"env -u COLUMNS -u LINES {venv / 'bin' / 'sparktui'} demo", WIDTH, HEIGHT)
            frame_s: float | None = None
            living_s: float | None = None
            while living_s is None and time.perf_counter() - started < TIMEOUT_S:
                screen = server.capture(session)
                now = time.perf_counter() - started
                header = screen.splitlines()[0] if screen else ""
                if frame_s is None and HEADER.match(header):
                    frame_s = now
                if LIVING.search(header):
                    living_s = now
                time.sleep(CAPTURE_EVERY_S)
            server.send(session, "q")
            time.sleep(1.0)  # the demo's servers stopped before the next run binds its own
            server.kill(session)
            found.append(Run(frame_s, living_s))
    return found


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} s"


def report(install_s: float, count: int, runs: list[Run], command: str) -> str:
    frames = [r.frame_s for r in runs if r.frame_s is not None]
    living = [r.living_s for r in runs if r.living_s is not None]
    missed = len(runs) - len(living)
    worst = max(living) if living and not missed else None
    met = not missed and worst is not None and worst < TARGET_LIVING_S
    return (
        "\n".join(
            [
                "## A newcomer's first run (README's first command)",
                "",
                f"Target: living numbers on the demo fleet within {TARGET_LIVING_S:g} s of `sparktui demo`, after the "
                "install.",
                "",
                "How: a fresh venv in a temporary directory, this checkout installed into it as the README does "
                "(`pip install -e .`, no test extras, `--no-cache-dir`); then that venv's `sparktui demo` "
                f"launched in a {WIDTH}x{HEIGHT} tmux session and the pane read every "
                f"{CAPTURE_EVERY_S * 1000:.0f} ms, to the fleet header drawn and to its fleet generation rate shown "
                "as a number.",
                "",
                f"Command: `{command}`",
                "",
                "| what | runs | p50 | max | target | |",
                "|---|---|---|---|---|---|",
                f"| install (`pip install -e .`, {count} packages in the venv) | 1 | {_s(install_s)} | | | |",
                f"| first frame | {len(frames)} | {_s(quantile(frames, 0.5) if frames else None)} | "
                f"{_s(max(frames) if frames else None)} | | |",
                f"| **living numbers** | {len(living)} | {_s(quantile(living, 0.5) if living else None)} | "
                f"{_s(worst) if not missed else f'{missed} not within {TIMEOUT_S:g} s'} | {TARGET_LIVING_S:g} s | "
                f"{'met' if met else '**not met**'} |",
                "",
                f"Measured on {machine_line()}.",
            ]
        )
        + "\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="demo launches timed (one install)")
    ap.add_argument("--write", type=Path, help="replace the bench_first_run section of this markdown file")
    args = ap.parse_args()
    stop_on_sigterm()
    if args.runs < 1:
        raise SystemExit("bench_first_run: --runs must be at least 1")
    tmux = shutil.which("tmux")
    if tmux is None:
        raise SystemExit("bench_first_run: tmux is needed: apt-get install tmux")
    with tempfile.TemporaryDirectory(prefix="sparktui-first-run-") as scratch:
        venv = Path(scratch) / "venv"
        install_s = install(venv)
        count = packages(venv)
        runs = time_demo(tmux, venv, args.runs)
    command = "python benchmarks/bench_first_run.py" + (f" --runs {args.runs}" if args.runs != 3 else "")
    body = report(install_s, count, runs, command)
    print(body)
    if args.write:
        write_section(args.write, "bench_first_run", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
