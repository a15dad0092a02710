"""``sparktui init HOST [HOST ...]``: probe hosts and write a commented config.

``sparktui.sources.probe`` asks each host, at once, over HTTP (every usual port: vLLM, llama-server, SGLang,
TensorRT-LLM, NIM, Ollama, exporters, services) and SSH (the systemd units and docker containers that run
vLLM, llama-server, SGLang, trtllm-serve, NIM or Ollama); ``sparktui.discovery`` reads the answers and renders
the TOML; the text is validated with ``parse_config`` before it is written, and an existing file is never
replaced without ``--force``. An SSH problem skips SSH discovery for that host only: one line on stderr names
the host and the fix, and the config still has what HTTP found. ``docs/init.md`` shows an example.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from sparktui.config import ConfigError, default_config_path, parse_config
from sparktui.discovery.names import node_names
from sparktui.discovery.probes import (
    DEFAULT_EXPORTER_PORTS,
    DEFAULT_LLAMACPP_PORTS,
    DEFAULT_NIM_PORTS,
    DEFAULT_OLLAMA_PORTS,
    DEFAULT_SERVICE_PORTS,
    DEFAULT_SGLANG_PORTS,
    DEFAULT_TRTLLM_PORTS,
    DEFAULT_VLLM_PORTS,
    ExporterAnswer,
    LlamaAnswer,
    NimAnswer,
    OllamaAnswer,
    PortFinding,
    ServiceAnswer,
    SglangAnswer,
    TrtllmAnswer,
    VllmAnswer,
    parse_port_list,
    parse_service_ports,
    port_roles,
    split_host_port,
)
from sparktui.discovery.render import HostReport, SshSettings, render_config
from sparktui.model.specs import SSH_USER_RE, url_host
from sparktui.sources.probe import SshOutcome, discover

EXIT_USAGE = 2
EXIT_NOTHING = 1  # nothing found on any host: no config written


@dataclass(frozen=True, slots=True)
class InitRequest:
    hosts: tuple[str, ...]
    ssh_ports: tuple[int | None, ...]  # per host: the PORT of a HOST:PORT argument (None: --port or 22)
    output: Path | None  # None: print the config to stdout
    force: bool
    ssh: SshSettings
    use_ssh: bool
    ports: tuple[tuple[int, str], ...]  # (port, what it is probed for)
    timeout_s: float
    ssh_timeout_s: float


class UsageError(Exception):
    """A command-line value that cannot be used; the message is one line."""


# --- command line -------------------------------------------------------------------------------------


def request_from_args(args: argparse.Namespace) -> InitRequest:
    """The ``init`` subcommand's arguments, checked; raises ``UsageError``."""
    targets: list[tuple[str, int | None]] = []
    for raw in args.hosts:
        try:
            target = split_host_port(raw)
        except ValueError as exc:
            raise UsageError(f"host {raw!r}: {exc}") from None
        if target not in targets:
            targets.append(target)
    try:
        vllm = DEFAULT_VLLM_PORTS if args.vllm_ports is None else parse_port_list(args.vllm_ports)
        llamacpp = DEFAULT_LLAMACPP_PORTS if args.llamacpp_ports is None else parse_port_list(args.llamacpp_ports)
        sglang = DEFAULT_SGLANG_PORTS if args.sglang_ports is None else parse_port_list(args.sglang_ports)
        trtllm = DEFAULT_TRTLLM_PORTS if args.trtllm_ports is None else parse_port_list(args.trtllm_ports)
        nim = DEFAULT_NIM_PORTS if args.nim_ports is None else parse_port_list(args.nim_ports)
        ollama = DEFAULT_OLLAMA_PORTS if args.ollama_ports is None else parse_port_list(args.ollama_ports)
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
        hosts=tuple(host for host, _port in targets),
        ssh_ports=tuple(port for _host, port in targets),
        output=output,
        force=args.force,
        ssh=SshSettings(
            user=args.user,
            port=args.port,
            key_file=_absolute(args.key),
            known_hosts=_absolute(args.known_hosts),
        ),
        use_ssh=not args.no_ssh,
        ports=port_roles(
            vllm,
            services,
            exporters,
            extra,
            llamacpp=llamacpp,
            sglang=sglang,
            trtllm=trtllm,
            nim=nim,
            ollama=ollama,
        ),
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


