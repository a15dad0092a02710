"""The engine launches SSH found: the units and containers that start a vLLM, a llama-server, an SGLang,
a TensorRT-LLM trtllm-serve, a NIM or an Ollama, one launch each."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from sparktui.discovery.commands import (
    CommandLine,
    Publish,
    analyse_command,
    analyse_llama_command,
    analyse_nim_command,
    analyse_ollama_command,
    analyse_sglang_command,
    analyse_trtllm_command,
    find_llama_server,
    find_ollama_serve,
    find_sglang_server,
    find_trtllm_serve,
    find_vllm_serve,
    llama_port,
    only_published,
    published_port,
    sglang_port,
    trtllm_port,
)
from sparktui.discovery.units import ContainerInfo, UnitInfo
from sparktui.engines.llamacpp.command import ServerArgs, is_server_image, parse_server_args
from sparktui.engines.nim.command import NimContainer, is_nim_image, read_container
from sparktui.engines.ollama import command as ollama_command
from sparktui.engines.ollama.command import OllamaHost
from sparktui.engines.sglang import command as sglang_command
from sparktui.engines.sglang.command import SglangArgs
from sparktui.engines.trtllm import command as trtllm_command
from sparktui.engines.trtllm.command import TrtllmArgs
from sparktui.engines.vllm import command as vllm_command
from sparktui.engines.vllm.command import VllmArgs

LaunchArgs = VllmArgs | ServerArgs | SglangArgs | TrtllmArgs | NimContainer | OllamaHost


@dataclass(frozen=True, slots=True)
class Launch:
    """A server's start found over SSH (a vLLM's, or a llama-server's, an SGLang's or a trtllm-serve's when
    ``engine`` says so): a systemd unit (which may run a container) or a container."""

    unit: str | None
    container: str | None  # a container run by the unit, or the container itself
    state: str
    alive: bool
    vllm: VllmArgs | None
    args_from: str  # where the server's arguments were read
    host_port: int | None
    port_how: str
    runs: str
    engine: str = "vllm"  # the config's engine = ...
    llama: ServerArgs | None = None  # a llama-server's options, when engine is "llamacpp"
    sglang: SglangArgs | None = None  # an SGLang's options, when engine is "sglang"
    trtllm: TrtllmArgs | None = None  # a trtllm-serve's options, when engine is "trtllm"
    nim: NimContainer | None = None  # a NIM container's image and environment, when engine is "nim"
    ollama: OllamaHost | None = None  # where an Ollama listens (OLLAMA_HOST), when engine is "ollama"

    @property
    def label(self) -> str:
        return f"unit {self.unit}" if self.unit else f"container {self.container}"


def _mentions_vllm(*texts: str) -> bool:
    return any("vllm" in text.lower() for text in texts)


def _mentions_llama(*texts: str) -> bool:
    return any(word in text.lower() for text in texts for word in ("llama-server", "llama.cpp", "llamacpp"))


def _mentions_sglang(*texts: str) -> bool:
    return any("sglang" in text.lower() for text in texts)


def _runs_sglang(unit: UnitInfo) -> bool:
    return any(analyse_sglang_command(argv).sglang is not None for argv in unit.exec_start)


def _mentions_trtllm(*texts: str) -> bool:
    return any(word in text.lower() for text in texts for word in ("trtllm", "tensorrt-llm", "tensorrt_llm"))


def _runs_trtllm(unit: UnitInfo) -> bool:
    return any(analyse_trtllm_command(argv).trtllm is not None for argv in unit.exec_start)


def is_vllm_unit(unit: UnitInfo) -> bool:
    """A unit named for vLLM or whose ExecStart mentions it (``vllm serve``, a vllm image...)."""
    return _mentions_vllm(unit.name, *(" ".join(argv) for argv in unit.exec_start))


def is_vllm_container(container: ContainerInfo) -> bool:
    return _mentions_vllm(container.name, container.image, *container.argv)


def is_llama_unit(unit: UnitInfo) -> bool:
    """A unit whose ExecStart runs llama-server (and no ``vllm serve`` or SGLang), or named for llama.cpp
    and not for vLLM (a script that starts it)."""
    if any(analyse_command(argv).vllm is not None for argv in unit.exec_start) or _runs_sglang(unit):
        return False
    if _runs_trtllm(unit):
        return False
    if any(analyse_llama_command(argv).llama is not None for argv in unit.exec_start):
        return True
    return not is_vllm_unit(unit) and _mentions_llama(unit.name, *(" ".join(argv) for argv in unit.exec_start))


def is_llama_container(container: ContainerInfo) -> bool:
    if find_vllm_serve(container.argv) is not None or find_sglang_server(container.argv) is not None:
        return False
    if find_trtllm_serve(container.argv) is not None:
        return False
    if find_llama_server(container.argv) is not None or is_server_image(container.image):
        return True
    return not is_vllm_container(container) and _mentions_llama(container.name, container.image, *container.argv)


def is_sglang_unit(unit: UnitInfo) -> bool:
    """A unit whose ExecStart runs SGLang (and no ``vllm serve`` or llama-server), or named for SGLang and
    running neither (a script that starts it)."""
    if any(analyse_command(argv).vllm is not None for argv in unit.exec_start):
        return False
    if any(analyse_llama_command(argv).llama is not None for argv in unit.exec_start) or _runs_trtllm(unit):
        return False
    return _runs_sglang(unit) or _mentions_sglang(unit.name, *(" ".join(argv) for argv in unit.exec_start))


def is_sglang_container(container: ContainerInfo) -> bool:
    """A container that runs SGLang, of an official SGLang image, or named for it (and running no
    ``vllm serve`` or llama-server)."""
    if find_vllm_serve(container.argv) is not None or find_llama_server(container.argv) is not None:
        return False
    if find_trtllm_serve(container.argv) is not None:
        return False
    if find_sglang_server(container.argv) is not None or sglang_command.is_server_image(container.image):
        return True
    return _mentions_sglang(container.name, container.image, *container.argv)


def is_trtllm_unit(unit: UnitInfo) -> bool:
    """A unit whose ExecStart runs trtllm-serve, or named for TensorRT-LLM and running no other engine's
    server (a script that starts it)."""
    if _runs_trtllm(unit):
        return True
    if any(analyse_command(argv).vllm is not None for argv in unit.exec_start) or _runs_sglang(unit):
        return False
    if any(analyse_llama_command(argv).llama is not None for argv in unit.exec_start):
        return False
    return _mentions_trtllm(unit.name, *(" ".join(argv) for argv in unit.exec_start))


def is_trtllm_container(container: ContainerInfo) -> bool:
    """A container that runs trtllm-serve, or of NVIDIA's TensorRT-LLM release image or named for it and
    running no other engine's server."""
    if find_trtllm_serve(container.argv) is not None:
        return True
    others = (find_vllm_serve, find_llama_server, find_sglang_server)
    if any(find(container.argv) is not None for find in others):
        return False
    if trtllm_command.is_server_image(container.image):
        return True
    return _mentions_trtllm(container.name, container.image)


