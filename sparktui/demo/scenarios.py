"""Scripted demo scenarios: what goes wrong, when (seconds of simulated time after the start).

Each scenario is a timeline of events applied to a ``DemoFleet`` as its clock passes them, so a
scenario plays the same in the live demo and, stepped, in the tests. The ``soak`` scenario's timeline
repeats forever (``Scenario.every_s``): it cycles through four faults on nodes it picks by position,
so it runs on any fleet (``--nodes N`` too).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparktui.demo.fabric import PIP_NCCL, SYSTEM_NCCL, NcclBuild
from sparktui.demo.sim import EngineState

if TYPE_CHECKING:
    from sparktui.demo.fleet import DemoFleet, DemoInstance, DemoNode, GpuFault, MetricsFault

# An event's action may return the line to log for what it did (the node it picked, say); None logs
# the event's ``what``.
Action = Callable[["DemoFleet"], Awaitable[str | None]]


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
    every_s: float | None = None  # the timeline starts again every this many seconds, forever
    any_fleet: bool = False  # picks its nodes by position: runs on a fleet of any size
    fleet: str = "default"  # the fleet its events script (``fleet.FLEETS``)


async def _wedge_spark1(fleet: DemoFleet) -> None:
    fleet.node("spark1").instances[0].engine.state = EngineState.WEDGED


async def _quiet_spark1(fleet: DemoFleet) -> None:
    fleet.node("spark1").instances[0].engine.load_factor = 0.0  # its users go home


async def _resume_spark1(fleet: DemoFleet) -> None:
    fleet.node("spark1").instances[0].engine.resume()


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


# --- ollama-overdue (the mixed fleet): Ollama keeps models past their keep-alive beside spark1's vLLM ----

OVERDUE_MODELS = ("llama3.3:70b", "gemma3:27b")  # 46.5 + 19.8 GiB, asked for with keep_alive 30 s
OVERDUE_KEEP_ALIVE_S = 30.0


async def _ollama_holds_on(fleet: DemoFleet) -> None:
    ollama = fleet.node("spark1").ollama
    assert ollama is not None, "ollama-overdue scripts the mixed fleet"
    for name in OVERDUE_MODELS:
        ollama.load(name, OVERDUE_KEEP_ALIVE_S)
    ollama.stuck = True  # its scheduler will not unload them when their keep-alive ends
    fleet.node("spark1").refresh_host()


async def _restart_ollama_spark1(fleet: DemoFleet) -> None:
    ollama = fleet.node("spark1").ollama
    assert ollama is not None
    ollama.restart()
    fleet.node("spark1").refresh_host()


# --- ssh-drop: spark2's sshd goes away and comes back; HTTP is not affected ----------------------


async def _ssh_down_spark2(fleet: DemoFleet) -> None:
    await fleet.ssh_down("spark2")


async def _ssh_up_spark2(fleet: DemoFleet) -> None:
    await fleet.ssh_up("spark2")


# --- nvrm-oom and kernel-faults: the box under the engine, in the kernel log (issue 21) -------------

NVRM_OOM_LINES = (
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from "
    "_memdescAllocInternal(pMemDesc) @ mem_desc.c:1359",
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from "
    "memdescAlloc(pMemDesc) @ kern_mem_sys.c:742",
)
KERNEL_FAULT_LINES = {
    "xid": ("NVRM: Xid (PCI:000f:01:00): 43, pid=4127, name=python3, Ch 00000008",),
    "pcie": (
        "pcieport 0000:00:00.0: AER: Uncorrectable (Fatal) error received: 0000:01:00.0",
        "mlx5_core 0000:01:00.0: mlx5_pci_err_detected Device state = 1 health sensors: 1 pci_status: 1. "
        "Enter, pci channel state = 2",
        "mlx5_core 0000:01:00.0: mlx5_pci_slot_reset was called",
        "mlx5_core 0000:01:00.0 enp1s0f0np0: Link up",
    ),
    "thermal": ("CPU4: Package temperature above threshold, cpu clock throttled (total events = 1)",),
}


def _gpu_fault(node: str, fault: GpuFault | None) -> Action:
    async def apply(fleet: DemoFleet) -> None:
        fleet.node(node).gpu_fault = fault

    return apply


THERMAL_TIMES = ((10.0, 50.0), (130.0, 170.0), (250.0, 290.0))  # thermal, clock stuck, spinning: on, off


async def _restart_spark1_slowly(fleet: DemoFleet) -> None:
    fleet.node("spark1").instances[0].restart(load_s=50.0)


async def _nvrm_oom_spark1(fleet: DemoFleet) -> None:
    for line in NVRM_OOM_LINES:
        fleet.node("spark1").host.kernel(line)


def _kernel_says(node: str, what: str) -> Action:
    async def say(fleet: DemoFleet) -> None:
        for line in KERNEL_FAULT_LINES[what]:
            fleet.node(node).host.kernel(line)

    return say


# --- fabric: the link between the two ranks of qwen235-tp2 (spark3 head, spark4 worker; issue 21) ---

FABRIC_TIMES = ((20.0, 80.0), (100.0, 160.0), (190.0,))  # link degraded, rank spinning: on, off; NCCL mended


def _link(degraded: bool) -> Action:
    async def apply(fleet: DemoFleet) -> None:
        for name in ("spark3", "spark4"):
            nic = fleet.node(name).nic
            if nic is not None:
                nic.degraded = degraded

    return apply


def _nccl_spark4(build: NcclBuild) -> Action:
    async def apply(fleet: DemoFleet) -> None:
        nic = fleet.node("spark4").nic
        if nic is not None:
            nic.nccl = build

    return apply


async def _collective_hangs(fleet: DemoFleet) -> None:
    fleet.node("spark3").instances[0].engine.state = EngineState.WEDGED
    fleet.node("spark4").gpu_fault = "spin"


async def _collective_runs(fleet: DemoFleet) -> None:
    fleet.node("spark3").instances[0].engine.resume()
    fleet.node("spark4").gpu_fault = None


# --- soak: four faults in turn, forever (the endurance run, benchmarks/soak.py) ------------------

SOAK_FAULTS = ("node-down", "ssh-drop", "malformed-scrape", "counter-reset")
DEFAULT_FAULT_EVERY_S = 180.0
MIN_FAULT_EVERY_S = 20.0  # shorter, and a fault would not have cleared before the next one


@dataclass(frozen=True, slots=True)
class SoakTimes:
    """How long each fault lasts, from the period between faults: it has cleared before the next."""

    every_s: float

    @property
    def hold_s(self) -> float:
        """A node stays off, an sshd down, a /metrics body broken, for this long."""
        return min(self.every_s / 3, 60.0)

    @property
    def boot_load_s(self) -> float:
        """vLLM's load after the node boots again."""
        return min(self.every_s / 4, 45.0)

    @property
    def restart_load_s(self) -> float:
        """vLLM's load after the counter-reset restart."""
        return min(self.every_s / 6, 20.0)

    @property
    def cycle_s(self) -> float:
        return self.every_s * len(SOAK_FAULTS)

    def cycle(self, fleet: DemoFleet) -> int:
        """Which round of the four faults the fleet's clock is in."""
        return int(fleet.elapsed // self.cycle_s)


def _soak_node(fleet: DemoFleet, times: SoakTimes, fault: int, *, serving: bool) -> DemoNode:
    """The node fault number ``fault`` hits in this round: the four faults hit four different nodes,
    and the next round shifts by five, so over the rounds every node gets every fault."""
    nodes = [n for n in fleet.nodes if not serving or any(i.serves_http for i in n.instances)]
    return nodes[(times.cycle(fleet) * 5 + fault) % len(nodes)]


def _serving_instance(node: DemoNode) -> DemoInstance:
    return next(i for i in node.instances if i.serves_http)


def soak_scenario(every_s: float = DEFAULT_FAULT_EVERY_S) -> Scenario:
    """Every ``every_s`` seconds a fault, in turn: a node powers off (and boots again), an sshd drops
    its sessions (and comes back), an instance serves a broken /metrics body (garbage one round,
    truncated the next), an instance restarts (its counters start again from zero). The first fault
    comes ``every_s / 2`` after the start; each has cleared before the next begins."""
    times = SoakTimes(every_s)
    hold, boot_load, restart_load = times.hold_s, times.boot_load_s, times.restart_load_s

    async def power_off(fleet: DemoFleet) -> str:
        node = _soak_node(fleet, times, 0, serving=False)
        await fleet.power_off(node.name)
        return f"fault node-down {node.name}: powered off, every port and SSH refuse for {hold:.0f} s"

    async def power_on(fleet: DemoFleet) -> str:
        node = _soak_node(fleet, times, 0, serving=False)
        await fleet.power_on(node.name, load_s=boot_load)
        return f"recover node-down {node.name}: powered on, vLLM loads for {boot_load:.0f} s"

    async def ssh_down(fleet: DemoFleet) -> str:
        node = _soak_node(fleet, times, 1, serving=False)
        await fleet.ssh_down(node.name)
        return f"fault ssh-drop {node.name}: sshd drops its sessions and refuses for {hold:.0f} s"

    async def ssh_up(fleet: DemoFleet) -> str:
        node = _soak_node(fleet, times, 1, serving=False)
        await fleet.ssh_up(node.name)
        return f"recover ssh-drop {node.name}: sshd accepts again"

    async def break_metrics(fleet: DemoFleet) -> str:
        node = _soak_node(fleet, times, 2, serving=True)
        instance = _serving_instance(node)
        mode: MetricsFault = "garbage" if times.cycle(fleet) % 2 == 0 else "truncated"
        instance.metrics_fault = mode
        where = f"{node.name}/{instance.spec.name}"
        return f"fault malformed-scrape {where}: /metrics serves a {mode} body for {hold:.0f} s"

    async def mend_metrics(fleet: DemoFleet) -> str:
        node = _soak_node(fleet, times, 2, serving=True)
        instance = _serving_instance(node)
        instance.metrics_fault = None
        return f"recover malformed-scrape {node.name}/{instance.spec.name}: /metrics whole again"

    async def restart(fleet: DemoFleet) -> str:
        node = _soak_node(fleet, times, 3, serving=True)
        instance = _serving_instance(node)
        instance.restart(load_s=restart_load)
        return (
            f"fault counter-reset {node.name}/{instance.spec.name}: vLLM restarts, loads for {restart_load:.0f} s, "
            "its counters start again from zero"
        )

    first = every_s / 2
    events = (
        Event(first, "a node powers off", power_off),
        Event(first + hold, "it boots again", power_on),
        Event(first + every_s, "a node's sshd drops its sessions", ssh_down),
        Event(first + every_s + hold, "the sshd is back", ssh_up),
        Event(first + 2 * every_s, "an instance serves a broken /metrics body", break_metrics),
        Event(first + 2 * every_s + hold, "its /metrics is whole again", mend_metrics),
        Event(first + 3 * every_s, "an instance restarts: its counters start again from zero", restart),
    )
    return Scenario(
        "soak",
        f"a fault every {every_s:g} s, in turn: node down and back, SSH dropped, malformed /metrics, counter reset",
        events,
        every_s=times.cycle_s,
        any_fleet=True,
    )


SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario("healthy", "every node serving its normal workload", ()),
        Scenario(
            "wedged",
            "spark1's engine hangs at 15 s: /health stays 200, the gauges freeze, no token moves",
            (Event(15.0, "spark1 engine wedged", _wedge_spark1),),
        ),
        Scenario(
            "wedged-idle",
            "spark1 goes quiet at 5 s and its engine hangs at 60 s while idle: no number moves, only the "
            "canary's unanswered request tells; it runs again at 180 s",
            (
                Event(5.0, "spark1 goes quiet", _quiet_spark1),
                Event(60.0, "spark1 engine wedged while idle", _wedge_spark1),
                Event(180.0, "spark1 engine runs again", _resume_spark1),
            ),
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
            "spark3's engine core dies at 10 s: /health answers 503 for a second, then the API server exits "
            "and its manager restarts it",
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
            "nvrm-oom",
            "spark1's vLLM restarts at 10 s; while it loads, at 25 s, the GPU driver logs 'Out of memory "
            "[NV_ERR_NO_MEMORY]' in the kernel log; the load gets through at 60 s and serving again clears it",
            (
                Event(10.0, "spark1 vLLM restarting", _restart_spark1_slowly),
                Event(25.0, "spark1 kernel: NVRM out of memory during the load", _nvrm_oom_spark1),
            ),
        ),
        Scenario(
            "kernel-faults",
            "spark2's kernel logs an Xid 43 at 10 s, a fatal PCIe AER error and the ConnectX-7's slot reset at "
            "20 s, a thermal throttle at 30 s; vLLM keeps serving and each finding clears once its kind has "
            "been quiet for its quiet_s (5 or 10 min)",
            (
                Event(10.0, "spark2 kernel: Xid 43", _kernel_says("spark2", "xid")),
                Event(20.0, "spark2 kernel: PCIe AER fatal, mlx5 slot reset", _kernel_says("spark2", "pcie")),
                Event(30.0, "spark2 kernel: thermal throttle", _kernel_says("spark2", "thermal")),
            ),
        ),
        Scenario(
            "thermal",
            "spark1's GPU, under load: 10-50 s a thermal slowdown (87 °C, SM 810 MHz, 'SW Thermal Slowdown'), "
            "130-170 s its clock stuck at 850 MHz with no reason given, 250-290 s busy at ~20 W (spinning); "
            "each finding clears a minute after its fault ends",
            (
                Event(THERMAL_TIMES[0][0], "spark1 GPU: thermal slowdown", _gpu_fault("spark1", "thermal")),
                Event(THERMAL_TIMES[0][1], "spark1 GPU: cooled down", _gpu_fault("spark1", None)),
                Event(THERMAL_TIMES[1][0], "spark1 GPU: clock stuck low", _gpu_fault("spark1", "clock-stuck")),
                Event(THERMAL_TIMES[1][1], "spark1 GPU: clock back", _gpu_fault("spark1", None)),
                Event(THERMAL_TIMES[2][0], "spark1 GPU: busy at idle power", _gpu_fault("spark1", "spin")),
                Event(THERMAL_TIMES[2][1], "spark1 GPU: computing again", _gpu_fault("spark1", None)),
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
        Scenario(
            "fabric",
            "qwen235-tp2 over spark3 and spark4: spark4's vLLM maps the system's NCCL (the head the pip "
            "wheel's) until 190 s; 20-80 s the link between them drops packets and pauses at 13 Gb/s of 200; "
            "100-160 s the collective hangs: spark3's engine stalls and spark4's GPU spins at ~20 W",
            (
                Event(0.0, "spark4 vLLM maps the system NCCL", _nccl_spark4(SYSTEM_NCCL)),
                Event(FABRIC_TIMES[0][0], "spark3-spark4 link: drops and pauses", _link(True)),
                Event(FABRIC_TIMES[0][1], "spark3-spark4 link: cable reseated", _link(False)),
                Event(FABRIC_TIMES[1][0], "qwen235-tp2: a collective hangs, spark4 spins", _collective_hangs),
                Event(FABRIC_TIMES[1][1], "qwen235-tp2: the collective completes", _collective_runs),
                Event(FABRIC_TIMES[2][0], "spark4 vLLM restarted on the pip NCCL", _nccl_spark4(PIP_NCCL)),
            ),
        ),
        Scenario(
            "mixed",
            "every engine a Spark runs on one fleet, serving its normal workload: vLLM and an idle Ollama on "
            "spark1, SGLang on spark2, TensorRT-LLM on spark3, a NIM and llama.cpp on spark4",
            (),
            fleet="mixed",
        ),
        Scenario(
            "ollama-overdue",
            "the mixed fleet; at 10 s spark1's vLLM is stopped for a config change; at 20 s someone uses the "
            "free memory: llama3.3:70b and gemma3:27b on spark1's Ollama with a 30 s keep-alive, and Ollama "
            "keeps them loaded past it (66 GiB); at 110 s vLLM is started and crash-loops on 'Free memory on "
            "device'; at 240 s Ollama is restarted, lets them go, and vLLM starts",
            (
                Event(10.0, "spark1: vllm-qwen36.service stopped for a config change", _stop_spark1_for_tests),
                Event(20.0, "spark1 Ollama: llama3.3:70b and gemma3:27b loaded, keep-alive 30 s", _ollama_holds_on),
                Event(110.0, "spark1: vllm-qwen36.service started", _start_spark1),
                Event(240.0, "spark1: ollama.service restarted, its models let go", _restart_ollama_spark1),
            ),
            fleet="mixed",
        ),
        soak_scenario(),
    )
}
