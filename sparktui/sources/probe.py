"""What ``sparktui init`` asks the hosts: HTTP probes of the usual ports and SSH discovery.

For each host, at once: every port is asked ``/version``, ``/v1/models``, ``/prometheus/metrics``,
``/v1/version``, ``/v1/health/ready``, ``/server_info``, ``/api/version``, ``/api/tags`` and ``/props`` (short
timeouts, all concurrently), then ``/metrics`` where something answered and it is not a trtllm-serve (whose
``/metrics`` drains its stats), then ``/health`` where something answered and it is not an SGLang (whose
``/health`` runs a generation); and over SSH the systemd units and docker containers that run vLLM,
llama.cpp's llama-server, SGLang, trtllm-serve, NIM or Ollama are read (``systemctl list-units`` and ``show``,
``docker ps`` and ``inspect``), and the ports the host listens on (``ss -Hltnp``). Then a second round asks
the ports SSH found: the launches' host ports, and the listening ports that could be HTTP (what answers is
kept; a port where nothing init knows answers is left out without a word). ``sparktui.discovery`` reads the
answers; ``sparktui.headless.init`` renders, validates and writes the config.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from sparktui.discovery.launches import (
    is_engine_container,
    is_engine_unit,
    llama_launches,
    nim_launches,
    ollama_launches,
    sglang_launches,
    trtllm_launches,
    vllm_launches,
)
from sparktui.discovery.listeners import SS_LISTENERS, Listener, is_loopback, parse_ss_listeners, probed_listeners
from sparktui.discovery.names import config_name
from sparktui.discovery.probes import (
    FIRST_PATHS,
    HEALTH_PATH,
    LISTENING,
    METRICS_PATH,
    NoAnswer,
    PortFinding,
    classify_port,
    wants_health,
    wants_metrics,
)
from sparktui.discovery.render import SshFindings, SshSettings, one_line
from sparktui.discovery.units import (
    ContainerInfo,
    UnitInfo,
    parse_docker_inspect,
    parse_docker_ps,
    parse_list_units,
    parse_systemctl_show,
)
from sparktui.model.observations import HttpResult
from sparktui.model.specs import NodeSpec, SshSpec, url_host
from sparktui.sources.http import FetchClient, fetch, make_poll_client
from sparktui.sources.ssh import CommandResult, NodeSsh

MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_CONTAINERS = 64  # containers inspected per host (one `docker inspect` call)
COMMAND_TIMEOUT_S = 20.0

LIST_UNITS = "systemctl list-units --type=service --all --no-legend --plain --no-pager"
SHOW_PROPERTIES = "Id,ActiveState,SubState,Description,FragmentPath,ExecStart,Environment"
DOCKER_PS = "docker ps -a --no-trunc --format '{{.Names}}\\t{{.Image}}\\t{{.Ports}}'"


@dataclass(frozen=True, slots=True)
class SshOutcome:
    findings: SshFindings | None
    problem: str | None  # one line naming the host and the fix, when SSH discovery was skipped


# --- HTTP ---------------------------------------------------------------------------------------------


async def probe_port(client: FetchClient, host: str, port: int, role: str, timeout_s: float) -> PortFinding:
    """What answers on one port: every path of ``FIRST_PATHS`` at once, then ``/metrics`` unless a
    trtllm-serve answered (its ``/metrics`` drains the stats its Prometheus gauges are fed from), then
    ``/health`` unless an SGLang answered (its ``/health`` runs a generation); neither where nothing
    answered."""
    base = f"http://{url_host(host)}:{port}"
    answers: list[HttpResult] = await asyncio.gather(
        *(fetch(client, base + path, timeout_s=timeout_s, max_bytes=MAX_BODY_BYTES) for path in FIRST_PATHS)
    )
    results = dict(zip(FIRST_PATHS, answers, strict=True))
    if wants_metrics(results):
        results[METRICS_PATH] = await fetch(client, base + METRICS_PATH, timeout_s=timeout_s, max_bytes=MAX_BODY_BYTES)
    if wants_health(results):
        results[HEALTH_PATH] = await fetch(client, base + HEALTH_PATH, timeout_s=timeout_s, max_bytes=MAX_BODY_BYTES)
    return classify_port(port, role, results)


async def probe_host(
    client: FetchClient, host: str, ports: Sequence[tuple[int, str]], timeout_s: float
) -> tuple[PortFinding, ...]:
    return tuple(await asyncio.gather(*(probe_port(client, host, port, role, timeout_s) for port, role in ports)))


# --- SSH ----------------------------------------------------------------------------------------------


def _failure(what: str, result: CommandResult) -> str | None:
    """Why a command gave nothing to read, as a note for the config; None when it worked."""
    if result.problem is not None:
        return f"{what}: {result.problem.message}"
    if result.exit_status == 0:
        return None
    tool = what.split(maxsplit=1)[0]
    if result.exit_status == 127:
        return f"{tool} is not installed on this host (or not on the SSH session's PATH)"
    output = (result.stderr or result.stdout).strip()
    if output:
        reason = one_line(output.splitlines()[0], 200)
    elif result.exit_signal:
        reason = f"killed by {result.exit_signal}"
    else:
        reason = f"exit status {result.exit_status}"
    if tool == "docker" and "permission denied" in reason.lower():
        return (
            f"{what}: permission denied ({reason}); add the SSH user to the docker group to let init "
            "and sparktui read containers"
        )
    return f"{what} failed: {reason}"


async def _listed(ssh: NodeSsh, command: str, what: str, notes: list[str]) -> str | None:
    """What a listing command printed; None, with a note saying why, when it did not work."""
    listed = await ssh.run(command, timeout_s=COMMAND_TIMEOUT_S)
    note = _failure(what, listed)
    if note is not None:
        notes.append(note)
        return None
    return listed.stdout


async def _units(ssh: NodeSsh, notes: list[str]) -> tuple[UnitInfo, ...]:
    listed = await _listed(ssh, LIST_UNITS, "systemctl list-units", notes)
    if listed is None:
        return ()
    names = parse_list_units(listed)
    if not names:
        return ()
    shown = await ssh.run(
        f"systemctl show --no-pager -p {SHOW_PROPERTIES} -- {' '.join(shlex.quote(n) for n in names)}",
        timeout_s=COMMAND_TIMEOUT_S,
    )
    if shown.problem is not None or not shown.stdout:
        notes.append(_failure("systemctl show", shown) or "systemctl show printed nothing")
        return ()
    return tuple(unit for unit in parse_systemctl_show(shown.stdout) if is_engine_unit(unit))


async def _containers(ssh: NodeSsh, notes: list[str]) -> tuple[ContainerInfo, ...]:
    listed = await _listed(ssh, DOCKER_PS, "docker ps", notes)
    if listed is None:
        return ()
    names = parse_docker_ps(listed)
    if len(names) > MAX_CONTAINERS:
        notes.append(f"{len(names)} containers: only the first {MAX_CONTAINERS} were inspected")
        names = names[:MAX_CONTAINERS]
    if not names:
        return ()
    inspected = await ssh.run(
        f"docker inspect --type container {' '.join(shlex.quote(n) for n in names)}",
        timeout_s=COMMAND_TIMEOUT_S,
    )
    if inspected.problem is not None:
        notes.append(_failure("docker inspect", inspected) or "docker inspect failed")
        return ()
    # Exit status 1 with a partial array: a container went away between ps and inspect.
    return tuple(c for c in parse_docker_inspect(inspected.stdout) if is_engine_container(c))


async def _listeners(ssh: NodeSsh, notes: list[str]) -> tuple[Listener, ...]:
    listed = await _listed(ssh, SS_LISTENERS, "ss -ltnp", notes)
    return () if listed is None else parse_ss_listeners(listed)


async def ssh_discover(host: str, settings: SshSettings, timeout_s: float) -> SshOutcome:
    """The host's name, the units and containers that run an engine, listening ports; or the problem that stopped SSH
    (one line)."""
    spec = SshSpec(
        user=settings.user,
        port=settings.port or 22,
        key_file=Path(settings.key_file) if settings.key_file else None,
        known_hosts=Path(settings.known_hosts) if settings.known_hosts else None,
        connect_timeout_s=timeout_s,
    )
    node = NodeSpec(name=config_name(host) or "node", host=host, ssh=spec)
    async with NodeSsh(node) as ssh:
        first = await ssh.run("hostname", timeout_s=timeout_s + COMMAND_TIMEOUT_S)
        if first.problem is not None:
            return SshOutcome(None, first.problem.message)
        hostname = first.stdout.strip() if first.ok else None
        notes: list[str] = []
        units, containers, listeners = await asyncio.gather(
            _units(ssh, notes), _containers(ssh, notes), _listeners(ssh, notes)
        )
    return SshOutcome(SshFindings(hostname, units, containers, tuple(notes), listeners), None)


async def discover(
    hosts: Sequence[str],
    ports: Sequence[tuple[int, str]],
    timeout_s: float,
    ssh: Sequence[SshSettings] | None,
    ssh_timeout_s: float,
) -> tuple[list[tuple[PortFinding, ...]], list[SshOutcome | None]]:
    """Probe every host over HTTP and (unless ``ssh`` is None) SSH, all at once; ``ssh`` holds the
    login of each host (a ``HOST:PORT`` argument gives its host a port of its own)."""
    async with make_poll_client() as client:
        http = [probe_host(client, host, ports, timeout_s) for host in hosts]
        if ssh is not None:
            logins = zip(hosts, ssh, strict=True)
            findings, outcomes = await asyncio.gather(
                asyncio.gather(*http), asyncio.gather(*(ssh_discover(h, login, ssh_timeout_s) for h, login in logins))
            )
            # The second round: what SSH found and the first round did not probe (a vLLM's host port
            # confirms its launch and names what it serves; a listening port may be anything).
            rounds = [_second_round(h, login, o, ports) for h, login, o in zip(hosts, ssh, outcomes, strict=True)]
            more = await asyncio.gather(
                *(probe_host(client, h, wanted, timeout_s) for h, (wanted, _note) in zip(hosts, rounds, strict=True))
            )
            found = [
                (*first, *(f for f in added if not (isinstance(f, NoAnswer) and f.role == LISTENING)))
                for first, added in zip(findings, more, strict=True)
            ]
            return found, [_with_note(outcome, note) for outcome, (_wanted, note) in zip(outcomes, rounds, strict=True)]
        return list(await asyncio.gather(*http)), [None] * len(hosts)


def _second_round(
    host: str, login: SshSettings, outcome: SshOutcome, probed: Sequence[tuple[int, str]]
) -> tuple[list[tuple[int, str]], str | None]:
    """The ports to ask next: the host ports of the engine launches SSH found, then the listening ports
    worth a probe, none of them among ``probed``; and a note when some listening ports were left out."""
    if outcome.findings is None:
        return [], None
    done = {port for port, _role in probed}
    units, containers = outcome.findings.units, outcome.findings.containers
    wanted: list[tuple[int, str]] = []
    for role, launches in (
        ("vllm", vllm_launches(units, containers)),
        ("llamacpp", llama_launches(units, containers)),
        ("sglang", sglang_launches(units, containers)),
        ("trtllm", trtllm_launches(units, containers)),
        ("nim", nim_launches(units, containers)),
        ("ollama", ollama_launches(units, containers)),
    ):
        ports = {launch.host_port for launch in launches if launch.host_port} - done
        wanted += [(port, role) for port in sorted(ports - {port for port, _role in wanted})]
    listening, left_out = probed_listeners(
        outcome.findings.listeners,
        host_is_loopback=is_loopback(host),
        skip={*done, *(port for port, _role in wanted), login.port or 22},
    )
    wanted += [(port, LISTENING) for port in listening]
    if not left_out:
        return wanted, None
    return wanted, f"{left_out} more listening ports were not probed (init probes {len(listening)} at most)"


def _with_note(outcome: SshOutcome, note: str | None) -> SshOutcome:
    if note is None or outcome.findings is None:
        return outcome
    return replace(outcome, findings=replace(outcome.findings, notes=(*outcome.findings.notes, note)))
