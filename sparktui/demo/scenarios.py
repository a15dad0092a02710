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
    )
}