def is_nim_unit(unit: UnitInfo) -> bool:
    """A unit whose ExecStart runs a container of a NIM image (``docker run ... nvcr.io/nim/...``)."""
    return any(analyse_nim_command(argv).nim is not None for argv in unit.exec_start)


def is_nim_container(container: ContainerInfo) -> bool:
    """A container of a NIM image (``nvcr.io/nim/ORG/MODEL:TAG``), whatever its name."""
    return is_nim_image(container.image)


def is_ollama_unit(unit: UnitInfo) -> bool:
    """A unit whose ExecStart runs ``ollama serve`` (the install's ``ollama.service``), or a container of
    the ``ollama/ollama`` image (``docker run ... ollama/ollama``)."""
    return any(analyse_ollama_command(argv, unit.environment).ollama is not None for argv in unit.exec_start)


def is_ollama_container(container: ContainerInfo) -> bool:
    """A container of the ``ollama/ollama`` image, or one whose command runs ``ollama serve``."""
    return ollama_command.is_server_image(container.image) or find_ollama_serve(container.argv) is not None


def is_engine_unit(unit: UnitInfo) -> bool:
    """A unit that runs (or is named for) any engine init finds."""
    return any(
        is_engine(unit)
        for is_engine in (is_vllm_unit, is_llama_unit, is_sglang_unit, is_trtllm_unit, is_nim_unit, is_ollama_unit)
    )


