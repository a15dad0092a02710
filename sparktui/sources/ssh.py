"""One long-lived SSH connection per node, shared by the host sampler, the log streams and the actions.

The connection is made on first use and made again after it is lost: at once after losing a stable
connection, then with a backoff of 0.2 s doubling to 10 s while attempts fail; every 30 s for problems
only a person can fix (an unknown or changed host key, a rejected or missing key). Host keys are always
checked against a known_hosts file (the node's ``ssh.known_hosts``, else ``~/.ssh/known_hosts``); an
unknown or changed key is reported as a problem with the command that fixes it, never accepted.
Keepalives (every 2 s, 2 unanswered) notice a silent peer within about 6 s.

``NodeSsh.run`` and ``NodeSsh.stream`` never raise for SSH or network trouble (only ``CancelledError``):
what went wrong comes back as an ``SshProblem`` whose message is one line naming the node and what to do.
Commands are strings built by the callers from validated names with ``shlex.quote``.
"""

from __future__ import annotations

import asyncio
import errno
import getpass
import os
import shlex
import socket
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import asyncssh

from sparktui.model.safe_text import safe_lines, safe_text
from sparktui.model.specs import NodeSpec

DEFAULT_MAX_COMMANDS = 4
DEFAULT_KEEPALIVE_INTERVAL_S = 2.0
DEFAULT_KEEPALIVE_COUNT_MAX = 2  # the link is declared dead after (count_max + 1) silent intervals
BACKOFF_MIN_S = 0.2  # after the first failure; the first reconnect after a stable connection is at once
REMOTE_KILL_AFTER_S = 2.0  # ``timeout -k``: a command that outlives its TERM is killed this long after
REMOTE_TIMED_OUT = frozenset({124, 137})  # ``timeout``'s exit status when TERM ended the command, or KILL had to
ANSWER_MARGIN_S = 3.0  # a bounded command's wait here, beyond its bound and kill on the node: the way back
BACKOFF_MAX_S = 10.0
BACKOFF_HUMAN_S = 30.0  # host key and authentication problems: retried slowly, a person has to act
# AES-GCM first: asyncssh's chacha20-poly1305 builds two cipher objects per packet, AES-GCM reuses one
# keyed object (and AES has hardware support on the Spark's Arm cores, as on x86). The rest as OpenSSH
# offers them, for servers that do not take AES-GCM.
PREFERRED_CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
)
STREAM_CHUNK = 64 * 1024  # the most a stream reads at once
MAX_COMMAND_OUTPUT = 1024 * 1024  # characters of stdout (and of stderr) a command's result keeps: the tail
STREAM_MAX_LINE = 256 * 1024  # a longer run without a newline is cut into lines of this size
STABLE_AFTER_S = 5.0  # a connection that lived this long counts as stable: its loss resets the backoff
_UNREACHABLE_ERRNOS = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EHOSTDOWN}


class SshProblemKind(StrEnum):
    HOST_KEY_UNKNOWN = "host_key_unknown"
    HOST_KEY_CHANGED = "host_key_changed"
    AUTH_REJECTED = "auth_rejected"
    NO_KEY = "no_key"  # the key file is missing, unreadable or needs a passphrase
    REFUSED = "refused"
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"  # DNS or routing
    LOST = "lost"
    STALLED = "stalled"  # keepalives or a stream's reads went unanswered
    EXITED = "exited"  # a streamed command ended by itself; the connection is fine (stream only)
    OTHER = "other"

    @property
    def needs_human(self) -> bool:
        """Whether retrying alone cannot fix it (the problem is reported and retried slowly)."""
        return self in _NEEDS_HUMAN


_NEEDS_HUMAN = frozenset(
    {
        SshProblemKind.HOST_KEY_UNKNOWN,
        SshProblemKind.HOST_KEY_CHANGED,
        SshProblemKind.AUTH_REJECTED,
        SshProblemKind.NO_KEY,
    }
)


