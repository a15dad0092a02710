"""What ``sparktui init`` found on a host, turned into a commented config: the pure half of init.

``sparktui.init`` does the I/O (HTTP probes of the usual ports, ``systemctl`` and ``docker`` over SSH)
and hands this module plain text and ``HttpResult``s. Here they are read and rendered:

* command lines: ``vllm serve`` arguments (``--port``, ``--gpu-memory-utilization``,
  ``--served-model-name``...) found in a systemd ``ExecStart``, a ``docker run`` (with its ``-p
  HOST:CONTAINER`` mappings and ``--network host``), a ``docker inspect`` or a ``bash -c`` string;
* ``systemctl list-units`` / ``systemctl show`` / ``docker ps`` / ``docker inspect`` output;
* HTTP probe answers: a vLLM (``/version`` gives ``{"version": ...}``), a GPU exporter or node_exporter
  (``/metrics``, kind by metric names), Ollama (``/api/tags``), a side service (``/health``);
* matching what SSH found (units, containers, their host ports) with the vLLMs that answered;
* the TOML text: every value with a comment saying how it was found, and what was probed and not
  found listed in comments.

Pure: no I/O, no asyncio. Everything that comes from a host is treated as untrusted text: names that
go into the config are checked against the spec's patterns, comments are kept to one line.
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.model.exporters import ExporterKind, detect
from sparktui.model.observations import HttpResult
from sparktui.model.promtext import ParseError, parse
from sparktui.model.specs import CONTAINER_RE, MAX_CONTAINER_LEN, MAX_UNIT_LEN, NAME_RE, UNIT_RE

# --- what is probed -----------------------------------------------------------------------------------

VLLM_DEFAULT_PORT = 8000  # vLLM's own default for --port
DEFAULT_VLLM_PORTS: tuple[int, ...] = (8000, 8001)
DEFAULT_EXPORTER_PORTS: tuple[int, ...] = (9835, 9400, 9100)  # DGX Spark / nvidia_gpu, DCGM, node_exporter
DEFAULT_SERVICE_PORTS: tuple[tuple[str, int], ...] = (("asr", 8765), ("tts", 8882), ("ollama", 11434))
SERVICE_KINDS = ("asr", "tts", "ollama", "http")
# Every port is asked all of these; what answers tells what it is (the port only says what was expected).
PROBE_PATHS: tuple[str, ...] = ("/version", "/v1/models", "/metrics", "/health", "/api/tags")

# Roles: what a port was probed for ("any" is a port added with --ports).
ROLE_LABELS: Mapping[str, str] = {
    "vllm": "vLLM",
    "exporter": "exporter",
    "asr": "ASR",
    "tts": "TTS",
    "ollama": "Ollama",
    "http": "HTTP service",
    "any": "extra port",
}
_PRIMARY_PATH: Mapping[str, str] = {
    "vllm": "/version",
    "exporter": "/metrics",
    "ollama": "/api/tags",
    "any": "/version",
}
_GPU_KINDS = (ExporterKind.NVIDIA_GPU_EXPORTER, ExporterKind.DGX_SPARK, ExporterKind.DCGM)

COMMENT_COLUMN = 36
WRAP_WIDTH = 104


def parse_port_list(text: str) -> tuple[int, ...]:
    """``"8000,8001"`` → ``(8000, 8001)``; raises ValueError with a sentence for anything else."""
    ports: list[int] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if not item.isdigit() or not 1 <= int(item) <= 65535:
            raise ValueError(f"{item!r} is not a port (a whole number from 1 to 65535)")
        if int(item) not in ports:
            ports.append(int(item))
    return tuple(ports)


def parse_service_ports(text: str) -> tuple[tuple[str, int], ...]:
    """``"asr=8765,tts=8882"`` → ``(("asr", 8765), ("tts", 8882))``; kinds are asr, tts, ollama, http."""
    services: list[tuple[str, int]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        kind, eq, port = item.partition("=")
        if not eq or kind.strip() not in SERVICE_KINDS:
            raise ValueError(f"{item!r} is not KIND=PORT with KIND one of {', '.join(SERVICE_KINDS)}")
        ports = parse_port_list(port)
        if len(ports) != 1:
            raise ValueError(f"{item!r} is not KIND=PORT (one port per kind; repeat the kind for more)")
        services.append((kind.strip(), ports[0]))
    return tuple(services)


def port_roles(
    vllm: Sequence[int],
    services: Sequence[tuple[str, int]],
    exporters: Sequence[int],
    extra: Sequence[int] = (),
) -> tuple[tuple[int, str], ...]:
    """Each port to probe once, with what it is probed for (the first mention wins)."""
    roles: dict[int, str] = {}
    for port in vllm:
        roles.setdefault(port, "vllm")
    for kind, port in services:
        roles.setdefault(port, kind)
    for port in exporters:
        roles.setdefault(port, "exporter")
    for port in extra:
        roles.setdefault(port, "any")
    return tuple(roles.items())


# --- command lines ------------------------------------------------------------------------------------

_SHELL_OPERATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "|&"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def split_command_line(text: str) -> list[str]:
    """Shell words of a command line as written in a unit file, a script or a write-up.

    Backslash-newline continuations are joined; quotes are honoured (a quoted ``--speculative-config``
    JSON stays one word). Text with unbalanced quotes falls back to splitting on whitespace.
    """
    joined = re.sub(r"\\\r?\n", " ", text)
    try:
        return shlex.split(joined, comments=False, posix=True)
    except ValueError:
        return joined.split()


def exec_start_argvs(value: str) -> list[list[str]]:
    """The argv of each command in a ``systemctl show -p ExecStart`` value.

    systemd prints ``{ path=... ; argv[]=ARG ARG ... ; ignore_errors=no ; ... }`` with the arguments
    joined by single spaces and NOT quoted, so they are split on whitespace (an argument that held
    spaces comes back as several words; the ``vllm serve`` flags this module reads have none).
    """
    found = re.findall(r"argv\[\]=(.*?) ; (?:ignore_errors|flags)=", value)
    return [words.split() for words in found if words.strip()]


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _until_shell_operator(words: Sequence[str]) -> list[str]:
    """The words of one simple command: up to ``&&``, ``;``, ``|``, a redirection..."""
    out: list[str] = []
    for word in words:
        if word in _SHELL_OPERATORS or word.startswith(("<", ">")) or re.match(r"^[0-9&]>", word):
            break
        if word.endswith(";") and not word.endswith("\\;"):
            if word[:-1]:
                out.append(word[:-1])
            break
        out.append(word)
    return out


def find_vllm_serve(argv: Sequence[str]) -> list[str] | None:
    """The arguments after ``vllm serve`` (or ``python -m vllm.entrypoints.openai.api_server``),
    looking inside ``bash -c "..."`` strings too; None when the command line runs no vLLM server."""
    for index, word in enumerate(argv):
        if _basename(word) == "vllm" and index + 1 < len(argv) and argv[index + 1] == "serve":
            return _until_shell_operator(argv[index + 2 :])
        if word.endswith("vllm.entrypoints.openai.api_server"):
            return _until_shell_operator(argv[index + 1 :])
        if "vllm" in word and any(c.isspace() for c in word):
            inner = find_vllm_serve(split_command_line(word))
            if inner is not None:
                return inner
    return None


@dataclass(frozen=True, slots=True)
class VllmArgs:
    """What a ``vllm serve`` command line says about the server sparktui will watch."""

    model: str | None = None
    served_model_name: str | None = None
    port: int | None = VLLM_DEFAULT_PORT  # None: given, but not a number (`--port $PORT`)
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


_VLLM_VALUE_FLAGS = frozenset(
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
_VLLM_BOOL_FLAGS = frozenset({"--headless"})


def _number_like(word: str) -> bool:
    return re.fullmatch(r"-?[0-9.]+", word) is not None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _speculative(value: str) -> str:
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


def parse_vllm_args(args: Sequence[str]) -> VllmArgs:
    """Read the arguments that follow ``vllm serve``: ``MODEL --flag value --flag=value ...``.

    Only the flags sparktui uses are read; the others and their values are skipped. Flags may be
    written with ``_`` (vLLM accepts both); the last occurrence wins, as with argparse.
    """
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
        if name in _VLLM_BOOL_FLAGS:
            flags.add(name)
            continue
        if name not in _VLLM_VALUE_FLAGS:
            continue
        if not eq:
            if index < len(args) and (not args[index].startswith("-") or _number_like(args[index])):
                value = args[index]
                index += 1
            else:
                continue
        values[name] = value
    port_raw = values.get("--port")
    port = _int(port_raw)
    if port is not None and not 1 <= port <= 65535:
        port = None
    gpu_raw = values.get("--gpu-memory-utilization")
    gpu: float | None = None
    if gpu_raw is not None:
        try:
            gpu = float(gpu_raw)
        except ValueError:
            gpu = None
        if gpu is not None and not 0 < gpu <= 1:
            gpu = None
    return VllmArgs(
        model=model or values.get("--model"),
        served_model_name=values.get("--served-model-name"),
        port=VLLM_DEFAULT_PORT if port_raw is None else port,
        port_given=port_raw is not None,
        port_raw=port_raw,
        host=values.get("--host"),
        gpu_memory_utilization=gpu,
        gpu_memory_utilization_raw=gpu_raw if gpu_raw is not None and gpu is None else None,
        speculative=_speculative(values["--speculative-config"]) if "--speculative-config" in values else None,
        headless="--headless" in flags,
        nnodes=_int(values.get("--nnodes")),
        api_key="--api-key" in values,
        config_file=values.get("--config"),
    )


# --- docker command lines -----------------------------------------------------------------------------

_DOCKER_RUN_BOOL = frozenset(
    {
        "--rm",
        "--detach",
        "--interactive",
        "--tty",
        "--privileged",
        "--init",
        "--read-only",
        "--publish-all",
        "--no-healthcheck",
        "--oom-kill-disable",
        "--quiet",
        "--help",
        "--disable-content-trust",
        "--sig-proxy",
        "--use-api-socket",
    }
)
_DOCKER_SHORT_BOOL = frozenset("ditPq")
_DOCKER_LONG: Mapping[str, str] = {"-p": "--publish", "--net": "--network", "-e": "--env"}


@dataclass(frozen=True, slots=True)
class Publish:
    """One ``-p`` mapping: the container port, and the host port (None: docker picks one)."""

    container_port: int
    host_port: int | None
    text: str  # as written, for comments


def parse_publish(value: str) -> Publish | None:
    """``8001:8000``, ``0.0.0.0:8001:8000``, ``[::1]:8001:8000/tcp``, ``8000``; None for a range."""
    spec = value.split("/", 1)[0]
    parts = spec.rsplit(":", 2)
    container = _int(parts[-1])
    if container is None:
        return None
    host = _int(parts[-2]) if len(parts) >= 2 else None
    return Publish(container_port=container, host_port=host, text=value)


@dataclass(frozen=True, slots=True)
class DockerRun:
    name: str | None
    image: str | None
    publish: tuple[Publish, ...]
    host_network: bool
    entrypoint: str | None
    command: tuple[str, ...]


def _docker_verb_index(argv: Sequence[str], verbs: Iterable[str]) -> tuple[str, int] | None:
    """(verb, index of the word after it) of ``docker VERB`` / ``docker container VERB`` in argv."""
    wanted = set(verbs)
    for index, word in enumerate(argv[:-1]):
        if _basename(word) not in ("docker", "podman"):
            continue
        following = argv[index + 1]
        if following == "container" and index + 2 < len(argv) and argv[index + 2] in wanted:
            return argv[index + 2], index + 3
        if following in wanted:
            return following, index + 2
    return None


def parse_docker_run(argv: Sequence[str]) -> DockerRun | None:
    """The parts of a ``docker run [OPTIONS] IMAGE [COMMAND...]`` that say what runs and where."""
    found = _docker_verb_index(argv, ("run",))
    if found is None:
        return None
    index = found[1]
    name: str | None = None
    network: str | None = None
    entrypoint: str | None = None
    publish: list[Publish] = []
    while index < len(argv):
        word = argv[index]
        if word == "--":
            index += 1
            break
        if not word.startswith("-") or word == "-":
            break
        index += 1
        value: str
        if word.startswith("--"):
            option, eq, value = word.partition("=")
            if option in _DOCKER_RUN_BOOL:
                continue
            if not eq:
                if index >= len(argv):
                    break
                value = argv[index]
                index += 1
        else:
            letters = word[1:]
            if all(c in _DOCKER_SHORT_BOOL for c in letters):
                continue
            option = "-" + letters[0]
            if len(letters) > 1:
                value = letters[1:].removeprefix("=")
            else:
                if index >= len(argv):
                    break
                value = argv[index]
                index += 1
        option = _DOCKER_LONG.get(option, option)
        if option == "--name":
            name = value
        elif option == "--publish":
            mapping = parse_publish(value)
            if mapping is not None:
                publish.append(mapping)
        elif option == "--network":
            network = value
        elif option == "--entrypoint":
            entrypoint = value
    image = argv[index] if index < len(argv) else None
    return DockerRun(
        name=name,
        image=image,
        publish=tuple(publish),
        host_network=network == "host",
        entrypoint=entrypoint,
        command=tuple(argv[index + 1 :]),
    )


_DOCKER_EXEC_VALUE = frozenset({"-e", "--env", "-u", "--user", "-w", "--workdir", "--env-file", "--detach-keys"})


def docker_target(argv: Sequence[str]) -> str | None:
    """The container a ``docker exec|start|restart ... NAME`` acts on."""
    found = _docker_verb_index(argv, ("exec", "start", "restart"))
    if found is None:
        return None
    index = found[1]
    while index < len(argv):
        word = argv[index]
        index += 1
        if word == "--":
            break
        if not word.startswith("-"):
            return word
        if word in _DOCKER_EXEC_VALUE:
            index += 1
    return argv[index] if index < len(argv) else None


def _script(argv: Sequence[str]) -> str | None:
    for index, word in enumerate(argv):
        if word.endswith(".sh"):
            return word
        if _basename(word) in ("bash", "sh") and index + 1 < len(argv) and argv[index + 1].startswith("/"):
            return argv[index + 1]
    return None


@dataclass(frozen=True, slots=True)
class CommandLine:
    """What one command line (a unit's ExecStart, a container's command) says about its vLLM."""

    vllm: VllmArgs | None
    container: str | None  # the container it runs or acts on (docker run --name / exec / start)
    image: str | None
    host_port: int | None  # where the vLLM API answers on the host; None: unknown here
    port_how: str  # how host_port was read, or why it is unknown
    runs: str  # a short description for comments: "docker run --name X (IMAGE)", "a script ..."


def _publish_for(
    port: int | None, publish: Sequence[Publish], host_network: bool, how_given: str
) -> tuple[int | None, str]:
    if port is None:
        return None, how_given
    if host_network:
        return port, f"{how_given} with `--network host`"
    for mapping in publish:
        if mapping.container_port == port:
            if mapping.host_port is None:
                return None, f"`-p {mapping.text}` publishes container port {port} on a port docker picks"
            return mapping.host_port, f"`-p {mapping.text}` ({how_given} in the container)"
    return None, f"container port {port} ({how_given}) is not published with `-p`"


def _port_given(args: VllmArgs | None) -> str:
    if args is None:
        return "the vLLM port"
    if args.port is None:
        return f"`--port {args.port_raw}`, which init cannot read"
    return f"`--port {args.port}`" if args.port_given else f"vLLM's default port {args.port}"


def analyse_command(argv: Sequence[str]) -> CommandLine:
    """Read one command line: ``vllm serve ...``, ``docker run ... IMAGE [vllm serve] ...``,
    ``docker exec NAME script``, ``bash -c "... vllm serve ..."``."""
    run = parse_docker_run(argv)
    if run is not None:
        serve = find_vllm_serve(run.command)
        image = run.image or ""
        if (
            serve is None
            and run.entrypoint is None
            and "vllm" in image.lower()
            and run.command
            and (run.command[0].startswith("-") or "/" in run.command[0])
        ):
            # vllm/vllm-openai images have `vllm serve` as their entrypoint: the command is its arguments.
            serve = _until_shell_operator(run.command)
        args = parse_vllm_args(serve) if serve is not None else None
        if args is not None:
            host_port, how = _publish_for(args.port, run.publish, run.host_network, _port_given(args))
        elif len(run.publish) == 1 and run.publish[0].host_port is not None:
            host_port, how = run.publish[0].host_port, f"`-p {run.publish[0].text}`, the only published port"
        else:
            host_port, how = None, "no vllm serve command line to read the port from"
        named = f" --name {run.name}" if run.name else ""
        return CommandLine(
            vllm=args,
            container=run.name,
            image=run.image,
            host_port=host_port,
            port_how=how,
            runs=f"`docker run{named}` ({run.image or 'no image'})",
        )
    serve = find_vllm_serve(argv)
    args = parse_vllm_args(serve) if serve is not None else None
    target = docker_target(argv)
    if target is not None:
        script = _script(argv)
        what = f"a script in container {target} ({script})" if script else f"container {target}"
        return CommandLine(
            vllm=args,
            container=target,
            image=None,
            host_port=None,
            port_how=f"set by container {target}",
            runs=what,
        )
    if args is not None:
        return CommandLine(
            vllm=args,
            container=None,
            image=None,
            host_port=args.port,
            port_how=_port_given(args),
            runs="`vllm serve`",
        )
    script = _script(argv)
    return CommandLine(
        vllm=None,
        container=None,
        image=None,
        host_port=None,
        port_how="no vllm serve command line to read the port from",
        runs=f"a script ({script})" if script else (f"`{argv[0]}`" if argv else "nothing"),
    )


# --- systemctl and docker output ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UnitInfo:
    name: str
    active: str  # ActiveState
    sub: str  # SubState
    description: str
    exec_start: tuple[tuple[str, ...], ...]  # argv of each ExecStart command

    @property
    def alive(self) -> bool:
        return self.active not in ("inactive", "")

    @property
    def state(self) -> str:
        return f"{self.active} ({self.sub})" if self.sub else self.active


def valid_unit_name(name: str) -> bool:
    return bool(UNIT_RE.fullmatch(name)) and len(name) <= MAX_UNIT_LEN and not name.startswith("-")


def valid_container_name(name: str) -> bool:
    return bool(CONTAINER_RE.fullmatch(name)) and len(name) <= MAX_CONTAINER_LEN


def parse_list_units(text: str) -> list[str]:
    """Unit names from ``systemctl list-units --no-legend --plain`` (``UNIT LOAD ACTIVE SUB DESC``)."""
    names: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0] in ("●", "*"):  # a marker column when --plain is not honoured
            words = words[1:]
        if words and valid_unit_name(words[0]) and words[0] not in names:
            names.append(words[0])
    return names


def parse_systemctl_show(text: str) -> list[UnitInfo]:
    """Units from ``systemctl show -p Id,ActiveState,SubState,Description,ExecStart U1 U2 ...``:
    one block of ``Key=value`` lines per unit, blocks separated by an empty line."""
    units: list[UnitInfo] = []
    for block in re.split(r"\n\s*\n", text):
        values: dict[str, str] = {}
        exec_start: list[tuple[str, ...]] = []
        for line in block.splitlines():
            key, eq, value = line.partition("=")
            if not eq:
                continue
            if key == "ExecStart":
                exec_start.extend(tuple(argv) for argv in exec_start_argvs(value))
            else:
                values.setdefault(key, value)
        name = values.get("Id", "")
        if not valid_unit_name(name):
            continue
        units.append(
            UnitInfo(
                name=name,
                active=values.get("ActiveState", ""),
                sub=values.get("SubState", ""),
                description=values.get("Description", ""),
                exec_start=tuple(exec_start),
            )
        )
    return units


def parse_docker_ps(text: str) -> list[str]:
    """Container names from ``docker ps -a --format '{{.Names}}\\t{{.Image}}\\t{{.Ports}}'``."""
    names: list[str] = []
    for line in text.splitlines():
        name = line.split("\t", 1)[0].strip()
        if valid_container_name(name) and name not in names:
            names.append(name)
    return names


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    name: str
    image: str
    status: str  # running, restarting, exited...
    argv: tuple[str, ...]  # what runs in it (Path + Args)
    host_network: bool
    ports: Mapping[int, int] = field(default_factory=dict)  # container port -> host port

    @property
    def alive(self) -> bool:
        return self.status in ("running", "restarting", "paused")


def _port_map(bindings: object) -> dict[int, int]:
    """``{"8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "8001"}]}`` → ``{8000: 8001}``."""
    ports: dict[int, int] = {}
    if not isinstance(bindings, Mapping):
        return ports
    for key, entries in bindings.items():
        container = _int(str(key).split("/", 1)[0])
        if container is None or not isinstance(entries, list):
            continue
        for entry in entries:
            host = _int(str(entry.get("HostPort", ""))) if isinstance(entry, Mapping) else None
            if host is not None:
                ports.setdefault(container, host)
                break
    return ports


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _table(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def container_from_inspect(data: object) -> ContainerInfo | None:
    """One element of ``docker inspect`` JSON; None when it is not a container with a valid name."""
    if not isinstance(data, Mapping):
        return None
    name = str(data.get("Name", "")).lstrip("/")
    if not valid_container_name(name):
        return None
    config, state = _table(data, "Config"), _table(data, "State")
    host_config, settings = _table(data, "HostConfig"), _table(data, "NetworkSettings")
    path = data.get("Path")
    if isinstance(path, str) and path:
        argv = [path, *_strings(data.get("Args"))]
    else:
        argv = [*_strings(config.get("Entrypoint")), *_strings(config.get("Cmd"))]
    ports = _port_map(settings.get("Ports")) or _port_map(host_config.get("PortBindings"))
    return ContainerInfo(
        name=name,
        image=str(config.get("Image") or data.get("Image") or ""),
        status=str(state.get("Status", "")),
        argv=tuple(argv),
        host_network=host_config.get("NetworkMode") == "host",
        ports=ports,
    )


def parse_docker_inspect(text: str) -> list[ContainerInfo]:
    """Containers from ``docker inspect`` output (a JSON array; unreadable output gives none)."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if not isinstance(data, list):
        return []
    return [c for c in (container_from_inspect(item) for item in data) if c is not None]


# --- SSH findings -> vLLM launches --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Launch:
    """A vLLM start found over SSH: a systemd unit (which may run a container) or a container."""

    unit: str | None
    container: str | None  # a container run by the unit, or the container itself
    state: str
    alive: bool
    vllm: VllmArgs | None
    args_from: str  # where the vLLM arguments were read
    host_port: int | None
    port_how: str
    runs: str

    @property
    def label(self) -> str:
        return f"unit {self.unit}" if self.unit else f"container {self.container}"


def _mentions_vllm(*texts: str) -> bool:
    return any("vllm" in text.lower() for text in texts)


def is_vllm_unit(unit: UnitInfo) -> bool:
    """A unit named for vLLM or whose ExecStart mentions it (``vllm serve``, a vllm image...)."""
    return _mentions_vllm(unit.name, *(" ".join(argv) for argv in unit.exec_start))


def is_vllm_container(container: ContainerInfo) -> bool:
    return _mentions_vllm(container.name, container.image, *container.argv)


def _container_launch(container: ContainerInfo) -> tuple[VllmArgs | None, int | None, str]:
    serve = find_vllm_serve(container.argv)
    args = parse_vllm_args(serve) if serve is not None else None
    if args is not None:
        port = args.port
        given = _port_given(args)
        if port is None:
            return args, None, given
        if container.host_network:
            return args, port, f"{given} with `--network host`"
        if port in container.ports:
            return (
                args,
                container.ports[port],
                f"port mapping `{container.ports[port]}->{port}` ({given} in the container)",
            )
        return args, None, f"container port {port} ({given}) is not published"
    if not container.host_network and len(container.ports) == 1:
        inside, host = next(iter(container.ports.items()))
        return None, host, f"port mapping `{host}->{inside}`, the only published port"
    return None, None, "no vllm serve command line to read the port from"


def vllm_launches(units: Sequence[UnitInfo], containers: Sequence[ContainerInfo]) -> list[Launch]:
    """The units and containers that run a vLLM, one launch each.

    A unit that runs or starts a container (``docker run --name X``, ``docker exec X``) and that
    container are one launch, written as the unit: systemd owns its life (restarting the container
    behind the unit's back would fight it). The container fills in what the unit's command line lacks.
    """
    by_name = {c.name: c for c in containers}
    claimed: set[str] = set()
    launches: list[Launch] = []
    for unit in units:
        if not is_vllm_unit(unit):
            continue
        commands = [analyse_command(argv) for argv in unit.exec_start]
        command = next(
            (c for c in commands if c.vllm is not None),
            next((c for c in commands if c.container is not None), commands[0] if commands else None),
        )
        if command is None:
            command = analyse_command(())
        inside = by_name.get(command.container) if command.container is not None else None
        vllm, args_from = command.vllm, f"the ExecStart of {unit.name}"
        host_port, port_how = command.host_port, command.port_how
        if host_port is not None:
            port_how += " in the unit's ExecStart"
        if inside is not None:
            claimed.add(inside.name)
            c_args, c_port, c_how = _container_launch(inside)
            if vllm is None and c_args is not None:
                vllm, args_from = c_args, f"the command of container {inside.name} (docker inspect)"
            if host_port is None and c_port is not None:
                host_port, port_how = c_port, f"{c_how}, from docker inspect {inside.name}"
        launches.append(
            Launch(
                unit=unit.name,
                container=command.container,
                state=unit.state,
                alive=unit.alive,
                vllm=vllm,
                args_from=args_from,
                host_port=host_port,
                port_how=port_how,
                runs=command.runs,
            )
        )
    for container in containers:
        if container.name in claimed or not is_vllm_container(container):
            continue
        args, host_port, port_how = _container_launch(container)
        launches.append(
            Launch(
                unit=None,
                container=container.name,
                state=container.status or "unknown",
                alive=container.alive,
                vllm=args,
                args_from=f"the command of container {container.name} (docker inspect)",
                host_port=host_port,
                port_how=port_how,
                runs=f"image {container.image}" if container.image else "a container",
            )
        )
    return launches


# --- HTTP probe answers -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VllmAnswer:
    port: int
    version: str
    models: tuple[str, ...]
    needs_api_key: bool


@dataclass(frozen=True, slots=True)
class ExporterAnswer:
    port: int
    kind: ExporterKind


@dataclass(frozen=True, slots=True)
class ServiceAnswer:
    port: int
    kind: str  # asr, tts, ollama, http
    path: str
    status: int
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class NoAnswer:
    """Nothing sparktui knows answered on the port; ``reason`` says what happened instead."""

    port: int
    role: str
    reason: str


PortFinding = VllmAnswer | ExporterAnswer | ServiceAnswer | NoAnswer


def _json(result: HttpResult | None) -> object:
    if result is None or not result.ok:
        return None
    try:
        return json.loads(result.body)
    except ValueError:
        return None


def vllm_version(result: HttpResult | None) -> str | None:
    data = _json(result)
    version = data.get("version") if isinstance(data, dict) else None
    return version if isinstance(version, str) and version else None


def model_ids(result: HttpResult | None) -> tuple[str, ...]:
    data = _json(result)
    cards = data.get("data") if isinstance(data, dict) else None
    if not isinstance(cards, list):
        return ()
    return tuple(str(card["id"]) for card in cards if isinstance(card, dict) and card.get("id"))


def exporter_kind(result: HttpResult | None) -> ExporterKind | None:
    """The exporter that served a /metrics page, or None (no page, not Prometheus text, unknown)."""
    if result is None or not result.ok:
        return None
    try:
        kind = detect(parse(result.text()))
    except ParseError:
        return None
    return None if kind is ExporterKind.UNKNOWN else kind


def classify_port(port: int, role: str, results: Mapping[str, HttpResult]) -> PortFinding:
    """What answers on a port, from the answers to ``PROBE_PATHS`` (the role only names the kind of
    a ``/health`` service and the reason shown when nothing answered)."""
    version = vllm_version(results.get("/version"))
    if version is not None:
        models = results.get("/v1/models")
        needs_key = models is not None and models.answered and models.status in (401, 403)
        return VllmAnswer(port=port, version=version, models=model_ids(models), needs_api_key=needs_key)
    kind = exporter_kind(results.get("/metrics"))
    if kind is not None:
        return ExporterAnswer(port=port, kind=kind)
    tags = _json(results.get("/api/tags"))
    if isinstance(tags, dict) and isinstance(tags.get("models"), list):
        answer = results["/api/tags"]
        return ServiceAnswer(port, "ollama", "/api/tags", answer.status or 200, answer.elapsed_s)
    health = results.get("/health")
    if (
        role in ("asr", "tts", "http", "any", "ollama")
        and health is not None
        and health.answered
        and health.status is not None
        and health.status not in (404, 405)
    ):
        service_kind = role if role in ("asr", "tts") else "http"
        return ServiceAnswer(port, service_kind, "/health", health.status, health.elapsed_s)
    primary = results.get(_PRIMARY_PATH.get(role, "/health"))
    if not any(r.answered for r in results.values()):
        reason = primary.problem() if primary is not None else "not probed"
        return NoAnswer(port, role, reason)
    if model_ids(results.get("/v1/models")):
        return NoAnswer(port, role, "an OpenAI-compatible server without /version (not vLLM); add it by hand")
    if role == "exporter" and results.get("/metrics") is not None and results["/metrics"].ok:
        return NoAnswer(port, role, "/metrics is not a GPU exporter or node_exporter sparktui knows")
    if role == "vllm" and health is not None and health.ok:
        return NoAnswer(port, role, "answers /health but not /version: not a vLLM sparktui can read")
    shown = primary if primary is not None and primary.answered else None
    status = f" (HTTP {shown.status} on {_PRIMARY_PATH.get(role, '/health')})" if shown else ""
    return NoAnswer(port, role, f"something answered{status}, but not a vLLM, exporter or service sparktui knows")


# --- names --------------------------------------------------------------------------------------------


def config_name(text: str | None) -> str | None:
    """``text`` made into a valid node/vLLM/service name (letters, digits, ``._-``; ≤ 63), or None."""
    if not text:
        return None
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text)
    cleaned = re.sub(r"^[^A-Za-z0-9]+", "", cleaned)[:63]
    return cleaned if cleaned and NAME_RE.fullmatch(cleaned) else None


def unique(name: str, taken: set[str], suffix: str | None = None) -> str:
    """``name``, or ``name-SUFFIX`` / ``name-2``... when taken; adds the result to ``taken``."""
    candidates = [name]
    if suffix:
        candidates.append(f"{name[: 62 - len(suffix)]}-{suffix}")
    candidates += [f"{name[:59]}-{n}" for n in range(2, 1000)]
    chosen = next(c for c in candidates if c not in taken)
    taken.add(chosen)
    return chosen


def node_names(hosts: Sequence[str], hostnames: Sequence[str | None]) -> list[tuple[str, str]]:
    """(name, how it was chosen) for each host: its short hostname over SSH, else the host argument."""
    taken: set[str] = set()
    out: list[tuple[str, str]] = []
    for host, hostname in zip(hosts, hostnames, strict=True):
        short = hostname.strip().split(".", 1)[0] if hostname and hostname.strip() else None
        from_hostname = config_name(short)
        if from_hostname is not None:
            base, how = from_hostname, "the host's `hostname`, over SSH"
        else:
            base, how = config_name(host) or "node", "the host argument"
        name = unique(base, taken)
        out.append((name, how if name == base else f"{how}, made unique"))
    return out


def _strip_vllm(name: str) -> str:
    stem = name.removesuffix(".service")
    for prefix in ("vllm-", "vllm_"):
        if stem.lower().startswith(prefix) and len(stem) > len(prefix):
            return stem[len(prefix) :]
    return stem


def _model_tail(model: str | None) -> str | None:
    return model.rstrip("/").rsplit("/", 1)[-1] if model else None


# --- matching HTTP answers with launches --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlannedVllm:
    port: int | None
    http: VllmAnswer | None
    launch: Launch | None
    paired: bool = False  # matched by elimination, not by port


def _worker(launch: Launch) -> bool:
    return launch.vllm is not None and launch.vllm.headless


def plan_vllms(
    answers: Sequence[VllmAnswer], launches: Sequence[Launch]
) -> tuple[list[PlannedVllm], list[Launch], list[str]]:
    """vLLM entries for the config, launches left out (comment only), and notes.

    A launch goes with the vLLM answering on its host port. A live launch whose port does not answer
    is still an entry (a vLLM in a crash loop is exactly one to watch). When exactly one answering vLLM
    and exactly one live launch with an unknown port are left, they are paired, with a comment.
    """
    planned: list[PlannedVllm] = []
    notes: list[str] = []
    left = list(launches)
    for answer in answers:
        # A --headless worker serves no HTTP: its --port is not where anything answers.
        on_port = [launch for launch in left if launch.host_port == answer.port and not _worker(launch)]
        on_port.sort(key=lambda launch: not launch.alive)
        chosen = on_port[0] if on_port else None
        if chosen is not None:
            left.remove(chosen)
            for other in on_port[1:]:
                notes.append(f"{other.label} ({other.state}) also uses port {answer.port}; it is left out")
                left.remove(other)
        planned.append(PlannedVllm(port=answer.port, http=answer, launch=chosen))
    unmatched_http = [p for p in planned if p.launch is None]
    unknown_port = [launch for launch in left if launch.host_port is None and launch.alive and not _worker(launch)]
    if len(unmatched_http) == 1 and len(unknown_port) == 1:
        index = planned.index(unmatched_http[0])
        planned[index] = PlannedVllm(
            port=unmatched_http[0].port, http=unmatched_http[0].http, launch=unknown_port[0], paired=True
        )
        left.remove(unknown_port[0])
    taken_ports = {p.port for p in planned}
    left_out: list[Launch] = []
    for launch in left:
        if (
            launch.alive
            and launch.host_port is not None
            and launch.host_port not in taken_ports
            and not _worker(launch)
        ):
            planned.append(PlannedVllm(port=launch.host_port, http=None, launch=launch))
            taken_ports.add(launch.host_port)
        else:
            left_out.append(launch)
    return planned, left_out, notes


# --- rendering ----------------------------------------------------------------------------------------


def one_line(text: str, limit: int = 300) -> str:
    """Remote text made safe for a comment: control characters become spaces; long text is cut."""
    flat = _CONTROL.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def toml_string(text: str) -> str:
    """A TOML basic string."""
    out = ['"']
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return toml_string(value)


def kv(key: str, value: str | int | float | bool, comment: str = "", *, disabled: bool = False) -> str:
    """``key = value   # comment``, with the comment at ``COMMENT_COLUMN`` when the line is short."""
    line = f"{'# ' if disabled else ''}{key} = {_value(value)}"
    if not comment:
        return line
    if len(line) < COMMENT_COLUMN - 1:
        return f"{line.ljust(COMMENT_COLUMN - 1)} # {one_line(comment)}"
    return f"{line}  # {one_line(comment)}"


def comment_block(text: str, indent: str = "") -> list[str]:
    """A paragraph as ``#`` lines wrapped at ``WRAP_WIDTH``."""
    # Spaces inside `code` do not break lines (textwrap only breaks at ASCII whitespace).
    kept = re.sub(r"`[^`\n]*`", lambda m: m.group(0).replace(" ", "\xa0"), one_line(text, 2000))
    wrapped = textwrap.wrap(
        kept,
        width=WRAP_WIDTH - 2 - len(indent),
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [f"# {indent}{line}".replace("\xa0", " ") for line in wrapped] or ["#"]


@dataclass(frozen=True, slots=True)
class SshSettings:
    """The SSH settings given on the command line (None: not given, the default applies)."""

    user: str | None = None
    port: int | None = None
    key_file: str | None = None
    known_hosts: str | None = None


@dataclass(frozen=True, slots=True)
class SshFindings:
    hostname: str | None
    units: tuple[UnitInfo, ...] = ()
    containers: tuple[ContainerInfo, ...] = ()
    notes: tuple[str, ...] = ()  # what could not be looked at ("docker: permission denied...")


@dataclass(frozen=True, slots=True)
class HostReport:
    """Everything init learned about one host."""

    host: str
    name: str
    name_how: str
    findings: tuple[PortFinding, ...]
    ssh: SshFindings | None  # None: SSH discovery was skipped (``ssh_skipped`` says why)
    ssh_skipped: str | None = None


def _vllm_name(plan: PlannedVllm) -> str | None:
    launch, args = plan.launch, plan.launch.vllm if plan.launch else None
    if args is not None and args.served_model_name:
        return config_name(args.served_model_name)
    if launch is not None:
        return config_name(_strip_vllm(launch.unit or launch.container or ""))
    if plan.http is not None and plan.http.models:
        return config_name(_model_tail(plan.http.models[0]))
    return None


def _vllm_section(plan: PlannedVllm, name: str, *, ssh_looked: bool) -> list[str]:
    lines = ["[[nodes.vllm]]"]
    launch, http = plan.launch, plan.http
    args = launch.vllm if launch is not None else None
    if args is not None and args.served_model_name:
        name_how = "--served-model-name"
    elif launch is not None:
        name_how = f"from the {'unit' if launch.unit else 'container'} name"
    elif http is not None and http.models:
        name_how = "from the model /v1/models serves"
    else:
        name_how = "rename it at will"
    lines.append(kv("name", name, name_how))
    if plan.port is not None:
        if http is not None:
            what = f"vLLM {http.version} answered /version"
            if http.needs_api_key:
                what += "; /v1/models wants an API key"
            elif http.models:
                what += f"; serves {', '.join(http.models)}"
        elif launch is not None:
            what = f"did not answer during init; port from {launch.port_how}"
        else:
            what = ""
        lines.append(kv("port", plan.port, what))
    if launch is not None:
        key = "unit" if launch.unit else "container"
        value = launch.unit or launch.container or ""
        if launch.unit:
            how = f"systemd unit (systemctl list-units), {launch.state}"
        else:
            how = f"docker container (docker ps), {launch.state}"
        lines.append(kv(key, value, how))
        if args is not None and args.gpu_memory_utilization is not None:
            lines.append(
                kv(
                    "gpu_memory_utilization",
                    args.gpu_memory_utilization,
                    f"--gpu-memory-utilization in {launch.args_from}",
                )
            )
        elif args is not None and args.gpu_memory_utilization_raw is not None:
            lines += comment_block(
                f"--gpu-memory-utilization {args.gpu_memory_utilization_raw} in {launch.args_from} is not a "
                "fraction between 0 and 1; set gpu_memory_utilization by hand"
            )
        elif args is not None:
            lines += comment_block(
                f"gpu_memory_utilization: {launch.args_from} has no --gpu-memory-utilization (vLLM's "
                "default is 0.9); set it for the launch-readiness check"
            )
        else:
            lines += comment_block(
                f"gpu_memory_utilization: no vllm serve command line found in {launch.label} "
                f"({launch.runs}); set it to the server's --gpu-memory-utilization"
            )
        runs = f"The {key} runs {launch.runs}"
        if http is not None and not plan.paired:
            runs += f", on this port by {launch.port_how}"
        if launch.unit and launch.container:
            runs += (
                f"; container {launch.container} is written as the unit, which owns its life (logs from "
                "journalctl, restarts through systemd)"
            )
        lines += comment_block(runs + ".")
        if plan.paired:
            lines += comment_block(
                f"Paired by elimination: {launch.label} is the only vLLM launch whose port could not be read "
                "and this is the only vLLM that answered without one. Check that they are the same."
            )
    else:
        found = (
            "No systemd unit or docker container found for it"
            if ssh_looked
            else "SSH discovery was skipped for this host"
        )
        lines += comment_block(
            f'{found}: add unit = "..." or container = "..." for its logs and actions, and '
            "gpu_memory_utilization for the launch-readiness check"
        )
    if args is not None:
        if args.model:
            lines += comment_block(f"model: {args.model}")
        if args.speculative:
            lines += comment_block(f"speculative decoding: {args.speculative} (--speculative-config)")
        if args.host in ("127.0.0.1", "localhost", "::1"):
            lines += comment_block(
                f"It listens on {args.host} only (--host): sparktui must run on this node to reach it"
            )
        if args.nnodes is not None and args.nnodes > 1:
            lines += comment_block(
                f'It runs across {args.nnodes} nodes (--nnodes): set role = "head" and a job name here, '
                'and role = "worker" with the same job on the other nodes'
            )
        if args.config_file:
            lines += comment_block(f"It reads more settings from --config {args.config_file} (not read by init)")
    if http is not None and http.needs_api_key:
        lines.append(
            kv(
                "api_key_env",
                "VLLM_API_KEY",
                "/v1/models answered 401: vLLM runs with --api-key; name the variable holding it",
                disabled=True,
            )
        )
    return lines


def _launch_note(launch: Launch) -> str:
    args = launch.vllm
    bits = [f"{launch.label} ({launch.state}), runs {launch.runs}"]
    if args is not None and args.headless:
        bits.append(
            'a multi-node worker (--headless, no HTTP endpoint): add it with role = "worker" and the job '
            "name of its head"
        )
    elif launch.host_port is None:
        bits.append(f"its port is unknown ({launch.port_how}); add port = ... if it serves here")
    elif not launch.alive:
        bits.append(f"not running, port {launch.host_port} did not answer; add it if it should run")
    else:
        bits.append(f"port {launch.host_port} is already taken by another entry")
    if args is not None and args.gpu_memory_utilization is not None:
        bits.append(f"--gpu-memory-utilization {args.gpu_memory_utilization:g}")
    return "; ".join(bits)


def _count(n: int, what: str) -> str:
    return f"{'no' if n == 0 else n} {what}{'' if n == 1 else 's'}"


def _rule(title: str) -> str:
    return f"# --- {title} ".ljust(WRAP_WIDTH, "-")


def render_node(report: HostReport, ssh: SshSettings) -> list[str]:
    """The ``[[nodes]]`` section of one host, with its sub-tables and comments."""
    lines = [
        _rule(report.name if report.name == report.host else f"{report.name} ({report.host})"),
        "",
        "[[nodes]]",
        kv("name", report.name, f"from {report.name_how}"),
        kv("host", report.host, "as given to sparktui init"),
        "",
    ]
    given = [ssh.user, ssh.port, ssh.key_file, ssh.known_hosts]
    if any(v is not None for v in given):
        lines.append("[nodes.ssh]")
        if ssh.user is not None:
            lines.append(kv("user", ssh.user, "--user"))
        if ssh.port is not None:
            lines.append(kv("port", ssh.port, "--port"))
        if ssh.key_file is not None:
            lines.append(kv("key_file", ssh.key_file, "--key"))
        if ssh.known_hosts is not None:
            lines.append(kv("known_hosts", ssh.known_hosts, "--known-hosts"))
    else:
        lines += [
            "# [nodes.ssh]".ljust(COMMENT_COLUMN - 1) + " # not given to init: the defaults are your user name,",
            kv("user", "...", "port 22, the SSH agent's keys, ~/.ssh/known_hosts", disabled=True),
        ]
    lines.append("")

    answers = [f for f in report.findings if isinstance(f, VllmAnswer)]
    launches = vllm_launches(report.ssh.units, report.ssh.containers) if report.ssh is not None else []
    planned, left_out, notes = plan_vllms(answers, launches)
    taken: set[str] = set()
    for plan in planned:
        base = _vllm_name(plan) or "vllm"
        name = unique(base, taken, str(plan.port) if plan.port is not None else None)
        lines += [*_vllm_section(plan, name, ssh_looked=report.ssh is not None), ""]

    exporters = [f for f in report.findings if isinstance(f, ExporterAnswer)]
    gpu = [e for e in exporters if e.kind in _GPU_KINDS]
    node = [e for e in exporters if e.kind is ExporterKind.NODE_EXPORTER]
    if gpu:
        lines += [
            "[nodes.gpu_exporter]",
            kv("port", gpu[0].port, f"/metrics answered: {gpu[0].kind.value}"),
            *[
                line
                for other in gpu[1:]
                for line in comment_block(
                    f"Also a GPU exporter on port {other.port} ({other.kind.value}); a node has one "
                    "gpu_exporter, change the port to use that one instead"
                )
            ],
            "",
        ]
    if node:
        lines += [
            "[nodes.node_exporter]",
            kv("port", node[0].port, "/metrics answered: node_exporter"),
            "",
        ]
    services = [f for f in report.findings if isinstance(f, ServiceAnswer)]
    service_names: set[str] = set()
    for service in services:
        base = service.kind if service.kind != "http" else f"http-{service.port}"
        name = unique(base, service_names, str(service.port))
        answered = f"{service.path} answered HTTP {service.status} in {service.elapsed_s * 1000:.0f} ms"
        if service.status != 200:
            answered += "; set expect_status if that is its healthy answer"
        lines += [
            "[[nodes.services]]",
            kv("name", name),
            kv("kind", service.kind),
            kv("port", service.port, answered),
        ]
        if service.kind == "http" and service.path != "/health":
            lines.append(kv("path", service.path))
        lines.append("")

    missing = [f for f in report.findings if isinstance(f, NoAnswer)]
    if missing:
        lines.append(f"# Probed on {report.host} and not found:")
        for item in missing:
            label = ROLE_LABELS.get(item.role, item.role)
            lines += comment_block(f"{label} on port {item.port}: {item.reason}", indent="  ")
    if report.ssh is None:
        # Not wrapped: the reason ends in a command to copy.
        lines += ["# SSH discovery skipped:", f"#   {one_line(report.ssh_skipped or 'not asked', 1000)}"]
    else:
        found = (
            f"{_count(len(report.ssh.units), 'vLLM unit')} and {_count(len(report.ssh.containers), 'vLLM container')}"
        )
        lines += comment_block(f"Over SSH: {found} (systemctl list-units and show, docker ps and inspect).")
        for note in [*notes, *report.ssh.notes]:
            lines += comment_block(note, indent="  ")
        if left_out:
            lines.append("# Found over SSH and left out:")
            for launch in left_out:
                lines += comment_block(_launch_note(launch), indent="  ")
    lines.append("")
    return lines


def render_config(reports: Sequence[HostReport], ssh: SshSettings, *, written_at: str, hosts: Sequence[str]) -> str:
    """The whole config file."""
    lines = [
        f"# sparktui fleet config, written by `sparktui init {' '.join(hosts)}` on {written_at}.",
        "#",
        "# Each value says how it was found: by probing the host's usual ports over HTTP (vLLM /version and",
        "# /v1/models, exporters' /metrics, services' /health) and, over SSH, reading the systemd units and",
        "# docker containers that run vLLM and their `vllm serve` command lines. What was probed and not",
        "# found is listed under each node. Check it, edit it, then run `sparktui config check`.",
        "# Every key is described in docs/config.md. Top-level settings (poll_interval_s, timeout_s,",
        "# [thresholds]) keep their defaults unless added here, above the first [[nodes]].",
        "",
    ]
    for report in reports:
        lines += render_node(report, ssh)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"
