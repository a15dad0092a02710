"""``sparktui screenshot``: an SVG of a dashboard screen on the demo fleet (for the docs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sparktui.cli.common import EXIT_CONFIG


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    shot = sub.add_parser("screenshot", help="an SVG of a dashboard screen on the demo fleet (for the docs)")
    shot.add_argument("--screen", choices=("fleet", "node", "logs", "kiosk"), default="fleet")
    shot.add_argument("--size", default="160x48", help="COLUMNSxROWS (default 160x48)")
    shot.add_argument("--seed", type=int, default=7)
    shot.add_argument("--scenario", default="healthy", help="the demo scenario to run first")
    shot.add_argument("--seconds", type=float, default=60.0, help="simulated seconds to run before the shot")
    shot.add_argument("--out", type=Path, help="the SVG file (default: ./sparktui-SCREEN-THEME.svg)")
    return shot


def run(args: argparse.Namespace) -> int:
    from sparktui.demo.scenarios import SCENARIOS

    try:
        columns, rows = (int(part) for part in args.size.lower().split("x"))
    except ValueError:
        print(f"sparktui screenshot: --size must look like 160x48 (got {args.size!r})", file=sys.stderr)
        return EXIT_CONFIG
    if args.scenario not in SCENARIOS:
        print(
            f"sparktui screenshot: unknown scenario {args.scenario!r}; choose one of: {', '.join(SCENARIOS)}",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    theme = args.theme or "spark-dark"
    out = args.out or Path(f"sparktui-{args.screen}-{theme}.svg")
    from sparktui.ui import screenshot

    return screenshot.main(
        out,
        theme=theme,
        screen=args.screen,
        size=(columns, rows),
        seed=args.seed,
        scenario=args.scenario,
        seconds=args.seconds,
    )
