"""``sparktui init HOST [HOST ...]``: probe hosts and write a commented config.

For each host, at once: every usual port is asked ``/version``, ``/v1/models``, ``/metrics``,
``/health`` and ``/api/tags`` (short timeouts, all concurrently), and over SSH the systemd units and
docker containers that run vLLM are read (``systemctl list-units`` and ``show``, ``docker ps`` and
``inspect``). ``sparktui.discovery`` reads the answers and renders the TOML; the text is
validated with ``parse_config`` before it is written, and an existing file is never replaced without
``--force``. An SSH problem skips SSH discovery for that host only: one line on stderr names the host
and the fix, and the config still has what HTTP found. ``docs/init.md`` shows an example.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from sparktui.config import ConfigError, default_config_path, parse_config
from sparktui.discovery.launches import is_vllm_container, is_vllm_unit
from sparktui.discovery.names import config_name, node_names
from sparktui.discovery.probes import (
    DEFAULT_EXPORTER_PORTS,
    DEFAULT_SERVICE_PORTS,
    DEFAULT_VLLM_PORTS,
    PROBE_PATHS,
    ExporterAnswer,
    PortFinding,
    ServiceAnswer,
    VllmAnswer,
    classify_port,
    parse_port_list,
    parse_service_ports,
    port_roles,
)
from sparktui.discovery.render import HostReport, SshFindings, SshSettings, one_line, render_config
from sparktui.discovery.units import (
    ContainerInfo,
    UnitInfo,
    parse_docker_inspect,
    parse_docker_ps,
    parse_list_units,
    parse_systemctl_show,
)
from sparktui.model.observations import HttpResult
from sparktui.model.specs import SSH_USER_RE, NodeSpec, SshSpec, check_host, url_host
from sparktui.sources.http import FetchClient, fetch, make_poll_client
from sparktui.sources.ssh import CommandResult, NodeSsh

EXIT_USAGE = 2
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_CONTAINERS = 64  # containers inspected per host (one `docker inspect` call)
COMMAND_TIMEOUT_S = 20.0

LIST_UNITS = "systemctl list-units --type=service --all --no-legend --plain --no-pager"
SHOW_PROPERTIES = "Id,ActiveState,SubState,Description,FragmentPath,ExecStart"
DOCKER_PS = "docker ps -a --no-trunc --format '{{.Names}}\\t{{.Image}}\\t{{.Ports}}'"


@dataclass(frozen=True, slots=True)
class InitRequest:
    hosts: tuple[str, ...]
    output: Path | None  # None: print the config to stdout
    force: bool
    ssh: SshSettings
    use_ssh: bool
    ports: tuple[tuple[int, str], ...]  # (port, what it is probed for)
    timeout_s: float
    ssh_timeout_s: float


@dataclass(frozen=True, slots=True)
class SshOutcome:
    findings: SshFindings | None
    problem: str | None  # one line naming the host and the fix, when SSH discovery was skipped


class UsageError(Exception):
    """A command-line value that cannot be used; the message is one line."""


# --- command line -------------------------------------------------------------------------------------


def request_from_args(args: argparse.Namespace) -> InitRequest:
    """The ``init`` subcommand's arguments, checked; raises ``UsageError``."""
    hosts: list[str] = []
    for raw in args.hosts:
        try:
            host = check_host(raw)
        except ValueError as exc:
            raise UsageError(f"host {raw!r}: {exc}") from None
        if host not in hosts:
            hosts.append(host)
    try:
        vllm = DEFAULT_VLLM_PORTS if args.vllm_ports is None else parse_port_list(args.vllm_ports)
        exporters = DEFAULT_EXPORTER_PORTS if args.exporter_ports is None else parse_port_list(args.exporter_ports)
        services = DEFAULT_SERVICE_PORTS if args.service_ports is None else parse_service_ports(args.service_ports)
        extra = parse_port_list(args.ports) if args.ports else ()
    except ValueError as exc:
        raise UsageError(f"ports: {exc}") from None
    if args.user is not None and not SSH_USER_RE.fullmatch(args.user):
        raise UsageError(f"--user {args.user!r} is not a unix user name")
    if args.port is not None and not 1 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a port (1 to 65535)")
    if not args.timeout > 0:
        raise UsageError("--timeout must be more than 0 seconds")
    output = None if args.print_config else (args.output or args.config or default_config_path())
    return InitRequest(
        hosts=tuple(hosts),
        output=output,
        force=args.force,
        ssh=SshSettings(
            user=args.user,
            port=args.port,
            key_file=_absolute(args.key),
            known_hosts=_absolute(args.known_hosts),
        ),
        use_ssh=not args.no_ssh,
        ports=port_roles(vllm, services, exporters, extra),
        timeout_s=args.timeout,
        ssh_timeout_s=max(args.timeout, 5.0),
    )