class SshState(StrEnum):
    IDLE = "idle"  # not used yet
    CONNECTING = "connecting"
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"  # the last attempt failed or the connection was lost; see ``problem``
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class SshProblem:
    kind: SshProblemKind
    message: str  # one line: the node, what happened, what to do

    def __post_init__(self) -> None:
        # The message may quote the server (a disconnect reason, a banner): made safe to print here.
        object.__setattr__(self, "message", safe_text(self.message))


@dataclass(frozen=True, slots=True)
class CommandResult:
    """A finished command, or why it could not run (``problem``; then ``exit_status`` is None)."""

    exit_status: int | None
    stdout: str = ""
    stderr: str = ""
    problem: SshProblem | None = None
    exit_signal: str | None = None  # the remote command was killed by this signal
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.problem is None and self.exit_status == 0


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One thing a stream saw: a line of output, a (re)start of the command, or a problem."""

    line: str | None = None  # stdout and stderr, merged, without the line ending
    problem: SshProblem | None = None
    connected: bool = False  # the command was (re)started on a live connection


class _Failure(Exception):
    def __init__(self, problem: SshProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def under_remote_timeout(command: str, bound_s: float) -> str:
    """``command`` under the node's ``timeout``: TERM after ``bound_s``, KILL ``REMOTE_KILL_AFTER_S``
    later (exit status 124 or 137, ``REMOTE_TIMED_OUT``). A leading ``exec`` stays in front."""
    return f"exec timeout -k {REMOTE_KILL_AFTER_S:g} {bound_s:g} {command.removeprefix('exec ')}"


def _short(command: str, limit: int = 60) -> str:
    return command if len(command) <= limit else command[: limit - 1] + "…"


class _ConnectionWatcher(asyncssh.SSHClient):
    """Tells the owner when its connection closes (the peer hung up, keepalives failed...)."""

    def __init__(self, owner: NodeSsh) -> None:
        self._owner = owner
        self._conn: asyncssh.SSHClientConnection | None = None

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self._conn = conn

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._owner._on_connection_lost(self._conn, exc)


class NodeSsh:
    """The SSH connection to one node: made lazily, shared, remade with backoff, closed with ``close()``.

    At most ``max_commands`` ``run()`` calls execute at once on the node; streams are long-lived and are
    not counted (OpenSSH allows 10 sessions per connection by default).
    """

    def __init__(
        self,
        node: NodeSpec,
        *,
        max_commands: int = DEFAULT_MAX_COMMANDS,
        keepalive_interval_s: float = DEFAULT_KEEPALIVE_INTERVAL_S,
        keepalive_count_max: int = DEFAULT_KEEPALIVE_COUNT_MAX,
        backoff_min_s: float = BACKOFF_MIN_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        backoff_human_s: float = BACKOFF_HUMAN_S,
        use_agent: bool = True,
    ) -> None:
        self.node = node
        ssh = node.ssh
        self.user = ssh.user or getpass.getuser()
        self.known_hosts = ssh.known_hosts or Path("~/.ssh/known_hosts").expanduser()
        host = f"[{node.host}]" if ":" in node.host else node.host
        self.where = f"{node.name} ({host}:{ssh.port})"
        self._agent_path = os.environ.get("SSH_AUTH_SOCK") if use_agent else None
        self._keepalive_interval_s = keepalive_interval_s
        self._keepalive_count_max = keepalive_count_max
        self._backoff_min_s = backoff_min_s
        self._backoff_max_s = backoff_max_s
        self._backoff_human_s = backoff_human_s
        self._commands = asyncio.Semaphore(max_commands)
        self._conn: asyncssh.SSHClientConnection | None = None
        self._connect_task: asyncio.Task[None] | None = None
        self._problem: SshProblem | None = None
        self._state = SshState.IDLE
        self._failures = 0
        self._retry_at = 0.0
        self._connected_at = 0.0
        self._closed = False

    # --- public -----------------------------------------------------------------------------------------

    @property
    def state(self) -> SshState:
        return self._state

    @property
    def problem(self) -> SshProblem | None:
        """The last connection problem, or None while connected (and before the first attempt)."""
        return self._problem

    @property
    def local_port(self) -> int | None:
        """The client side's TCP port of the live connection (diagnostics, tests), else None."""
        if self._conn is None:
            return None
        sockname = self._conn.get_extra_info("sockname")
        return int(sockname[1]) if sockname else None

    async def run(
        self, command: str, *, timeout_s: float, stdin: str | None = None, max_output: int = MAX_COMMAND_OUTPUT
    ) -> CommandResult:
        """Run ``command`` on the node and collect its output; everything (connecting, waiting for a
        free command slot, running) within ``timeout_s``. Of stdout and of stderr the last ``max_output``
        characters are kept, after a line saying how many were dropped before them."""
        started = time.monotonic()

        def failed(problem: SshProblem) -> CommandResult:
            return CommandResult(None, problem=problem, elapsed_s=time.monotonic() - started)

        try:
            async with asyncio.timeout(timeout_s), self._commands:
                for attempt in (1, 2):
                    conn = await self._connection(wait=False)
                    try:
                        process = await conn.create_process(
                            command,
                            input=stdin,
                            # without input, stdin is closed: a command that reads it ends, not hangs
                            stdin=asyncssh.PIPE if stdin is not None else asyncssh.DEVNULL,
                            encoding="utf-8",
                            errors="replace",
                        )
                    except (asyncssh.Error, OSError) as exc:
                        if conn.is_closed() or self._conn is not conn:
                            # The shared connection had died unnoticed (sshd restarted...) and the
                            # command never started: one more try, on a fresh connection.
                            problem = self._drop(conn, exc)
                            if attempt == 1:
                                continue
                            return failed(problem)
                        return failed(
                            SshProblem(
                                SshProblemKind.OTHER,
                                f"{self.where}: cannot start `{_short(command)}`: {_reason(exc)}",
                            )
                        )
                    try:
                        stdout, stderr = await asyncio.gather(
                            read_tail(process.stdout, max_output), read_tail(process.stderr, max_output)
                        )
                        done = await process.wait(check=False)
                    except (asyncssh.Error, OSError) as exc:
                        # Lost while the command ran: not run again (it may have done its work).
                        return failed(self._drop(conn, exc))
                    finally:
                        process.close()
                    status = done.exit_status
                    if (status is None or status < 0) and not done.exit_signal:
                        # The channel closed with no exit status: the connection went mid-command.
                        lost = conn.is_closed() or self._conn is not conn
                        return failed(
                            self._drop(conn, None)
                            if lost
                            else SshProblem(
                                SshProblemKind.OTHER,
                                f"{self.where}: `{_short(command)}` ended without an exit status",
                            )
                        )
                    return CommandResult(
                        exit_status=status if status is not None and status >= 0 else None,
                        # What the node printed, made safe to show (an action's output is printed).
                        stdout=safe_lines(stdout),
                        stderr=safe_lines(stderr),
                        exit_signal=done.exit_signal[0] if done.exit_signal else None,
                        elapsed_s=time.monotonic() - started,
                    )
        except TimeoutError:
            return failed(
                SshProblem(
                    SshProblemKind.TIMEOUT,
                    f"{self.where}: `{_short(command)}` did not finish within {timeout_s:g} s",
                )
            )
        except _Failure as failure:
            return failed(failure.problem)
        raise AssertionError("unreachable")  # pragma: no cover

    async def run_bounded(self, command: str, *, bound_s: float, max_output: int = MAX_COMMAND_OUTPUT) -> CommandResult:
        """``run`` a command the node itself stops after ``bound_s`` (``under_remote_timeout``), waiting
        here for that, its kill and the answer's way back. Closing the channel of a command given up on
        here would not stop it: a hung one (nvidia-smi with a GPU off the bus) stays on the node, and a
        periodic caller would start another beside it every interval."""
        return await self.run(
            under_remote_timeout(command, bound_s),
            timeout_s=bound_s + REMOTE_KILL_AFTER_S + ANSWER_MARGIN_S,
            max_output=max_output,
        )

    async def stream(self, command: str, *, read_timeout_s: float | None) -> AsyncGenerator[StreamEvent, None]:
        """Run a long-lived ``command`` and yield its output lines, forever.

        Yields ``StreamEvent(connected=True)`` each time the command (re)starts, then its lines, and a
        ``StreamEvent(problem=...)`` when the connection is lost or stalls (then it reconnects with
        backoff) or when the command ends by itself (then it is run again, with backoff). When
        ``read_timeout_s`` passes with no output the connection is taken as stalled and is aborted;
        ``None`` leaves stall detection to the keepalives (right for quiet logs). Iterate with
        ``contextlib.aclosing`` so that stopping closes the remote command at once.
        """
        restart_delay = self._backoff_min_s
        while not self._closed:
            try:
                conn = await self._connection(wait=True)
            except _Failure as failure:
                if self._closed:
                    return
                yield StreamEvent(problem=failure.problem)
                continue
            try:
                process = await conn.create_process(
                    command,
                    stdin=asyncssh.DEVNULL,
                    stderr=asyncssh.STDOUT,
                    encoding="utf-8",
                    errors="replace",
                )
            except (asyncssh.Error, OSError) as exc:
                if conn.is_closed() or self._conn is not conn:
                    yield StreamEvent(problem=self._drop(conn, exc))
                    continue
                yield StreamEvent(
                    problem=SshProblem(
                        SshProblemKind.OTHER,
                        f"{self.where}: cannot start `{_short(command)}`: {_reason(exc)}",
                    )
                )
                await asyncio.sleep(restart_delay)
                restart_delay = min(self._backoff_max_s, restart_delay * 2)
                continue
            started = time.monotonic()
            problem: SshProblem | None = None
            try:
                yield StreamEvent(connected=True)
                partial = ""  # the start of a line whose end has not arrived yet
                while True:
                    # Whatever has arrived, split here: one wait per chunk rather than per line (a
                    # host frame is ~60 lines; readline's per-line timeout and wait cost more than the
                    # lines themselves).
                    try:
                        async with asyncio.timeout(read_timeout_s):
                            chunk = await process.stdout.read(STREAM_CHUNK)
                    except TimeoutError:
                        assert read_timeout_s is not None
                        problem = self._drop(
                            conn,
                            None,
                            SshProblem(
                                SshProblemKind.STALLED,
                                f"{self.where}: no output for {read_timeout_s:g} s, the connection looks "
                                "stalled; reconnecting",
                            ),
                        )
                        break
                    if not chunk:
                        if partial:
                            yield StreamEvent(line=partial.rstrip("\r"))
                        break
                    *lines, partial = (partial + chunk).split("\n")
                    for line in lines:
                        yield StreamEvent(line=line.rstrip("\r"))
                    while len(partial) > STREAM_MAX_LINE:  # no newline in sight: memory stays bounded
                        yield StreamEvent(line=partial[:STREAM_MAX_LINE])
                        partial = partial[STREAM_MAX_LINE:]
            except (asyncssh.Error, OSError) as exc:
                problem = self._drop(conn, exc)
            finally:
                process.close()
            if problem is None:
                problem = await self._why_ended(conn, process, command)
            yield StreamEvent(problem=problem)
            if problem.kind is SshProblemKind.EXITED:
                if time.monotonic() - started >= self._backoff_max_s:
                    restart_delay = self._backoff_min_s
                await asyncio.sleep(restart_delay)
                restart_delay = min(self._backoff_max_s, restart_delay * 2)

    async def close(self) -> None:
        """Close the connection and stop reconnecting; ``run`` then reports a problem, streams end."""
        self._closed = True
        self._state = SshState.CLOSED
        task, self._connect_task = self._connect_task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            try:
                async with asyncio.timeout(1.0):
                    await conn.wait_closed()
            except TimeoutError:
                conn.abort()  # the peer does not answer: do not wait on it

    async def __aenter__(self) -> NodeSsh:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # --- connection management --------------------------------------------------------------------------

    async def _connection(self, *, wait: bool) -> asyncssh.SSHClientConnection:
        """The live connection, made now if needed; raises ``_Failure`` with the reason there is none.

        During the backoff after a failure, ``wait=False`` fails at once with the last problem (a poll
        must not hang on a dead node) and ``wait=True`` sleeps until the next attempt (a stream).
        """
        while True:
            if self._closed:
                raise _Failure(SshProblem(SshProblemKind.OTHER, f"{self.where}: the SSH connection is closed"))
            if self._conn is not None:
                return self._conn
            if self._connect_task is None:
                delay = self._retry_at - time.monotonic()
                if delay > 0:
                    if not wait and self._problem is not None:
                        raise _Failure(self._problem)
                    await asyncio.sleep(delay)
                    continue
                self._connect_task = asyncio.create_task(self._connect(), name=f"ssh-connect-{self.node.name}")
            # shield: one caller's timeout or cancellation must not cancel the attempt the others share
            attempt = self._connect_task
            try:
                await asyncio.shield(attempt)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if attempt.cancelled() and current is not None and not current.cancelling():
                    continue  # close() cancelled the attempt, not our caller: the loop reports "closed"
                raise
            if self._conn is not None:
                return self._conn
            if self._problem is not None:
                raise _Failure(self._problem)

    async def _connect(self) -> None:
        self._state = SshState.CONNECTING
        known: asyncssh.SSHKnownHosts | None = None
        problem: SshProblem
        try:
            known, keys = await asyncio.to_thread(self._read_key_files)
            options: dict[str, Any] = {}
            if keys is not None:
                options["client_keys"] = keys
            conn = await asyncssh.connect(
                self.node.host,
                self.node.ssh.port,
                username=self.user,
                known_hosts=known,
                agent_path=self._agent_path,
                config=[],  # ~/.ssh/config is not read: the sparktui config is the one place
                preferred_auth="publickey",
                connect_timeout=self.node.ssh.connect_timeout_s,
                keepalive_interval=self._keepalive_interval_s,
                keepalive_count_max=self._keepalive_count_max,
                encryption_algs=PREFERRED_CIPHERS,
                client_factory=lambda: _ConnectionWatcher(self),
                **options,
            )
        except _Failure as failure:
            problem = failure.problem
        except Exception as exc:
            problem = self._classify(exc, known)
            if problem.kind is SshProblemKind.AUTH_REJECTED:
                problem = await self._if_no_keys_at_all(problem)
        else:
            self._connect_task = None
            if self._closed:
                conn.abort()
                return
            self._conn = conn
            self._problem = None
            self._state = SshState.CONNECTED
            self._connected_at = time.monotonic()
            return
        self._connect_task = None
        self._schedule_retry(problem)

    async def _if_no_keys_at_all(self, rejected: SshProblem) -> SshProblem:
        """A node that takes no keys at all (password or keyboard-interactive only) says so, not "add
        the key": it is asked which methods it offers, on one more connection that sends the user name
        and no credential. When that fails, or keys are among them, the rejection stands as it was."""
        host, ssh = self.node.host, self.node.ssh
        try:
            async with asyncio.timeout(ssh.connect_timeout_s):
                methods = await asyncssh.get_server_auth_methods(host, ssh.port, username=self.user, config=[])
        except Exception:
            return rejected
        if "publickey" in methods:
            return rejected
        offered = " and ".join(safe_text(method, 40) for method in methods) or "no"
        return SshProblem(
            SshProblemKind.AUTH_REJECTED,
            f"{self.where}: the node offers only {offered} login to user {self.user}, and sparktui logs in "
            f"with keys; set PubkeyAuthentication yes in the node's sshd_config and add the public key to "
            f"~{self.user}/.ssh/authorized_keys",
        )

    def _read_key_files(self) -> tuple[asyncssh.SSHKnownHosts, Sequence[asyncssh.SSHKeyPair] | None]:
        """Read known_hosts and the key file (in a thread: file I/O)."""
        path = self.known_hosts
        try:
            known = asyncssh.read_known_hosts(str(path))
        except FileNotFoundError:
            raise _Failure(
                SshProblem(
                    SshProblemKind.HOST_KEY_UNKNOWN,
                    f"{self.where}: {path} does not exist, so the host key cannot be checked; "
                    f"verify the key, then run: {self._keyscan_command()}",
                )
            ) from None
        except (OSError, ValueError) as exc:
            raise _Failure(
                SshProblem(SshProblemKind.OTHER, f"{self.where}: cannot read {path}: {_reason(exc)}")
            ) from None
        key_file = self.node.ssh.key_file
        if key_file is None:
            return known, None  # the agent and the default keys (~/.ssh/id_*)
        try:
            keys = asyncssh.load_keypairs(str(key_file))
        except OSError as exc:
            reason = exc.strerror or _reason(exc)
            raise _Failure(
                SshProblem(
                    SshProblemKind.NO_KEY,
                    f"{self.where}: cannot read the key file {key_file} ({reason}); "
                    "set ssh.key_file to a private key this user can read",
                )
            ) from None
        except (asyncssh.KeyImportError, ValueError) as exc:
            reason = _reason(exc)
            hint = (
                "it needs a passphrase: load it into ssh-agent (ssh-add) and leave ssh.key_file unset"
                if "passphrase" in reason.lower()
                else "set ssh.key_file to an OpenSSH private key"
            )
            raise _Failure(
                SshProblem(
                    SshProblemKind.NO_KEY,
                    f"{self.where}: cannot use the key file {key_file} ({reason}); {hint}",
                )
            ) from None
        return known, keys

    def _keyscan_command(self) -> str:
        port, host = self.node.ssh.port, self.node.host
        return f"ssh-keyscan -p {port} {shlex.quote(host)} >> {shlex.quote(str(self.known_hosts))}"

    def _classify(self, exc: BaseException, known: asyncssh.SSHKnownHosts | None) -> SshProblem:
        where, port, host = self.where, self.node.ssh.port, self.node.host
        if isinstance(exc, asyncssh.HostKeyNotVerifiable):
            # asyncssh says the same for "no key on file" and "another key on file": look which it is.
            on_file = known is not None and any(known.match(host, "", port)[:2])
            if on_file:
                pattern = host if port == 22 else f"[{host}]:{port}"
                remove = f"ssh-keygen -f {shlex.quote(str(self.known_hosts))} -R {shlex.quote(pattern)}"
                return SshProblem(
                    SshProblemKind.HOST_KEY_CHANGED,
                    f"{where}: the host key has CHANGED from the one in {self.known_hosts}; this may be an "
                    "attack, or the node was reinstalled; if you are sure, remove the old key with: "
                    f"{remove}, then verify and add the new one with: {self._keyscan_command()}",
                )
            return SshProblem(
                SshProblemKind.HOST_KEY_UNKNOWN,
                f"{where}: host key is not in {self.known_hosts}; verify it, then run: {self._keyscan_command()}",
            )
        if isinstance(exc, asyncssh.PermissionDenied):
            key = self.node.ssh.key_file
            offered = f"the key {key}" if key is not None else "the SSH agent's and the default keys"
            return SshProblem(
                SshProblemKind.AUTH_REJECTED,
                f"{where}: the node rejected {offered} for user {self.user}; add the public key to "
                f"~{self.user}/.ssh/authorized_keys on the node, or set ssh.user and ssh.key_file",
            )
        if isinstance(exc, ConnectionRefusedError):
            return SshProblem(
                SshProblemKind.REFUSED,
                f"{where}: connection refused; check that sshd runs on the node and listens on port {port}",
            )
        if isinstance(exc, TimeoutError):
            return SshProblem(
                SshProblemKind.TIMEOUT,
                f"{where}: no answer within {self.node.ssh.connect_timeout_s:g} s; check that the node is "
                "up and reachable",
            )
        if isinstance(exc, socket.gaierror):
            return SshProblem(
                SshProblemKind.UNREACHABLE,
                f"{where}: cannot resolve the host name ({exc.strerror or _reason(exc)}); check the node's host",
            )
        if isinstance(exc, OSError) and exc.errno in _UNREACHABLE_ERRNOS:
            return SshProblem(
                SshProblemKind.UNREACHABLE,
                f"{where}: cannot reach the host ({exc.strerror}); check the network and the node's host",
            )
        if isinstance(exc, asyncssh.ConnectionLost) and "keepalive" in str(exc):
            return SshProblem(
                SshProblemKind.STALLED,
                f"{where}: the node stopped answering keepalives; reconnecting",
            )
        if isinstance(exc, asyncssh.DisconnectError | ConnectionError | EOFError):
            return SshProblem(SshProblemKind.LOST, f"{where}: connection lost ({_reason(exc)}); reconnecting")
        return SshProblem(SshProblemKind.OTHER, f"{where}: SSH error: {_reason(exc)}")

    def _schedule_retry(self, problem: SshProblem, *, lost: bool = False) -> None:
        """Record a failed attempt or a lost connection and when to try next.

        The first reconnect after losing a connection that had been stable is immediate; then 0.2 s,
        doubling to the cap while attempts keep failing (or connections keep dying young).
        """
        if problem.kind.needs_human:
            delay = self._backoff_human_s
        elif self._failures == 0:
            delay = 0.0 if lost else self._backoff_min_s
        else:
            delay = min(self._backoff_max_s, self._backoff_min_s * 2 ** min(self._failures - 1, 30))
        self._failures += 1
        self._problem = problem
        self._retry_at = time.monotonic() + delay
        if not self._closed:
            self._state = SshState.DISCONNECTED

    def _drop(
        self,
        conn: asyncssh.SSHClientConnection,
        exc: BaseException | None,
        problem: SshProblem | None = None,
    ) -> SshProblem:
        """Forget a dead (or stalled) connection, abort it without waiting on the peer, and return why."""
        if self._conn is conn:
            if problem is None:
                problem = (
                    self._classify(exc, None)
                    if exc is not None
                    else SshProblem(SshProblemKind.LOST, f"{self.where}: the node closed the connection; reconnecting")
                )
            self._conn = None
            if time.monotonic() - self._connected_at >= STABLE_AFTER_S:
                self._failures = 0
            self._schedule_retry(problem, lost=True)
        elif problem is None:
            # Already dropped (the watcher heard first): report what was recorded then.
            problem = self._problem or (
                self._classify(exc, None)
                if exc is not None
                else SshProblem(SshProblemKind.LOST, f"{self.where}: connection lost; reconnecting")
            )
        conn.abort()
        return problem

    def _on_connection_lost(self, conn: asyncssh.SSHClientConnection, exc: Exception | None) -> None:
        if self._conn is conn:
            self._drop(conn, exc)

    async def _why_ended(
        self,
        conn: asyncssh.SSHClientConnection,
        process: asyncssh.SSHClientProcess[str],
        command: str,
    ) -> SshProblem:
        """A stream's output ended: did the command exit, or did the connection go?"""
        try:
            async with asyncio.timeout(1.0):
                await process.wait_closed()
        except TimeoutError:
            pass
        if self._conn is not conn or conn.is_closed():
            return self._drop(conn, None)
        status = process.exit_status
        how = (
            f"was killed by {process.exit_signal[0]}"
            if process.exit_signal
            else f"exited with status {status}"
            if status is not None and status >= 0
            else "ended"
        )
        return SshProblem(SshProblemKind.EXITED, f"{self.where}: `{_short(command)}` {how}; running it again")


class TextReader(Protocol):
    """A stream of text read in chunks: an SSH channel's, or a local process's decoded."""

    async def read(self, n: int = -1, /) -> str: ...


async def read_tail(stream: TextReader, limit: int) -> str:
    """All of ``stream``, or its last ``limit`` characters after a line saying how many went before:
    a command that prints without end must not fill the watcher's memory."""
    tail = ""
    dropped = 0
    while chunk := await stream.read(STREAM_CHUNK):
        tail += chunk
        if len(tail) > limit:
            dropped += len(tail) - limit
            tail = tail[-limit:]
    if not dropped:
        return tail
    return f"[{dropped:,} characters of output dropped; the last {limit:,} follow]\n{tail}"
