"""Every benchmark, one after the other, each writing its own section of docs/performance.md.

    python benchmarks/run_all.py [--quick] [--write docs/performance.md]

Runs every ``benchmarks/bench_*.py`` (found by glob, in name order) as
``python benchmarks/bench_x.py --write PATH``, one at a time so they do not compete for the machine's
cores, then writes the "machine" section at the top of PATH: how to reproduce the figures, the machine
and versions, the date, and what ran. A benchmark that fails is reported and the others still run; the
exit status says whether all passed.

``--quick`` is a short pass to see that everything runs: a script that defines ``QUICK_ARGS`` (a tuple
of its own shorter options, read from its source without importing it) gets them. Quick figures are
not the ones the targets are judged by, so ``--quick`` writes to a scratch copy of the doc unless
``--write`` is given.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from _common import machine_line, write_section

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DOC = ROOT / "docs" / "performance.md"
SECTION = "machine"
TIMEOUT_S = 1800.0  # one benchmark; the longest take a few minutes


@dataclass(frozen=True, slots=True)
class Outcome:
    script: str
    options: tuple[str, ...]  # besides --write
    seconds: float
    status: int | None  # None: stopped at the timeout


def benchmarks() -> list[Path]:
    return sorted(HERE.glob("bench_*.py"))


def quick_args(script: Path) -> tuple[str, ...]:
    """The script's ``QUICK_ARGS = (...)``, read from its source; () when it has none."""
    tree = ast.parse(script.read_text(), filename=str(script))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "QUICK_ARGS" for t in node.targets):
            value = ast.literal_eval(node.value)
            if not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
                raise SystemExit(f"run_all: {script.name}: QUICK_ARGS must be a tuple of strings")
            return tuple(value)
    return ()


def run(script: Path, options: tuple[str, ...], doc: Path, timeout_s: float) -> Outcome:
    """The script in its own process group, so a timeout stops it and whatever it started."""
    command = [sys.executable, str(script), *options, "--write", str(doc)]
    print(f"\n=== {script.name} {' '.join(options)}", flush=True)
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, start_new_session=True)
    try:
        status: int | None = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        status = None
    seconds = time.monotonic() - started
    verdict = "timed out" if status is None else ("ok" if status == 0 else f"FAILED with status {status}")
    print(f"=== {script.name}: {verdict} in {seconds:.0f} s", flush=True)
    return Outcome(script.name, options, seconds, status)


def reserve_machine_section(path: Path) -> None:
    """Put the machine section's markers right under the doc's title, where a reader starts."""
    start, end = f"<!-- {SECTION}:start -->", f"<!-- {SECTION}:end -->"
    doc = path.read_text() if path.exists() else "# Performance\n"
    if start in doc and end in doc:
        return
    title, _, rest = doc.partition("\n") if doc.startswith("# ") else ("# Performance", "", doc)
    path.write_text(f"{title}\n\n{start}\n{end}\n\n{rest.lstrip(chr(10))}")


def machine_body(outcomes: list[Outcome], quick: bool, started: datetime) -> str:
    lines = [
        "## How to reproduce, and the machine",
        "",
        "How to reproduce every figure in this file: on a checkout with the package installed "
        "(`pip install -e '.[test]'`; tmux and Debian's `prometheus` and `victoria-metrics` for the benchmarks that "
        "use them), run",
        "",
        "    python benchmarks/run_all.py",
        "",
        "which runs every `benchmarks/bench_*.py` one after the other, each with its defaults and "
        "`--write docs/performance.md`, and rewrites only the sections between the `<!-- name:start -->` "
        "and `<!-- name:end -->` markers; each section names the command that reproduces it alone. "
        "`--quick` is a short pass to see that everything runs (into a scratch copy). The machine is "
        "shared by the benchmark and what it measures (the demo fleet, Prometheus): on a 2-core machine "
        "their figures include that contention.",
        "",
        f"Last run: {started:%Y-%m-%d %H:%M} UTC{' (quick)' if quick else ''}, on {machine_line()}.",
        "",
        "| benchmark | options | time | result |",
        "|---|---|---|---|",
    ]
    for o in outcomes:
        options = f"`{' '.join(o.options)}`" if o.options else "defaults"
        result = "timed out" if o.status is None else ("ok" if o.status == 0 else f"failed (status {o.status})")
        lines.append(f"| `{o.script}` | {options} | {o.seconds:.0f} s | {result} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="each benchmark's QUICK_ARGS: a short pass")
    ap.add_argument("--write", type=Path, help=f"the doc to write (default {DOC.relative_to(ROOT)})")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds one benchmark may take")
    args = ap.parse_args()
    path: Path = args.write if args.write is not None else DOC
    if args.quick and args.write is None:
        path = Path(tempfile.gettempdir()) / "sparktui-performance-quick.md"
        if DOC.exists():
            shutil.copyfile(DOC, path)
    path = path.resolve()
    scripts = benchmarks()
    if not scripts:
        raise SystemExit(f"run_all: no bench_*.py in {HERE}")
    started = datetime.now(UTC)
    reserve_machine_section(path)
    outcomes: list[Outcome] = []
    for script in scripts:
        extra = quick_args(script) if args.quick else ()
        outcomes.append(run(script, extra, path, args.timeout))
    write_section(path, SECTION, machine_body(outcomes, args.quick, started))
    failed = [o.script for o in outcomes if o.status != 0]
    total = sum(o.seconds for o in outcomes)
    print(f"\n{len(outcomes) - len(failed)} of {len(outcomes)} benchmarks ran in {total:.0f} s; wrote {path}")
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
