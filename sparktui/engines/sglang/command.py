"""An SGLang server's command line: how it is recognised, and what its options say.

``sparktui init`` reads the command line of a systemd unit or a docker container (the shell around it,
``bash -c`` and ``docker run``, is read by ``sparktui.discovery``); what is SGLang's is here. SGLang is
started as ``python -m sglang.launch_server ...`` or, with its newer CLI, ``sglang serve [MODEL] ...``
(``sglang/cli/serve.py`` takes a first word that is not an option as ``--model-path``); the official
images (``lmsysorg/sglang:*``) have no entrypoint of their own, so their command is one of those.

Options are read as SGLang 0.5.23 reads them: one ``argparse`` parser built from its server-argument
fields (``srt/server_args.py``, ``srt/arg_groups/fields/``), so ``--opt=value`` works, the last one given
wins, a word starting with ``-`` is not a value, and a unique prefix of an option is that option
(``--tp`` is ``--tp-size``, ``--dp`` is ``--dp-size``: the only options they begin). Only the spellings
below are read; others (``--served-model``...) are skipped. Options in a ``--config`` YAML file are not
read. Pure: the words are untrusted text from a host.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktui.engines.command_line import bounded_whole, loopback_only, port_option_how

MODULE = "sglang.launch_server"
PROGRAM_LABEL = "SGLang"  # as the config's comments name it
DEFAULT_PORT = 30000  # fields/serving.py: port = 30000
DEFAULT_HOST = "127.0.0.1"  # fields/serving.py: host = "127.0.0.1", so it is reached from this node only

# The options read, under every spelling SGLang's parser takes, by the name used here (fields/*.py:
# model_path has the alias --model, tp_size --tensor-parallel-size, dp_size --data-parallel-size).
_VALUE_OPTIONS: Mapping[str, str] = {
    "--port": "--port",
    "--host": "--host",
    "--model-path": "--model-path",
    "--model": "--model-path",
    "--served-model-name": "--served-model-name",
    "--tp-size": "--tp-size",
    "--tensor-parallel-size": "--tp-size",
    "--tp": "--tp-size",
    "--dp-size": "--dp-size",
    "--data-parallel-size": "--dp-size",
    "--dp": "--dp-size",
    "--api-key": "--api-key",
    "--config": "--config",
}
_FLAGS = frozenset({"--enable-metrics"})
# lmsysorg/sglang:latest, :v0.5.4-cu129, :spark, docker.io/lmsysorg/sglang@sha256:...
_IMAGE = re.compile(r"(?:^|/)lmsysorg/sglang(?::[A-Za-z0-9_.-]+)?(?:@sha256:[0-9a-f]+)?$")
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse takes these as values


def server_start(argv: Sequence[str], index: int) -> int | None:
    """When ``argv[index]`` starts an SGLang server, the index of its first option; else None.

    ``-m sglang.launch_server`` (any python), a path to ``sglang/launch_server.py``, or ``sglang serve``
    (the console script under any path).
    """
    word = argv[index]
    if word == MODULE and index > 0 and argv[index - 1] == "-m":
        return index + 1
    if word == f"-m{MODULE}" or word.replace("\\", "/").endswith("sglang/launch_server.py"):
        return index + 1
    if word.rsplit("/", 1)[-1] == "sglang" and index + 1 < len(argv) and argv[index + 1] == "serve":
        return index + 2
    return None


def is_server_image(image: str) -> bool:
    """An official SGLang image (``lmsysorg/sglang:latest``...)."""
    return _IMAGE.search(image) is not None


@dataclass(frozen=True, slots=True)
class SglangArgs:
    """What an SGLang command line says about the server sparktui will watch."""

    port: int | None = DEFAULT_PORT  # None: given, but not a port (`--port $PORT`)
    port_given: bool = False
    port_raw: str | None = None
    host: str | None = None  # --host as given; None: SGLang's default, 127.0.0.1
    model_path: str | None = None  # --model-path (or `sglang serve MODEL`)
    served_model_name: str | None = None  # --served-model-name: what /v1/models calls it
    enable_metrics: bool = False  # --enable-metrics: /metrics is served
    tp_size: int | None = None  # --tp-size as given (a whole number)
    dp_size: int | None = None  # --dp-size as given
    api_key: bool = False  # started with --api-key (the key itself is never kept)
    config_file: str | None = None  # --config FILE: its settings are not read

    @property
    def local_only(self) -> str | None:
        """The loopback address it listens on when that is all (SGLang's default host), else None."""
        return loopback_only(self.host, DEFAULT_HOST)

    def port_how(self) -> str:
        """How the port was given, for the comment that says where the config's port came from."""
        return port_option_how(self.port, self.port_raw, given=self.port_given, program=PROGRAM_LABEL)


def parse_server_args(args: Sequence[str]) -> SglangArgs:
    """Read the options that follow ``sglang.launch_server`` or ``sglang serve``; those sparktui does not
    use are skipped. A first word that is not an option is the model (``sglang serve MODEL``)."""
    values: dict[str, str] = {}
    if args and not args[0].startswith("-"):
        values["--model-path"] = args[0]
    flags: set[str] = set()
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        if not word.startswith("--"):
            continue
        name, eq, inline = word.partition("=")
        if name in _FLAGS and not eq:
            flags.add(name)
            continue
        key = _VALUE_OPTIONS.get(name)
        if key is None:
            continue
        if eq:
            values[key] = inline
        elif index < len(args) and (not args[index].startswith("-") or _NEGATIVE_NUMBER.match(args[index])):
            values[key] = args[index]
            index += 1
    port_raw = values.get("--port")
    return SglangArgs(
        port=DEFAULT_PORT if port_raw is None else bounded_whole(port_raw, 65535),
        port_given=port_raw is not None,
        port_raw=port_raw,
        host=values.get("--host"),
        model_path=values.get("--model-path"),
        served_model_name=values.get("--served-model-name"),
        enable_metrics="--enable-metrics" in flags,
        tp_size=bounded_whole(values.get("--tp-size"), 4096),
        dp_size=bounded_whole(values.get("--dp-size"), 4096),
        api_key="--api-key" in values,
        config_file=values.get("--config"),
    )
