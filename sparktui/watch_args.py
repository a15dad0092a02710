"""The ``watch`` subcommand's arguments: kept apart from ``sparktui.watch`` so building the CLI's
parser does not import the watcher (every command would pay for it at start-up)."""

from __future__ import annotations

import argparse

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
    from sparktui.record.cli import add_record_options

    add_record_options(parser)  # --record FILE / --black-box MINUTES (after `watch`: docs/record.md)
    return parser