def is_engine_container(container: ContainerInfo) -> bool:
    return (
        is_vllm_container(container)
        or is_llama_container(container)
        or is_sglang_container(container)
        or is_trtllm_container(container)
        or is_nim_container(container)
        or is_ollama_container(container)
    )


def _publish(container: ContainerInfo) -> list[Publish]:
    return [Publish(inside, host, f"port mapping `{host}->{inside}`") for inside, host in container.ports.items()]


ArgsT = TypeVar("ArgsT", VllmArgs, ServerArgs, SglangArgs, TrtllmArgs, NimContainer, OllamaHost)


def _in_container(
    container: ContainerInfo,
    args: ArgsT | None,
    port: Callable[[ArgsT, Sequence[Publish], bool], tuple[int | None, str]],
    program: str,
) -> tuple[ArgsT | None, int | None, str]:
    """A container's server arguments (None: no command line of ``program`` in it) with where it answers
    on the host (``port``: from its arguments, the container's port mappings and whether it runs on the
    host network), else the only port the container publishes."""
    publish = _publish(container)
    if args is None:
        only = None if container.host_network else only_published(publish)
        if only is not None:
            return None, only[0], only[1]
        return None, None, f"no {program} command line to read the port from"
    host_port, how = port(args, publish, container.host_network)
    return args, host_port, how


def _container_launch(container: ContainerInfo) -> tuple[VllmArgs | None, int | None, str]:
    serve = find_vllm_serve(container.argv)
    return _in_container(
        container,
        vllm_command.parse_server_args(serve) if serve is not None else None,
        lambda args, publish, host: published_port(args.port, args.port_how(), publish, host_network=host),
        "vllm serve",
    )


def _llama_container_launch(container: ContainerInfo) -> tuple[ServerArgs | None, int | None, str]:
    server = find_llama_server(container.argv)
    return _in_container(
        container,
        parse_server_args(server, container.env) if server is not None else None,
        lambda args, publish, host: llama_port(args, publish, host_network=host),
        "llama-server",
    )


def _from_container(
    find: Callable[[Sequence[str]], list[str] | None],
    read: Callable[[Sequence[str]], ArgsT],
    port: Callable[..., tuple[int | None, str]],
    program: str,
) -> Callable[[ContainerInfo], tuple[ArgsT | None, int | None, str]]:
    """How a container's launch is read for a server that reads nothing from the environment: ``find``
    its arguments in the container's command, ``read`` them, and ``port`` says where it answers."""

    def launch(container: ContainerInfo) -> tuple[ArgsT | None, int | None, str]:
        server = find(container.argv)
        return _in_container(
            container,
            read(server) if server is not None else None,
            lambda args, publish, host: port(args, publish, host_network=host),
            program,
        )

    return launch


_sglang_container_launch = _from_container(find_sglang_server, sglang_command.parse_server_args, sglang_port, "SGLang")
_trtllm_container_launch = _from_container(
    find_trtllm_serve, trtllm_command.parse_server_args, trtllm_port, "trtllm-serve"
)


@dataclass(frozen=True, slots=True)
class _Reader:
    """How one engine's launches are found and read."""

    engine: str
    is_unit: Callable[[UnitInfo], bool]
    is_container: Callable[[ContainerInfo], bool]
    analyse: Callable[[Sequence[str], Mapping[str, str]], CommandLine]  # a command line, the unit's environment
    args_of: Callable[[CommandLine], LaunchArgs | None]
    from_container: Callable[[ContainerInfo], tuple[LaunchArgs | None, int | None, str]]
    # where a unit's command line gave the port it read (an Ollama's is in the unit's environment)
    port_given: Callable[[CommandLine], str] = lambda _command: " in the unit's ExecStart"

    def launch(self, args: LaunchArgs | None, where: Launch) -> Launch:
        """``where`` (found with no arguments) given this engine and the arguments read."""
        vllm = args if isinstance(args, VllmArgs) else None
        llama = args if isinstance(args, ServerArgs) else None
        sglang = args if isinstance(args, SglangArgs) else None
        trtllm = args if isinstance(args, TrtllmArgs) else None
        nim = args if isinstance(args, NimContainer) else None
        ollama = args if isinstance(args, OllamaHost) else None
        return replace(
            where, engine=self.engine, vllm=vllm, llama=llama, sglang=sglang, trtllm=trtllm, nim=nim, ollama=ollama
        )


