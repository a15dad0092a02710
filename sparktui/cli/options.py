"""The options every command reads (``--config``, ``--read-only``, ``--kiosk``, ``--theme``) and the
recording options of the dashboard and ``watch`` (``--record FILE`` / ``--black-box MINUTES``), with the
recorder they ask for."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sparktui.record import DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES  # constants only: no model loaded

if TYPE_CHECKING:
    from sparktui.model.specs import FleetSpec
    from sparktui.record.recorder import Recorder

MIB = 1024 * 1024


def add_global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="fleet config (default: $SPARKTUI_CONFIG, else XDG path)")
    parser.add_argument("--read-only", action="store_true", help="the dashboard without actions")
    parser.add_argument("--kiosk", action="store_true", help="read-only wall screen: rotates, takes no input")
    parser.add_argument("--theme", help="spark-dark (default), spark-light or high-contrast")


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
