"""A TensorRT-LLM ``trtllm-serve`` command line: how it is recognised, and what its options say.

``sparktui init`` reads the command line of a systemd unit or a docker container (the shell around it,
``bash -c`` and ``docker run``, is read by ``sparktui.discovery``); what is TensorRT-LLM's is here.
``trtllm-serve`` is a click group whose first word, when it is not one of its other commands (``grpc``,
``disaggregated``...), is the ``serve`` command's: ``trtllm-serve MODEL ...`` and
``trtllm-serve serve MODEL ...`` are the same (``tensorrt_llm/commands/serve.py``, ``DefaultGroup``).

Options are read as click reads ``serve``'s: ``--opt value`` or ``--opt=value``, the last one given wins,
and an option that takes a value takes the next word whatever it is (click does not look at it); every
option of ``serve`` takes one value but its three flags. ``MODEL`` is the one word that is no option or
value, wherever it stands. ``--host`` is ``localhost`` and ``--port`` 8000 when not given. Options in an
``--extra_llm_api_options`` (``--config``) YAML file are not read. Pure: the words are untrusted text
from a host.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktui.engines.command_line import bounded_whole, loopback_only, port_option_how

PROGRAM = "trtllm-serve"
PROGRAM_LABEL = "trtllm-serve"  # as the config's comments name it
DEFAULT_PORT = 8000  # serve's --port default
DEFAULT_HOST = "localhost"  # serve's --host default: reached from this node only
# trtllm-serve's commands other than serve: not the OpenAI server sparktui watches.
_OTHER_COMMANDS = frozenset({"grpc", "disaggregated", "disaggregated_mpi_worker", "mm_embedding_serve"})
# The options read, under every spelling serve's click options take, by the name used here.
_VALUE_OPTIONS: Mapping[str, str] = {
    "--port": "--port",
    "--host": "--host",
    "--backend": "--backend",
    "--tensor_parallel_size": "--tp_size",
    "--tp_size": "--tp_size",
    "--extra_llm_api_options": "--extra_llm_api_options",
    "--config": "--extra_llm_api_options",
}
_FLAGS = frozenset({"--trust_remote_code", "--fail_fast_on_attention_window_too_large", "--enable_chunked_prefill"})
_BACKEND_ALIASES: Mapping[str, str] = {"trt": "tensorrt"}
# nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc2, :spark-single-gpu-dev, ...@sha256:...
_IMAGE = re.compile(r"(?:^|/)nvidia/tensorrt-llm/release(?::[A-Za-z0-9_.-]+)?(?:@sha256:[0-9a-f]+)?$")


def server_start(argv: Sequence[str], index: int) -> int | None:
    """When ``argv[index]`` starts ``trtllm-serve`` (under any path) serving, the index of its first
    argument (after an explicit ``serve``); else None (another of its commands, or another program)."""
    if argv[index].replace("\\", "/").rsplit("/", 1)[-1] != PROGRAM:
        return None
    following = argv[index + 1] if index + 1 < len(argv) else None
    if following == "serve":
        return index + 2
    return None if following in _OTHER_COMMANDS else index + 1


def is_server_image(image: str) -> bool:
    """NVIDIA's TensorRT-LLM release image (``nvcr.io/nvidia/tensorrt-llm/release:...``), which the Spark
    playbook runs ``trtllm-serve`` in."""
    return _IMAGE.search(image) is not None


@dataclass(frozen=True, slots=True)
class TrtllmArgs:
    """What a ``trtllm-serve`` command line says about the server sparktui will watch."""

    port: int | None = DEFAULT_PORT  # None: given, but not a port (`--port $PORT`)
    port_given: bool = False
    port_raw: str | None = None
    host: str | None = None  # --host as given; None: trtllm-serve's default, localhost
    model: str | None = None  # MODEL: a model name, a Hugging Face checkpoint or an engine folder
    backend: str | None = None  # --backend as given (trt read as tensorrt); None: pytorch
    tp_size: int | None = None  # --tp_size as given (a whole number)
    extra_options: str | None = None  # --extra_llm_api_options FILE: its settings are not read

    @property
    def local_only(self) -> str | None:
        """The loopback name it listens on when that is all (trtllm-serve's default host), else None."""
        return loopback_only(self.host, DEFAULT_HOST)

    def port_how(self) -> str:
        """How the port was given, for the comment that says where the config's port came from."""
        return port_option_how(self.port, self.port_raw, given=self.port_given, program=PROGRAM_LABEL)


def parse_server_args(args: Sequence[str]) -> TrtllmArgs:
    """Read the words after ``trtllm-serve [serve]``; options sparktui does not use are skipped (with
    their value: every option of ``serve`` but its flags takes one)."""
    values: dict[str, str] = {}
    model: str | None = None
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        if word == "--":
            model = model or (args[index] if index < len(args) else None)
            break
        if not word.startswith("--"):
            model = model or word
            continue
        name, eq, inline = word.partition("=")
        if name in _FLAGS:
            continue
        if eq:
            value: str | None = inline
        elif index < len(args):
            value = args[index]
            index += 1
        else:
            value = None
        key = _VALUE_OPTIONS.get(name)
        if key is not None and value is not None:
            values[key] = value
    port_raw = values.get("--port")
    backend = values.get("--backend")
    return TrtllmArgs(
        port=DEFAULT_PORT if port_raw is None else bounded_whole(port_raw, 65535),
        port_given=port_raw is not None,
        port_raw=port_raw,
        host=values.get("--host"),
        model=model,
        backend=_BACKEND_ALIASES.get(backend, backend) if backend is not None else None,
        tp_size=bounded_whole(values.get("--tp_size"), 4096),
        extra_options=values.get("--extra_llm_api_options"),
    )
