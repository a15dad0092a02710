"""Command lines that start an engine's server: ``docker run`` / ``exec`` / ``start``, ``bash -c``.

A command line comes from a systemd ``ExecStart``, a ``docker inspect``, a script or a ``bash -c``
string; where the server in it is found and where its port is published on the host (``-p
HOST:CONTAINER``, ``--network host``) is read here. What the server's own arguments say (vLLM's
``--port``, ``--gpu-memory-utilization``, ``--served-model-name``...) is read by its engine's reader
(``engines.vllm.command``, ``engines.llamacpp.command``, ``engines.sglang.command``,
``engines.trtllm.command``; Ollama's environment by ``engines.ollama.command``), which also says
how its start is recognised. Pure: the words are untrusted text from a host.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from sparktui.engines.llamacpp.command import ServerArgs, is_server_image, is_server_program, parse_server_args
from sparktui.engines.nim.command import NimContainer, read_container
from sparktui.engines.ollama import command as ollama_command
from sparktui.engines.ollama.command import OllamaHost
from sparktui.engines.sglang import command as sglang_command
from sparktui.engines.sglang.command import SglangArgs
from sparktui.engines.trtllm import command as trtllm_command
from sparktui.engines.trtllm.command import TrtllmArgs
from sparktui.engines.vllm import command as vllm_command
from sparktui.engines.vllm.command import VllmArgs
from sparktui.model.numbers import is_digits

# --- command lines ------------------------------------------------------------------------------------

_SHELL_OPERATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "|&"})


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
    spaces comes back as several words; the servers' options sparktui reads have none).
    """
    found = re.findall(r"argv\[\]=(.*?) ; (?:ignore_errors|flags)=", value)
    return [words.split() for words in found if words.strip()]


MAX_ENVIRONMENT = 256  # variables kept per unit or container


def environment_words(words: Iterable[str]) -> dict[str, str]:
    """``NAME=VALUE`` words (a unit's ``Environment``, a container's ``Env`` or ``-e``) as a dict; a word
    that is not one is skipped, and at most ``MAX_ENVIRONMENT`` are kept."""
    found: dict[str, str] = {}
    for word in words:
        name, eq, value = word.partition("=")
        if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and len(found) < MAX_ENVIRONMENT:
            found[name] = value
    return found


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


def whole_number(text: str | None) -> int | None:
    """``"8000"`` → 8000; None for anything but digits (``$PORT``, ``8000-8010``, nothing)."""
    return int(text) if text is not None and is_digits(text) else None


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
    """A container port published on the host (None: docker picks the host port), from a ``-p`` or
    from ``docker inspect``."""

    container_port: int
    host_port: int | None
    label: str  # how the mapping was written, for comments: "`-p 8001:8000`", "port mapping `8001->8000`"


def parse_publish(value: str) -> Publish | None:
    """``8001:8000``, ``0.0.0.0:8001:8000``, ``[::1]:8001:8000/tcp``, ``8000``; None for a range."""
    spec = value.split("/", 1)[0]
    parts = spec.rsplit(":", 2)
    container = whole_number(parts[-1])
    if container is None:
        return None
    host = whole_number(parts[-2]) if len(parts) >= 2 else None
    return Publish(container_port=container, host_port=host, label=f"`-p {value}`")


