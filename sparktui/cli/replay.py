"""``sparktui replay FILE``: its arguments and the ``ReplaySource`` they ask for; the dashboard shows it
(``sparktui.ui.replay``)."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparktui.record.replay import ReplaySource
    from sparktui.record.store import RecordingReader

EXIT_USAGE = 2

FROM_FORMS = (
    "HH:MM[:SS] (on the recording's first day, local time), 'YYYY-MM-DD HH:MM[:SS]', "
    "+DURATION after the start or -DURATION before the end (90s, 5m, 1h30m)"
)
FROM_HELP = "where to start: " + FROM_FORMS


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
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
    return replay


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


def run(args: argparse.Namespace) -> int:
    """``sparktui replay``: the recording in the dashboard; a bad file or option is one line."""
    from sparktui.record.types import RecordingError
    from sparktui.ui.replay import run_replay

    try:
        return run_replay(open_replay(args), args)
    except (RecordingError, ValueError) as exc:
        print(f"sparktui replay: {exc}", file=sys.stderr)
        return EXIT_USAGE
