"""``sparktui`` command line: one module per command, each owning its arguments (``add_parser``) and
its ``run(args)``, which imports the command's heavy parts when it runs. Building the parser loads no
more than argparse, so ``sparktui --version`` starts fast and the headless commands never load Textual
or Rich (tests/integration/test_import_hygiene.py)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from sparktui import installed_version
from sparktui.cli import (
    action,
    bench,
    check,
    completion,
    config,
    dashboard,
    demo,
    export,
    init,
    replay,
    screenshot,
    serve,
    snapshot,
    watch,
)
from sparktui.cli.common import EXIT_CONFIG, guarded_output
from sparktui.cli.options import add_global_options, add_record_options

__all__ = ["EXIT_CONFIG", "build_parser", "main"]

# In the order ``sparktui --help`` lists them.
COMMANDS = (snapshot, check, watch, demo, init, action, serve, replay, export, screenshot, config, completion, bench)

Run = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparktui",
        description="Operations dashboard for vLLM on NVIDIA DGX Spark fleets.",
    )
    parser.add_argument("--version", action="version", version=f"sparktui {installed_version()}")
    add_global_options(parser)
    sub = parser.add_subparsers(dest="command")
    for command in COMMANDS:
        # Not `run`: that is the name of demo's `-- COMMAND` argument.
        command.add_parser(sub).set_defaults(run_command=command.run)
    add_record_options(parser)  # the dashboard's (no subcommand); `watch` has its own
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    completion.autocomplete(parser)  # the shell asking for completions: answered, and the process exits
    args = parser.parse_args(argv)
    run: Run = getattr(args, "run_command", dashboard.run)  # no subcommand: the dashboard
    return guarded_output(lambda: run(args), args.command or "dashboard")
