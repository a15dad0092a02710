"""Restart through sparktui's own action runner, on a real engine under a (stub) service manager.

The node is the real sshd of the tests (tests/support/sshd.py) with the stub ``systemctl`` and ``sudo``
on its PATH; the unit's ``restart`` hook stops the real vLLM server the test started and starts a new
one exactly as the test did, as systemd would. The runner sends ``sudo -n systemctl restart UNIT``
over SSH, waits for the new server's ``/health`` (readiness: refused while it loads, 200 once it
serves), then warms it up on the real path with streamed chat completions and measures their time to
first token on the real engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from sparktui.actions.audit import AuditLog
from sparktui.actions.plans import ActionPlan, ActionSettings, plan_restart
from sparktui.actions.runner import ActionRunner
from sparktui.model.specs import FleetSpec, ServerSpec
from tests.support.sshd import Sshd
from tests.support.vllm_server import (
    SERVED_NAME,
    SERVER_ENV,
    START_TIMEOUT_S,
    free_port,
    remove_shm_leftovers,
    require_vllm,
    shm_names,
    vllm_command,
)
from tests.support.wait import wait_until

pytestmark = pytest.mark.vllm
UNIT = "vllm-tiny.service"
REAL = ActionSettings(
    command_timeout_s=60.0,
    ready_timeout_s=START_TIMEOUT_S,  # a real start: 45-90 s on an idle 2-core machine, more under load
    health_poll_s=0.5,
    warmup_request_timeout_s=60.0,
    warmup_ttft_target_s=2.0,
    warmup_max_requests=5,
    margin_s=30.0,
)


def serve_script(python: Path, model: Path, port: int, folder: Path) -> Path:
    """A script that starts the server in a session of its own, its PID in ``server.pid``: what the
    unit runs. Logs go to ``server-N.log``, one per start."""
    env = " ".join(f"{key}={shlex.quote(value)}" for key, value in SERVER_ENV.items())
    command = " ".join(shlex.quote(part) for part in vllm_command(python, model, port))
    script = folder / "serve.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"cd {shlex.quote(str(folder))}\n"
        "n=$(ls server-*.log 2>/dev/null | wc -l)\n"
        f"env -u VLLM_CPU_OMP_THREADS_BIND {env} setsid {command} > server-$n.log 2>&1 < /dev/null &\n"
        "echo $! > server.pid\n"
    )
    script.chmod(0o755)
    return script


def stop_script(folder: Path) -> str:
    """Stops the server whose PID is in ``server.pid`` and its children, as systemd stops a unit."""
    return (
        f"pid=$(cat {shlex.quote(str(folder / 'server.pid'))})\n"
        'kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"\n'
        "i=0\n"
        'while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n'
        'kill -KILL -- "-$pid" 2>/dev/null || true\n'
    )


def server_pid(folder: Path) -> int:
    return int((folder / "server.pid").read_text())


@contextlib.contextmanager
def cleanup(folder: Path) -> Iterator[None]:
    """The last server killed at the end, and what the servers left in /dev/shm removed."""
    before = shm_names()
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError, PermissionError, psutil.Error):
            pid = server_pid(folder)
            os.killpg(pid, signal.SIGKILL)
            psutil.wait_procs([psutil.Process(pid)], timeout=10)
        remove_shm_leftovers(before)


async def test_restart_through_the_runner_brings_a_real_engine_back_and_warms_it_with_measured_ttfts(
    sshd: Sshd, tiny_model: Path, tmp_path: Path
) -> None:
    python = require_vllm()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = serve_script(python, tiny_model, port, tmp_path)
    sshd.set_unit(UNIT, {"LoadState": "loaded", "ActiveState": "active", "SubState": "running"})
    sshd.set_unit_hook(UNIT, "restart", stop_script(tmp_path) + f"exec {shlex.quote(str(serve))}\n")
    node = sshd.node("spark1").model_copy(update={"vllm": (ServerSpec(name=SERVED_NAME, url=url, unit=UNIT),)})
    fleet = FleetSpec(nodes=(node,))
    runner = ActionRunner(fleet, audit=AuditLog(tmp_path / "audit.log", user="tester"))
    with cleanup(tmp_path):
        await asyncio.create_subprocess_exec(str(serve))
        await wait_until((tmp_path / "server.pid").exists, 10.0, what="the first server started")
        first = server_pid(tmp_path)
        await wait_until(lambda: _healthy(url), START_TIMEOUT_S, what="the first server healthy", interval_s=0.5)
        plan = plan_restart(fleet, "spark1", settings=REAL)
        assert isinstance(plan, ActionPlan), plan
        progress: list[str] = []
        started = time.monotonic()
        try:
            result = await runner.run(plan, on_progress=progress.append)
        finally:
            await runner.close()
        took = time.monotonic() - started
        second = server_pid(tmp_path)
    assert result.ok, (result.lines(), (tmp_path / "server-1.log").read_text()[-2000:])
    assert second != first and not psutil.pid_exists(first)  # a new server, the old one gone
    assert [line for line in sshd.calls() if UNIT in line and "restart" in line] == [
        f"sudo -n systemctl restart {UNIT}",
        f"systemctl restart {UNIT}",
    ]
    assert result.steps[0].exit_status == 0
    assert result.steps[1].message == "/health answered 200"
    warmup = result.warmup
    assert warmup is not None and warmup.model == SERVED_NAME
    # TTFTs measured on the real engine: each one a real first token, the last under the target.
    assert warmup.ttfts_s and all(0 < t < REAL.warmup_request_timeout_s for t in warmup.ttfts_s)
    assert warmup.reached and warmup.ttfts_s[-1] < REAL.warmup_ttft_target_s
    assert result.duration_s <= took
    assert result.message.startswith(f"restart spark1/{SERVED_NAME}: ok in ")
    assert progress[0] == f"restart spark1/{SERVED_NAME}: started" and progress[-1] == result.message


def _healthy(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/health", timeout=1.0) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False
