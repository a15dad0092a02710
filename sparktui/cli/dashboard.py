"""``sparktui`` with no command: the dashboard on the configured fleet (its options are the top-level
ones: ``sparktui.cli.options``)."""

from __future__ import annotations

import argparse
import sys

from sparktui.cli.common import EXIT_CONFIG, print_warning


def run(args: argparse.Namespace) -> int:
    from sparktui.config import ConfigError, default_config_path, load_config

    path = args.config or default_config_path()
    try:  # no file at all: one line saying how to try the demo or write one (sparktui.config)
        fleet = load_config(path, warn=print_warning)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_CONFIG
    from sparktui.cli.options import recorder_from_args
    from sparktui.record.types import RecordingError
    from sparktui.ui.run import run_dashboard

    try:
        recorder = recorder_from_args(args, fleet, config_text=path.read_text())
    except RecordingError as exc:
        print(f"sparktui: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return run_dashboard(fleet, read_only=args.read_only, kiosk=args.kiosk, theme=args.theme, recorder=recorder)
