"""``sparktui watch``: its arguments, read into the headless watcher (``sparktui.headless.watch``)."""

from __future__ import annotations

import argparse
import os
import sys

from sparktui.cli.common import EXIT_CONFIG, load_fleet
from sparktui.cli.options import add_record_options

WATCH_DESCRIPTION = """\
Run the dashboard's collection and rules with no screen: evaluate the alert rules every poll interval
and send what fires and resolves to the configured notifiers. One log line per event on stdout, for
journald. Stop it with SIGTERM or Ctrl-C. docs/alerts.md has the rules, the notifiers and a systemd
unit."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The ``watch`` subcommand (``sparktui watch``)."""
    parser = sub.add_parser(
        "watch",
        help="headless: evaluate the alert rules and send notifications (run it as a service)",
        description=WATCH_DESCRIPTION,
    )
    parser.add_argument(
        "--for",
        dest="stop_after_s",
        type=float,
        metavar="SECONDS",
        help="stop after this many seconds (default: run until stopped)",
    )
    parser.add_argument(
        "--journal",
        choices=("auto", "yes", "no"),
        default="auto",
        help="start each line with its syslog priority <N> for journald (auto: when $JOURNAL_STREAM is set)",
    )
    add_record_options(parser)  # --record FILE / --black-box MINUTES (after `watch`: docs/record.md)
    return parser


def run(args: argparse.Namespace) -> int:
    """Load the config (``--config``), watch until SIGTERM/SIGINT or ``--for``."""
    fleet = load_fleet(getattr(args, "config", None))
    if fleet is None:
        return EXIT_CONFIG
    stop_after_s = getattr(args, "stop_after_s", None)
    if stop_after_s is not None and stop_after_s <= 0:
        print("sparktui watch: --for must be a number of seconds above 0", file=sys.stderr)
        return EXIT_CONFIG
    choice = getattr(args, "journal", "auto")
    journal = choice == "yes" or (choice == "auto" and bool(os.environ.get("JOURNAL_STREAM")))
    from sparktui.cli.options import recorder_from_args
    from sparktui.headless import watch
    from sparktui.record.types import RecordingError

    try:
        recorder = recorder_from_args(args, fleet) if hasattr(args, "record") else None
    except RecordingError as exc:
        print(f"sparktui watch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        return watch.main(fleet, stop_after_s=stop_after_s, journal=journal, recorder=recorder)
    finally:
        if recorder is not None:
            recorder.close()
