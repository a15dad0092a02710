"""The vLLM launches SSH found: the units and containers that start a vLLM, one launch each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sparktui.discovery.commands import (
    Publish,
    VllmArgs,
    analyse_command,
    find_vllm_serve,
    only_published,
    parse_vllm_args,
    port_given,
    published_port,
)
from sparktui.discovery.units import ContainerInfo, UnitInfo


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
    publish = [Publish(inside, host, f"port mapping `{host}->{inside}`") for inside, host in container.ports.items()]
    if args is not None:
        host_port, how = published_port(args.port, port_given(args), publish, host_network=container.host_network)
        return args, host_port, how
    only = None if container.host_network else only_published(publish)
    if only is not None:
        return None, *only
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
