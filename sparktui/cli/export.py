"""``sparktui export FILE``: a recording's numbers as JSON lines or CSV (``sparktui.record.export``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sparktui.cli.common import EXIT_BROKEN_PIPE

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    out = sub.add_parser(
        "export",
        help="export a recording's numbers as JSON lines or CSV",
        description="Replay a recording through the model and write one row per node per tick: time, t "
        "(seconds since the start), node and the metrics. Unknown values are empty (CSV) or null (JSON).",
    )
    out.add_argument("file", type=Path, metavar="FILE", help="the recording")
    out.add_argument("--to", choices=("jsonl", "csv"), required=True, help="output format")
    out.add_argument(
        "--metrics", metavar="NAMES", help="comma-separated metrics (default: all; --metrics list names them)"
    )
    out.add_argument(
        "--output",
        "-o",
        type=Path,
        metavar="FILE",
        help="write here instead of stdout ('-': stdout); written whole or not at all, never the recording",
    )
    out.add_argument(
        "--window", type=float, default=30.0, metavar="SECONDS", help="window of rates and quantiles (default 30)"
    )
    return out


def run(args: argparse.Namespace) -> int:
    """Exit 0 written, 1 when the recording could not be read to its end or records were skipped, 2 a
    bad file or option or an output that cannot be written (one line); stdout closed early (``| head``):
    quietly, 141."""
    from sparktui.record.export import OutputError
    from sparktui.record.types import RecordingError

    try:
        return _export(args)
    except BrokenPipeError:
        # The reader of stdout went away: nothing more to say to it, nor to flush at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as exc:  # stdout itself cannot be written (a full disk behind a redirection)
        print(f"sparktui export: cannot write the output ({exc.strerror or exc})", file=sys.stderr)
        return EXIT_USAGE
    except (RecordingError, OutputError, ValueError) as exc:
        print(f"sparktui export: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _export(args: argparse.Namespace) -> int:
    from sparktui.config import catalogue_for
    from sparktui.record.export import METRICS, check_metrics, export, output_file
    from sparktui.record.store import RecordingReader

    if args.metrics == "list":
        print("\n".join(METRICS))
        sys.stdout.flush()
        return EXIT_OK
    names = [n.strip() for n in args.metrics.split(",") if n.strip()] if args.metrics else None
    check_metrics(names)
    RecordingReader(args.file).close()  # a bad file is told before the output is created
    to_stdout = args.output is None or str(args.output) == "-"
    if to_stdout:
        rows, problem = export(args.file, args.to, names, sys.stdout, catalogue_for=catalogue_for, window_s=args.window)
        sys.stdout.flush()  # a closed or full stdout is told here, not at exit
    else:
        with output_file(args.output, args.file) as out:
            rows, problem = export(args.file, args.to, names, out, catalogue_for=catalogue_for, window_s=args.window)
    if problem is not None:
        print(f"sparktui export: {problem}", file=sys.stderr)
        return EXIT_PROBLEM
    if not to_stdout:
        print(f"sparktui export: {rows:,} rows written to {args.output}", file=sys.stderr)
    return EXIT_OK
