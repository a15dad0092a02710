"""A ``llama-server`` command line: how it is recognised, and what its options say.

``sparktui init`` reads the command line of a systemd unit or a docker container (the shell around it,
``bash -c`` and ``docker run``, is read by ``sparktui.discovery``); what is llama-server's is here.
Options are read as llama-server reads them (``common/arg.cpp`` of llama.cpp 11434): every option takes
the next word as its value, whatever it looks like; a long option's ``_`` is read as ``-``; the last one
given wins; nothing is positional. ``--opt=value`` is accepted too, though llama-server itself refuses
it. The environment variables it reads for the same options (``LLAMA_ARG_PORT``...) are read where the
environment is known (a unit's ``Environment``, a container's ``-e`` or ``Config.Env``); the command
line wins over them, as in llama-server. Pure: the words are untrusted text from a host.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktui.model.numbers import is_digits

PROGRAM = "llama-server"
DEFAULT_PORT = 8080  # llama-server's own default for --port (and the official images' HEALTHCHECK)

# The options read, under every spelling llama-server takes (arg.cpp), by the name used here.
_VALUE_OPTIONS: Mapping[str, str] = {
    "--port": "--port",
    "--host": "--host",
    "-m": "--model",
    "--model": "--model",
    "-a": "--alias",
    "--alias": "--alias",
    "--models-dir": "--models-dir",
    "-hf": "--hf-repo",
    "-hfr": "--hf-repo",
    "--hf-repo": "--hf-repo",
    "--api-key": "--api-key",
}
_FLAGS: Mapping[str, tuple[str, bool]] = {
    "--metrics": ("--metrics", True),
    "--slots": ("--slots", True),
    "--no-slots": ("--slots", False),
}
# The environment variables llama-server reads for those options (arg.cpp's set_env).
_ENV_VALUES: Mapping[str, str] = {
    "LLAMA_ARG_PORT": "--port",
    "LLAMA_ARG_HOST": "--host",
    "LLAMA_ARG_MODEL": "--model",
    "LLAMA_ARG_ALIAS": "--alias",
    "LLAMA_ARG_MODELS_DIR": "--models-dir",
    "LLAMA_ARG_HF_REPO": "--hf-repo",
    "LLAMA_API_KEY": "--api-key",
}
_ENV_FLAGS: Mapping[str, str] = {"LLAMA_ARG_ENDPOINT_METRICS": "--metrics", "LLAMA_ARG_ENDPOINT_SLOTS": "--slots"}
_TRUTHY = frozenset({"on", "enabled", "true", "1"})  # common_arg_utils::is_truthy
_FALSEY = frozenset({"off", "disabled", "false", "0"})
# ghcr.io/ggml-org/llama.cpp:server, :server-cuda, :server-cuda13, ggerganov/llama.cpp:server-vulkan...:
# images whose entrypoint is llama-server, so the words after the image are its options.
_SERVER_IMAGE = re.compile(r"(?:^|/)llama\.cpp:server(?:-[A-Za-z0-9_.-]+)?(?:@sha256:[0-9a-f]+)?$")


def is_server_program(word: str) -> bool:
    """``llama-server`` under any path (``/opt/llama.cpp/build/bin/llama-server``, ``/app/llama-server``)."""
    return word.rsplit("/", 1)[-1] == PROGRAM


def is_server_image(image: str) -> bool:
    """An official llama.cpp server image (``ghcr.io/ggml-org/llama.cpp:server-cuda``...)."""
    return _SERVER_IMAGE.search(image) is not None


@dataclass(frozen=True, slots=True)
class ServerArgs:
    """What a ``llama-server`` command line says about the server sparktui will watch."""

    port: int | None = DEFAULT_PORT  # None: given, but not a port (`--port $PORT`)
    port_given: bool = False
    port_raw: str | None = None
    port_env: bool = False  # the port came from LLAMA_ARG_PORT, not --port
    host: str | None = None  # --host as given (comma-separated addresses, or a UNIX socket path)
    model: str | None = None  # -m: the GGUF it loads
    hf_repo: str | None = None  # -hf: the Hugging Face repository it downloads its GGUF from
    alias: str | None = None  # -a: the first of its comma-separated aliases
    models_dir: str | None = None  # --models-dir: a router
    metrics: bool = False  # --metrics: /metrics is served
    slots: bool | None = None  # --slots / --no-slots; None: not given (the build's default)
    api_key: bool = False  # started with --api-key (the key itself is never kept)

    @property
    def router(self) -> bool:
        """A router: models from ``--models-dir``, none of its own."""
        return self.models_dir is not None and self.model is None and self.hf_repo is None

    @property
    def unix_socket(self) -> bool:
        """``--host /run/llama.sock``: it listens on a UNIX socket, on no TCP port."""
        return self.host is not None and self.host.endswith(".sock")

    def port_how(self) -> str:
        """How the port was given, for the comment that says where the config's port came from."""
        given = f"`LLAMA_ARG_PORT={self.port_raw}`" if self.port_env else f"`--port {self.port_raw}`"
        if self.port is None:
            return f"{given}, which init cannot read"
        return given if self.port_given else f"llama-server's default port {self.port}"


def _port(raw: str | None) -> int | None:
    if raw is None or not is_digits(raw) or len(raw) > 5:
        return None
    port = int(raw)
    return port if 1 <= port <= 65535 else None


def _from_environment(env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, bool]]:
    values = {option: env[name] for name, option in _ENV_VALUES.items() if name in env}
    flags: dict[str, bool] = {}
    for name, option in _ENV_FLAGS.items():
        value = env.get(name, "").strip().lower()
        if value in _TRUTHY or value in _FALSEY:
            flags[option] = value in _TRUTHY
    if "LLAMA_ARG_NO_ENDPOINT_SLOTS" in env:  # the negative form, whatever its value
        flags["--slots"] = False
    return values, flags


def parse_server_args(args: Sequence[str], env: Mapping[str, str] | None = None) -> ServerArgs:
    """Read the options that follow ``llama-server`` (over what ``env``, its environment, says); those
    sparktui does not use are skipped."""
    values, flags = _from_environment(env or {})
    from_env = set(values)
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        if not word.startswith("-"):
            continue
        name, eq, inline = word.partition("=")
        if name.startswith("--"):
            name = name.replace("_", "-")
        if name in _FLAGS:
            key, on = _FLAGS[name]
            flags[key] = on
            continue
        key = _VALUE_OPTIONS.get(name, "")
        if not key:
            continue
        if eq:
            values[key] = inline
        elif index < len(args):
            values[key] = args[index]
            index += 1
        else:
            continue
        from_env.discard(key)
    port_raw = values.get("--port")
    aliases = [alias.strip() for alias in values.get("--alias", "").split(",") if alias.strip()]
    return ServerArgs(
        port=DEFAULT_PORT if port_raw is None else _port(port_raw),
        port_given=port_raw is not None,
        port_raw=port_raw,
        port_env="--port" in from_env,
        host=values.get("--host"),
        model=values.get("--model"),
        hf_repo=values.get("--hf-repo"),
        alias=aliases[0] if aliases else None,
        models_dir=values.get("--models-dir"),
        metrics=flags.get("--metrics", False),
        slots=flags.get("--slots"),
        api_key="--api-key" in values,
    )
