"""What runs on a host, as ``systemctl`` and ``docker`` print it: units and containers.

Reads ``systemctl list-units`` / ``systemctl show`` and ``docker ps`` / ``docker inspect`` output;
names that go into the config are checked against the spec's patterns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparktui.discovery.commands import environment_words, exec_start_argvs, split_command_line, whole_number
from sparktui.model.specs import CONTAINER_RE, MAX_CONTAINER_LEN, MAX_UNIT_LEN, UNIT_RE


@dataclass(frozen=True, slots=True)
class UnitInfo:
    name: str
    active: str  # ActiveState
    sub: str  # SubState
    description: str
    exec_start: tuple[tuple[str, ...], ...]  # argv of each ExecStart command
    environment: Mapping[str, str] = field(default_factory=dict)  # its Environment= (not EnvironmentFile=)

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
    """Units from ``systemctl show -p Id,ActiveState,SubState,Description,ExecStart,Environment U1 ...``:
    one block of ``Key=value`` lines per unit, blocks separated by an empty line."""
    units: list[UnitInfo] = []
    for block in re.split(r"\n\s*\n", text):
        values: dict[str, str] = {}
        exec_start: list[tuple[str, ...]] = []
        environment: dict[str, str] = {}
        for line in block.splitlines():
            key, eq, value = line.partition("=")
            if not eq:
                continue
            if key == "ExecStart":
                exec_start.extend(tuple(argv) for argv in exec_start_argvs(value))
            elif key == "Environment":
                environment.update(environment_words(split_command_line(value)))
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
                environment=environment,
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
    env: Mapping[str, str] = field(default_factory=dict)  # Config.Env

    @property
    def alive(self) -> bool:
        return self.status in ("running", "restarting", "paused")


def _port_map(bindings: object) -> dict[int, int]:
    """``{"8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "8001"}]}`` → ``{8000: 8001}``."""
    ports: dict[int, int] = {}
    if not isinstance(bindings, Mapping):
        return ports
    for key, entries in bindings.items():
        container = whole_number(str(key).split("/", 1)[0])
        if container is None or not isinstance(entries, list):
            continue
        for entry in entries:
            host = whole_number(str(entry.get("HostPort", ""))) if isinstance(entry, Mapping) else None
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
        env=environment_words(_strings(config.get("Env"))),
    )


def parse_docker_inspect(text: str) -> list[ContainerInfo]:
    """Containers from ``docker inspect`` output (a JSON array; unreadable output gives none)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return []
    if not isinstance(data, list):
        return []
    return [c for c in (container_from_inspect(item) for item in data) if c is not None]
