"""``sparktui bench`` without a screen: find the instance in the config, ask it what it serves, run the
cases (``sparktui.sources.bench``) and turn what was measured into a ``BenchRun`` that is saved as JSON
and printed as the operators' table (``sparktui.model.bench``). ``docs/bench.md`` tells the workloads.

The job itself (``BenchJob``, ``run_job``) is in ``sparktui.sources.bench``, where the node screen's key
reaches it too; here is what the command adds: Ctrl-C, and reading saved runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from sparktui.model.bench import BenchFileError, BenchProgress, BenchRun, run_from_json
from sparktui.sources.bench import BenchError, BenchJob, find_instance, run_job, save

__all__ = ["BenchError", "BenchJob", "find_instance", "load", "run_bench", "run_job", "save"]


def run_bench(
    job: BenchJob, on_change: Callable[[BenchProgress], None] | None = None, *, ca_file: Path | None = None
) -> BenchRun:
    """Run ``job`` to its end, or until Ctrl-C: either way the run with every case that finished.
    ``BenchError`` when it cannot start."""
    if run_interruptible(lambda: run_job(job, on_change, ca_file=ca_file)):
        return job.result(complete=False, problem="stopped by Ctrl-C")
    return job.result(complete=True)


RECANCEL_S = 0.5  # after Ctrl-C, the run is cancelled again this often until it has ended


def run_interruptible(main: Callable[[], Coroutine[Any, Any, None]]) -> bool:
    """Run ``main()`` to its end, or until Ctrl-C; True when Ctrl-C stopped it.

    ``asyncio.run`` alone cancels the run once on Ctrl-C and reports it only if that cancellation
    comes out: a library that takes it for its own (an HTTP client's timeout scope, met by the Ctrl-C
    in the middle of a scrape) lets the run go on to its end, and the command says it finished (seen
    under load: the Ctrl-C test's whole long case ran). Here Ctrl-C is remembered, and the run is
    cancelled again every ``RECANCEL_S`` until it has ended.
    """
    interrupted = False

    async def guarded() -> None:
        nonlocal interrupted
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def cancel_until_done() -> None:
            if not task.done():
                task.cancel()
                loop.call_later(RECANCEL_S, cancel_until_done)

        def on_sigint() -> None:
            nonlocal interrupted
            interrupted = True
            cancel_until_done()

        handled = True
        try:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread: asyncio.run's own
            handled = False
        try:
            await main()
        finally:
            if handled:
                with contextlib.suppress(RuntimeError, ValueError):
                    loop.remove_signal_handler(signal.SIGINT)

    try:
        asyncio.run(guarded())
    except (KeyboardInterrupt, asyncio.CancelledError):
        return True
    return interrupted


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