@dataclass(frozen=True, slots=True)
class DockerRun:
    name: str | None
    image: str | None
    publish: tuple[Publish, ...]
    host_network: bool
    entrypoint: str | None
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # -e NAME=VALUE (-e NAME passes the caller's: unknown)


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
    env: list[str] = []
    while index < len(argv):
        word = argv[index]
        if word == "--":
            index += 1
            break
        if not word.startswith("-") or word == "-":
            break
        index += 1
        value: str | None  # None: the value is the next word
        if word.startswith("--"):
            option, eq, inline = word.partition("=")
            if option in _DOCKER_RUN_BOOL:
                continue
            value = inline if eq else None
        else:
            letters = word[1:]
            if all(c in _DOCKER_SHORT_BOOL for c in letters):
                continue
            option = "-" + letters[0]
            value = letters[1:].removeprefix("=") if len(letters) > 1 else None
        if value is None:
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
        elif option == "--env":
            env.append(value)
    image = argv[index] if index < len(argv) else None
    return DockerRun(
        name=name,
        image=image,
        publish=tuple(publish),
        host_network=network == "host",
        entrypoint=entrypoint,
        command=tuple(argv[index + 1 :]),
        env=environment_words(env),
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
    """What one command line (a unit's ExecStart, a container's command) says about the server it runs."""

    vllm: VllmArgs | None  # a vLLM's arguments (``analyse_command``)
    container: str | None  # the container it runs or acts on (docker run --name / exec / start)
    image: str | None
    host_port: int | None  # where the server's API answers on the host; None: unknown here
    port_how: str  # how host_port was read, or why it is unknown
    runs: str  # a short description for comments: "docker run --name X (IMAGE)", "a script ..."
    llama: ServerArgs | None = None  # a llama-server's options (``analyse_llama_command``)
    sglang: SglangArgs | None = None  # an SGLang's options (``analyse_sglang_command``)
    trtllm: TrtllmArgs | None = None  # a trtllm-serve's options (``analyse_trtllm_command``)
    nim: NimContainer | None = None  # a NIM container's image and environment (``analyse_nim_command``)
    ollama: OllamaHost | None = None  # where an ``ollama serve`` listens (``analyse_ollama_command``)


def published_port(
    port: int | None, how_given: str, publish: Sequence[Publish], *, host_network: bool, unpublished: str = ""
) -> tuple[int | None, str]:
    """Where a container's server port answers on the host, and how that was read (or why it is unknown)."""
    if port is None:
        return None, how_given
    if host_network:
        return port, f"{how_given} with `--network host`"
    for mapping in publish:
        if mapping.container_port == port:
            if mapping.host_port is None:
                return None, f"{mapping.label} publishes container port {port} on a port docker picks"
            return mapping.host_port, f"{mapping.label} ({how_given} in the container)"
    return None, f"container port {port} ({how_given}) is not published{unpublished}"


def only_published(publish: Sequence[Publish]) -> tuple[int, str] | None:
    """The host port of a container that publishes exactly one, when no command line names the port."""
    if len(publish) != 1 or publish[0].host_port is None:
        return None
    return publish[0].host_port, f"{publish[0].label}, the only published port"


def _docker_run_command(run: DockerRun, found: tuple[int | None, str] | None, program: str) -> CommandLine:
    """A ``docker run``: where the server answers on the host (``found``, read from its command line),
    else the only port the container publishes. The server's arguments are for the caller to add."""
    only = only_published(run.publish)
    if found is not None:
        host_port, how = found
    elif only is not None:
        host_port, how = only
    else:
        host_port, how = None, f"no {program} command line to read the port from"
    named = f" --name {run.name}" if run.name else ""
    return CommandLine(
        vllm=None,
        container=run.name,
        image=run.image,
        host_port=host_port,
        port_how=how,
        runs=f"`docker run{named}` ({run.image or 'no image'})",
    )


def _container_or_script(argv: Sequence[str], program: str) -> CommandLine:
    """A command line that is not the server's own: ``docker exec|start NAME ...`` (the container sets
    the port), a script, or anything else. The server's arguments are for the caller to add."""
    target = docker_target(argv)
    script = _script(argv)
    if target is not None:
        return CommandLine(
            vllm=None,
            container=target,
            image=None,
            host_port=None,
            port_how=f"set by container {target}",
            runs=f"a script in container {target} ({script})" if script else f"container {target}",
        )
    return CommandLine(
        vllm=None,
        container=None,
        image=None,
        host_port=None,
        port_how=f"no {program} command line to read the port from",
        runs=f"a script ({script})" if script else (f"`{argv[0]}`" if argv else "nothing"),
    )


# --- each engine's server: vLLM, llama.cpp's llama-server, SGLang, TensorRT-LLM ----------------------

MAX_NESTING = 8  # `bash -c` strings inside `bash -c` strings read; deeper is not a launch
ArgsT = TypeVar("ArgsT", VllmArgs, ServerArgs, SglangArgs, TrtllmArgs)


def _find_server(
    argv: Sequence[str], start: Callable[[Sequence[str], int], int | None], marker: str, depth: int = 0
) -> list[str] | None:
    """The arguments of the server whose start ``start`` recognises (the index of its first argument),
    looking inside ``bash -c "..."`` strings that mention ``marker`` too; None when there is none."""
    for index, word in enumerate(argv):
        first = start(argv, index)
        if first is not None:
            return _until_shell_operator(argv[first:])
        if depth < MAX_NESTING and marker in word and any(c.isspace() for c in word):
            inner = _find_server(split_command_line(word), start, marker, depth + 1)
            if inner is not None:
                return inner
    return None


def find_vllm_serve(argv: Sequence[str]) -> list[str] | None:
    """The arguments after ``vllm serve`` (or ``python -m vllm.entrypoints.openai.api_server``),
    looking inside ``bash -c "..."`` strings too; None when the command line runs no vLLM server."""
    return _find_server(argv, vllm_command.server_start, "vllm")


def find_llama_server(argv: Sequence[str]) -> list[str] | None:
    """The arguments after ``llama-server`` (under any path), looking inside ``bash -c "..."`` strings
    too; None when the command line runs no llama-server."""
    return _find_server(
        argv, lambda words, index: index + 1 if is_server_program(words[index]) else None, "llama-server"
    )


def find_sglang_server(argv: Sequence[str]) -> list[str] | None:
    """The arguments after ``python -m sglang.launch_server`` or ``sglang serve``, looking inside
    ``bash -c "..."`` strings too; None when the command line runs no SGLang server."""
    return _find_server(argv, sglang_command.server_start, "sglang")


def find_trtllm_serve(argv: Sequence[str]) -> list[str] | None:
    """The arguments after ``trtllm-serve [serve]`` (under any path), looking inside ``bash -c "..."``
    strings too; None when the command line runs no trtllm-serve server."""
    return _find_server(argv, trtllm_command.server_start, "trtllm-serve")


def find_ollama_serve(argv: Sequence[str]) -> list[str] | None:
    """The words after ``ollama serve`` (under any path), looking inside ``bash -c "..."`` strings too; None
    when the command line runs no Ollama server."""
    return _find_server(argv, ollama_command.server_start, "ollama")


def llama_port(
    args: ServerArgs, publish: Sequence[Publish] | None, *, host_network: bool = False, unpublished: str = ""
) -> tuple[int | None, str]:
    """Where a llama-server answers on the host, and how that was read or why it is unknown;
    ``publish``: a container's port mappings, None for a llama-server run on the host itself."""
    if args.unix_socket:
        return None, f"`--host {args.host}` is a UNIX socket, not a TCP port"
    return server_port(args.port, args.port_how(), publish, host_network=host_network, unpublished=unpublished)


def server_port(
    port: int | None, how: str, publish: Sequence[Publish] | None, *, host_network: bool = False, unpublished: str = ""
) -> tuple[int | None, str]:
    """Where a server answers on the host (``port``, given as ``how``, in its container when ``publish``
    holds the container's port mappings; None for a server run on the host itself)."""
    if publish is None:
        return port, how
    return published_port(port, how, publish, host_network=host_network, unpublished=unpublished)


def _analyse_server(
    argv: Sequence[str],
    *,
    run_args: Callable[[DockerRun], list[str] | None],
    find: Callable[[Sequence[str]], list[str] | None],
    read: Callable[[list[str], Mapping[str, str] | None], ArgsT],
    port: Callable[[ArgsT, Sequence[Publish] | None, bool], tuple[int | None, str]],
    program: str,
    runs: str,
    env: Mapping[str, str] | None,
) -> tuple[CommandLine, ArgsT | None]:
    """One command line read for one engine's server: a ``docker run`` (``run_args``: the server's
    arguments in it), the server itself (``find``), or ``docker exec|start NAME`` or a script; with the
    server's arguments (``read``), where it answers on the host (``port``) and what runs (``runs``, for
    comments)."""
    run = parse_docker_run(argv)
    if run is not None:
        words = run_args(run)
        args = read(words, run.env) if words is not None else None
        found = port(args, run.publish, run.host_network) if args is not None else None
        return _docker_run_command(run, found, program), args
    words = find(argv)
    args = read(words, env) if words is not None else None
    other = _container_or_script(argv, program)
    if other.container is not None or args is None:
        return other, args
    host_port, how = port(args, None, False)
    return replace(other, host_port=host_port, port_how=how, runs=runs), args


def _vllm_run_args(run: DockerRun) -> list[str] | None:
    serve = find_vllm_serve(run.command)
    if serve is None and run.entrypoint is None and vllm_command.image_serves(run.image or "", run.command):
        serve = _until_shell_operator(run.command)
    return serve


def _vllm_host_port(args: VllmArgs, publish: Sequence[Publish] | None, host: bool) -> tuple[int | None, str]:
    return server_port(args.port, args.port_how(), publish, host_network=host, unpublished=" with `-p`")


def _vllm_args(words: list[str], _env: Mapping[str, str] | None) -> VllmArgs:
    return vllm_command.parse_server_args(words)


def analyse_command(argv: Sequence[str]) -> CommandLine:
    """Read one command line for a vLLM: ``vllm serve ...``, ``docker run ... IMAGE [vllm serve] ...``
    (a vLLM image runs ``vllm serve``: the words after it are its arguments), ``docker exec NAME
    script``, ``bash -c "... vllm serve ..."``."""
    command, args = _analyse_server(
        argv,
        run_args=_vllm_run_args,
        find=find_vllm_serve,
        read=_vllm_args,
        port=_vllm_host_port,
        program="vllm serve",
        runs="`vllm serve`",
        env=None,
    )
    return replace(command, vllm=args)


def _llama_run_args(run: DockerRun) -> list[str] | None:
    server = find_llama_server(run.command)
    if server is None and run.entrypoint is not None and is_server_program(run.entrypoint):
        server = _until_shell_operator(run.command)
    if server is None and run.entrypoint is None and is_server_image(run.image or ""):
        server = _until_shell_operator(run.command)
    return server


def _llama_host_port(args: ServerArgs, publish: Sequence[Publish] | None, host: bool) -> tuple[int | None, str]:
    return llama_port(args, publish, host_network=host, unpublished=" with `-p`")


def analyse_llama_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> CommandLine:
    """Read one command line for a llama-server: ``llama-server ...``, ``bash -c "... llama-server ..."``,
    ``docker run ... IMAGE [llama-server] ...`` (an official server image runs llama-server: the words
    after it are its options), ``docker exec|start NAME``. ``env``: the environment it runs in (a unit's);
    a container's is its ``-e``."""
    command, args = _analyse_server(
        argv,
        run_args=_llama_run_args,
        find=find_llama_server,
        read=parse_server_args,
        port=_llama_host_port,
        program="llama-server",
        runs="`llama-server`",
        env=env,
    )
    return replace(command, llama=args)


def sglang_port(
    args: SglangArgs, publish: Sequence[Publish] | None, *, host_network: bool = False, unpublished: str = ""
) -> tuple[int | None, str]:
    """Where an SGLang answers on the host, and how that was read or why it is unknown."""
    return server_port(args.port, args.port_how(), publish, host_network=host_network, unpublished=unpublished)


def _sglang_host_port(args: SglangArgs, publish: Sequence[Publish] | None, host: bool) -> tuple[int | None, str]:
    return sglang_port(args, publish, host_network=host, unpublished=" with `-p`")


def _sglang_args(words: list[str], _env: Mapping[str, str] | None) -> SglangArgs:
    return sglang_command.parse_server_args(words)


def analyse_sglang_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> CommandLine:
    """Read one command line for an SGLang: ``python3 -m sglang.launch_server ...``, ``sglang serve ...``,
    ``bash -c "..."`` around either, ``docker run ... IMAGE python3 -m sglang.launch_server ...`` (the
    official ``lmsysorg/sglang`` images have no entrypoint of their own), ``docker exec|start NAME``.
    SGLang reads none of its options from the environment: ``env`` is not used."""
    command, args = _analyse_server(
        argv,
        run_args=lambda run: find_sglang_server(run.command),
        find=find_sglang_server,
        read=_sglang_args,
        port=_sglang_host_port,
        program="SGLang",
        runs="an SGLang server",
        env=env,
    )
    return replace(command, sglang=args)


def trtllm_port(
    args: TrtllmArgs, publish: Sequence[Publish] | None, *, host_network: bool = False, unpublished: str = ""
) -> tuple[int | None, str]:
    """Where a trtllm-serve answers on the host, and how that was read or why it is unknown."""
    return server_port(args.port, args.port_how(), publish, host_network=host_network, unpublished=unpublished)


def _trtllm_args(words: list[str], _env: Mapping[str, str] | None) -> TrtllmArgs:
    return trtllm_command.parse_server_args(words)


def analyse_trtllm_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> CommandLine:
    """Read one command line for a trtllm-serve: ``trtllm-serve [serve] MODEL ...``, ``bash -c "..."``
    around it, ``docker run ... IMAGE trtllm-serve ...`` (NVIDIA's release image has no server of its own
    as entrypoint), ``docker exec|start NAME``. trtllm-serve reads none of its options from the
    environment: ``env`` is not used."""
    command, args = _analyse_server(
        argv,
        run_args=lambda run: find_trtllm_serve(run.command),
        find=find_trtllm_serve,
        read=_trtllm_args,
        port=lambda args, publish, host: trtllm_port(args, publish, host_network=host, unpublished=" with `-p`"),
        program="trtllm-serve",
        runs="`trtllm-serve`",
        env=env,
    )
    return replace(command, trtllm=args)


def analyse_nim_command(argv: Sequence[str], _env: Mapping[str, str] | None = None) -> CommandLine:
    """Read one command line for a NIM: ``docker run ... nvcr.io/nim/ORG/MODEL:TAG`` (its entrypoint
    starts the server: the port is ``-e NIM_SERVER_PORT``, else 8000, in the container), or ``docker
    exec|start NAME`` (the container sets the port)."""
    run = parse_docker_run(argv)
    if run is None:
        return _container_or_script(argv, "NIM")
    found = read_container(run.image or "", run.env)
    where = (
        published_port(found.port, found.port_how(), run.publish, host_network=run.host_network)
        if found is not None
        else None
    )
    return replace(_docker_run_command(run, where, "NIM"), nim=found)


def analyse_ollama_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> CommandLine:
    """Read one command line for an Ollama: ``ollama serve`` (``bash -c "..."`` around it), where
    ``OLLAMA_HOST`` in ``env`` (a unit's environment) says where it listens; ``docker run ... ollama/ollama``
    (its ``-e OLLAMA_HOST``, else the image's ``0.0.0.0:11434``) or ``docker run ... IMAGE ollama serve``;
    or ``docker exec|start NAME`` (the container sets the port)."""
    run = parse_docker_run(argv)
    if run is not None:
        found = ollama_command.read_container(run.image or "", run.env)
        if found is None and find_ollama_serve(run.command) is not None:
            found = ollama_command.read_environment(run.env)
        where = (
            published_port(found.port, found.port_how(), run.publish, host_network=run.host_network)
            if found is not None
            else None
        )
        return replace(_docker_run_command(run, where, "ollama serve"), ollama=found)
    other = _container_or_script(argv, "ollama serve")
    if other.container is not None or find_ollama_serve(argv) is None:
        return other
    host = ollama_command.read_environment(env or {})
    return replace(other, host_port=host.port, port_how=host.port_how(), runs="`ollama serve`", ollama=host)
