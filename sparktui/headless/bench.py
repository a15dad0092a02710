"""``sparktui bench`` without a screen: find the instance in the config, ask it what it serves, run the
cases (``sparktui.sources.bench``) and turn what was measured into a ``BenchRun`` that is saved as JSON
and printed as the operators' table (``sparktui.model.bench``). ``docs/bench.md`` tells the workloads.

The job itself (``BenchJob``, ``run_job``) is in ``sparktui.sources.bench``, where the node screen's key
reaches it too; here is what the command adds: Ctrl-C, and reading saved runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from sparktui.model.bench import BenchFileError, BenchProgress, BenchRun, run_from_json
from sparktui.sources.bench import BenchError, BenchJob, find_instance, run_job, save

__all__ = ["BenchError", "BenchJob", "find_instance", "load", "run_bench", "run_job", "save"]


def run_bench(
    job: BenchJob, on_change: Callable[[BenchProgress], None] | None = None, *, ca_file: Path | None = None
) -> BenchRun:
    """Run ``job`` to its end, or until Ctrl-C: either way the run with every case that finished.
    ``BenchError`` when it cannot start."""
    try:
        asyncio.run(run_job(job, on_change, ca_file=ca_file))
    except KeyboardInterrupt:
        return job.result(complete=False, problem="stopped by Ctrl-C")
    return job.result(complete=True)


def load(path: Path) -> BenchRun:
    """A saved run; ``BenchFileError`` in one sentence naming the file when it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchFileError(f"{path}: cannot read it as JSON ({exc})") from None
    try:
        return run_from_json(data)
    except BenchFileError as exc:
        raise BenchFileError(f"{path}: {exc}") from None


def failed_requests(run: BenchRun) -> int:
    return sum(case.stats.failed for case in run.cases)


def case_names_of(text: Sequence[str] | None) -> tuple[str, ...] | None:
    """``--cases a,b c`` as names (None: the default)."""
    if not text:
        return None
    return tuple(n.strip() for part in text for n in part.split(",") if n.strip())
