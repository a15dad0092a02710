"""Scripted demo scenarios: what goes wrong, when (seconds of simulated time after the start).

Each scenario is a timeline of events applied to a ``DemoFleet`` as its clock passes them, so a
scenario plays the same in the live demo and, stepped, in the tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparktui.demo.sim import EngineState

if TYPE_CHECKING:
    from sparktui.demo.fleet import DemoFleet

Action = Callable[["DemoFleet"], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Event:
    at_s: float
    what: str  # for the demo's log line and the docs
    action: Action


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    summary: str
    events: tuple[Event, ...]


async def _wedge_spark1(fleet: DemoFleet) -> None:
    fleet.node("spark1").instances[0].engine.state = EngineState.WEDGED


async def _collapse_last_position(fleet: DemoFleet) -> None:
    engine = fleet.node("spark2").instances[0].engine
    engine.acceptance_factor = (0.92, 0.84, 0.74, 0.12)


async def _flood_spark1(fleet: DemoFleet) -> None:
    engine = fleet.node("spark1").instances[0].engine
    # Long agent sessions: 40k-token contexts, almost all of it a cached prefix (cheap to prefill,
    # but every cached block is held in KV), and long answers that keep growing the cache.
    engine.load_factor = 6.0
    engine.prompt_factor = 16.0
    engine.output_factor = 10.0
    engine.cached_share = (0.93, 0.99)


async def _power_off_spark2(fleet: DemoFleet) -> None:
    await fleet.power_off("spark2")


async def _power_on_spark2(fleet: DemoFleet) -> None:
    await fleet.power_on("spark2", load_s=45.0)


async def _kill_engine_spark3(fleet: DemoFleet) -> None:
    fleet.node("spark3").instances[0].engine.state = EngineState.DEAD


async def _restart_spark1(fleet: DemoFleet) -> None:
    fleet.node("spark1").instances[0].restart(load_s=40.0, cold_jit_s=30.0)


# --- incident: page cache from model loads blocks vLLM's start on spark1 (context/002) -----------

INCIDENT_CHECKPOINTS = (
    ("Qwen/Qwen3-Next-80B-A3B-Instruct-FP8", 75.0),
    ("openai/gpt-oss-120b", 61.0),
)
INCIDENT_READ_GIB_S = 2.5  # NVMe reads of safetensors shards
CLIENTS_RETURN_S = 45.0  # the agents that failed over come back this long after vLLM serves again


async def _stop_spark1_for_tests(fleet: DemoFleet) -> None:
    instance = fleet.node("spark1").instances[0]
    instance.service.stop()
    instance.engine.load_factor = 0.0  # its clients fail over to a cloud endpoint
    instance.service.failover_return_s = CLIENTS_RETURN_S


async def _load_checkpoints_spark1(fleet: DemoFleet) -> None:
    host = fleet.node("spark1").host
    for name, size_gib in INCIDENT_CHECKPOINTS:
        host.queue_read(name, size_gib, INCIDENT_READ_GIB_S, held=True)


async def _start_spark1(fleet: DemoFleet) -> None:
    fleet.node("spark1").instances[0].service.start()


# --- ssh-drop: spark2's sshd goes away and comes back; HTTP is not affected ----------------------


async def _ssh_down_spark2(fleet: DemoFleet) -> None:
    await fleet.ssh_down("spark2")


async def _ssh_up_spark2(fleet: DemoFleet) -> None:
    await fleet.ssh_up("spark2")


SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario("healthy", "every node serving its normal workload", ()),
        Scenario(
            "wedged",
            "spark1's engine hangs at 15 s: /health stays 200, requests stay running, no token moves",
            (Event(15.0, "spark1 engine wedged", _wedge_spark1),),
        ),
        Scenario(
            "spec-degradation",
            "spark2's last draft position stops being accepted at 10 s (conditional 0.12)",
            (Event(10.0, "spark2 draft position 3 collapses", _collapse_last_position),),
        ),
        Scenario(
            "kv-pressure",
            "spark1 gets a flood of long conversations at 5 s: the KV cache fills and requests are preempted",
            (Event(5.0, "spark1 flooded with long prompts", _flood_spark1),),
        ),
        Scenario(
            "node-down",
            "spark2 loses power at 20 s and boots again at 80 s (vLLM loads for 45 s)",
            (
                Event(20.0, "spark2 powered off", _power_off_spark2),
                Event(80.0, "spark2 powered on", _power_on_spark2),
            ),
        ),
        Scenario(
            "engine-dead",
            "spark3's engine core dies at 10 s: /health answers 503, /metrics freezes",
            (Event(10.0, "spark3 engine core died", _kill_engine_spark3),),
        ),
        Scenario(
            "restart",
            "spark1's vLLM restarts at 10 s: refused while loading for 40 s, then a cold first request",
            (Event(10.0, "spark1 vLLM restarting", _restart_spark1),),
        ),
        Scenario(
            "incident",
            "spark1's vLLM is stopped at 10 s to try two other checkpoints; their page cache fills the "
            "memory, and from 75 s the restarted unit crash-loops on vLLM's 'Free memory on device' check "
            "until someone drops caches on spark1 and restarts vllm-qwen36.service",
            (
                Event(
                    10.0, "spark1: operator stops vllm-qwen36.service to try other checkpoints", _stop_spark1_for_tests
                ),
                Event(
                    15.0, "spark1: a test script loads 75 + 61 GiB of checkpoints from disk", _load_checkpoints_spark1
                ),
                Event(75.0, "spark1: operator starts vllm-qwen36.service again", _start_spark1),
            ),
        ),
        Scenario(
            "ssh-drop",
            "spark2's sshd stops accepting and drops its sessions at 15 s and is back at 45 s; HTTP is unaffected",
            (
                Event(15.0, "spark2: sshd down, sessions dropped", _ssh_down_spark2),
                Event(45.0, "spark2: sshd back", _ssh_up_spark2),
            ),
        ),
    )
}
