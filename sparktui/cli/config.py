"""``sparktui config check [FILE]``: validate a config file."""

from __future__ import annotations

import argparse
from pathlib import Path

from sparktui.cli.common import EXIT_CONFIG, load_fleet
from sparktui.model.units import fmt_count


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    config = sub.add_parser("config", help="config file tools")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    config_check = config_sub.add_parser("check", help="validate a config file")
    config_check.add_argument("file", nargs="?", type=Path, help="the file (default: the configured one)")
    return config


def run(args: argparse.Namespace) -> int:
    fleet = load_fleet(args.file or args.config)
    if fleet is None:
        return EXIT_CONFIG
    instances = sum(len(n.vllm) for n in fleet.nodes)
    services = sum(len(n.services) for n in fleet.nodes)
    counts = (
        f"{fmt_count(len(fleet.nodes), 'node')}, {fmt_count(instances, 'vLLM instance')}, "
        f"{fmt_count(services, 'side service')}"
    )
    if instances == 0:
        # Valid, but nothing to watch: an init that found nothing, or a config still to be filled in.
        print(f"{fleet.source or 'config'}: {counts}: no [[nodes.vllm]] entry, so there is no vLLM to watch")
        return 1
    print(f"{fleet.source or 'config'}: ok: {counts}")
    return 0
