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


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sparktui")
    except PackageNotFoundError:
        return "(not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparktui",
        description="Operations dashboard for vLLM on NVIDIA DGX Spark fleets.",
    )
    parser.add_argument("--version", action="version", version=f"sparktui {_version()}")
    parser.add_argument("--config", type=Path, help="fleet config (default: $SPARKTUI_CONFIG, else XDG path)")
    parser.add_argument("--read-only", action="store_true", help="the dashboard without actions")
    parser.add_argument("--kiosk", action="store_true", help="read-only wall screen: rotates, takes no input")
    parser.add_argument("--theme", help="spark-dark (default), spark-light or high-contrast")
    sub = parser.add_subparsers(dest="command")

    snap = sub.add_parser("snapshot", help="scrape every node twice and print every number (headless)")
    snap.add_argument("--json", action="store_true", help="print JSON instead of text")
    snap.add_argument("--interval", type=float, default=2.0, help="seconds between the two scrapes (default 2)")
    from sparktui.promql import add_compare_argument

    add_compare_argument(snap)

    check = sub.add_parser("check", help="health check for cron: exit 0 healthy, 1 degraded, 2 down")
    check.add_argument("--json", action="store_true", help="print JSON instead of one line per problem")
    check.add_argument(
        "--interval",
        type=float,
        default=1.0,
        help="seconds between the two scrapes used for rates (default 1)",
    )
    check.add_argument("--alerts", action="store_true", help="judge the alert rules once (exit 0 none, 1 warn, 2 crit)")

    from sparktui.watch_args import add_parser as add_watch_parser

    add_watch_parser(sub)

    demo = sub.add_parser(
        "demo",
        help="the dashboard on a simulated fleet (servers on 127.0.0.1)",
        description="Start simulated DGX Sparks (real HTTP servers on 127.0.0.1) and the dashboard on them. "
        "With -- COMMAND, run COMMAND with SPARKTUI_CONFIG pointing at the fleet instead; with --serve-only, "
        "serve the fleet until Ctrl-C.",
    )
    demo.add_argument("--nodes", type=int, help="N single-model nodes instead of the default fleet of four")
    demo.add_argument("--seed", type=int, default=7, help="simulation seed (default 7)")
    demo.add_argument(
        "--scenario",
        default="healthy",
        help="what goes wrong: healthy (default), incident, wedged, spec-degradation, kv-pressure, node-down, "
        "engine-dead, restart, ssh-drop, soak",
    )
    demo.add_argument(
        "--fault-every",
        type=float,
        metavar="SECONDS",
        help="with --scenario soak: seconds between injected faults (default 180)",
    )
    demo.add_argument("--serve-only", action="store_true", help="serve the fleet without the dashboard")
    demo.add_argument("--write-config", type=Path, help="also write the fleet's config to this file")
    demo.add_argument("run", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...] to run against the fleet")

    _init_parser(sub)
    _action_parser(sub)

    from sparktui.ui import serve  # stdlib-only at import: the headless commands stay light

    serve.add_parser(sub)

    from sparktui.record import cli as record_cli

    record_cli.add_parsers(sub)
    record_cli.add_record_options(parser)

    shot = sub.add_parser("screenshot", help="an SVG of a dashboard screen on the demo fleet (for the docs)")
    shot.add_argument("--screen", choices=("fleet", "node", "kiosk"), default="fleet")
    shot.add_argument("--size", default="160x48", help="COLUMNSxROWS (default 160x48)")
    shot.add_argument("--seed", type=int, default=7)
    shot.add_argument("--scenario", default="healthy", help="the demo scenario to run first")
    shot.add_argument("--seconds", type=float, default=60.0, help="simulated seconds to run before the shot")
    shot.add_argument("--out", type=Path, help="the SVG file (default docs/screenshots/SCREEN-THEME.svg)")

    config = sub.add_parser("config", help="config file tools")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    config_check = config_sub.add_parser("check", help="validate a config file")
    config_check.add_argument("file", nargs="?", type=Path, help="the file (default: the configured one)")
    return parser


INIT_DESCRIPTION = """\
Probe each HOST and write a commented config for it: one [[nodes]] per host, named from its hostname.

Over HTTP (all at once, short timeouts), every port below is asked /version, /v1/models, /metrics,
/health and /api/tags; what answers says what it is: a vLLM ({"version": ...} on /version), a GPU
exporter or node_exporter (/metrics, told apart by metric names), Ollama (/api/tags) or a side
service (/health). Over SSH (with --user, --port, --key, --known-hosts), the systemd units and docker
containers that run vLLM are read, with their `vllm serve` command lines: --port (and docker's
-p HOST:CONTAINER), --gpu-memory-utilization and --served-model-name.

Every value in the file has a comment saying how it was found; what was probed and not found is
listed in comments. The file is validated before it is written, and an existing file is only
replaced with --force. An SSH problem (unknown host key...) is reported in one line and skips SSH
for that host only; its HTTP findings are still written. docs/init.md has the details and an example."""