def _absolute(path: Path | None) -> str | None:
    # The config may live elsewhere: a path relative to the current folder would move with it.
    return None if path is None else str(Path.cwd() / path.expanduser())


def _exists_message(path: Path) -> str:
    return (
        f"sparktui init: {path} already exists; run again with --force to overwrite it "
        "(or choose another file with --output FILE, or --print)"
    )


# --- HTTP ---------------------------------------------------------------------------------------------


async def probe_port(client: FetchClient, host: str, port: int, role: str, timeout_s: float) -> PortFinding:
    base = f"http://{url_host(host)}:{port}"
    results: list[HttpResult] = await asyncio.gather(
        *(fetch(client, base + path, timeout_s=timeout_s, max_bytes=MAX_BODY_BYTES) for path in PROBE_PATHS)
    )
    return classify_port(port, role, dict(zip(PROBE_PATHS, results, strict=True)))


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


async def _units(ssh: NodeSsh, notes: list[str]) -> tuple[UnitInfo, ...]:
    listed = await ssh.run(LIST_UNITS, timeout_s=COMMAND_TIMEOUT_S)
    note = _failure("systemctl list-units", listed)
    if note is not None:
        notes.append(note)
        return ()
    names = parse_list_units(listed.stdout)
    if not names:
        return ()
    shown = await ssh.run(
        f"systemctl show --no-pager -p {SHOW_PROPERTIES} -- {' '.join(shlex.quote(n) for n in names)}",
        timeout_s=COMMAND_TIMEOUT_S,
    )
    if shown.problem is not None or not shown.stdout:
        notes.append(_failure("systemctl show", shown) or "systemctl show printed nothing")
        return ()
    return tuple(unit for unit in parse_systemctl_show(shown.stdout) if is_vllm_unit(unit))


async def _containers(ssh: NodeSsh, notes: list[str]) -> tuple[ContainerInfo, ...]:
    listed = await ssh.run(DOCKER_PS, timeout_s=COMMAND_TIMEOUT_S)
    note = _failure("docker ps", listed)
    if note is not None:
        notes.append(note)
        return ()
    names = parse_docker_ps(listed.stdout)
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
    return tuple(c for c in parse_docker_inspect(inspected.stdout) if is_vllm_container(c))


async def ssh_discover(host: str, request: InitRequest) -> SshOutcome:
    """The host's name, vLLM units and containers; or the problem that stopped SSH (one line)."""
    settings = request.ssh
    spec = SshSpec(
        user=settings.user,
        port=settings.port or 22,
        key_file=Path(settings.key_file) if settings.key_file else None,
        known_hosts=Path(settings.known_hosts) if settings.known_hosts else None,
        connect_timeout_s=request.ssh_timeout_s,
    )
    node = NodeSpec(name=config_name(host) or "node", host=host, ssh=spec)
    async with NodeSsh(node) as ssh:
        first = await ssh.run("hostname", timeout_s=request.ssh_timeout_s + COMMAND_TIMEOUT_S)
        if first.problem is not None:
            return SshOutcome(None, first.problem.message)
        hostname = first.stdout.strip() if first.ok else None
        notes: list[str] = []
        units, containers = await asyncio.gather(_units(ssh, notes), _containers(ssh, notes))
    return SshOutcome(SshFindings(hostname, units, containers, tuple(notes)), None)


# --- the whole run ------------------------------------------------------------------------------------