_VLLM = _Reader(
    engine="vllm",
    is_unit=lambda unit: (
        is_vllm_unit(unit)
        and not any(
            other(unit) for other in (is_llama_unit, is_sglang_unit, is_trtllm_unit, is_nim_unit, is_ollama_unit)
        )
    ),
    is_container=lambda container: (
        is_vllm_container(container)
        and not any(
            other(container)
            for other in (
                is_llama_container,
                is_sglang_container,
                is_trtllm_container,
                is_nim_container,
                is_ollama_container,
            )
        )
    ),
    analyse=lambda argv, _env: analyse_command(argv),
    args_of=lambda command: command.vllm,
    from_container=_container_launch,
)
_LLAMA = _Reader(
    engine="llamacpp",
    is_unit=is_llama_unit,
    is_container=is_llama_container,
    analyse=analyse_llama_command,
    args_of=lambda command: command.llama,
    from_container=_llama_container_launch,
)
_SGLANG = _Reader(
    engine="sglang",
    is_unit=is_sglang_unit,
    is_container=is_sglang_container,
    analyse=analyse_sglang_command,
    args_of=lambda command: command.sglang,
    from_container=_sglang_container_launch,
)
_TRTLLM = _Reader(
    engine="trtllm",
    is_unit=is_trtllm_unit,
    is_container=is_trtllm_container,
    analyse=analyse_trtllm_command,
    args_of=lambda command: command.trtllm,
    from_container=_trtllm_container_launch,
)


def _launches(reader: _Reader, units: Sequence[UnitInfo], containers: Sequence[ContainerInfo]) -> list[Launch]:
    by_name = {c.name: c for c in containers}
    claimed: set[str] = set()
    launches: list[Launch] = []
    for unit in units:
        if not reader.is_unit(unit):
            continue
        commands = [reader.analyse(argv, unit.environment) for argv in unit.exec_start]
        command = next(
            (c for c in commands if reader.args_of(c) is not None),
            next((c for c in commands if c.container is not None), commands[0] if commands else None),
        )
        if command is None:
            command = reader.analyse((), unit.environment)
        inside = by_name.get(command.container) if command.container is not None else None
        args, args_from = reader.args_of(command), f"the ExecStart of {unit.name}"
        host_port, port_how = command.host_port, command.port_how
        if host_port is not None:
            port_how += reader.port_given(command)
        if inside is not None:
            claimed.add(inside.name)
            c_args, c_port, c_how = reader.from_container(inside)
            if args is None and c_args is not None:
                args, args_from = c_args, f"the command of container {inside.name} (docker inspect)"
            if host_port is None and c_port is not None:
                host_port, port_how = c_port, f"{c_how}, from docker inspect {inside.name}"
        launches.append(
            reader.launch(
                args,
                Launch(
                    unit=unit.name,
                    container=command.container,
                    state=unit.state,
                    alive=unit.alive,
                    args_from=args_from,
                    host_port=host_port,
                    port_how=port_how,
                    runs=command.runs,
                    vllm=None,
                ),
            )
        )
    for container in containers:
        if container.name in claimed or not reader.is_container(container):
            continue
        args, host_port, port_how = reader.from_container(container)
        launches.append(
            reader.launch(
                args,
                Launch(
                    unit=None,
                    container=container.name,
                    state=container.status or "unknown",
                    alive=container.alive,
                    args_from=f"the command of container {container.name} (docker inspect)",
                    host_port=host_port,
                    port_how=port_how,
                    runs=f"image {container.image}" if container.image else "a container",
                    vllm=None,
                ),
            )
        )
    return launches


