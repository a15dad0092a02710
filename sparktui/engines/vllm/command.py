"""A ``vllm serve`` command line: how it is recognised, and what its arguments say.

``sparktui init`` reads the command line of a systemd unit or a docker container (the shell around it,
``bash -c`` and ``docker run``, is read by ``sparktui.discovery``); what is vLLM's is here. vLLM is
started as ``vllm serve [MODEL] ...`` or ``python -m vllm.entrypoints.openai.api_server ...``; its
images (``vllm/vllm-openai``...) have ``vllm serve`` as their entrypoint, so their command is its
arguments.

Only the options sparktui uses are read (``--port``, ``--host``, ``--gpu-memory-utilization``,
``--served-model-name``, ``--model``, ``--speculative-config``, ``--nnodes``, ``--headless``,
``--api-key``, ``--config``); the others and their values are skipped. A first word that is not an
option is the model. Options may be written with ``_`` (vLLM accepts both) and as ``--opt=value``; the
last one given wins, as with argparse. Options in a ``--config`` YAML file are not read. Pure: the words
are untrusted text from a host.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sparktui.model.numbers import is_digits

PROGRAM = "vllm"
MODULE = "vllm.entrypoints.openai.api_server"
DEFAULT_PORT = 8000  # vLLM's own default for --port

_VALUE_OPTIONS = frozenset(
    {
        "--port",
        "--host",
        "--gpu-memory-utilization",
        "--served-model-name",
        "--model",
        "--speculative-config",
        "--nnodes",
        "--api-key",
        "--config",
    }
)
_FLAGS = frozenset({"--headless"})


def server_start(argv: Sequence[str], index: int) -> int | None:
    """When ``argv[index]`` starts a vLLM server, the index of its first argument; else None.

    ``vllm serve`` (the console script under any path) or ``vllm.entrypoints.openai.api_server``
    (``python -m ...``).
    """
    word = argv[index]
    if word.rsplit("/", 1)[-1] == PROGRAM and index + 1 < len(argv) and argv[index + 1] == "serve":
        return index + 2
    if word.endswith(MODULE):
        return index + 1
    return None


def is_server_image(image: str) -> bool:
    """A vLLM image (``vllm/vllm-openai:latest``, ``nvcr.io/nvidia/vllm``...: any that names vLLM), whose
    entrypoint is ``vllm serve``."""
    return "vllm" in image.lower()


def image_serves(image: str, command: Sequence[str]) -> bool:
    """Whether a container of ``image`` running ``command`` (with no entrypoint of its own given) runs
    ``vllm serve`` with ``command`` as its arguments: a vLLM image, and a command that starts with an
    option or a model (``Qwen/Qwen3...``, a path)."""
    return is_server_image(image) and bool(command) and (command[0].startswith("-") or "/" in command[0])


@dataclass(frozen=True, slots=True)
class VllmArgs:
    """What a ``vllm serve`` command line says about the server sparktui will watch."""

    model: str | None = None
    served_model_name: str | None = None
    port: int | None = DEFAULT_PORT  # None: given, but not a number (`--port $PORT`)
    port_given: bool = False
    port_raw: str | None = None
    host: str | None = None
    gpu_memory_utilization: float | None = None
    gpu_memory_utilization_raw: str | None = None  # given, but not a fraction in (0, 1]
    speculative: str | None = None  # "mtp, 2 speculative tokens"
    headless: bool = False  # a multi-node worker: no HTTP endpoint
    nnodes: int | None = None
    api_key: bool = False  # started with --api-key (the key itself is never kept)
    config_file: str | None = None  # --config FILE: its settings are not read

    def port_how(self) -> str:
        """How the port was given, for the comment that says where the config's port came from."""
        if self.port is None:
            return f"`--port {self.port_raw}`, which init cannot read"
        return f"`--port {self.port}`" if self.port_given else f"vLLM's default port {self.port}"


def _number_like(word: str) -> bool:
    return re.fullmatch(r"-?[0-9.]+", word) is not None


def _whole(text: str | None) -> int | None:
    return int(text) if text is not None and is_digits(text) else None


def _speculative(value: str) -> str:
    """``--speculative-config`` JSON in words: ``mtp, 2 speculative tokens``, ``draft model, ...``."""
    try:
        config = json.loads(value)
    except ValueError:
        return "configured (its JSON could not be read from the command line)"
    if not isinstance(config, dict):
        return "configured"
    method = config.get("method") or ("draft model" if config.get("model") else "configured")
    tokens = config.get("num_speculative_tokens")
    text = str(method)
    if isinstance(tokens, int):
        text += f", {tokens} speculative tokens"
    drafter = config.get("model")
    if isinstance(drafter, str) and drafter:
        text += f", drafter {drafter}"
    return text


def _fraction(raw: str | None) -> float | None:
    """``--gpu-memory-utilization`` as a fraction in (0, 1]; None for anything else."""
    if raw is None:
        return None
    try:
        fraction = float(raw)
    except ValueError:
        return None
    return fraction if 0 < fraction <= 1 else None


def parse_server_args(args: Sequence[str]) -> VllmArgs:
    """Read the arguments that follow ``vllm serve``: ``MODEL --flag value --flag=value ...``; those
    sparktui does not use are skipped."""
    model = args[0] if args and not args[0].startswith("-") else None
    values: dict[str, str] = {}
    flags: set[str] = set()
    index = 1 if model is not None else 0
    while index < len(args):
        word = args[index]
        index += 1
        if not word.startswith("-") or word == "-":
            continue
        name, eq, value = word.partition("=")
        if name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")
        if name in _FLAGS:
            flags.add(name)
            continue
        if name not in _VALUE_OPTIONS:
            continue
        if not eq:
            if index < len(args) and (not args[index].startswith("-") or _number_like(args[index])):
                value = args[index]
                index += 1
            else:
                continue
        values[name] = value
    port_raw = values.get("--port")
    port = _whole(port_raw)
    if port is not None and not 1 <= port <= 65535:
        port = None
    gpu_raw = values.get("--gpu-memory-utilization")
    gpu = _fraction(gpu_raw)
    return VllmArgs(
        model=model or values.get("--model"),
        served_model_name=values.get("--served-model-name"),
        port=DEFAULT_PORT if port_raw is None else port,
        port_given=port_raw is not None,
        port_raw=port_raw,
        host=values.get("--host"),
        gpu_memory_utilization=gpu,
        gpu_memory_utilization_raw=gpu_raw if gpu_raw is not None and gpu is None else None,
        speculative=_speculative(values["--speculative-config"]) if "--speculative-config" in values else None,
        headless="--headless" in flags,
        nnodes=_whole(values.get("--nnodes")),
        api_key="--api-key" in values,
        config_file=values.get("--config"),
    )