# --- the whole run ------------------------------------------------------------------------------------


def build_reports(
    request: InitRequest, findings: Sequence[tuple[PortFinding, ...]], outcomes: Sequence[SshOutcome | None]
) -> list[HostReport]:
    hostnames = [o.findings.hostname if o is not None and o.findings is not None else None for o in outcomes]
    names = node_names(request.hosts, hostnames)
    reports: list[HostReport] = []
    for host, ssh_port, (name, how), found, outcome in zip(
        request.hosts, request.ssh_ports, names, findings, outcomes, strict=True
    ):
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
                ssh_port=ssh_port,
            )
        )
    return reports


def found_anything(report: HostReport) -> bool:
    """Whether a host answered anything init can use: a vLLM, a llama-server, an SGLang, a TensorRT-LLM, a
    NIM, an Ollama, an exporter or a service over HTTP, or an engine's unit or container over SSH."""
    engines = OllamaAnswer | NimAnswer | TrtllmAnswer | SglangAnswer | VllmAnswer | LlamaAnswer
    answered = any(isinstance(f, engines | ExporterAnswer | ServiceAnswer) for f in report.findings)
    return answered or (report.ssh is not None and bool(report.ssh.units or report.ssh.containers))


def _summary(report: HostReport) -> str:
    parts: list[str] = []
    for finding in report.findings:
        if isinstance(finding, VllmAnswer):
            parts.append(f"vLLM :{finding.port}")
        elif isinstance(finding, SglangAnswer):
            parts.append(f"SGLang :{finding.port}")
        elif isinstance(finding, TrtllmAnswer):
            parts.append(f"TensorRT-LLM :{finding.port}")
        elif isinstance(finding, NimAnswer):
            parts.append(f"NIM :{finding.port}")
        elif isinstance(finding, OllamaAnswer):
            parts.append(f"Ollama :{finding.port}")
        elif isinstance(finding, LlamaAnswer):
            parts.append(f"llama-server{' router' if finding.router else ''} :{finding.port}")
        elif isinstance(finding, ExporterAnswer):
            parts.append(f"{finding.kind.value} :{finding.port}")
        elif isinstance(finding, ServiceAnswer):
            parts.append(f"{finding.kind} :{finding.port}")
    if report.ssh is not None:
        parts.append(f"{len(report.ssh.units)} engine unit(s) and {len(report.ssh.containers)} container(s) over SSH")
    return f"sparktui init: {report.name} ({report.host}): {', '.join(parts) or 'nothing found'}"


def write_config(path: Path, text: str, *, force: bool) -> None:
    """Write the file; without ``force`` an existing file is never touched (raises FileExistsError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not force:
        _write_private(path, text)
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    _write_private(tmp, text)
    tmp.replace(path)


def _write_private(path: Path, text: str) -> None:
    """Create ``path`` (it must not exist) readable by its owner only: the config names every host,
    port, user and key file of the fleet."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def run(request: InitRequest, stdout: TextIO, stderr: TextIO) -> int:
    path = request.output
    if path is not None:
        if path.is_dir():
            print(f"sparktui init: {path} is a folder; give a file with --output FILE", file=stderr)
            return EXIT_USAGE
        if path.exists() and not request.force:
            print(_exists_message(path), file=stderr)
            return EXIT_USAGE
    logins = [request.ssh if port is None else replace(request.ssh, port=port) for port in request.ssh_ports]
    findings, outcomes = asyncio.run(
        discover(
            request.hosts, request.ports, request.timeout_s, logins if request.use_ssh else None, request.ssh_timeout_s
        )
    )
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
        hosts=[
            host if port is None else f"{url_host(host)}:{port}"
            for host, port in zip(request.hosts, request.ssh_ports, strict=True)
        ],
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
    if not any(found_anything(report) for report in reports):
        print(
            "sparktui init: found nothing to watch: no vLLM, llama-server, SGLang, TensorRT-LLM, NIM, exporter or "
            "service answered on the ports probed, and SSH found no vLLM, llama-server, SGLang, TensorRT-LLM or "
            "NIM unit or container; check the hosts, the ports (--vllm-ports, --llamacpp-ports, --sglang-ports, "
            "--trtllm-ports, --nim-ports, --ports) and the SSH options. Nothing written.",
            file=stderr,
        )
        return EXIT_NOTHING
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
