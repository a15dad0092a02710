"""``sparktui`` command line. Imports are lazy so the headless commands never load Textual or Rich."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparktui.model.specs import FleetSpec

EXIT_CONFIG = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparktui",
        description="Operations dashboard for vLLM on NVIDIA DGX Spark fleets.",
    )
    parser.add_argument("--config", type=Path, help="fleet config (default: $SPARKTUI_CONFIG, else XDG path)")
    sub = parser.add_subparsers(dest="command")

    snap = sub.add_parser("snapshot", help="scrape every node twice and print every number (headless)")
    snap.add_argument("--json", action="store_true", help="print JSON instead of text")
    snap.add_argument(
        "--interval", type=float, default=2.0, help="seconds between the two scrapes (default 2)"
    )

    check = sub.add_parser("check", help="health check for cron: exit 0 healthy, 1 degraded, 2 down")
    check.add_argument("--json", action="store_true", help="print JSON instead of one line per problem")
    check.add_argument(
        "--interval",
        type=float,
        default=1.0,
        help="seconds between the two scrapes used for rates (default 1)",
    )

    demo = sub.add_parser(
        "demo",
        help="start the simulated fleet on 127.0.0.1 and run a command against it",
        description="Start simulated DGX Sparks (real HTTP servers on 127.0.0.1), write their config, "
        "and run COMMAND with SPARKTUI_CONFIG pointing at it; without COMMAND, serve until Ctrl-C.",
    )
    demo.add_argument("--nodes", type=int, help="N single-model nodes instead of the default fleet of four")
    demo.add_argument("--seed", type=int, default=7, help="simulation seed (default 7)")
    demo.add_argument(
        "--scenario",
        default="healthy",
        help="what goes wrong: healthy (default), wedged, spec-degradation, kv-pressure, node-down, "
        "engine-dead, restart",
    )
    demo.add_argument("--serve-only", action="store_true", help="serve the fleet alone (the default for now)")
    demo.add_argument("--write-config", type=Path, help="also write the fleet's config to this file")
    demo.add_argument("run", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...] to run against the fleet")

    config = sub.add_parser("config", help="config file tools")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    config_check = config_sub.add_parser("check", help="validate a config file")
    config_check.add_argument("file", nargs="?", type=Path, help="the file (default: the configured one)")
    return parser


def _load(path: Path | None) -> FleetSpec | None:
    from sparktui.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "config":
        return _config_check(args.file or args.config)
    if args.command in ("snapshot", "check"):
        return _headless(args)
    if args.command == "demo":
        from sparktui.demo import run

        if args.nodes is not None and not 1 <= args.nodes <= 256:
            print("sparktui demo: --nodes must be between 1 and 256", file=sys.stderr)
            return 2
        from sparktui.demo.scenarios import SCENARIOS

        scenario = SCENARIOS.get(args.scenario)
        if scenario is None:
            print(
                f"sparktui demo: unknown scenario {args.scenario!r}; choose one of: {', '.join(SCENARIOS)}",
                file=sys.stderr,
            )
            return 2
        if args.nodes is not None and scenario.events:
            print(
                "sparktui demo: scenarios script the default four-node fleet; drop --nodes", file=sys.stderr
            )
            return 2
        command = [c for c in args.run if c != "--"]
        return run.main(args.nodes, args.seed, command, args.write_config, scenario)
    print(
        "sparktui: the interactive dashboard is not built yet. Working now:\n"
        "  sparktui snapshot [--json]   every node, service and derived number\n"
        "  sparktui check [--json]      exit 0 healthy, 1 degraded, 2 down\n"
        "  sparktui config check [FILE] validate a config file\n"
        "  sparktui demo [-- COMMAND]   the simulated fleet on 127.0.0.1",
        file=sys.stderr,
    )
    return 0 if args.command is None else 2


def _config_check(path: Path | None) -> int:
    fleet = _load(path)
    if fleet is None:
        return EXIT_CONFIG
    instances = sum(len(n.vllm) for n in fleet.nodes)
    services = sum(len(n.services) for n in fleet.nodes)
    print(
        f"{fleet.source or 'config'}: ok: {len(fleet.nodes)} nodes, {instances} vLLM instances, "
        f"{services} side services"
    )
    return 0


def _headless(args: argparse.Namespace) -> int:
    from sparktui import headless

    fleet = _load(args.config)
    if fleet is None:
        return EXIT_CONFIG
    interval = max(0.0, args.interval)
    state, now = asyncio.run(headless.collect(fleet, polls=2, interval_s=interval))
    views = state.view(now, window_s=None)
    code = headless.exit_code(views)
    if args.command == "snapshot":
        sys.stdout.write(headless.views_json(views) + "\n" if args.json else headless.render_snapshot(views))
        return 0
    sys.stdout.write(headless.views_json(views, code) + "\n" if args.json else headless.render_check(views))
    return code


if __name__ == "__main__":
    sys.exit(main())
