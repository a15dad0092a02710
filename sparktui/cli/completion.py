"""Shell completion: ``sparktui completion bash|zsh|fish`` prints the code to load, and the commands,
options, node names and vLLM instance names complete as they are typed (argcomplete).

Completing runs ``sparktui`` itself with argcomplete's environment; node and instance names come from
the config the command line would use (``--config``, else ``$SPARKTUI_CONFIG``, else the XDG path),
read as plain TOML: a config that does not validate still completes what it names.
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SHELLS = ("bash", "zsh", "fish")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    completion = sub.add_parser(
        "completion",
        help="print the shell code that completes sparktui's commands and node names",
        description=(
            "Print the shell code that completes sparktui's commands, options, node names and vLLM instance "
            'names. bash: eval "$(sparktui completion bash)" in ~/.bashrc; zsh: the same in ~/.zshrc; '
            "fish: sparktui completion fish > ~/.config/fish/completions/sparktui.fish"
        ),
    )
    completion.add_argument("shell", choices=SHELLS)
    return completion


def run(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    sys.stdout.write(shellcode(["sparktui"], shell=args.shell))
    return 0


def autocomplete(parser: argparse.ArgumentParser) -> None:
    """Answer a completion request (and exit) when the shell asked for one; nothing otherwise, and
    argcomplete is not even imported."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser)


def _config_nodes(parsed: argparse.Namespace) -> list[Mapping[str, Any]]:
    path = getattr(parsed, "config", None)
    if path is None:
        from sparktui.config import default_config_path

        path = default_config_path()
    try:
        data = tomllib.loads(Path(path).expanduser().read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    nodes = data.get("nodes")
    return [n for n in nodes if isinstance(n, Mapping)] if isinstance(nodes, list) else []


def node_names(prefix: str, parsed_args: argparse.Namespace, **_kwargs: object) -> list[str]:
    """The config's node names that start with what is typed."""
    names = [str(n.get("name", "")) for n in _config_nodes(parsed_args)]
    return [name for name in names if name and name.startswith(prefix)]


def instance_names(prefix: str, parsed_args: argparse.Namespace, **_kwargs: object) -> list[str]:
    """The vLLM instance names of the node already typed (of every node when none is)."""
    node = getattr(parsed_args, "node", None)
    found: list[str] = []
    for entry in _config_nodes(parsed_args):
        if node is not None and entry.get("name") != node:
            continue
        vllms = entry.get("vllm")
        for vllm in vllms if isinstance(vllms, list) else []:
            name = str(vllm.get("name", "")) if isinstance(vllm, Mapping) else ""
            if name and name.startswith(prefix) and name not in found:
                found.append(name)
    return found


def instance_targets(prefix: str, parsed_args: argparse.Namespace, **_kwargs: object) -> list[str]:
    """``NODE`` or ``NODE/INSTANCE`` (``sparktui bench``): the node names, then, once a node and its
    slash are typed, that node's vLLM instances after it."""
    node, slash, _typed = prefix.partition("/")
    if not slash:
        return node_names(prefix, parsed_args)
    found: list[str] = []
    for entry in _config_nodes(parsed_args):
        if entry.get("name") != node:
            continue
        vllms = entry.get("vllm")
        for vllm in vllms if isinstance(vllms, list) else []:
            name = str(vllm.get("name", "")) if isinstance(vllm, Mapping) else ""
            if name and f"{node}/{name}".startswith(prefix):
                found.append(f"{node}/{name}")
    return found
