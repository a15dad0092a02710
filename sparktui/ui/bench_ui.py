"""``b`` on the node screen (or on a node highlighted in the fleet): ``sparktui bench`` in the dashboard.

A confirmation first (it loads the engine like real traffic), then a screen with the run's progress and
the operators' table growing a row per finished case; escape stops it and keeps what finished. The
finished run is saved as JSON in the folder sparktui was started from, as ``sparktui bench --out``
would write it (docs/bench.md). It is an action of the table (sparktui/actions/registry.py): planned,
refused (read-only, kiosk, a busy node), confirmed and audited (started, then how it ended) by the
action controller, like the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.widgets import ProgressBar, Static
from textual.worker import Worker

from sparktui.actions.plans import BenchPlan
from sparktui.model.bench import (
    TABLE_HEADER,
    BenchProgress,
    BenchRun,
    CaseResult,
    progress_text,
    result_row,
    run_heading,
)
from sparktui.sources.bench import BenchError, BenchJob, run_job, save
from sparktui.ui.base import SparkModal
from sparktui.ui.footer import KeyFooter
from sparktui.ui.keys import BENCH_BINDINGS, CONFIRM_BINDINGS
from sparktui.ui.lists import KeyedScroll
from sparktui.ui.render import IndentedText


class ConfirmBench(SparkModal[bool]):
    """y starts the bench, n or escape does not."""

    BINDINGS: ClassVar[list[BindingType]] = CONFIRM_BINDINGS
    DEFAULT_CSS = """
    ConfirmBench { align: center middle; }
    ConfirmBench > Vertical { width: 100; max-width: 95%; height: auto; border: thick $warning;
                              background: $surface; padding: 1 2; }
    ConfirmBench #bench-confirm-title { text-style: bold; margin-bottom: 1; }
    ConfirmBench #bench-confirm-body { margin-bottom: 1; }
    """

    def __init__(self, plan: BenchPlan, job: BenchJob) -> None:
        super().__init__()
        self.plan = plan
        self.job = job

    def compose(self) -> ComposeResult:
        lines = self.plan.confirmation()
        with Vertical():
            yield Static(Text(lines[0]), id="bench-confirm-title")
            yield Static(IndentedText(Text("\n".join(lines[1:]))), id="bench-confirm-body")  # wraps under its indent
            yield Static(Text("y runs it, n or escape cancels", style="bold"))
        yield KeyFooter()


class BenchScreen(SparkModal[None]):
    """The run: its progress, then its table. Escape stops a running bench (the finished cases are
    kept, shown and saved), and closes a finished one."""

    BINDINGS: ClassVar[list[BindingType]] = BENCH_BINDINGS
    DEFAULT_CSS = """
    BenchScreen { align: center middle; }
    BenchScreen > Vertical { width: 95%; height: 85%; border: round $primary; background: $surface; padding: 0 1; }
    BenchScreen #bench-title { text-style: bold; }
    BenchScreen #bench-table-scroll { height: 1fr; }
    """

    def __init__(
        self,
        job: BenchJob,
        ca_file: Path | None = None,
        folder: Path | None = None,
        on_end: Callable[[BenchRun | str], None] | None = None,
    ) -> None:
        """``on_end`` hears how the run ended: the run (finished or stopped), or why it did not start
        (the dashboard's action controller audits it)."""
        super().__init__()
        self.job = job
        self.on_end = on_end
        self.ca_file = ca_file
        self.folder = folder
        self.result: BenchRun | None = None
        self.saved_to: Path | None = None
        self.problem: str | None = None
        self._worker: Worker[None] | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"sparktui bench {self.job.target_name}"), id="bench-title")
            yield ProgressBar(id="bench-progress", show_eta=False)
            yield Static(Text("connecting"), id="bench-status")
            with KeyedScroll(id="bench-table-scroll"):
                yield Static(Text(""), id="bench-table")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._worker = self.run_worker(self._run(), name="bench", group="bench", exit_on_error=False)

    @property
    def running(self) -> bool:
        return self.result is None and self.problem is None

    async def _run(self) -> None:
        try:
            await run_job(self.job, self._progress, ca_file=self.ca_file)
        except BenchError as exc:
            self.problem = str(exc)
            if self.on_end is not None:
                self.on_end(self.problem)
            self.query_one("#bench-status", Static).update(Text(f"not run: {exc}"))
            return
        except BaseException:  # cancelled by escape: keep and show what finished
            self._finish(complete=False, problem="stopped from the dashboard")
            raise
        self._finish(complete=True)

    def _progress(self, state: BenchProgress) -> None:
        if not self.is_attached:
            return
        bar = self.query_one("#bench-progress", ProgressBar)
        bar.update(total=state.total_requests or None, progress=state.done_requests)
        status = progress_text(state)
        self.query_one("#bench-status", Static).update(Text(f"{status}; escape stops and keeps what finished"))
        if state.finished:
            self.query_one("#bench-table", Static).update(results_table(state.finished))

    def _finish(self, *, complete: bool, problem: str | None = None) -> None:
        run = self.result = self.job.result(complete=complete, problem=problem)
        self.saved_to = self._save(run)
        if self.on_end is not None:
            self.on_end(run)
        if not self.is_attached:
            return
        where = f"saved to {self.saved_to}" if self.saved_to else "not saved: the folder cannot be written"
        self.query_one("#bench-status", Static).update(Text(f"{'done' if run.complete else 'stopped'}; {where}"))
        heading = Text("\n".join(run_heading(run)))
        self.query_one("#bench-table", Static).update(Group(heading, results_table(run.cases)))

    def _save(self, run: BenchRun) -> Path | None:
        if not run.cases:
            return None
        try:
            folder = self.folder or Path.cwd()
            node = run.target.replace("/", "-")
            target = folder.absolute() / f"sparktui-bench-{node}-{time.strftime('%Y%m%d-%H%M%S')}.json"
            save(run, target)
        except OSError:
            return None
        return target

    def action_stop_or_close(self) -> None:
        if self.running and self._worker is not None:
            self._worker.cancel()
            return
        self.dismiss(None)


def bench_job(plan: BenchPlan) -> BenchJob:
    """The run of the dashboard's bench plan (every case, the prefill sweep to its ``prefill_max``)."""
    return BenchJob(plan.target_name, plan.spec, plan.cases, plan.concurrency, prefill_max=plan.prefill_max)


def results_table(cases: list[CaseResult] | tuple[CaseResult, ...]) -> Table:
    """The operators' table as the command prints it (the same cells), drawn to fit the screen."""
    table = Table(*TABLE_HEADER, box=None, header_style="bold", pad_edge=False)
    table.columns[0].no_wrap = True
    for column in table.columns[1:]:
        column.justify = "right"
    for case in cases:
        table.add_row(*result_row(case))
    return table
