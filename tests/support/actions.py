"""What the recovery-action tests share: settings with short timeouts, a one-node config for a real
sshd (tests/support/sshd.py), and one simulated Spark whose clock runs 50x faster than the wall."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sparktui.actions.plans import ActionPlan, ActionSettings, FixPlan
from sparktui.actions.runner import ActionResult, ActionRunner, ProgressCallback
from sparktui.demo.fleet import DemoFleet, InstanceSpec
from sparktui.demo.fleet import NodeSpec as DemoNodeSpec
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
