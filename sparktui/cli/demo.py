"""``sparktui demo``: the dashboard on a simulated fleet, or a command run against it, or the fleet alone."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    demo = sub.add_parser(
        "demo",
        help="the dashboard on a simulated fleet (servers on 127.0.0.1)",
        description="Start simulated DGX Sparks (real HTTP servers on 127.0.0.1) and the dashboard on them. "
        "With -- COMMAND, run COMMAND with SPARKTUI_CONFIG pointing at the fleet instead; with --serve-only, "
        "serve the fleet until Ctrl-C.",
    )
    demo.add_argument("--nodes", type=int, help="N single-model nodes instead of the default fleet of four")
    demo.add_argument(
        "--fleet",
        choices=("default", "mixed"),
        help="which fleet: default (four vLLM nodes, a llama.cpp beside spark1's), or mixed (every engine a Spark "
        "runs, vLLM, SGLang, TensorRT-LLM, NIM, llama.cpp and Ollama, each at its default port on a loopback "
        "address of its node's own); a scenario written for one fleet picks it",
    )
    demo.add_argument("--seed", type=int, default=7, help="simulation seed (default 7)")
    demo.add_argument(
        "--scenario",
        default="healthy",
        help="what goes wrong: healthy (default), incident, wedged, spec-degradation, kv-pressure, node-down, "
        "engine-dead, restart, ssh-drop, soak; on the mixed fleet: mixed, ollama-overdue",
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
    return demo


def run(args: argparse.Namespace) -> int:
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
    fleet = args.fleet or scenario.fleet
    if args.nodes is not None and fleet != "default":
        print("sparktui demo: --nodes makes a fleet of vLLM nodes; drop --fleet", file=sys.stderr)
        return 2
    if fleet != scenario.fleet and scenario.events and not scenario.any_fleet:
        print(
            f"sparktui demo: scenario {scenario.name} scripts the {scenario.fleet} fleet; drop --fleet {fleet}",
            file=sys.stderr,
        )
        return 2
    command = [c for c in args.run if c != "--"]
    if command or args.serve_only:
        from sparktui.demo import run as demo_run

        return demo_run.main(args.nodes, args.seed, command, args.write_config, scenario, fleet=fleet)
    from sparktui.ui.run import run_demo_dashboard

    return run_demo_dashboard(
        nodes=args.nodes,
        seed=args.seed,
        scenario=args.scenario,
        fleet=fleet,
        fault_every_s=args.fault_every,
        read_only=args.read_only,
        kiosk=args.kiosk,
        theme=args.theme,
    )
