"""What the recovery-action tests share: settings with short timeouts, a one-node config for a real
sshd (tests/support/sshd.py), and one simulated Spark whose clock runs 50x faster than the wall."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sparktui.actions.plans import ActionPlan, ActionSettings, FixPlan
from sparktui.actions.runner import ActionResult, ActionRunner, ProgressCallback
from sparktui.demo.fleet import DemoFleet, InstanceSpec
from sparktui.demo.fleet import NodeSpec as DemoNodeSpec
from sparktui.model.host import HostProcess, process_kind, short_args
from sparktui.model.memory import GIB
from tests.support.sshd import Sshd

FAST = ActionSettings(
    command_timeout_s=10.0,
    remove_timeout_s=10.0,
    kill_timeout_s=10.0,
    ready_timeout_s=20.0,
    health_poll_s=0.05,
    warmup_request_timeout_s=20.0,
    warmup_ttft_target_s=5.0,
    warmup_max_requests=3,
    margin_s=5.0,
)


def config_for(server: Sshd, vllm_url: str, unit: str) -> str:
    """spark1 reached through ``server``, its vLLM at ``vllm_url`` run by the systemd ``unit``."""
    return f"""
poll_interval_s = 0.5
timeout_s = 1.0

[[nodes]]
name = "spark1"
host = "{server.host}"

[nodes.ssh]
user = "{server.user}"
port = {server.port}
key_file = "{server.client_key}"
known_hosts = "{server.known_hosts}"
connect_timeout_s = 3.0

[[nodes.vllm]]
name = "qwen36"
url = "{vllm_url}"
unit = "{unit}"
"""


DEV_FULL = Path("/dev/full")


def full_device() -> Path:
    """/dev/full, where every write fails with ENOSPC from the kernel: a full disk, for real."""
    if not DEV_FULL.exists():
        pytest.skip("no /dev/full here")
    return DEV_FULL


def host_process(pid: int) -> HostProcess:
    """A process of this machine as the host sampler reads it: /proc/PID/stat's start time (field 22)
    and the command line, NULs as spaces, its first 300 bytes."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rpartition(")")[2].split()
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:300].decode()
    return HostProcess(
        pid, int(fields[1]), GIB, None, process_kind(cmdline), short_args(cmdline), start_ticks=int(fields[19])
    )


async def run_once(
    runner: ActionRunner, plan: ActionPlan | FixPlan, progress: ProgressCallback | None = None, timeout_s: float = 60.0
) -> ActionResult:
    """Run ``plan`` within ``timeout_s``, then close the SSH connections the runner opened."""
    try:
        async with asyncio.timeout(timeout_s):
            return await runner.run(plan, on_progress=progress)
    finally:
        await runner.close()


@contextlib.asynccontextmanager
async def fast_demo(seed: int) -> AsyncIterator[DemoFleet]:
    """spark1 serving qwen36 from ``vllm-qwen36.service`` over the demo's real HTTP and SSH servers, its
    simulated clock 50x wall speed (a model load of ~48 s takes about one second)."""
    fleet = DemoFleet(
        nodes=(DemoNodeSpec("spark1", (InstanceSpec("qwen36", "qwen36", unit="vllm-qwen36.service"),), "nvidia"),),
        seed=seed,
    )
    await fleet.start()

    async def fast_clock() -> None:
        while True:
            await asyncio.sleep(0.01)  # the scenario: the simulation's clock runs on wall time
            await fleet.advance(0.5)

    clock = asyncio.create_task(fast_clock())
    try:
        yield fleet
    finally:
        clock.cancel()
        await asyncio.gather(clock, return_exceptions=True)
        await fleet.stop()
