"""``sparktui bench NODE[/INSTANCE]``: the operators' benchmark table, measured on one instance, saved as
JSON and compared with an earlier run (``sparktui.headless.bench``; docs/bench.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sparktui.cli.common import EXIT_CONFIG, load_fleet
from sparktui.cli.completion import instance_targets

if TYPE_CHECKING:
    from sparktui.model.bench import BenchProgress, BenchRun

EXIT_OK = 0
EXIT_PROBLEM = 1  # a request failed, or the run was stopped (what finished is still saved and printed)

BENCH_DESCRIPTION = """\
Benchmark one vLLM instance with streamed completions: the workloads short, medium, long, code and
reasoning; a concurrency sweep (1, 2, 4, 8); a prefill sweep up to the instance's max_model_len; and a
repeated system prompt for the prefix cache. Prints the markdown table, with the server's own counters
over each case. Ctrl-C stops it and keeps the cases that finished. It loads the engine: not on a
production instance at its peak. docs/bench.md tells what each number means."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    bench = sub.add_parser(
        "bench", help="benchmark a vLLM instance: the operators' table, before and after", description=BENCH_DESCRIPTION
    )
    bench.add_argument(
        "target", nargs="?", metavar="NODE[/INSTANCE]", help="the instance (from the config)"
    ).completer = instance_targets  # type: ignore[attr-defined]
    bench.add_argument(
        "--cases",
        nargs="+",
        metavar="CASE",
        help="short, medium, long, code, reasoning, concurrency, prefill, prefix (default: all)",
    )
    bench.add_argument(
        "--concurrency", default="1,2,4,8", metavar="N,N,...", help="the concurrency sweep's levels (default 1,2,4,8)"
    )
    bench.add_argument(
        "--requests", type=int, default=2, metavar="N", help="requests of each workload case, one at a time (default 2)"
    )
    bench.add_argument(
        "--prefill-max",
        type=int,
        metavar="TOKENS",
        help="end the prefill sweep at this prompt length (default: the instance's max_model_len)",
    )
    bench.add_argument("--out", type=Path, metavar="FILE.json", help="save the result here (JSON)")
    bench.add_argument(
        "--compare",
        nargs="+",
        type=Path,
        metavar="FILE.json",
        help="BEFORE.json: print the before/after table with this run; BEFORE.json AFTER.json: compare two "
        "saved runs (no NODE)",
    )
    return bench


def run(args: argparse.Namespace) -> int:
    from sparktui.model.bench import BenchFileError, compare_table

    compare: list[Path] = args.compare or []
    if len(compare) > 2 or (len(compare) == 2 and args.target):
        return _usage("--compare takes BEFORE.json, or BEFORE.json AFTER.json without NODE")
    if len(compare) == 2:
        from sparktui.headless.bench import load

        try:
            before, after = load(compare[0]), load(compare[1])
        except BenchFileError as exc:
            return _usage(str(exc))
        sys.stdout.write(compare_table(before, after))
        return EXIT_OK
    if not args.target:
        return _usage("name the instance: sparktui bench NODE[/INSTANCE] (or --compare BEFORE.json AFTER.json)")
    try:
        concurrency = tuple(int(n) for n in args.concurrency.split(",") if n.strip())
    except ValueError:
        return _usage(f"--concurrency wants numbers separated by commas (got {args.concurrency!r})")
    if not concurrency or min(concurrency) < 1 or args.requests < 1:
        return _usage("--concurrency levels and --requests must be 1 or more")
    before_run = None
    if compare:
        from sparktui.headless.bench import load

        try:
            before_run = load(compare[0])  # read before the run: a bad file is told before minutes of load
        except BenchFileError as exc:
            return _usage(str(exc))
    found = _measure(args, concurrency)
    if isinstance(found, int):
        return found
    from sparktui.headless.bench import failed_requests
    from sparktui.model.bench import render_run

    sys.stdout.write(render_run(found))
    if before_run is not None:
        sys.stdout.write("\n" + compare_table(before_run, found))
    return EXIT_OK if found.complete and not failed_requests(found) else EXIT_PROBLEM


def _usage(message: str) -> int:
    print(f"sparktui bench: {message}", file=sys.stderr)
    return EXIT_CONFIG


def _measure(args: argparse.Namespace, concurrency: tuple[int, ...]) -> BenchRun | int:
    """Run the bench with a progress bar on stderr; the run, or the exit status of why it could not."""
    from sparktui.headless.bench import BenchError, BenchJob, case_names_of, find_instance, run_bench, save
    from sparktui.model.bench import CASE_NAMES, DEFAULT_CASES

    names = case_names_of(args.cases) or DEFAULT_CASES
    unknown = [n for n in names if n not in CASE_NAMES]
    if unknown:
        return _usage(f"unknown case {unknown[0]!r}: choose from {', '.join(CASE_NAMES)}")
    fleet = load_fleet(args.config)
    if fleet is None:
        return EXIT_CONFIG
    try:
        node, spec = find_instance(fleet, args.target)
    except BenchError as exc:
        return _usage(str(exc))
    job = BenchJob(f"{node}/{spec.name}", spec, names, concurrency, args.requests, args.prefill_max)
    with _ProgressBar() if sys.stderr.isatty() else _ProgressLines() as bar:
        try:
            result = run_bench(job, bar.update, ca_file=fleet.ca_file)
        except BenchError as exc:
            return _usage(str(exc))
    if args.out is not None:
        try:
            save(result, args.out)
        except OSError as exc:
            print(f"sparktui bench: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        else:
            print(f"sparktui bench: saved to {args.out}", file=sys.stderr)
    return result


class _ProgressLines:
    """Without a terminal (cron, CI, a pipe): one line on stderr as each case starts, and no Rich."""

    def __init__(self) -> None:
        self.last: str | None = None

    def __enter__(self) -> _ProgressLines:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def update(self, state: BenchProgress) -> None:
        from sparktui.model.bench import progress_text

        what = progress_text(state)
        if what != self.last:
            print(f"sparktui bench: {what}, {state.done_requests}/{state.total_requests} requests", file=sys.stderr)
            self.last = what


class _ProgressBar:
    """Rich's progress bar on stderr: requests finished of the run's, and the case running."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self.task = self.progress.add_task("connecting", total=None)

    def __enter__(self) -> _ProgressBar:
        self.progress.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.progress.stop()

    def update(self, state: BenchProgress) -> None:
        from sparktui.model.bench import progress_text

        self.progress.update(
            self.task, description=progress_text(state), total=state.total_requests, completed=state.done_requests
        )
