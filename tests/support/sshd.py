"""A real OpenSSH server on 127.0.0.1 for tests, with stub service managers on its sessions' PATH.

Registered for every test module by ``pytest_plugins = ["tests.support.sshd"]`` in ``tests/conftest.py``:

- ``sshd``: one server for the whole test session. Share it; do not stop it or change its keys, and
  give the units and containers you create names of your own.
- ``fresh_sshd``: a server of the test's own: stop, restart, kill or freeze its sessions freely.
- ``sshd_factory``: ``sshd_factory("name")`` starts one more server (two nodes...); all are stopped at
  teardown.

Each server has its own directory: an ed25519 host key, a client key in ``authorized_keys``, a
``known_hosts`` that trusts the host key, ``sshd_config``, the log (``sshd.log``), the stub
commands (``bin/``: ``systemctl``, ``journalctl``, ``docker``, ``stub-inflight``, ``sudo``, ``sync``,
``dmesg``, ``nvidia-smi``, ``ss``, ``ethtool``, copied from ``tests/stubs/``) and their state (``state/``). ``SetEnv``
in ``sshd_config`` puts ``bin/`` first on the PATH of every session (the account's shell rc files may
prepend directories of their own; a test checks that the stubs still win) and tells the stubs where their
state is. The stubs append every call to ``state/calls.log`` and answer from files the test writes with
``set_unit``, ``set_container``, ``set_listeners``, ``append_journal``, ``append_kernel_log`` (and
``remove_journal``), ``set_nvidia_smi`` (and ``hang_nvidia_smi``), ``set_ethtool`` and
``append_docker_log``. The ``sudo`` stub runs its command with the privileged paths redirected into
``state/`` (``/proc/sys/vm/drop_caches`` → ``drop_caches_file``, ``/dev/shm/`` → ``shm_dir``), kills only
PIDs allowed with ``sudo_may_kill``, and can be made to want a password (``sudo_needs_password``) or to
wait first (``sudo_sleep``, or until released: ``sudo_hold``); see tests/stubs/sudo.

Needs ``/usr/sbin/sshd`` (Debian: ``apt-get install -y openssh-server openssh-client``). Without it
the fixtures skip, or fail when ``CI=true``.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

# No type stubs for psutil in the test extras; the ignore stays harmless if types-psutil appears.
import psutil  # type: ignore[import-untyped, unused-ignore]
import pytest

from sparktui.model.specs import NodeSpec, SshSpec

SSHD = Path("/usr/sbin/sshd")  # sshd re-execs itself and refuses to start from a relative path
STUBS = Path(__file__).resolve().parents[1] / "stubs"
STUB_NAMES = (
    "systemctl",
    "journalctl",
    "docker",
    "stub-inflight",
    "sudo",
    "sync",
    "dmesg",
    "nvidia-smi",
    "ss",
    "ethtool",
)
INSTALL_HINT = "apt-get install -y openssh-server openssh-client"

# A vLLM unit that runs, and one in the crash loop of a unit whose ExecStart points at a file that is
# gone (status 127, restarted every 30 s all day): as `systemctl show` prints them.
VLLM_EXEC = "/home/spark/vllm/.venv/bin/vllm"
_EXEC_START = (
    "{{ path={path} ; argv[]={path} serve Qwen/Qwen3-Next-80B-A3B-Instruct-FP8 --port 8000 "
    "--gpu-memory-utilization 0.9 --max-model-len 131072 ; ignore_errors=no ; "
    "start_time=[{start}] ; stop_time=[{stop}] ; pid={pid} ; code={code} ; status={status} }}"
)
UNIT_RUNNING: Mapping[str, str] = {
    "Id": "vllm.service",
    "Names": "vllm.service",
    "LoadState": "loaded",
    "ActiveState": "active",
    "SubState": "running",
    "Result": "success",
    "MainPID": "48213",
    "ExecMainPID": "48213",
    "ExecMainCode": "0",
    "ExecMainStatus": "0",
    "NRestarts": "0",
    "ExecMainStartTimestamp": "Wed 2026-11-25 21:04:17 UTC",
    "ExecMainExitTimestamp": "",
    "ExecStart": _EXEC_START.format(
        path=VLLM_EXEC,
        start="Wed 2026-11-25 21:04:17 UTC",
        stop="n/a",
        pid=48213,
        code="(null)",
        status="0/0",
    ),
    "FragmentPath": "/etc/systemd/system/vllm.service",
}
UNIT_EXEC_127_CRASH_LOOP: Mapping[str, str] = {
    **UNIT_RUNNING,
    "ActiveState": "activating",
    "SubState": "auto-restart",
    "Result": "exit-code",
    "MainPID": "0",
    "ExecMainPID": "91877",
    "ExecMainCode": "1",
    "ExecMainStatus": "127",
    "NRestarts": "57",
    "ExecMainStartTimestamp": "Sat 2026-05-30 14:31:02 UTC",
    "ExecMainExitTimestamp": "Sat 2026-05-30 14:31:02 UTC",
    "ExecStart": _EXEC_START.format(
        path="/workspace/vllm-head-090.sh",
        start="Sat 2026-05-30 14:31:02 UTC",
        stop="Sat 2026-05-30 14:31:02 UTC",
        pid=91877,
        code="exited",
        status="127",
    ),
}

FREE_MEMORY_ERROR = (
    "Free memory on device cuda:0 (4.75/119.67 GiB) on startup is less than desired GPU memory "
    "utilization (0.9, 107.7 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
    "processes."
)
# The last lines a vLLM unit wrote before failing to start on a node whose page cache holds the memory.
JOURNAL_FAILED_START: tuple[str, ...] = (
    "2026-11-26T09:58:40+0000 spark1 systemd[1]: Started vllm.service - vLLM OpenAI-compatible server.",
    "2026-11-26T09:58:47+0000 spark1 vllm[48213]: INFO 11-26 09:58:47 [api_server.py:1351] "
    "vLLM API server version 0.11.0",
    "2026-11-26T09:58:52+0000 spark1 vllm[48213]: INFO 11-26 09:58:52 [core.py:77] Initializing a V1 LLM "
    "engine (v0.11.0) with config: model='Qwen/Qwen3-Next-80B-A3B-Instruct-FP8'",
    "2026-11-26T09:59:05+0000 spark1 vllm[48213]: ERROR 11-26 09:59:05 [core.py:708] EngineCore failed to start.",
    f"2026-11-26T09:59:05+0000 spark1 vllm[48213]: ValueError: {FREE_MEMORY_ERROR}",
    "2026-11-26T09:59:07+0000 spark1 systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE",
)
DOCKER_FAILED_START: tuple[str, ...] = (
    "2026-11-26T09:58:47.120418337Z INFO 11-26 09:58:47 [api_server.py:1351] vLLM API server version 0.11.0",
    "2026-11-26T09:58:52.5Z INFO 11-26 09:58:52 [core.py:77] Initializing a V1 LLM engine (v0.11.0)",
    f"2026-11-26T09:59:05.004511902Z (EngineCore_DP0 pid=212) ValueError: {FREE_MEMORY_ERROR}",
)


def container_inspect(name: str, *, running: bool = True, exit_code: int = 0, restarts: int = 0) -> dict[str, Any]:
    """The fields of ``docker inspect`` a dashboard reads, as docker prints them."""
    return {
        "Id": "4f0c8e3a9b7d" + "0" * 52,
        "Created": "2026-11-25T21:03:58.771224116Z",
        "Path": "vllm",
        "Args": ["serve", "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8", "--port", "8000"],
        "State": {
            "Status": "running" if running else "exited",
            "Running": running,
            "Paused": False,
            "Restarting": False,
            "OOMKilled": False,
            "Dead": False,
            "Pid": 48213 if running else 0,
            "ExitCode": exit_code,
            "Error": "",
            "StartedAt": "2026-11-25T21:04:17.118200411Z",
            "FinishedAt": "0001-01-01T00:00:00Z" if running else "2026-11-26T09:59:07.402113025Z",
        },
        "Image": "sha256:" + "9c1e" * 16,
        "Name": f"/{name}",
        "RestartCount": restarts,
        "Config": {"Image": "nvcr.io/nvidia/vllm:25.11-py3", "Cmd": ["vllm", "serve"]},
        "HostConfig": {"RestartPolicy": {"Name": "unless-stopped", "MaximumRetryCount": 0}},
    }


def published_container(
    name: str,
    image: str,
    argv: Sequence[str],
    *,
    container_port: int,
    host_port: int | None,
    entrypoint: Sequence[str] = (),
) -> dict[str, Any]:
    """``docker inspect`` of a running container of ``image`` whose process is ``argv`` (``Path`` and
    ``Args``; the image's ``entrypoint`` and the ``Cmd`` after it), its ``container_port`` published on
    ``host_port`` (None: not published) on a bridge network."""
    data = container_inspect(name)
    bindings = {f"{container_port}/tcp": [{"HostIp": "", "HostPort": str(host_port)}]} if host_port else {}
    config: dict[str, Any] = {"Image": image, "Cmd": list(argv[len(entrypoint) :])}
    if entrypoint:
        config["Entrypoint"] = list(entrypoint)
    data.update(
        Path=argv[0],
        Args=list(argv[1:]),
        Config=config,
        HostConfig={"NetworkMode": "bridge", "PortBindings": bindings, "RestartPolicy": {"Name": "no"}},
        NetworkSettings={"Ports": bindings},
    )
    return data


def require_sshd() -> None:
    """Skip (or fail under CI=true) when the OpenSSH server or client tools are missing."""
    missing = [str(SSHD)] if not SSHD.is_file() else []
    missing += [tool for tool in ("ssh-keygen",) if shutil.which(tool) is None]
    if missing:
        message = f"{', '.join(missing)} not found: install OpenSSH ({INSTALL_HINT})"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )


def _public_key(private: Path) -> str:
    """``ssh-ed25519 AAAA…`` of a key pair (the comment left out)."""
    kind, blob, *_ = private.with_name(private.name + ".pub").read_text().split()
    return f"{kind} {blob}"


def _signal(proc: psutil.Process, sig: int) -> None:
    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
        proc.send_signal(sig)


def _gone(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def _wait_gone(procs: Iterable[psutil.Process], timeout_s: float) -> None:
    """Wait until the processes have exited. A zombie counts as gone: an orphan is re-parented to
    PID 1, which may take a while to reap it."""
    deadline = time.monotonic() + timeout_s
    waiting = list(procs)
    while waiting and time.monotonic() < deadline:
        waiting = [proc for proc in waiting if not _gone(proc)]
        if waiting:
            time.sleep(0.01)


class Sshd:
    """One OpenSSH server on 127.0.0.1 in its own directory; ``start()``, ``stop()``, ``restart()``."""

    def __init__(self, root: Path, name: str = "sshd") -> None:
        self.name = name
        self.dir = root
        self.host = "127.0.0.1"
        self.port = 0
        self.user = getpass.getuser()
        self.host_key = root / "ssh_host_ed25519_key"
        self.client_key = root / "id_ed25519"
        self.authorized_keys = root / "authorized_keys"
        self.known_hosts = root / "known_hosts"
        self.config_file = root / "sshd_config"
        self.log_file = root / "sshd.log"
        self.pid_file = root / "sshd.pid"
        self.stub_dir = root / "bin"
        self.state_dir = root / "state"
        self._process: subprocess.Popen[bytes] | None = None
        self._leftovers: list[psutil.Process] = []  # children of killed sessions, stopped with the server

    # --- life cycle -------------------------------------------------------------------------------------

    def start(self) -> Sshd:
        """Start the server (keys and files are made on the first start and kept for restarts)."""
        require_sshd()
        if self.running:
            return self
        if os.geteuid() == 0:
            # Privilege separation directory: nothing creates it without systemd, and sshd (even
            # `sshd -t`) refuses to run as root without it.
            subprocess.run(["install", "-d", "-m", "0755", "/run/sshd"], check=True)
        if not self.host_key.exists():
            self._make_files()
        first = self.port == 0
        for _ in range(5):
            if first:
                self.port = _free_port()
                self._write_config()
            self.log_file.write_text("")
            self._process = subprocess.Popen(
                [str(SSHD), "-D", "-f", str(self.config_file), "-E", str(self.log_file)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if self._wait_listening():
                return self
            if not first:
                break  # restart on the same port failed: no point trying other ports
        raise RuntimeError(f"sshd did not start on 127.0.0.1:{self.port}; log:\n{self.log_file.read_text()}")

    def stop(self) -> None:
        """Stop by PID: the sessions and what they run first (they outlive the listener), then it."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            listener = psutil.Process(process.pid)
            descendants = listener.children(recursive=True)
        except psutil.NoSuchProcess:
            descendants = []
        sessions = [p for p in descendants if self._is_sshd(p)]
        others = [p for p in descendants if p not in sessions] + self._leftovers
        for proc in sessions:
            _signal(proc, signal.SIGTERM)
            _signal(proc, signal.SIGCONT)  # a frozen session handles SIGTERM once it runs again
        _wait_gone(sessions, timeout_s=3)
        for proc in sessions + others:
            _signal(proc, signal.SIGKILL)
        _wait_gone(sessions + others, timeout_s=3)
        self._leftovers = []
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def restart(self) -> Sshd:
        """Stop and start again on the same port with the same keys."""
        self.stop()
        return self.start()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _make_files(self) -> None:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        _keygen(self.host_key, f"{self.name}-host")
        _keygen(self.client_key, f"{self.name}-client")
        self.authorized_keys.write_text(_public_key(self.client_key) + "\n")
        self.authorized_keys.chmod(0o600)
        self.stub_dir.mkdir()
        for stub in STUB_NAMES:
            target = self.stub_dir / stub
            shutil.copyfile(STUBS / stub, target)
            target.chmod(0o755)  # set here: the mode a checkout gives the files in tests/stubs may vary
        for sub in ("systemd", "journal", "docker", "shm", "sudo"):
            (self.state_dir / sub).mkdir(parents=True)
        (self.state_dir / "calls.log").write_text("")

    def only_passwords(self) -> None:
        """From now on the server takes passwords and keyboard-interactive logins, no keys (restarted
        on the same port when it runs)."""
        text = self.config_file.read_text()
        for old, new in (
            ("PubkeyAuthentication yes", "PubkeyAuthentication no"),
            ("PasswordAuthentication no", "PasswordAuthentication yes"),
            ("KbdInteractiveAuthentication no", "KbdInteractiveAuthentication yes"),
        ):
            text = text.replace(old, new)
        self.config_file.write_text(text)
        if self.running:
            self.restart()

    def _write_config(self) -> None:
        path = f"{self.stub_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        self.config_file.write_text(
            f"""\
Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.host_key}
PidFile {self.pid_file}
AuthorizedKeysFile {self.authorized_keys}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
# No PAM stack needed; then sshd itself refuses accounts whose password hash starts with '!'.
UsePAM no
# authorized_keys lives under /tmp (mode 1777), which StrictModes would reject.
StrictModes no
PrintMotd no
MaxStartups 100
MaxSessions 20
LogLevel VERBOSE
SetEnv PATH={path} SPARKTUI_STUB_STATE={self.state_dir}
"""
        )
        self.known_hosts.write_text(f"[{self.host}]:{self.port} {_public_key(self.host_key)}\n")

    def _wait_listening(self, timeout_s: float = 5.0) -> bool:
        assert self._process is not None
        ready = f"Server listening on 127.0.0.1 port {self.port}."
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready in self.log_file.read_text(errors="replace"):
                return True
            if self._process.poll() is not None:
                self._process = None
                return False
            time.sleep(0.01)
        self.stop()
        return False

    # --- sessions ---------------------------------------------------------------------------------------

    @staticmethod
    def _is_sshd(proc: psutil.Process) -> bool:
        try:
            return bool(proc.name() == "sshd")  # the listener and "sshd: USER@notty" sessions alike
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False

    def sessions(self) -> list[psutil.Process]:
        """The per-connection ``sshd: USER@notty`` processes (and any other sshd child of the listener)."""
        if self._process is None:
            return []
        try:
            children = psutil.Process(self._process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [p for p in children if self._is_sshd(p)]

    def session(self, client_port: int) -> psutil.Process:
        """The session process serving the client connection from 127.0.0.1:``client_port``."""
        for proc in self.sessions():
            try:
                connections = proc.net_connections(kind="tcp")
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            for conn in connections:
                if conn.laddr and conn.raddr and conn.laddr.port == self.port and conn.raddr.port == client_port:
                    return proc
        raise LookupError(f"no sshd session on port {self.port} for client port {client_port}")

    def kill_session(self, client_port: int) -> None:
        """SIGKILL the session (the client sees the connection drop at once)."""
        proc = self.session(client_port)
        self._leftovers.extend(proc.children(recursive=True))
        proc.send_signal(signal.SIGKILL)

    def freeze_session(self, client_port: int) -> psutil.Process:
        """SIGSTOP the session: the TCP connection stays open but nothing answers (a stalled peer)."""
        proc = self.session(client_port)
        proc.send_signal(signal.SIGSTOP)
        return proc

    def thaw_sessions(self) -> None:
        for proc in self.sessions():
            _signal(proc, signal.SIGCONT)

    # --- nodes, keys --------------------------------------------------------------------------------------

    def node(self, name: str = "spark1", **ssh: Any) -> NodeSpec:
        """A node spec that reaches this server (``ssh`` overrides: key_file, known_hosts, port...)."""
        settings: dict[str, Any] = {
            "user": self.user,
            "port": self.port,
            "key_file": self.client_key,
            "known_hosts": self.known_hosts,
            "connect_timeout_s": 3.0,
            **ssh,
        }
        return NodeSpec(name=name, host=self.host, ssh=SshSpec(**settings))

    def new_key(self, name: str) -> Path:
        """A fresh client key pair that is not in authorized_keys."""
        path = self.dir / name
        _keygen(path, name)
        return path

    def known_hosts_with_other_key(self, path: Path) -> Path:
        """A known_hosts that holds another ed25519 key for this host:port (as after a reinstall)."""
        other = self.dir / f"other_host_key_{path.stem}"
        if not other.exists():
            _keygen(other, "other-host")
        path.write_text(f"[{self.host}]:{self.port} {_public_key(other)}\n")
        return path

    def ssh_command(self, remote: str) -> list[str]:
        """The OpenSSH client command line for this server (strict host key checking)."""
        return [
            "ssh",
            "-p",
            str(self.port),
            "-i",
            str(self.client_key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            f"{self.user}@{self.host}",
            remote,
        ]

    # --- stub state ---------------------------------------------------------------------------------------

    def set_unit(self, unit: str, properties: Mapping[str, str]) -> None:
        """What ``systemctl show UNIT`` prints (Key=Value lines)."""
        text = "".join(f"{key}={value}\n" for key, value in {"Id": unit, **properties}.items())
        self._write(self.state_dir / "systemd" / unit, text)

    def set_container(self, name: str, inspect: Mapping[str, Any] | None = None, *, running: bool = True) -> None:
        """What ``docker inspect NAME`` prints; a stopped container ends ``docker logs -f`` at once."""
        data = inspect if inspect is not None else container_inspect(name, running=running)
        self._write(self.state_dir / "docker" / f"{name}.json", json.dumps(data, indent=4))
        stopped = self.state_dir / "docker" / f"{name}.stopped"
        if running:
            stopped.unlink(missing_ok=True)
        else:
            stopped.touch()
        (self.state_dir / "docker" / f"{name}.log").touch()

    def set_unit_hook(self, unit: str, verb: str, script: str) -> Path:
        """What ``systemctl VERB UNIT`` (start, stop, restart) runs on the node: a shell script."""
        hook = self.state_dir / "hooks" / f"{unit}.{verb}"
        hook.parent.mkdir(parents=True, exist_ok=True)
        hook.write_text("#!/bin/sh\n" + script)
        hook.chmod(0o755)
        return hook

    def set_listeners(self, ports: Iterable[tuple[int, str | None]]) -> None:
        """What ``ss -Hltnp`` prints: (port, process name or None) listening on 127.0.0.1."""
        rows = [
            f"LISTEN 0      4096   127.0.0.1:{port} 0.0.0.0:* "
            + (f'users:(("{process}",pid={4000 + n},fd=3))' if process is not None else "")
            for n, (port, process) in enumerate(ports)
        ]
        self._write(self.state_dir / "ss.txt", "".join(row + "\n" for row in rows))

    def append_journal(self, unit: str, lines: Iterable[str]) -> None:
        """Append ``journalctl -o short-iso`` lines to the unit's journal (a follower sees them)."""
        self._append(self.state_dir / "journal" / f"{unit}.log", lines)

    def append_kernel_log(self, lines: Iterable[str], *, journal: bool = True) -> None:
        """Append kernel-log lines: ``journalctl -k -o short-iso`` ones to the journal, or (``journal``
        False) ``dmesg --time-format iso`` ones to the ring buffer."""
        self._append(self.state_dir / ("journal/kernel.log" if journal else "dmesg.log"), lines)

    def set_nvidia_smi(self, text: str) -> None:
        """What ``nvidia-smi`` prints from now on (without it, the node has no nvidia-smi)."""
        (self.state_dir / "nvidia-smi.txt").write_text(text)

    def hang_nvidia_smi(self) -> None:
        """From now on ``nvidia-smi`` never answers (a GPU off the bus) and runs until it is killed."""
        (self.state_dir / "nvidia-smi.hang").write_text("")

    def set_ethtool(self, text: str) -> None:
        """What ``ethtool -S IF`` prints from now on (without it: "no stats available", status 94)."""
        (self.state_dir / "ethtool-S.txt").write_text(text)

    def remove_journal(self) -> None:
        """The node has no journal: ``journalctl`` fails from now on, as without systemd-journald."""
        (self.state_dir / "journal" / "none").touch()

    def append_docker_log(self, name: str, lines: Iterable[str]) -> None:
        """Append ``docker logs --timestamps`` lines to the container's log."""
        self._append(self.state_dir / "docker" / f"{name}.log", lines)

    def calls(self) -> list[str]:
        """Every stub call so far, as ``name arg arg...``."""
        return (self.state_dir / "calls.log").read_text().splitlines()

    # --- sudo (tests/stubs/sudo) ----------------------------------------------------------------------------

    @property
    def shm_dir(self) -> Path:
        """Where the sudo stub sends ``/dev/shm/...`` paths."""
        return self.state_dir / "shm"

    @property
    def drop_caches_file(self) -> Path:
        """Where the sudo stub sends writes to ``/proc/sys/vm/drop_caches``."""
        return self.state_dir / "drop_caches"

    def _sudo_flag(self, name: str, on: bool) -> None:
        flag = self.state_dir / "sudo" / name
        if on:
            flag.touch()
        else:
            flag.unlink(missing_ok=True)

    def sudo_needs_password(self, needs: bool = True) -> None:
        """Make ``sudo -n`` answer "sudo: a password is required" (exit 1), as a sudoers rule without
        NOPASSWD does."""
        self._sudo_flag("password", needs)

    def sudo_hold(self, held: bool = True) -> None:
        """While held, the sudo stub waits before running its command: an action that is still running
        for as long as the test needs, however slow the machine, and goes on once released."""
        self._sudo_flag("hold", held)

    def sudo_sleep(self, seconds: float | None) -> None:
        """Make the sudo stub wait ``seconds`` before running its command (None: at once)."""
        path = self.state_dir / "sudo" / "sleep"
        if seconds is None:
            path.unlink(missing_ok=True)
        else:
            self._write(path, f"{seconds:g}\n")

    def sudo_may_kill(self, pids: Iterable[int]) -> None:
        """The PIDs ``sudo -n kill`` may signal (the test's own processes); others are refused."""
        self._write(self.state_dir / "sudo" / "killable", "".join(f"{pid}\n" for pid in pids))

    def sudo_log(self) -> list[tuple[float, str, str]]:
        """(time, "begin" | "end", command) of every command the sudo stub ran, in order."""
        path = self.state_dir / "sudo.log"
        out: list[tuple[float, str, str]] = []
        for line in path.read_text().splitlines() if path.exists() else []:
            stamp, event, command = [*line.split(" ", 2), "", ""][:3]
            out.append((float(stamp), event, command))
        return out

    def inflight_max(self) -> int:
        """The most ``stub-inflight`` commands that ran at the same time."""
        path = self.state_dir / "inflight.log"
        running = peak = 0
        for line in path.read_text().splitlines() if path.exists() else []:
            running += 1 if line.startswith("start ") else -1
            peak = max(peak, running)
        return peak

    @staticmethod
    def _write(path: Path, text: str) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)  # atomic: a stub never reads half a file

    @staticmethod
    def _append(path: Path, lines: Iterable[str]) -> None:
        with path.open("a") as handle:
            handle.writelines(f"{line}\n" for line in lines)


# --- fixtures -------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """One server shared by the whole session: do not stop it or change its keys."""
    require_sshd()
    server = Sshd(tmp_path_factory.mktemp("sshd-shared"), "shared").start()
    yield server
    server.stop()


@pytest.fixture
def sshd_factory(tmp_path: Path) -> Iterator[Callable[[str], Sshd]]:
    """Start servers of the test's own: ``sshd_factory("spark2")``; all are stopped at teardown."""
    require_sshd()
    servers: list[Sshd] = []

    def make(name: str = "sshd") -> Sshd:
        server = Sshd(tmp_path / f"sshd-{name}", name)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def fresh_sshd(sshd_factory: Callable[[str], Sshd]) -> Sshd:
    """A server of the test's own: stop, restart, kill or freeze its sessions freely."""
    return sshd_factory("fresh")
