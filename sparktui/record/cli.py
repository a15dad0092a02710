"""Command-line glue for recordings: ``sparktui replay`` and ``sparktui export``, and the ``--record``
/ ``--black-box`` options of the dashboard and ``watch``.

``sparktui.cli`` calls ``add_parsers(sub)`` and ``add_record_options(parser)``, then ``main(args)``
for ``replay``/``export`` (passing the dashboard's ``run_replay``: this package never imports the
UI) and ``recorder_from_args(args, fleet)`` when it starts collecting.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from sparktui.record import DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES

if TYPE_CHECKING:
    from sparktui.model.specs import FleetSpec
    from sparktui.record.recorder import Recorder
    from sparktui.record.replay import ReplaySource
    from sparktui.record.store import RecordingReader

# The model loads only when a command runs: building the parser stays cheap for every command.

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
MIB = 1024 * 1024

RunReplay = Callable[["ReplaySource", argparse.Namespace], int]

FROM_FORMS = (
    "HH:MM[:SS] (on the recording's first day, local time), 'YYYY-MM-DD HH:MM[:SS]', "
    "+DURATION after the start or -DURATION before the end (90s, 5m, 1h30m)"
)
FROM_HELP = "where to start: " + FROM_FORMS


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = sub.add_parser(
        "replay",
        help="replay a recording in the dashboard",
        description="Run the dashboard on a recording (sparktui --record FILE, or a --black-box file) through "
        "the same model code as live data. Keys: space play/pause, . step, [ ] seek 10 s, { } seek 60 s, "
        "+ - speed. Actions are unavailable. docs/record.md has the details.",
    )
    replay.add_argument("file", type=Path, metavar="FILE", help="the recording")
    replay.add_argument("--speed", type=float, default=1.0, metavar="N", help="N times the recorded pace (default 1)")
    replay.add_argument("--from", dest="start", metavar="TIME", help=FROM_HELP)
    replay.add_argument("--paused", action="store_true", help="start paused")

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
    out.add_argument("--output", "-o", type=Path, metavar="FILE", help="write here instead of stdout")
    out.add_argument(
        "--window", type=float, default=30.0, metavar="SECONDS", help="window of rates and quantiles (default 30)"
    )


def add_record_options(parser: argparse.ArgumentParser) -> None:
    """``--record FILE`` and ``--black-box MINUTES`` (with their retention limits)."""
    group = parser.add_argument_group("recording (docs/record.md)")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--record", type=Path, metavar="FILE", help="record everything collected to FILE")
    where.add_argument(
        "--black-box",
        type=float,
        metavar="MINUTES",
        help="keep the last MINUTES in memory and write them, and 2 minutes after, to --black-box-file "
        "around each finding or alert",
    )
    group.add_argument(
        "--black-box-file",
        type=Path,
        metavar="FILE",
        help="where the black box writes (default: sparktui-blackbox.db in the current directory)",
    )
    group.add_argument(
        "--record-max-mb",
        type=float,
        default=DEFAULT_MAX_BYTES / MIB,
        metavar="MB",
        help=f"delete the oldest records beyond this size (default {DEFAULT_MAX_BYTES // MIB})",
    )
    group.add_argument(
        "--record-max-days",
        type=float,
        default=DEFAULT_MAX_AGE_S / 86400,
        metavar="DAYS",
        help=f"delete records older than this (default {DEFAULT_MAX_AGE_S / 86400:g})",
    )


def recorder_from_args(
    args: argparse.Namespace,
    fleet: FleetSpec,
    *,
    clock: Callable[[], float] = time.monotonic,
    config_text: str | None = None,
) -> Recorder | None:
    """The Recorder or BlackBox the options ask for, or None. Raises ``RecordingError`` (one line)."""
    from sparktui.record.blackbox import BlackBox
    from sparktui.record.recorder import Recorder
    from sparktui.record.types import RecordingError

    max_bytes = int(args.record_max_mb * MIB) if args.record_max_mb > 0 else None
    max_age_s = args.record_max_days * 86400 if args.record_max_days > 0 else None
    if args.record is not None:
        return Recorder(
            args.record, fleet, max_age_s=max_age_s, max_bytes=max_bytes, clock=clock, config_text=config_text
        )
    if args.black_box is not None:
        if not args.black_box > 0:
            raise RecordingError("--black-box: give the minutes to keep, more than 0")
        path = args.black_box_file or Path("sparktui-blackbox.db")
        return BlackBox(
            path, fleet, args.black_box, max_age_s=max_age_s, max_bytes=max_bytes, clock=clock, config_text=config_text
        )
    return None


_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")


def _duration(text: str) -> float | None:
    match = _DURATION.match(text)
    if match is None or not text:
        return None
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def parse_time(text: str, reader: RecordingReader) -> float:
    """``--from TIME`` as a unix time (see ``FROM_FORMS``); raises ValueError with one line."""
    text = text.strip()
    start, end = reader.wall_at(reader.start_t), reader.wall_at(reader.end_t)
    if text[:1] in "+-":
        found = _duration(text[1:])
        if found is not None:
            return start + found if text[0] == "+" else end - found
    clock = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?", text)
    if clock is not None:
        hour, minute, second = int(clock[1]), int(clock[2]), float(clock[3] or 0)
        day = datetime.fromtimestamp(start).replace(hour=0, minute=0, second=0, microsecond=0)
        at = day + timedelta(hours=hour, minutes=minute, seconds=second)
        while at.timestamp() < start and at.timestamp() + 86400 <= end:
            at += timedelta(days=1)  # the first such time inside the recording
        return at.timestamp()
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        pass
    raise ValueError(f"--from {text!r}: give {FROM_FORMS}")


def open_replay(args: argparse.Namespace) -> ReplaySource:
    """The ``ReplaySource`` of ``sparktui replay``'s arguments; RecordingError or ValueError (one line)."""
    from sparktui.record.replay import ReplaySource
    from sparktui.record.store import RecordingReader, wall_text

    if not args.speed > 0:
        raise ValueError("--speed must be more than 0")
    reader = RecordingReader(args.file)
    try:
        start = None if args.start is None else parse_time(args.start, reader)
        first, last = reader.wall_at(reader.start_t), reader.wall_at(reader.end_t)
    finally:
        reader.close()
    if start is not None and not first <= start <= last:
        print(
            f"sparktui replay: {args.start} is outside the recording ({wall_text(first)} to {wall_text(last)}); "
            "starting at the nearest end",
            file=sys.stderr,
        )
    return ReplaySource(args.file, speed=args.speed, start=start, playing=not args.paused)