def vllm_launches(units: Sequence[UnitInfo], containers: Sequence[ContainerInfo]) -> list[Launch]:
    """The units and containers that run a vLLM, one launch each.

    A unit that runs or starts a container (``docker run --name X``, ``docker exec X``) and that
    container are one launch, written as the unit: systemd owns its life (restarting the container
    behind the unit's back would fight it). The container fills in what the unit's command line lacks.
    A unit or container that runs a llama-server is not a vLLM's, whatever its name.
    """
    return _launches(_VLLM, units, containers)


def llama_launches(units: Sequence[UnitInfo], containers: Sequence[ContainerInfo]) -> list[Launch]:
    """The units and containers that run a llama.cpp llama-server, one launch each, read as
    ``vllm_launches`` reads vLLM's (a unit that runs a container is written as the unit)."""
    return _launches(_LLAMA, units, containers)


def sglang_launches(units: Sequence[UnitInfo], containers: Sequence[ContainerInfo]) -> list[Launch]:
    """The units and containers that run an SGLang, one launch each, read as ``vllm_launches`` reads
    vLLM's (a unit that runs a container is written as the unit)."""
    return _launches(_SGLANG, units, containers)


def _nim_container_launch(container: ContainerInfo) -> tuple[NimContainer | None, int | None, str]:
    return _in_container(
        container,
        read_container(container.image, container.env),
        lambda args, publish, host: published_port(args.port, args.port_how(), publish, host_network=host),
        "NIM",
    )


_NIM = _Reader(
    engine="nim",
    is_unit=is_nim_unit,
    is_container=is_nim_container,
    analyse=analyse_nim_command,
    args_of=lambda command: command.nim,
    from_container=_nim_container_launch,
)


def nim_launches(units: Sequence[UnitInfo], containers: Sequence[ContainerInfo]) -> list[Launch]:
    """The units and containers that run a NIM (a container of an ``nvcr.io/nim/`` image), one launch
    each; a unit that runs the container is written as the unit."""
    return _launches(_NIM, units, containers)


def _ollama_container_launch(container: ContainerInfo) -> tuple[OllamaHost | None, int | None, str]:
    found = ollama_command.read_container(container.image, container.env)
    if found is None and find_ollama_serve(container.argv) is not None:
        found = ollama_command.read_environment(container.env)
    return _in_container(
        container,
        found,
        lambda args, publish, host: published_port(args.port, args.port_how(), publish, host_network=host),
        "ollama serve",
    )


def _ollama_port_given(command: CommandLine) -> str:
    """Where a unit's ``ollama serve`` got its port: ``OLLAMA_HOST`` in the unit's environment, Ollama's
    default where it has none, or a ``docker run``'s options in its ExecStart."""
    if command.image is not None or command.container is not None:
        return " in the unit's ExecStart"
    return "" if command.ollama is None or command.ollama.raw is None else " in the unit's Environment"


_OLLAMA = _Reader(
    engine="ollama",
    is_unit=is_ollama_unit,
    is_container=is_ollama_container,
    analyse=analyse_ollama_command,
    args_of=lambda command: command.ollama,
    from_container=_ollama_container_launch,
    port_given=_ollama_port_given,
)


def ollama_launches(units: Sequence[UnitInfo], containers: Sequence[ContainerInfo]) -> list[Launch]:
    """The units and containers that run an Ollama (``ollama serve``, the ``ollama/ollama`` image), one
    launch each; where it listens is read from ``OLLAMA_HOST`` in the unit's or container's environment.
    A unit that runs the container is written as the unit."""
    return _launches(_OLLAMA, units, containers)


def trtllm_launches(units: Sequence[UnitInfo], containers: Sequence[ContainerInfo]) -> list[Launch]:
    """The units and containers that run a TensorRT-LLM trtllm-serve, one launch each, read as
    ``vllm_launches`` reads vLLM's (a unit that runs a container is written as the unit)."""
    return _launches(_TRTLLM, units, containers)


def engine_launches(units: Sequence[UnitInfo], containers: Sequence[ContainerInfo]) -> list[Launch]:
    """Every engine's launches: vLLM's, then llama-server's, SGLang's, TensorRT-LLM's, NIM's and Ollama's."""
    return [
        *vllm_launches(units, containers),
        *llama_launches(units, containers),
        *sglang_launches(units, containers),
        *trtllm_launches(units, containers),
        *nim_launches(units, containers),
        *ollama_launches(units, containers),
    ]
