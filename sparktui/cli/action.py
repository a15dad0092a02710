"""``sparktui action NODE ACTION``: its arguments, read into the terminal flow of ``sparktui.headless.action``."""

from __future__ import annotations

import argparse

from sparktui.actions.registry import cli_choices
from sparktui.cli.common import EXIT_CONFIG, load_fleet
from sparktui.cli.completion import instance_names, node_names

ACTIONS = cli_choices()  # the table's (sparktui/actions/registry.py): one spelling, the keys' ids too


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    action = sub.add_parser(
        "action",
        help="run a recovery action on a node (restart, drop-caches, kill-workers, warmup), or a finding's fix",
        description="Collect the node's state, print the plan (node, target, exact commands), confirm on a "
        "terminal (or --yes), run it and print the result; every action goes to the audit log "
        "(docs/actions.md). `fix` runs the whole fix of a finding (--finding ID, else the worst one open on the "
        "node), its actions in order, stopping at the first that fails. Exit 0 done, 1 failed, 2 refused or not "
        "confirmed.",
    )
    action.add_argument("node", metavar="NODE", help="the node's name in the config").completer = node_names  # type: ignore[attr-defined]
    action.add_argument("action", metavar="ACTION", choices=ACTIONS, help=", ".join(ACTIONS))
    action.add_argument(
        "--instance", metavar="NAME", help="which vLLM of the node (needed when it runs several)"
    ).completer = instance_names  # type: ignore[attr-defined]
    action.add_argument(
        "--finding", metavar="ID", help="fix: the finding (rule id) whose fix to run (default: the worst one open)"
    )
    action.add_argument("--yes", action="store_true", help="run without asking (for scripts)")
    return action


def run(args: argparse.Namespace) -> int:
    from sparktui.headless import action

    fleet = load_fleet(args.config)
    if fleet is None:
        return EXIT_CONFIG
    read_only = bool(args.read_only or args.kiosk)
    return action.main(
        fleet,
        args.node,
        args.action,
        instance=args.instance,
        finding=args.finding,
        yes=args.yes,
        read_only=read_only,
    )
