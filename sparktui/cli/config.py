"""``sparktui config check [FILE]``: validate a config file."""

from __future__ import annotations

import argparse
from pathlib import Path

from sparktui.cli.common import EXIT_CONFIG, load_fleet


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
    print(
        f"{fleet.source or 'config'}: ok: {len(fleet.nodes)} nodes, {instances} vLLM instances, "
        f"{services} side services"
    )
    return 0
