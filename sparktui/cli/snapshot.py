"""``sparktui snapshot``: scrape every node twice and print every number; ``--compare`` puts them beside
Prometheus's own."""

from __future__ import annotations

import argparse
import sys

from sparktui.cli.common import EXIT_CONFIG, collect_state, load_fleet


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    snap = sub.add_parser("snapshot", help="scrape every node twice and print every number (headless)")
    snap.add_argument("--json", action="store_true", help="print JSON instead of text (docs/json.md)")
    snap.add_argument(
        "--json-schema", action="store_true", help="print the JSON Schema of --json's output and exit (no scrape)"
    )
    snap.add_argument(
        "--no-canary",
        action="store_true",
        help="send no canary (a 1-token completion to an instance that is up but generated nothing)",
    )
    snap.add_argument("--interval", type=float, default=2.0, help="seconds between the two scrapes (default 2)")
    snap.add_argument(
        "--compare",
        action="store_true",
        help="print sparktui's direct numbers beside Prometheus's own for the same nodes (needs [prometheus])",
    )
    snap.add_argument(
        "--window",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="with --compare: the window of rates and quantiles, polled directly meanwhile (default 30)",
    )
    return snap


def run(args: argparse.Namespace) -> int:
    if args.json_schema:
        import json

        from sparktui.headless.json_schema import snapshot_schema

        sys.stdout.write(json.dumps(snapshot_schema(), indent=2) + "\n")
        return 0
    fleet = load_fleet(args.config)
    if fleet is None:
        return EXIT_CONFIG
    if args.compare:
        from sparktui.headless import compare

        return compare.main(fleet, args.window)
    found = collect_state(fleet, args.interval, canary=not args.no_canary)
    if found is None:
        return EXIT_CONFIG
    from sparktui.headless.snapshot import render_snapshot, views_json

    monitor, _now = found
    views = monitor.views
    sys.stdout.write(views_json(views) + "\n" if args.json else render_snapshot(views))
    return 0