INIT_EPILOG = """\
ports probed by default:
  vLLM           8000, 8001                      (--vllm-ports replaces them)
  services       asr=8765, tts=8882, ollama=11434 (--service-ports replaces them)
  exporters      9835, 9400, 9100                (--exporter-ports replaces them)
  --ports adds ports to the list, each recognised by what it answers.

examples:
  sparktui init 192.168.1.11 192.168.1.12 --user milo
  sparktui init spark1 --print --no-ssh
  sparktui init 127.0.0.1 --vllm-ports 18001,18002 --service-ports asr=18765 --exporter-ports 19835
"""


def _init_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = sub.add_parser(
        "init",
        help="probe hosts and write a commented config",
        description=INIT_DESCRIPTION,
        epilog=INIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.add_argument("hosts", nargs="+", metavar="HOST", help="host name or IP address of a node")
    where = init.add_mutually_exclusive_group()
    where.add_argument(
        "--output",
        "-o",
        type=Path,
        metavar="FILE",
        help="write here (default: --config, else $SPARKTUI_CONFIG, else the XDG config path)",
    )
    where.add_argument(
        "--print", dest="print_config", action="store_true", help="print the config to stdout, write no file"
    )
    init.add_argument("--force", action="store_true", help="overwrite the file if it exists")
    ssh = init.add_argument_group("SSH (written into each node's [nodes.ssh])")
    ssh.add_argument("--user", help="SSH user (default: your user name)")
    ssh.add_argument("--port", type=int, help="SSH port (default 22)")
    ssh.add_argument("--key", type=Path, metavar="FILE", help="private key (default: the SSH agent, ~/.ssh/id_*)")
    ssh.add_argument(
        "--known-hosts",
        type=Path,
        metavar="FILE",
        help="known_hosts to check host keys against (default ~/.ssh/known_hosts)",
    )
    ssh.add_argument("--no-ssh", action="store_true", help="probe over HTTP only")
    probe = init.add_argument_group("probing")
    probe.add_argument("--ports", metavar="PORTS", help="more ports to probe, comma-separated (8002,9500)")
    probe.add_argument("--vllm-ports", metavar="PORTS", help="vLLM ports instead of 8000,8001")
    probe.add_argument(
        "--service-ports",
        metavar="KIND=PORT,...",
        help="side services instead of asr=8765,tts=8882,ollama=11434 (KIND: asr, tts, ollama, http)",
    )
    probe.add_argument("--exporter-ports", metavar="PORTS", help="exporter ports instead of 9835,9400,9100")
    probe.add_argument(
        "--timeout", type=float, default=2.0, metavar="SECONDS", help="timeout of each HTTP probe (default 2)"
    )


ACTIONS = ("restart", "drop-caches", "kill-workers", "warmup")


def _action_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    action = sub.add_parser(
        "action",
        help="run a recovery action on a node (restart, drop-caches, kill-workers, warmup)",
        description="Collect the node's state, print the plan (node, target, exact commands), confirm on a "
        "terminal (or --yes), run it and print the result; every action goes to the audit log "
        "(docs/actions.md). Exit 0 done, 1 failed, 2 refused or not confirmed.",
    )
    action.add_argument("node", metavar="NODE", help="the node's name in the config")
    action.add_argument("action", metavar="ACTION", choices=ACTIONS, help=", ".join(ACTIONS))
    action.add_argument("--instance", metavar="NAME", help="which vLLM of the node (needed when it runs several)")
    action.add_argument("--yes", action="store_true", help="run without asking (for scripts)")


def _action(args: argparse.Namespace) -> int:
    from sparktui.actions import headless as actions

    fleet = _load(args.config)
    if fleet is None:
        return EXIT_CONFIG
    read_only = bool(args.read_only or args.kiosk)
    return actions.main(fleet, args.node, args.action, instance=args.instance, yes=args.yes, read_only=read_only)


def _load(path: Path | None) -> FleetSpec | None:
    from sparktui.config import ConfigError, load_config

    try:
        fleet = load_config(path)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return None
    if fleet.prometheus is None or fleet.nodes:
        return fleet
    from sparktui.sources.prometheus import PrometheusError, with_discovered_nodes

    try:  # no [[nodes]]: the fleet is whatever Prometheus scrapes
        return asyncio.run(with_discovered_nodes(fleet))
    except PrometheusError as exc:
        print(str(exc), file=sys.stderr)
        return None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "config":
        return _config_check(args.file or args.config)
    if args.command == "watch":
        from sparktui import watch

        return watch.main(args)
    if args.command in ("snapshot", "check"):
        return _headless(args)
    if args.command == "action":
        return _action(args)
    if args.command == "serve":
        from sparktui.ui import serve

        return serve.main(args)
    if args.command in ("replay", "export"):
        from sparktui.record import cli as record_cli

        if args.command == "replay":
            from sparktui.ui.replay import run_replay

            return record_cli.main(args, run_replay=run_replay)
        return record_cli.main(args)
    if args.command == "screenshot":
        return _screenshot(args)
    if args.command == "init":
        from sparktui import init

        return init.main(args)
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
        if args.fault_every is not None:
            from sparktui.demo.scenarios import MIN_FAULT_EVERY_S, soak_scenario

            if scenario.name != "soak":
                print("sparktui demo: --fault-every applies to --scenario soak only", file=sys.stderr)
                return 2
            if not args.fault_every >= MIN_FAULT_EVERY_S:
                print(
                    f"sparktui demo: --fault-every must be at least {MIN_FAULT_EVERY_S:g} seconds "
                    f"(got {args.fault_every:g}): a fault lasts a third of it and must clear before the next",
                    file=sys.stderr,
                )
                return 2
            scenario = soak_scenario(args.fault_every)
        if args.nodes is not None and scenario.events and not scenario.any_fleet:
            print("sparktui demo: scenarios script the default four-node fleet; drop --nodes", file=sys.stderr)
            return 2
        command = [c for c in args.run if c != "--"]
        if command or args.serve_only:
            return run.main(args.nodes, args.seed, command, args.write_config, scenario)
        from sparktui.ui.run import run_demo_dashboard

        return run_demo_dashboard(
            nodes=args.nodes,
            seed=args.seed,
            scenario=args.scenario,
            fault_every_s=args.fault_every,
            read_only=args.read_only,
            kiosk=args.kiosk,
            theme=args.theme,
        )
    return _dashboard(args)


def _screenshot(args: argparse.Namespace) -> int:
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
    out = args.out or Path("docs/screenshots") / f"{args.screen}-{theme}.svg"
    from sparktui.ui import screenshot

    return screenshot.main(
        out, theme=theme, screen=args.screen, size=(columns, rows), seed=args.seed, scenario=args.scenario
    )


def _dashboard(args: argparse.Namespace) -> int:
    from sparktui.config import ConfigError, default_config_path, load_config

    path = args.config or default_config_path()
    if not path.exists():
        print(
            f"sparktui: no config at {path}.\n"
            "  sparktui init HOST...   probe your Sparks and write one\n"
            "  sparktui demo           try the dashboard on a simulated fleet",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    try:
        fleet = load_config(path)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_CONFIG
    from sparktui.record import cli as record_cli
    from sparktui.record.types import RecordingError
    from sparktui.ui.run import run_dashboard

    try:
        recorder = record_cli.recorder_from_args(args, fleet, config_text=path.read_text())
    except RecordingError as exc:
        print(f"sparktui: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return run_dashboard(fleet, read_only=args.read_only, kiosk=args.kiosk, theme=args.theme, recorder=recorder)


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
    if args.command == "snapshot" and args.compare:
        from sparktui import promql

        return promql.main(fleet, args.window)
    if fleet.prometheus is not None:
        from sparktui.sources import prometheus

        try:
            state, now = asyncio.run(prometheus.collect(fleet, window_s=60.0))
        except prometheus.PrometheusError as exc:
            print(str(exc), file=sys.stderr)
            return EXIT_CONFIG
    else:
        interval = max(0.0, args.interval)
        state, now = asyncio.run(headless.collect(fleet, polls=2, interval_s=interval))
    if args.command == "check" and args.alerts:
        from sparktui import watch

        return watch.run_check(fleet, state, now)
    views = state.view(now, window_s=None)
    code = headless.exit_code(views)
    if args.command == "snapshot":
        sys.stdout.write(headless.views_json(views) + "\n" if args.json else headless.render_snapshot(views))
        return 0
    sys.stdout.write(headless.views_json(views, code) + "\n" if args.json else headless.render_check(views))
    return code


if __name__ == "__main__":
    sys.exit(main())
