"""``sparktui check``: a health check for cron (exit 0 healthy, 1 degraded, 2 down), or with ``--alerts``
the alert rules judged once."""

from __future__ import annotations

import argparse
import sys

from sparktui.cli.common import EXIT_CONFIG, collect_state, load_fleet


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    check = sub.add_parser("check", help="health check for cron: exit 0 healthy, 1 degraded, 2 down")
    check.add_argument("--json", action="store_true", help="print JSON instead of one line per problem")
    check.add_argument(
        "--interval",
        type=float,
        default=1.0,
        help="seconds between the two scrapes used for rates (default 1)",
    )
    check.add_argument(
        "--no-canary",
        action="store_true",
        help="send no canary (a 1-token completion to an instance that is up but generated nothing)",
    )
    check.add_argument("--alerts", action="store_true", help="judge the alert rules once (exit 0 none, 1 warn, 2 crit)")
    return check


def run(args: argparse.Namespace) -> int:
    fleet = load_fleet(args.config)
    if fleet is None:
        return EXIT_CONFIG
    found = collect_state(fleet, args.interval, canary=not args.no_canary)
    if found is None:
        return EXIT_CONFIG
    monitor, _now = found
    if args.alerts:
        from sparktui.headless.watch import run_check

        return run_check(fleet, monitor)
    from sparktui.headless.snapshot import exit_code, render_check, views_json

    views = monitor.views
    code = exit_code(views)
    sys.stdout.write(views_json(views, code) + "\n" if args.json else render_check(views))
    return code
