"""``sparktui serve``: its options; ``sparktui.ui.serve`` serves the dashboard in a browser."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8088  # not 8000/8001 (vLLM), 8765/8882 (speech), 9835 (the GPU exporter)
DEFAULT_MAX_SESSIONS = 8
DEFAULT_FONT_SIZE = 16

SERVE_DESCRIPTION = """\
Serve the dashboard in a browser (through textual-serve): each browser session runs its own dashboard
on the configured fleet. It is read-only unless --allow-actions, which needs a token (on loopback
too). With a token, the page is opened once as http://HOST:PORT/?token=TOKEN; after that a
cookie carries it. docs/kiosk.md has a wall-screen setup."""

SERVE_EPILOG = """\
examples:
  sparktui serve --kiosk                                   kiosk on http://127.0.0.1:8088/
  sparktui serve --kiosk --host 0.0.0.0 --token-file ~/.config/sparktui/serve-token
  chromium --kiosk --app='http://spark-mon:8088/?token=...'
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``sparktui serve``. The global options are repeated here with no default, so they
    work before or after ``serve`` (``sparktui --kiosk serve`` and ``sparktui serve --kiosk``)."""
    quiet = argparse.SUPPRESS
    parser.add_argument("--config", type=Path, default=quiet, help="fleet config (default: $SPARKTUI_CONFIG, XDG)")
    parser.add_argument("--kiosk", action="store_true", default=quiet, help="serve the read-only rotating kiosk")
    parser.add_argument("--read-only", action="store_true", default=quiet, help="serve the dashboard without actions")
    parser.add_argument("--theme", default=quiet, help="spark-dark (default), spark-light or high-contrast")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free)")
    parser.add_argument(
        "--allow-actions",
        action="store_true",
        help="let the sessions run recovery actions (needs a token, also on loopback; refused with --kiosk)",
    )
    token = parser.add_mutually_exclusive_group()
    token.add_argument("--token-file", type=Path, metavar="FILE", help="access token: the first line of FILE")
    token.add_argument("--token-env", metavar="VAR", help="access token: the environment variable VAR")
    parser.add_argument("--demo", action="store_true", help="serve the dashboard of a demo fleet started here")
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=DEFAULT_MAX_SESSIONS,
        metavar="N",
        help=f"browser sessions at once, each a dashboard process (default {DEFAULT_MAX_SESSIONS})",
    )
    parser.add_argument(
        "--font-size",
        type=int,
        default=DEFAULT_FONT_SIZE,
        metavar="PX",
        help=f"terminal font size in the page (default {DEFAULT_FONT_SIZE}; ?fontsize=N in the address too)",
    )


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "serve",
        help="the dashboard in a browser (textual-serve), for a wall screen",
        description=SERVE_DESCRIPTION,
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    from sparktui.ui import serve

    return serve.main(args)