async def discover(request: InitRequest) -> tuple[list[tuple[PortFinding, ...]], list[SshOutcome | None]]:
    """Probe every host over HTTP and SSH, all at once."""
    async with make_poll_client() as client:
        http = [probe_host(client, host, request.ports, request.timeout_s) for host in request.hosts]
        if request.use_ssh:
            findings, outcomes = await asyncio.gather(
                asyncio.gather(*http), asyncio.gather(*(ssh_discover(h, request) for h in request.hosts))
            )
            return list(findings), list(outcomes)
        return list(await asyncio.gather(*http)), [None] * len(request.hosts)


def build_reports(
    request: InitRequest, findings: Sequence[tuple[PortFinding, ...]], outcomes: Sequence[SshOutcome | None]
) -> list[HostReport]:
    hostnames = [o.findings.hostname if o is not None and o.findings is not None else None for o in outcomes]
    names = node_names(request.hosts, hostnames)
    reports: list[HostReport] = []
    for host, (name, how), found, outcome in zip(request.hosts, names, findings, outcomes, strict=True):
        if outcome is None:
            skipped: str | None = "--no-ssh was given"
        elif outcome.problem is not None:
            skipped = outcome.problem
        else:
            skipped = None
        reports.append(
            HostReport(
                host=host,
                name=name,
                name_how=how,
                findings=found,
                ssh=outcome.findings if outcome is not None else None,
                ssh_skipped=skipped,
            )
        )
    return reports


def _summary(report: HostReport) -> str:
    parts: list[str] = []
    for finding in report.findings:
        if isinstance(finding, VllmAnswer):
            parts.append(f"vLLM :{finding.port}")
        elif isinstance(finding, ExporterAnswer):
            parts.append(f"{finding.kind.value} :{finding.port}")
        elif isinstance(finding, ServiceAnswer):
            parts.append(f"{finding.kind} :{finding.port}")
    if report.ssh is not None:
        parts.append(f"{len(report.ssh.units)} vLLM unit(s) and {len(report.ssh.containers)} container(s) over SSH")
    return f"sparktui init: {report.name} ({report.host}): {', '.join(parts) or 'nothing found'}"


def write_config(path: Path, text: str, *, force: bool) -> None:
    """Write the file; without ``force`` an existing file is never touched (raises FileExistsError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not force:
        with path.open("x", encoding="utf-8") as handle:
            handle.write(text)
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def run(request: InitRequest, stdout: TextIO, stderr: TextIO) -> int:
    path = request.output
    if path is not None:
        if path.is_dir():
            print(f"sparktui init: {path} is a folder; give a file with --output FILE", file=stderr)
            return EXIT_USAGE
        if path.exists() and not request.force:
            print(_exists_message(path), file=stderr)
            return EXIT_USAGE
    findings, outcomes = asyncio.run(discover(request))
    for outcome, host in zip(outcomes, request.hosts, strict=True):
        if outcome is not None and outcome.problem is not None:
            print(
                f"sparktui init: SSH discovery skipped for {host} (its config comes from HTTP only): {outcome.problem}",
                file=stderr,
            )
    reports = build_reports(request, findings, outcomes)
    text = render_config(
        reports,
        request.ssh,
        written_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        hosts=request.hosts,
    )
    try:
        parse_config(text, source=str(path or "<init>"), env={}, base_dir=path.parent if path else None)
    except ConfigError as exc:
        print(
            "sparktui init: the config built from what was found does not validate (a bug in init, please report it):",
            file=stderr,
        )
        print(str(exc), file=stderr)
        return 1
    for report in reports:
        print(_summary(report), file=stderr)
    if path is None:
        stdout.write(text)
        return 0
    try:
        write_config(path, text, force=request.force)
    except FileExistsError:
        print(_exists_message(path), file=stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"sparktui init: cannot write {path}: {exc.strerror or exc}", file=stderr)
        return 1
    print(f"sparktui init: wrote {path}; check it, then run `sparktui config check {path}`", file=stdout)
    return 0


def main(args: argparse.Namespace, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    try:
        request = request_from_args(args)
    except UsageError as exc:
        print(f"sparktui init: {exc}", file=err)
        return EXIT_USAGE
    return run(request, out, err)
