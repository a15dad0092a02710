"""The demo node's SSH server: sparktui's own commands, answered from the simulation.

One asyncssh server per node on 127.0.0.1 (port chosen by the OS, kept across stops and restarts),
with a host key generated at start and the demo's one client key; public-key authentication only.
It runs no shell. It recognises the commands sparktui sends and answers them from the simulated
node:

- the host sampler (``exec sh -c '<script>' sparktui-sampler``, ``sparktui.sources.sampler``): its
  interval, refresh periods, frame count and probes are read from the script, and frames in the
  format of ``sparktui.model.host`` are printed on the simulation's clock (the first at once, then
  one per interval of simulated time; in step mode, when the fleet is advanced). A session whose
  simulation stands still gets a frame every few wall-clock seconds, so the client's stall detection
  does not fire while a test pauses;
- ``journalctl -u UNIT -f -o short-iso -n N`` and ``docker logs -f --timestamps --tail N NAME``
  (``sparktui.sources.logs``): the instance's log, then its new lines as they are written;
- ``journalctl -k -f -o short-iso -n N || { dmesg …; }``: the node's kernel log (the host's boot lines
  and what the scenarios make the kernel say), then its new lines; the node has a journal, so the
  dmesg fallback is never taken;
- the recovery commands of ``sparktui.model.commands``, executed against the simulation: restart and
  stop of a unit or container, drop caches (silent on success, like the real one), removal of
  ``/dev/shm`` leftovers, ``kill -9`` of PIDs (the kill-workers command's check of each process's start
  time and command line included);
- ``cat /proc/meminfo`` and ``cat /proc/pressure/memory`` (the drop-caches action reads MemAvailable
  before and after);
- what ``sparktui init`` asks (``sparktui.sources.probe``): ``hostname``, ``systemctl list-units`` and
  ``show``, ``docker ps`` and ``inspect``, ``ss -Hltnp``, printed as the real tools print them from the
  node's vLLM units and containers (their ``vllm serve`` command lines and the host ports they answer
  on) and the ports its servers listen on.

- the fabric command (``exec sh -c '<script>' sparktui-fabric PID…``, ``sparktui.model.fabric``): a rank
  of a multi-node job answers its ConnectX-7 port (``/sys/class/net`` and ``ethtool -S``, from
  ``demo.fabric.SimNic``) and the libnccl its given vLLM processes map; any other node has no mlx5 NIC;
  ``sha256sum -- PATH`` of that library gives its build's checksum.

Anything else ends with status 127 and ``sh: 1: CMD: not found`` on stderr, as ``sh -c`` would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import asyncssh

from sparktui.demo.fabric import SimNic
from sparktui.demo.host import SimClock, SimHost, SimProcess
from sparktui.demo.httpserver import LOOPBACK
from sparktui.demo.service import IMAGE, VllmService
from sparktui.demo.vllmlog import InstanceLog, LogFollower, LogFormat
from sparktui.model.commands import (
    DROP_CACHES,
    KILLED,
    NOT_KILLED,
    ProcessIdentity,
    parse_kill_workers_command,
)
from sparktui.model.fabric import FABRIC_TAG

USER = "spark"
PRESSURE_PATH = "/proc/pressure/memory"
SHM_DIR = "/dev/shm"
WALL_FRAME_AFTER_S = 2.0  # a frame at least this often (wall clock) while the simulation stands still
FRAME_QUEUE = 64

PSI_MISSING = (
    "(kernel without PSI: needs Linux 4.20+ with CONFIG_PSI, and not booted with psi=0; "
    "enable with the psi=1 boot option)"
)


# --- the commands -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SamplerCommand:
    interval_s: float
    process_every: int
    service_every: int
    count: int
    probes: tuple[tuple[str, str, str], ...]  # (instance, "systemd" | "docker", unit or container)
    pressure_path: str = PRESSURE_PATH
    shm_dir: str = SHM_DIR


@dataclass(frozen=True, slots=True)
class LogCommand:
    fmt: LogFormat
    target: str  # unit or container
    tail: int


@dataclass(frozen=True, slots=True)
class KernelLogCommand:
    tail: int


@dataclass(frozen=True, slots=True)
class ServiceCommand:
    action: Literal["restart", "stop"]
    manager: Literal["systemd", "docker"]
    name: str


@dataclass(frozen=True, slots=True)
class DropCachesCommand:
    pass


@dataclass(frozen=True, slots=True)
class RemoveCommand:
    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class KillCommand:
    pids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CheckedKillCommand:
    """``model.commands.kill_workers_command``: (PID, start ticks, cksum CRC, length) of each process."""

    checks: tuple[tuple[int, int, int, int], ...]


@dataclass(frozen=True, slots=True)
class UnknownCommand:
    word: str


@dataclass(frozen=True, slots=True)
class ReadCommand:
    """``cat /proc/meminfo`` (the drop-caches action's before and after) or the PSI file."""

    path: str


@dataclass(frozen=True, slots=True)
class DiscoveryCommand:
    """What ``sparktui init`` asks (``sparktui.sources.probe``): the host's name, its units and containers,
    the ports it listens on."""

    what: Literal["hostname", "list-units", "show", "ps", "inspect", "ss"]
    names: tuple[str, ...] = ()  # the units shown, the containers inspected


@dataclass(frozen=True, slots=True)
class FabricCommand:
    pids: tuple[int, ...]
    ethtool: bool


@dataclass(frozen=True, slots=True)
class ChecksumCommand:
    path: str


Command = (
    FabricCommand
    | ChecksumCommand
    | SamplerCommand
    | LogCommand
    | KernelLogCommand
    | ServiceCommand
    | DropCachesCommand
    | RemoveCommand
    | KillCommand
    | CheckedKillCommand
    | DiscoveryCommand
    | ReadCommand
    | UnknownCommand
)

_SAMPLER_SETTINGS = re.compile(r"^iv=(\d+); pe=(\d+); se=(\d+); count=(\d+);", re.MULTILINE)
_SAMPLER_PATHS = re.compile(r"^psi=(.*?); shm=(.*?); pat=", re.MULTILINE)
_SAMPLER_PROBE = re.compile(r"^    (sd|dk) (.+)$", re.MULTILINE)
_DROP_CACHES = shlex.split(DROP_CACHES)


def _sampler(script: str) -> SamplerCommand | None:
    settings = _SAMPLER_SETTINGS.search(script)
    if settings is None:
        return None
    interval_cs, process_every, service_every, count = (int(x) for x in settings.groups())
    pressure_path, shm_dir = PRESSURE_PATH, SHM_DIR
    paths = _SAMPLER_PATHS.search(script)
    if paths is not None:
        with contextlib.suppress(ValueError):
            pressure_path = " ".join(shlex.split(paths.group(1)))
            shm_dir = " ".join(shlex.split(paths.group(2)))
    probes: list[tuple[str, str, str]] = []
    for function, rest in _SAMPLER_PROBE.findall(script):
        try:
            words = shlex.split(rest)
        except ValueError:
            continue
        if len(words) == 2:
            probes.append((words[0], "systemd" if function == "sd" else "docker", words[1]))
    return SamplerCommand(
        max(0.01, interval_cs / 100), process_every, service_every, count, tuple(probes), pressure_path, shm_dir
    )


def _unwrapped(words: list[str]) -> list[str]:
    """The command without a leading ``exec`` and ``timeout -k KILL BOUND`` (``ssh.under_remote_timeout``)."""
    if words[:1] == ["exec"]:
        words = words[1:]
    if words[:2] == ["timeout", "-k"] and len(words) > 4:
        words = words[4:]
    return words


_REMOTE_TIMEOUT = re.compile(r"(?:exec )?timeout -k [0-9.]+ [0-9.]+ ")


def without_remote_timeout(text: str) -> str:
    """The command line as the node runs it under ``timeout`` (``ssh.under_remote_timeout``): what the
    demo's audit trail keeps, and what its commands are parsed from."""
    found = _REMOTE_TIMEOUT.match(text)
    return text[found.end() :] if found else text


def parse_command(text: str) -> Command:
    """What a command line sparktui sends asks for; ``UnknownCommand`` for anything else."""
    text = without_remote_timeout(text)
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    words = _unwrapped(words)
    if not words:
        return UnknownCommand("")
    unknown = UnknownCommand(words[0])
    if words[:2] == ["sh", "-c"] and len(words) == 4 and words[3] == "sparktui-sampler":
        return _sampler(words[2]) or unknown
    if words[:2] == ["sh", "-c"] and len(words) >= 4 and words[3] == FABRIC_TAG:
        given = tuple(int(w) for w in words[4:] if w.isdigit())
        return FabricCommand(given, words[2].startswith("et=1;"))
    if words[:2] == ["sha256sum", "--"] and len(words) == 3:
        return ChecksumCommand(words[2])
    checks = parse_kill_workers_command(text)
    if checks is not None:
        return CheckedKillCommand(checks)
    found = _matched_command(words)
    if found is not None:
        return found
    if words == _DROP_CACHES:
        return DropCachesCommand()
    return unknown


def _matched_command(words: list[str]) -> Command | None:
    """The commands of fixed words (logs, service actions, removals, kills, reads, init's discovery)."""
    match words:
        case ["journalctl", "-u", unit, "-f", "-o", "short-iso", "-n", count] if count.isdigit():
            return LogCommand("journal", unit, int(count))
        case ["journalctl", "-k", "-f", "-o", "short-iso", "-n", count, "||", *_dmesg] if count.isdigit():
            return KernelLogCommand(int(count))
        case ["docker", "logs", "-f", "--timestamps", "--tail", count, name] if count.isdigit():
            return LogCommand("docker", name, int(count))
        case ["sudo", "-n", "systemctl", ("restart" | "stop") as action, unit]:
            return ServiceCommand(action, "systemd", unit)
        case ["docker", ("restart" | "stop") as action, name]:
            return ServiceCommand(action, "docker", name)
        case ["sudo", "-n", "rm", "-f", "--", *paths] if paths:
            return RemoveCommand(tuple(paths))
        case ["sudo", "-n", "kill", "-9", "--", *pids] if pids and all(p.isdigit() for p in pids):
            return KillCommand(tuple(int(p) for p in pids))
        case ["cat", ("/proc/meminfo" | "/proc/pressure/memory") as path]:
            return ReadCommand(path)
        case ["hostname"]:
            return DiscoveryCommand("hostname")
        case ["systemctl", "list-units", *_options]:
            return DiscoveryCommand("list-units")
        case ["systemctl", "show", *rest] if "--" in rest and rest.index("--") + 1 < len(rest):
            return DiscoveryCommand("show", tuple(rest[rest.index("--") + 1 :]))
        case ["docker", "ps", "-a", *_options]:
            return DiscoveryCommand("ps")
        case ["docker", "inspect", "--type", "container", *names] if names:
            return DiscoveryCommand("inspect", tuple(names))
        case ["ss", options] if options.startswith("-") and set(options[1:]) == set("Hltnp"):
            return DiscoveryCommand("ss")
    return None


# --- the node it answers for -----------------------------------------------------------------------


class SshNode(Protocol):
    """What the SSH server needs from a demo node."""

    @property
    def name(self) -> str: ...

    @property
    def host(self) -> SimHost: ...

    @property
    def clock(self) -> SimClock: ...

    @property
    def address(self) -> str: ...

    def vllm_service(self, manager: str, name: str) -> VllmService | None: ...

    def vllm_services(self) -> list[VllmService]: ...

    def vllm_processes(self) -> list[SimProcess]: ...

    def kill(self, pid: int) -> bool: ...

    def listeners(self) -> list[tuple[int, str | None, int | None]]: ...

    @property
    def nic(self) -> SimNic | None: ...


# Units and containers a Spark runs beside vLLM: what init reads past.
OTHER_UNITS = (
    ("docker.service", "Docker Application Container Engine"),
    ("nvidia-persistenced.service", "NVIDIA Persistence Daemon"),
    ("ssh.service", "OpenBSD Secure Shell server"),
)


def answer_discovery(node: SshNode, command: DiscoveryCommand) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of one of init's discovery commands, as the real tools print them."""
    units = {s.name: s for s in node.vllm_services() if s.manager == "systemd"}
    containers = {s.name: s for s in node.vllm_services() if s.manager == "docker"}
    if command.what == "hostname":
        return f"{node.name}\n", "", 0
    if command.what == "ss":
        # As ``ss -Hltnp`` prints them for a user who is not root: the processes of other users
        # (docker-proxy, run by root) have no name.
        sockets = []
        for port, process, pid in sorted(node.listeners(), key=lambda row: row[0]):
            users = f'users:(("{process}",pid={pid},fd=7))' if process is not None else ""
            sockets.append(f"LISTEN 0      4096       {node.address}:{port:<5} 0.0.0.0:*    {users}".rstrip())
        return "".join(line + "\n" for line in sockets), "", 0
    if command.what == "list-units":
        rows = [(name, *unit.systemd_state(), unit.description) for name, unit in units.items()]
        rows += [(name, "active", "running", description) for name, description in OTHER_UNITS]
        lines = [f"{name} loaded {active} {sub} {description}" for name, active, sub, description in sorted(rows)]
        return "".join(line + "\n" for line in lines), "", 0
    if command.what == "show":
        blocks = []
        for name in command.names:
            unit = units.get(name)
            if unit is None:
                other = dict(OTHER_UNITS).get(name)
                state = ("active", "running") if other else ("inactive", "dead")
                blocks.append(f"Id={name}\nActiveState={state[0]}\nSubState={state[1]}\nDescription={other or ''}\n")
                continue
            active, sub = unit.systemd_state()
            blocks.append(
                f"Id={name}\nActiveState={active}\nSubState={sub}\nDescription={unit.description}\n"
                f"FragmentPath=/etc/systemd/system/{name}\nExecStart={unit.exec_start()}\n"
            )
        return "\n".join(blocks), "", 0
    if command.what == "ps":
        lines = [
            f"{name}\t{IMAGE}\t" + (f"0.0.0.0:{c.published_port}->{c.port}/tcp" if c.published_port else "")
            for name, c in sorted(containers.items())
        ]
        return "".join(line + "\n" for line in lines), "", 0
    found = [containers[name].container_inspect() for name in command.names if name in containers]
    missing = [name for name in command.names if name not in containers]
    errors = "".join(f"Error: No such container: {name}\n" for name in missing)
    return json.dumps(found, indent=4) + "\n", errors, 1 if missing else 0


def answer_fabric(node: SshNode, command: FabricCommand) -> str:
    """The fabric command's answer: the node's mlx5 port (if it has one) and the NCCL its vLLM maps."""
    nic = node.nic
    lines: list[str] = []
    if nic is not None:
        lines += nic.sysfs_lines()
        if command.ethtool:
            lines += [f"=== ethtool {nic.name}", nic.ethtool_text().rstrip("\n")]
    lines.append("=== nccl")
    if nic is not None:
        vllm = {p.pid for p in node.vllm_processes()}
        lib = nic.nccl
        mapped = [f"/proc/{pid}/maps:{lib.path}" for pid in command.pids if pid in vllm]
        lines += mapped + ([f"stat {lib.size} {lib.mtime} {lib.path}"] if mapped else [])
    lines.append("=== end")
    return "\n".join(lines) + "\n"


def _due(seq: int, every: int) -> bool:
    return every > 0 and (seq - 1) % every == 0


def render_frame(node: SshNode, command: SamplerCommand, seq: int) -> str:
    """One sampler frame (``sparktui.model.host`` format) of the node's state now."""
    host = node.host
    out = [f"==sparktui-sample 1 {node.clock.epoch:.2f} {seq}", "==meminfo", host.meminfo_text().rstrip("\n")]
    if command.pressure_path == PRESSURE_PATH:
        out += ["==pressure", host.pressure_text().rstrip("\n")]
    else:
        out.append(f"==pressure unavailable {command.pressure_path} does not exist {PSI_MISSING}")
    out += ["==loadavg", host.loadavg_text().rstrip("\n"), "==uptime", host.uptime_text().rstrip("\n")]
    if _due(seq, command.process_every):
        if command.shm_dir == SHM_DIR:
            out += ["==shm", host.shm_text().rstrip("\n")]
        else:
            out.append(f"==shm unavailable {command.shm_dir} does not exist")
        out.append(f"==processes clk_tck=100 pagesize=4096 btime={int(host.boot_epoch)}")
        rows = host.processes_text(node.vllm_processes()).rstrip("\n")
        if rows:
            out.append(rows)
        out += ["==cpufreq", host.cpufreq_text().rstrip("\n")]
    if _due(seq, command.service_every):
        out.append(f"==services {len(command.probes)}")
        for instance, manager, name in command.probes:
            service = node.vllm_service(manager, name)
            if service is not None:
                props = service.systemd_properties() if manager == "systemd" else service.docker_properties()
                out += [f"==service {instance} {manager} {name}", *props]
            elif manager == "systemd":
                out += [
                    f"==service {instance} {manager} {name}",
                    "NRestarts=0",
                    "ExecMainStartTimestamp=",
                    "ExecMainStartTimestampMonotonic=0",
                    "ExecMainStatus=0",
                    "LoadState=not-found",
                    "ActiveState=inactive",
                    "SubState=dead",
                ]
            else:
                out.append(
                    f"==service {instance} docker {name} unavailable docker exited 1: Error: No such container: {name}"
                )
    out.append(f"==sparktui-end {seq}")
    return "\n".join(out) + "\n"


# --- the server ------------------------------------------------------------------------------------


class _Server(asyncssh.SSHServer):
    def __init__(self, owner: DemoSshServer) -> None:
        self._owner = owner
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._owner.connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._owner.connections.discard(self._conn)

    def begin_auth(self, username: str) -> bool:
        return True  # authentication is required

    def password_auth_supported(self) -> bool:
        return False

    def kbdint_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return username == self._owner.user and key.public_data == self._owner.client_key.public_data


class _SamplerSession:
    """One running sampler: frames on the simulation's clock into a queue, written by ``run``."""

    def __init__(self, node: SshNode, command: SamplerCommand, server: DemoSshServer) -> None:
        self.node = node
        self.command = command
        self.server = server
        self.queue: asyncio.Queue[str] = asyncio.Queue(FRAME_QUEUE)
        self.seq = 0
        self.next_due = node.clock.now

    @property
    def finished(self) -> bool:
        return self.command.count > 0 and self.seq >= self.command.count

    def emit(self) -> None:
        if self.finished:
            return
        self.seq += 1
        with contextlib.suppress(asyncio.QueueFull):  # a client that stopped reading loses frames
            self.queue.put_nowait(render_frame(self.node, self.command, self.seq))
            self.server.frames_emitted += 1

    def tick(self) -> None:
        now = self.node.clock.now
        if now + 1e-9 < self.next_due:
            return
        self.emit()
        self.next_due += self.command.interval_s
        if self.next_due <= now:  # after a stall, skip the missed ticks (as the real loop does)
            self.next_due = now + self.command.interval_s

    async def run(self, process: asyncssh.SSHServerProcess[str]) -> int | None:
        self.emit()
        self.next_due = self.node.clock.now + self.command.interval_s
        closed = asyncio.ensure_future(process.wait_closed())
        wall_after = max(WALL_FRAME_AFTER_S, 2 * self.command.interval_s)
        try:
            while True:
                if self.finished and self.queue.empty():
                    return 0
                getter = asyncio.ensure_future(self.queue.get())
                done, _ = await asyncio.wait({getter, closed}, timeout=wall_after, return_when="FIRST_COMPLETED")
                if closed in done:
                    getter.cancel()
                    return None
                if getter not in done:
                    getter.cancel()
                    self.emit()  # the simulation stands still: repeat its state
                    continue
                text = getter.result()
                process.stdout.write(text)
                await process.stdout.drain()
                self.server.frames_sent += 1
        finally:
            closed.cancel()


class DemoSshServer:
    """The SSH server of one demo node. ``start()`` listens, ``stop()`` refuses and drops sessions."""

    def __init__(
        self,
        node: SshNode,
        host_key: asyncssh.SSHKey,
        client_key: asyncssh.SSHKey,
        *,
        user: str = USER,
        after_command: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.node = node
        self.host_key = host_key
        self.client_key = client_key
        self.user = user
        self.after_command = after_command
        self.port = 0
        self.address = node.address  # where it listens: the node's loopback address, else 127.0.0.1
        self.connections: set[asyncssh.SSHServerConnection] = set()
        self.samplers: set[_SamplerSession] = set()
        # Frames rendered for the sessions since the last start (tests wait until their client has them
        # all; the frames of a connection that a stop dropped are lost with it, so a start counts anew).
        self.frames_emitted = 0
        self.frames_sent = 0
        self.commands: list[str] = []  # every command line run, in order (the demo's audit trail)
        self._acceptor: asyncssh.SSHAcceptor | None = None

    @property
    def listening(self) -> bool:
        return self._acceptor is not None

    def known_hosts_line(self) -> str:
        key = self.host_key.export_public_key("openssh").decode().split()
        return f"[{self.address}]:{self.port} {key[0]} {key[1]}"

    async def start(self) -> None:
        if self._acceptor is not None:
            return
        self.frames_emitted = 0
        try:
            self._acceptor = await self._listen(self.address)
        except OSError:
            if self.port or self.address == LOOPBACK:
                raise
            self.address = LOOPBACK  # not this machine's address: the demo still runs, on 127.0.0.1
            self._acceptor = await self._listen(self.address)
        self.port = self._acceptor.get_port()

    async def _listen(self, address: str) -> asyncssh.SSHAcceptor:
        return await asyncssh.listen(
            address,
            self.port,
            server_host_keys=[self.host_key],
            server_factory=lambda: _Server(self),
            process_factory=self._session,
            encoding="utf-8",
            errors="replace",
            reuse_address=True,
            allow_scp=False,
            agent_forwarding=False,
            x11_forwarding=False,
            server_version="OpenSSH_9.6p1",
        )

    async def stop(self) -> None:
        """Stop accepting and drop every connection (clients see the connection lost, then refused)."""
        acceptor, self._acceptor = self._acceptor, None
        if acceptor is not None:
            acceptor.close()
        for conn in list(self.connections):
            conn.abort()
        self.connections.clear()
        if acceptor is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(acceptor.wait_closed(), 2.0)

    def tick(self) -> None:
        """The simulation moved: sampler frames that are due go out."""
        for session in self.samplers:
            session.tick()

    async def _session(self, process: asyncssh.SSHServerProcess[str]) -> None:
        command = process.command
        status: int | None
        try:
            if command is None:
                process.stderr.write("This demo node runs no shell; it answers sparktui's commands only.\n")
                status = 1
            else:
                self.commands.append(without_remote_timeout(command))
                status = await self._execute(process, command)
        except (OSError, asyncssh.Error):
            return  # the client went away
        if status is not None:
            with contextlib.suppress(OSError, asyncssh.Error):
                process.exit(status)

    async def _execute(self, process: asyncssh.SSHServerProcess[str], text: str) -> int | None:
        command = parse_command(text)
        node = self.node
        if isinstance(command, SamplerCommand):
            session = _SamplerSession(node, command, self)
            self.samplers.add(session)
            try:
                return await session.run(process)
            finally:
                self.samplers.discard(session)
        if isinstance(command, LogCommand):
            return await self._log(process, command)
        if isinstance(command, KernelLogCommand):
            return await self._follow(process, node.host.kernel_log, "journal", command.tail)
        if isinstance(command, ReadCommand):
            host = node.host
            process.stdout.write(host.meminfo_text() if command.path == "/proc/meminfo" else host.pressure_text())
            return 0
        if isinstance(command, FabricCommand):
            process.stdout.write(answer_fabric(node, command))
            return 0
        if isinstance(command, ChecksumCommand):
            if node.nic is None or command.path != node.nic.nccl.path:
                process.stderr.write(f"sha256sum: {command.path}: No such file or directory\n")
                return 1
            process.stdout.write(f"{node.nic.nccl.sha256}  {command.path}\n")
            return 0
        if isinstance(command, DiscoveryCommand):
            stdout, stderr, status = answer_discovery(node, command)
            process.stdout.write(stdout)
            process.stderr.write(stderr)
            return status
        if isinstance(command, UnknownCommand):
            process.stderr.write(f"sh: 1: {command.word}: not found\n")
            return 127
        status = self._recover(process, command)
        if self.after_command is not None:
            await self.after_command()
        return status

    def _recover(self, process: asyncssh.SSHServerProcess[str], command: Command) -> int:
        node = self.node
        if isinstance(command, ServiceCommand):
            service = node.vllm_service(command.manager, command.name)
            if service is None:
                if command.manager == "systemd":
                    state = "found" if command.action == "restart" else "loaded"
                    process.stderr.write(
                        f"Failed to {command.action} {command.name}: Unit {command.name} not {state}.\n"
                    )
                    return 5
                process.stderr.write(f"Error response from daemon: No such container: {command.name}\n")
                return 1
            if command.action == "restart":
                service.restart()
            else:
                service.stop()
            if command.manager == "docker":
                process.stdout.write(f"{command.name}\n")
            return 0
        if isinstance(command, DropCachesCommand):
            node.host.drop_caches()
            return 0
        if isinstance(command, RemoveCommand):
            for path in command.paths:
                directory, _, name = path.rpartition("/")
                if directory == SHM_DIR:
                    node.host.remove_shm(name)
            return 0
        if isinstance(command, KillCommand):
            status = 0
            for pid in command.pids:
                if not node.kill(pid):
                    process.stderr.write(f"kill: ({pid}): No such process\n")
                    status = 1
            return status
        if isinstance(command, CheckedKillCommand):
            # As the kill script does on a node: only a process still the same (start ticks and command
            # line) is killed; the others are reported.
            current = {p.pid: p for p in node.vllm_processes()}
            same: list[int] = []
            for pid, ticks, crc, length in command.checks:
                proc = current.get(pid)
                seen = ProcessIdentity(pid, node.host.start_ticks(proc), proc.args) if proc is not None else None
                if seen is not None and seen.start_ticks == ticks and seen.fingerprint() == (crc, length):
                    same.append(pid)
                else:
                    process.stdout.write(NOT_KILLED.format(pid=pid) + "\n")
            for pid in same:
                if not node.kill(pid):
                    process.stderr.write(f"kill: ({pid}): No such process\n")
                    return 1
            process.stdout.write("".join(KILLED.format(pid=pid) + "\n" for pid in same))
            return 0
        raise AssertionError(f"not a recovery command: {command!r}")

    async def _log(self, process: asyncssh.SSHServerProcess[str], command: LogCommand) -> int | None:
        manager = "systemd" if command.fmt == "journal" else "docker"
        service = self.node.vllm_service(manager, command.target)
        if service is None and command.fmt == "docker":
            process.stderr.write(f"Error response from daemon: No such container: {command.target}\n")
            return 1
        log: InstanceLog | None = service.log if service is not None else None
        # docker logs -f of a stopped container prints and returns
        stopped = service is not None and command.fmt == "docker" and not service.running
        return await self._follow(process, log, command.fmt, command.tail, stopped=stopped)

    async def _follow(
        self,
        process: asyncssh.SSHServerProcess[str],
        log: InstanceLog | None,
        fmt: LogFormat,
        tail: int,
        *,
        stopped: bool = False,
    ) -> int | None:
        """Print the last ``tail`` lines of ``log``, then (unless ``stopped``) its new lines until the
        client goes away."""
        follower: LogFollower | None = log.follow(fmt) if log is not None else None
        closed = asyncio.ensure_future(process.wait_closed())
        try:
            lines = log.lines(fmt, tail) if log is not None else []
            if fmt == "journal" and not lines:
                lines = ["-- No entries --"]
            if lines:
                process.stdout.write("\n".join(lines) + "\n")
                await process.stdout.drain()
            if stopped:
                return 0
            if follower is None:
                await closed  # journalctl -f of an unknown unit waits for entries that never come
                return None
            while True:
                getter = asyncio.ensure_future(follower.queue.get())
                done, _ = await asyncio.wait({getter, closed}, return_when="FIRST_COMPLETED")
                if closed in done:
                    getter.cancel()
                    return None
                batch: list[str] = []
                line: str | None = getter.result()
                while line is not None:
                    batch.append(line)
                    try:
                        line = follower.queue.get_nowait()
                    except asyncio.QueueEmpty:
                        break
                if batch:
                    process.stdout.write("\n".join(batch) + "\n")
                    await process.stdout.drain()
                if line is None:
                    return 0  # the container stopped
                if follower.overflowed:
                    return 1
        finally:
            closed.cancel()
            if log is not None and follower is not None:
                log.unfollow(follower)


def generate_key() -> asyncssh.SSHKey:
    return asyncssh.generate_private_key("ssh-ed25519")