def main(args: argparse.Namespace, *, run_replay: RunReplay | None = None) -> int:
    """``sparktui replay`` (shown by ``run_replay``, the UI's) and ``sparktui export``."""
    from sparktui.record.types import RecordingError

    command = args.command
    try:
        if command == "replay":
            if run_replay is None:
                print("sparktui replay: the dashboard is not available here", file=sys.stderr)
                return EXIT_USAGE
            return run_replay(open_replay(args), args)
        if command == "export":
            return _export(args)
    except (RecordingError, ValueError) as exc:
        print(f"sparktui {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"sparktui: {command!r} is not a recording command", file=sys.stderr)
    return EXIT_USAGE


def _export(args: argparse.Namespace) -> int:
    from sparktui.config import catalogue_for
    from sparktui.record.export import METRICS, check_metrics, export
    from sparktui.record.store import RecordingReader

    if args.metrics == "list":
        print("\n".join(METRICS))
        return EXIT_OK
    names = [n.strip() for n in args.metrics.split(",") if n.strip()] if args.metrics else None
    check_metrics(names)
    RecordingReader(args.file).close()  # a bad file is told before the output is created
    if args.output is None:
        rows, problem = export(args.file, args.to, names, sys.stdout, catalogue_for=catalogue_for, window_s=args.window)
    else:
        with args.output.open("w", encoding="utf-8", newline="") as out:
            rows, problem = export(args.file, args.to, names, out, catalogue_for=catalogue_for, window_s=args.window)
    if problem is not None:
        print(f"sparktui export: {problem}", file=sys.stderr)
        return EXIT_PROBLEM
    if args.output is not None:
        print(f"sparktui export: {rows:,} rows written to {args.output}", file=sys.stderr)
    return EXIT_OK
