"""The recovery actions: plans (pure) and the runner against a real sshd with stub systemctl, docker and
sudo on its PATH (tests/stubs), readiness and warmup against the demo fleet's real HTTP servers, and
the ``sparktui action`` command.

The sudo stub never touches the machine: ``/proc/sys/vm/drop_caches`` and ``/dev/shm/`` are redirected
into the server's state folder and ``kill`` reaches only the PIDs a test allows (tests/stubs/sudo).
Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from sparktui.actions.audit import AUDIT_ENV, AuditLog
from sparktui.actions.controller import ActionController
from sparktui.actions.plans import (
    ActionPlan,
    Refusal,
    StepKind,
    plan_action,
    plan_drop_caches,
    plan_kill_workers,
    plan_restart,
    plan_warmup,
)
from sparktui.actions.registry import ActionKind, ActionSpec, action_spec
from sparktui.actions.runner import ActionResult, ActionRunner, MemoryReader, Outcome
from sparktui.cli import main
from sparktui.config import catalogue_for, parse_config
from sparktui.demo.fleet import DemoFleet, InstanceSpec
from sparktui.demo.fleet import NodeSpec as DemoNodeSpec
from sparktui.demo.sim import PROFILES
from sparktui.diagnosis.engine import ACTION_SETTLE_S
from sparktui.engines import readings
from sparktui.headless.action import main as actions_main
from sparktui.headless.snapshot import collect
from sparktui.model.commands import KILL_SCRIPT, ProcessIdentity, posix_cksum
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.host import HostProcess, HostSample, ServiceState, ShmEntry
from sparktui.model.memory import GIB, HostMemory
from sparktui.model.observations import HostUpdate
from sparktui.model.specs import FleetSpec, NodeSpec, ServerSpec, SshSpec
from sparktui.model.units import fmt_seconds
from sparktui.monitor.core import Monitor
from sparktui.sources.bench import find_instance
from tests.support.actions import FAST, config_for, fast_demo, host_process
from tests.support.fixture_fleet import Endpoint, FixtureServer
from tests.support.sshd import Sshd
from tests.support.wait import wait_until

FIX_FINDING = "page-cache-blocks-start"  # its fix: drop caches, restart, warm up
HOSTILE = ["x; rm -rf /", "a b", "it's", 'q"uote', "new\nline", "-rf", "$(id)", "`id`", "a|b"]
QWEN36 = PROFILES["qwen36"].served_name


# --- helpers ------------------------------------------------------------------------------------------


def fleet_of(*nodes: NodeSpec) -> FleetSpec:
    return FleetSpec(nodes=nodes)


def with_vllm(node: NodeSpec, *vllm: ServerSpec) -> NodeSpec:
    return node.model_copy(update={"vllm": vllm})


def memory(available_gib: float) -> HostMemory:
    total = 119.67 * GIB
    return HostMemory(
        mem_total=total,
        mem_available=available_gib * GIB,
        mem_free=available_gib * GIB * 0.5,
        buffers=0.1 * GIB,
        cached=100 * GIB,
        shmem=1 * GIB,
    )


def host_sample(
    *,
    processes: tuple[HostProcess, ...] = (),
    shm: tuple[ShmEntry, ...] = (),
    services: dict[str, ServiceState] | None = None,
    available_gib: float = 8.0,
) -> HostSample:
    epoch = 1_800_000_000.0
    return HostSample(
        remote_epoch=epoch,
        memory=memory(available_gib),
        pressure=None,
        pressure_problem=None,
        shm=shm,
        processes=processes,
        load=(0.1, 0.1, 0.1),
        uptime_s=86400.0,
        services=services or {},
        problems=(),
        refreshed=dict.fromkeys(("meminfo", "shm", "processes", "services"), epoch),
    )


def views_with(fleet: FleetSpec, samples: dict[str, HostSample]) -> tuple[NodeView, ...]:
    state = FleetState(fleet, readings())
    for name, sample in samples.items():
        state.apply_host(HostUpdate(name, 0.0, sample=sample))
    return state.view(1.0)


def stopped_unit(instance: str, unit: str) -> ServiceState:
    return ServiceState(instance, "systemd", unit, state="inactive", sub_state="dead", exit_status=0, restarts=0)


def running_unit(instance: str, unit: str) -> ServiceState:
    return ServiceState(
        instance, "systemd", unit, state="active", sub_state="running", restarts=0, started_epoch=1_799_992_800.0
    )


def runner_for(
    fleet: FleetSpec,
    tmp_path: Path,
    *,
    memory: MemoryReader | None = None,
    clock: Callable[[], float] = time.monotonic,
    memory_settle_s: float = 5.0,
) -> ActionRunner:
    return ActionRunner(
        fleet,
        audit=AuditLog(tmp_path / "audit.log", user="tester"),
        memory=memory,
        clock=clock,
        memory_settle_s=memory_settle_s,
    )


def calls_with(server: Sshd, needle: str) -> list[str]:
    return [line for line in server.calls() if needle in line]


async def run_plan(
    runner: ActionRunner, plan: ActionPlan | Refusal, progress: list[str] | None = None, timeout_s: float = 60.0
) -> Outcome:
    async with asyncio.timeout(timeout_s):
        result = await runner.run(plan, on_progress=None if progress is None else progress.append)
    return result.outcome


@pytest.fixture
def worker_process() -> Iterator[subprocess.Popen[bytes]]:
    """A real process whose command line is ``VLLM::Worker_TP1_EP1`` (as vLLM renames its workers)."""
    process = started_worker()
    yield process
    if process.poll() is None:
        process.kill()
    process.wait(timeout=5)


@pytest.fixture
async def demo() -> AsyncIterator[DemoFleet]:
    """One simulated Spark serving vLLM over real HTTP, its clock running at wall speed."""
    fleet = DemoFleet(
        nodes=(DemoNodeSpec("spark1", (InstanceSpec("qwen36", "qwen36", unit="vllm-qwen36.service"),), "nvidia"),),
        seed=3,
    )
    fleet.node("spark1").instances[0].engine.load_factor = 0.0  # no simulated clients: only the tests' requests
    await fleet.start()
    clock = asyncio.create_task(fleet.run_clock(tick_s=0.02))
    yield fleet
    clock.cancel()
    await asyncio.gather(clock, return_exceptions=True)
    await fleet.stop()


def demo_url(fleet: DemoFleet) -> str:
    http = fleet.node("spark1").instances[0].http
    assert http is not None
    return http.url


# --- plans (pure) -------------------------------------------------------------------------------------


def test_restart_plan_confirmation_names_node_target_exact_commands_and_timeout() -> None:
    node = NodeSpec(
        name="spark1",
        host="10.0.0.1",
        vllm=(ServerSpec(name="qwen36", url="http://10.0.0.1:8000", unit="vllm-qwen36.service"),),
    )
    fleet = fleet_of(node)
    services = {"qwen36": running_unit("qwen36", "vllm-qwen36.service")}
    serve = HostProcess(48213, 1, 2 * GIB, 1_799_992_800.0, "serve", "vllm serve Qwen/Qwen3.6")
    views = views_with(fleet, {"spark1": host_sample(processes=(serve,), services=services)})
    plan = plan_restart(fleet, "spark1", views=views)
    assert isinstance(plan, ActionPlan)
    assert plan.commands[0] == "sudo -n systemctl restart vllm-qwen36.service"
    assert [s.kind for s in plan.steps] == [StepKind.COMMAND, StepKind.WAIT_HEALTHY, StepKind.WARMUP]
    assert plan.steps[1].url == "http://10.0.0.1:8000/health"
    assert (plan.targets[0].node, plan.targets[0].what) == (
        "spark1",
        "systemd unit vllm-qwen36.service: active (running), up 2h00m; pid 48213",
    )
    text = "\n".join(plan.confirmation())
    assert text.startswith("restart spark1/qwen36?")
    assert "1. on spark1: sudo -n systemctl restart vllm-qwen36.service" in text
    assert '"max_tokens":3' in text and '"stream":true' in text
    assert f"timeout: {int(plan.timeout_s // 60)}m" in text


def test_two_node_job_plans_the_worker_first_from_either_node() -> None:
    head = NodeSpec(
        name="spark3",
        host="10.0.0.3",
        vllm=(ServerSpec(name="q", url="http://10.0.0.3:8000", container="vllm-q", role="head", job="tp2"),),
    )
    worker = NodeSpec(
        name="spark4", host="10.0.0.4", vllm=(ServerSpec(name="q", container="vllm-q", role="worker", job="tp2"),)
    )
    fleet = fleet_of(head, worker)
    for asked in ("spark3", "spark4"):
        plan = plan_restart(fleet, asked)
        assert isinstance(plan, ActionPlan), plan
        assert [(s.node, s.command) for s in plan.steps[:2]] == [
            ("spark4", "docker restart vllm-q"),
            ("spark3", "docker restart vllm-q"),
        ]
        assert plan.steps[2].kind is StepKind.WAIT_HEALTHY and plan.steps[2].node == "spark3"
        assert set(plan.nodes) == {"spark3", "spark4"}


def test_a_worker_without_its_head_is_refused_with_one_line() -> None:
    worker = NodeSpec(
        name="spark4", host="10.0.0.4", vllm=(ServerSpec(name="q", container="vllm-q", role="worker", job="tp2"),)
    )
    fleet = FleetSpec.model_construct(nodes=(worker,))  # the config itself refuses this; test this layer
    refusal = plan_restart(fleet, "spark4")
    assert isinstance(refusal, Refusal)
    assert "worker of job 'tp2', whose head is not in the config" in refusal.reason
    assert "\n" not in refusal.reason
    warm = plan_warmup(fleet, "spark4")
    assert isinstance(warm, Refusal) and "tensor-parallel worker with no HTTP" in warm.reason


def test_plans_that_make_no_sense_are_refused() -> None:
    bare = NodeSpec(name="spark1", host="10.0.0.1", vllm=(ServerSpec(name="v", url="http://10.0.0.1:8000"),))
    two = NodeSpec(
        name="spark2",
        host="10.0.0.2",
        vllm=(
            ServerSpec(name="a", url="http://10.0.0.2:8000", unit="a.service"),
            ServerSpec(name="b", url="http://10.0.0.2:8001", unit="b.service"),
        ),
    )
    no_ssh = NodeSpec(
        name="spark3",
        host="10.0.0.3",
        ssh=SshSpec(enabled=False),
        vllm=(ServerSpec(name="v", url="http://10.0.0.3:8000", unit="v.service"),),
    )
    fleet = fleet_of(bare, two, no_ssh)
    reasons = {
        "no unit": plan_restart(fleet, "spark1"),
        "several": plan_restart(fleet, "spark2"),
        "unknown instance": plan_restart(fleet, "spark2", "c"),
        "no ssh": plan_restart(fleet, "spark3"),
        "no node": plan_action("drop-caches", fleet, "spark9"),
        "unknown action": plan_action("reboot", fleet, "spark1"),
        "no process list": plan_kill_workers(fleet, "spark2", None),
    }
    assert all(isinstance(r, Refusal) for r in reasons.values()), reasons
    text = {k: r.reason for k, r in reasons.items() if isinstance(r, Refusal)}
    assert "neither a systemd unit nor a container" in text["no unit"]
    assert text["several"] == "spark2 runs 2 vLLM instances (a, b): name one"
    assert text["unknown instance"] == "no vLLM named 'c' on spark2 (it runs: a, b)"
    assert text["no ssh"] == "actions on spark3 need SSH, and ssh.enabled is false for it"
    assert text["no node"] == "no node named 'spark9' in the config (nodes: spark1, spark2, spark3)"
    assert text["unknown action"].startswith("unknown action 'reboot'")
    assert all("\n" not in r for r in text.values())
    assert isinstance(plan_restart(fleet, "spark2", "b"), ActionPlan)


def test_a_node_running_a_llamacpp_fallback_beside_one_vllm_means_the_vllm_when_none_is_named() -> None:
    """The demo's spark1: its restart key and ``bench spark1`` reach the vLLM; the fallback is named."""
    node = NodeSpec(
        name="spark1",
        host="10.0.0.1",
        vllm=(
            ServerSpec(name="qwen36", url="http://10.0.0.1:8000", unit="vllm-qwen36.service"),
            ServerSpec(name="qwen3-8b", engine="llamacpp", url="http://10.0.0.1:11434", unit="llama.service"),
        ),
    )
    fleet = fleet_of(node)
    restart = plan_restart(fleet, "spark1")
    assert isinstance(restart, ActionPlan) and restart.instance == "qwen36"
    warmup = plan_warmup(fleet, "spark1")
    assert isinstance(warmup, ActionPlan) and warmup.instance == "qwen36"
    fallback = plan_restart(fleet, "spark1", "qwen3-8b")
    assert isinstance(fallback, ActionPlan) and fallback.instance == "qwen3-8b"
    assert find_instance(fleet, "spark1")[1].name == "qwen36"
    assert find_instance(fleet, "spark1/qwen3-8b")[1].name == "qwen3-8b"


def test_kill_workers_plans_only_stale_workers() -> None:
    node = NodeSpec(name="spark1", host="10.0.0.1", vllm=(ServerSpec(name="v", url="http://h:1", unit="v.service"),))
    fleet = fleet_of(node)
    worker = HostProcess(4242, 1, GIB, 1_799_999_000.0, "worker", "VLLM::Worker_TP0", start_ticks=8_640_000)

    def plan(services: dict[str, ServiceState], processes: tuple[HostProcess, ...]) -> ActionPlan | Refusal:
        (view,) = views_with(fleet, {"spark1": host_sample(processes=processes, services=services)})
        return plan_kill_workers(fleet, "spark1", view)

    stale = plan({"v": stopped_unit("v", "v.service")}, (worker,))
    assert isinstance(stale, ActionPlan)
    # The plan carries what it saw of the process; the command checks it again on the node, from
    # integers only: PID, start ticks, and the cksum CRC and length of the command line.
    assert stale.processes == (ProcessIdentity(4242, 8_640_000, "VLLM::Worker_TP0"),)
    crc = posix_cksum(b"VLLM::Worker_TP0")
    assert stale.commands == (f"sh -c {shlex.quote(KILL_SCRIPT)} sparktui-kill 4242 8640000 {crc} 16",)
    assert stale.steps[0].needs_root and stale.steps[0].sudo == "kill -9"
    assert stale.targets[0].what == "pid 4242 (VLLM::Worker_TP0, up 16m40s, RSS 1.0 GiB)"
    unread = plan({"v": stopped_unit("v", "v.service")}, (replace(worker, start_ticks=None),))
    assert isinstance(unread, Refusal) and unread.reason == (
        "the start time of PID 4242 on spark1 was not read: the kill could not check that it is still the same process"
    )
    live = plan({"v": running_unit("v", "v.service")}, (worker,))
    assert (
        isinstance(live, Refusal) and live.reason == "systemd v.service is active on spark1: its workers are not stale"
    )
    nothing = plan({"v": stopped_unit("v", "v.service")}, ())
    assert isinstance(nothing, Refusal) and nothing.reason == "nothing to kill: no VLLM::Worker process on spark1"
    unknown = plan({}, (worker,))
    assert isinstance(unknown, Refusal) and "cannot tell stale workers from live ones" in unknown.reason


def test_drop_caches_removes_only_plain_leftover_names_while_no_vllm_runs() -> None:
    node = NodeSpec(name="spark1", host="10.0.0.1")
    fleet = fleet_of(node)
    shm = (
        ShmEntry("psm_8f2a1c", 4096, "psm"),
        ShmEntry("sem.mp-x1y2", 32, "sem"),
        ShmEntry("psm_$(reboot)", 32, "psm"),
        ShmEntry("keep-me", 32, "other"),
    )
    (view,) = views_with(fleet, {"spark1": host_sample(shm=shm)})
    plan = plan_drop_caches(fleet, "spark1", view)
    assert isinstance(plan, ActionPlan)
    assert plan.commands == (
        "sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'",
        "sudo -n rm -f -- /dev/shm/psm_8f2a1c /dev/shm/sem.mp-x1y2",
    )
    assert any("not a plain name" in note and "psm_$(reboot)" in note for note in plan.notes)
    serving = HostProcess(5000, 1, GIB, None, "serve", "vllm serve x")
    (busy,) = views_with(fleet, {"spark1": host_sample(shm=shm, processes=(serving,))})
    kept = plan_drop_caches(fleet, "spark1", busy)
    assert isinstance(kept, ActionPlan) and len(kept.commands) == 1
    assert any("in use and kept" in note for note in kept.notes)


# --- hostile names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", HOSTILE)
async def test_hostile_unit_and_container_names_are_refused_before_anything_is_sent(
    name: str, sshd: Sshd, tmp_path: Path
) -> None:
    node = sshd.node("spark1")
    for field in ("unit", "container"):
        unit, container = (name, None) if field == "unit" else (None, name)
        vllm = ServerSpec.model_construct(
            name="v", url="http://127.0.0.1:1", role="single", job=None, unit=unit, container=container
        )
        fleet = FleetSpec.model_construct(nodes=(with_vllm(node, vllm),))
        before = len(sshd.calls())
        plan = plan_restart(fleet, "spark1", settings=FAST)
        assert isinstance(plan, Refusal), plan
        assert f"refusing {field} {name!r}: not a plain {field} name" in plan.reason
        runner = runner_for(fleet, tmp_path)
        assert await run_plan(runner, plan) is Outcome.REFUSED
        assert len(sshd.calls()) == before  # nothing reached the node
    records = AuditLog(tmp_path / "audit.log").records()
    assert [r["event"] for r in records] == ["refused", "refused"]
    assert all(r["command"] == [] for r in records)


# --- the runner over SSH ------------------------------------------------------------------------------


async def test_restart_systemd_sends_the_exact_command_then_waits_for_health_and_warms_up(
    sshd: Sshd, demo: DemoFleet, tmp_path: Path
) -> None:
    unit = "vllm-act-systemd.service"
    fleet = fleet_of(with_vllm(sshd.node("spark1"), ServerSpec(name="qwen36", url=demo_url(demo), unit=unit)))
    plan = plan_restart(fleet, "spark1", settings=FAST)
    assert isinstance(plan, ActionPlan)
    runner = runner_for(fleet, tmp_path)
    progress: list[str] = []
    try:
        async with asyncio.timeout(60):
            result = await runner.run(plan, on_progress=progress.append)
    finally:
        await runner.close()
    assert result.ok, result.lines()
    assert calls_with(sshd, unit) == [f"sudo -n systemctl restart {unit}", f"systemctl restart {unit}"]
    assert [s.exit_status for s in result.steps] == [0, None, None]
    assert result.steps[1].message == "/health answered 200"
    assert result.warmup is not None and result.warmup.model == QWEN36 and result.warmup.reached
    assert result.message.startswith("restart spark1/qwen36: ok in ") and "after restart" in result.message
    assert progress[0] == "restart spark1/qwen36: started" and progress[-1] == result.message


async def test_restart_docker_sends_docker_restart_without_sudo(sshd: Sshd, demo: DemoFleet, tmp_path: Path) -> None:
    container = "vllm-act-docker"
    fleet = fleet_of(with_vllm(sshd.node("spark1"), ServerSpec(name="qwen36", url=demo_url(demo), container=container)))
    plan = plan_restart(fleet, "spark1", settings=FAST)
    assert isinstance(plan, ActionPlan)
    runner = runner_for(fleet, tmp_path)
    try:
        assert await run_plan(runner, plan) is Outcome.OK
    finally:
        await runner.close()
    assert calls_with(sshd, container) == [f"docker restart {container}"]


async def test_two_node_job_restarts_the_worker_then_the_head_after_the_worker_returned(
    sshd_factory: Callable[[str], Sshd], demo: DemoFleet, tmp_path: Path
) -> None:
    head_server, worker_server = sshd_factory("spark1"), sshd_factory("spark2")
    worker_server.sudo_sleep(0.5)  # the worker's restart takes a while: the head must wait for it
    head = with_vllm(
        head_server.node("spark1"),
        ServerSpec(name="qwen36", url=demo_url(demo), unit="vllm-head.service", role="head", job="tp2"),
    )
    worker = with_vllm(
        worker_server.node("spark2"), ServerSpec(name="qwen36", unit="vllm-worker.service", role="worker", job="tp2")
    )
    fleet = fleet_of(head, worker)
    plan = plan_restart(fleet, "spark1", settings=FAST)
    assert isinstance(plan, ActionPlan)
    runner = runner_for(fleet, tmp_path)
    try:
        assert await run_plan(runner, plan) is Outcome.OK
    finally:
        await runner.close()
    assert worker_server.calls() == [
        "sudo -n systemctl restart vllm-worker.service",
        "systemctl restart vllm-worker.service",
    ]
    assert head_server.calls() == ["sudo -n systemctl restart vllm-head.service", "systemctl restart vllm-head.service"]
    (worker_begin, _, _), (worker_end, _, _) = worker_server.sudo_log()
    (head_begin, _, _), _ = head_server.sudo_log()
    assert worker_end - worker_begin >= 0.5
    assert head_begin > worker_end  # sent only after the worker's restart had returned


async def test_drop_caches_syncs_drops_then_removes_the_leftovers_and_reports_memory(
    fresh_sshd: Sshd, tmp_path: Path
) -> None:
    node = fresh_sshd.node("spark1")
    fleet = fleet_of(node)
    for name in ("psm_8f2a1c", "sem.mp-x1y2", "keep-me"):
        (fresh_sshd.shm_dir / name).write_text("x")
    shm = (ShmEntry("psm_8f2a1c", 4096, "psm"), ShmEntry("sem.mp-x1y2", 32, "sem"), ShmEntry("keep-me", 1, "other"))
    (view,) = views_with(fleet, {"spark1": host_sample(shm=shm)})
    plan = plan_drop_caches(fleet, "spark1", view, settings=FAST)
    assert isinstance(plan, ActionPlan)
    # Before; the same again; one read on the node before the drop landed; then the fresh sample.
    samples = iter([memory(7.2), memory(7.2), memory(7.1), memory(112.4)])
    runner = runner_for(fleet, tmp_path, memory=lambda _node: next(samples), memory_settle_s=5.0)
    try:
        async with asyncio.timeout(30):
            result = await runner.run(plan)
    finally:
        await runner.close()
    assert result.ok, result.lines()
    assert fresh_sshd.calls() == [
        "sudo -n sh -c sync; echo 3 > /proc/sys/vm/drop_caches",
        "sync ",
        "sudo -n rm -f -- /dev/shm/psm_8f2a1c /dev/shm/sem.mp-x1y2",
    ]
    assert fresh_sshd.drop_caches_file.read_text() == "3\n"
    assert sorted(p.name for p in fresh_sshd.shm_dir.iterdir()) == ["keep-me"]
    assert result.freed_bytes == pytest.approx((112.4 - 7.2) * GIB)
    assert "MemAvailable 7.2 GiB → 112.4 GiB (+105.2 GiB)" in result.message


def stale_plan(server: Sshd, processes: tuple[HostProcess, ...]) -> tuple[FleetSpec, ActionPlan]:
    """kill-workers on ``server``'s node, whose unit is stopped, as planned from ``processes``."""
    unit = "vllm-stale.service"
    fleet = fleet_of(with_vllm(server.node("spark1"), ServerSpec(name="v", url="http://127.0.0.1:1", unit=unit)))
    sample = host_sample(processes=processes, services={"v": stopped_unit("v", unit)})
    (view,) = views_with(fleet, {"spark1": sample})
    plan = plan_kill_workers(fleet, "spark1", view, settings=FAST)
    assert isinstance(plan, ActionPlan), plan
    return fleet, plan


async def run_kill(fleet: FleetSpec, plan: ActionPlan, tmp_path: Path) -> ActionResult:
    runner = runner_for(fleet, tmp_path)
    try:
        async with asyncio.timeout(30):
            return await runner.run(plan)
    finally:
        await runner.close()


def started_worker(name: str = "VLLM::Worker_TP1_EP1", then: str | None = None) -> subprocess.Popen[bytes]:
    """A real process whose command line starts with ``name``, once it shows (before the exec, bash's own
    command line holds the name too): ``sleep 120``, or a bash running ``then`` (its stdin a pipe)."""
    if then is None:
        process = subprocess.Popen(["bash", "-c", f'exec -a "{name}" sleep 120'])
    else:
        process = subprocess.Popen(["bash", "-c", f'exec -a "{name}" bash -c "{then}"'], stdin=subprocess.PIPE)
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    deadline = time.monotonic() + 5
    while not cmdline.read_bytes().startswith(name.encode()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return process


def alive(process: subprocess.Popen[bytes]) -> bool:
    return process.poll() is None


async def test_kill_workers_sends_kill_for_the_stale_pids_and_they_die(
    fresh_sshd: Sshd, worker_process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    fleet, plan = stale_plan(fresh_sshd, (host_process(worker_process.pid),))
    fresh_sshd.sudo_may_kill([worker_process.pid])
    result = await run_kill(fleet, plan, tmp_path)
    assert result.outcome is Outcome.OK, result.lines()
    assert fresh_sshd.calls() == [f"sudo -n kill -9 -- {worker_process.pid}"]
    assert worker_process.wait(timeout=5) == -9
    assert result.message.endswith("; killed 1 stale worker(s)"), result.message
    assert result.steps[0].stdout_tail == f"PID {worker_process.pid} killed\n"


async def test_kill_workers_leaves_a_worker_that_exited_since_the_plan_and_the_process_started_after_it(
    fresh_sshd: Sshd, tmp_path: Path
) -> None:
    """The worker exits between the dialog and the confirmation and another process starts: nothing is
    killed, the PID is reported, and no kill is sent at all."""
    old = started_worker()
    fleet, plan = stale_plan(fresh_sshd, (host_process(old.pid),))
    old.kill()
    old.wait(timeout=5)
    new = started_worker()
    try:
        fresh_sshd.sudo_may_kill([old.pid, new.pid])
        result = await run_kill(fleet, plan, tmp_path)
        assert result.outcome is Outcome.OK, result.lines()
        said = f"PID {old.pid} exited or was replaced since the dialog opened; not killed"
        assert result.steps[0].stdout_tail == said + "\n"
        assert result.message.endswith(f"; killed 0 stale worker(s); {said}"), result.message
        assert fresh_sshd.calls() == []  # the check on the node sent no kill
        assert alive(new)
    finally:
        new.kill()
        new.wait(timeout=5)


def _uptime_ticks() -> int:
    """Clock ticks since boot now (the unit of /proc/PID/stat's start time)."""
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))


def _reuse_pid(pid: int, name: str) -> subprocess.Popen[bytes] | None:
    """A new process with ``pid`` (free again): /proc/sys/kernel/ns_last_pid makes the next fork take it.
    Needs CAP_SYS_ADMIN (root); None when it cannot be had."""
    last_pid = Path("/proc/sys/kernel/ns_last_pid")
    for _ in range(50):
        try:
            last_pid.write_text(str(pid - 1))
        except OSError:
            return None
        process = started_worker(name)
        if process.pid == pid:
            return process
        process.kill()  # another fork on the machine came first
        process.wait(timeout=5)
    return None


async def test_kill_workers_leaves_a_process_that_reuses_the_planned_pid(fresh_sshd: Sshd, tmp_path: Path) -> None:
    """The PID the dialog showed now belongs to another process, with the very same command line: its
    start time differs, and it survives the confirmation."""
    old = started_worker()
    fleet, plan = stale_plan(fresh_sshd, (host_process(old.pid),))
    old.kill()
    old.wait(timeout=5)
    ticks = plan.processes[0].start_ticks
    await wait_until(lambda: _uptime_ticks() > ticks, 5, what="a clock tick after the old process's start")
    new = _reuse_pid(old.pid, "VLLM::Worker_TP1_EP1")
    if new is None:
        pytest.skip("cannot make a new process take a given PID here (ns_last_pid needs root)")
    try:
        assert host_process(new.pid).start_ticks != plan.processes[0].start_ticks
        fresh_sshd.sudo_may_kill([new.pid])  # the sudo stub would kill it: only the check stands between
        result = await run_kill(fleet, plan, tmp_path)
        assert result.outcome is Outcome.OK, result.lines()
        assert f"PID {new.pid} exited or was replaced since the dialog opened; not killed" in result.message
        assert fresh_sshd.calls() == []  # no kill was sent, so none can land later
        assert alive(new)
    finally:
        new.kill()
        new.wait(timeout=5)


async def test_kill_workers_leaves_a_process_whose_command_line_changed_and_kills_the_unchanged_one(
    fresh_sshd: Sshd, tmp_path: Path
) -> None:
    """Same PID, same start time, another program (it exec'd): not killed; the unchanged worker beside
    it is, by one kill that names only it."""
    changing = started_worker(then="read _; exec -a other-program sleep 120")
    unchanged = started_worker()
    try:
        cmdline = Path(f"/proc/{changing.pid}/cmdline")
        seen = (host_process(changing.pid), host_process(unchanged.pid))
        fleet, plan = stale_plan(fresh_sshd, seen)
        assert changing.stdin is not None
        changing.stdin.write(b"go\n")
        changing.stdin.flush()
        await wait_until(lambda: cmdline.read_bytes().startswith(b"other-program"), 5, what="the exec")
        assert host_process(changing.pid).start_ticks == seen[0].start_ticks
        fresh_sshd.sudo_may_kill([changing.pid, unchanged.pid])
        result = await run_kill(fleet, plan, tmp_path)
        assert result.outcome is Outcome.OK, result.lines()
        assert fresh_sshd.calls() == [f"sudo -n kill -9 -- {unchanged.pid}"]
        assert unchanged.wait(timeout=5) == -9
        assert alive(changing)
        assert result.message.endswith(
            f"; killed 1 stale worker(s); PID {changing.pid} exited or was replaced since the dialog opened; not killed"
        ), result.message
    finally:
        for process in (changing, unchanged):
            process.kill()
            process.wait(timeout=5)


async def test_a_password_requiring_sudo_is_reported_clearly_and_nothing_else_runs(
    fresh_sshd: Sshd, demo: DemoFleet, tmp_path: Path
) -> None:
    unit = "vllm-pw.service"
    fleet = fleet_of(with_vllm(fresh_sshd.node("spark1"), ServerSpec(name="v", url=demo_url(demo), unit=unit)))
    fresh_sshd.sudo_needs_password()
    plan = plan_restart(fleet, "spark1", settings=FAST)
    assert isinstance(plan, ActionPlan)
    runner = runner_for(fleet, tmp_path)
    try:
        async with asyncio.timeout(30):
            result = await runner.run(plan)
    finally:
        await runner.close()
    assert result.outcome is Outcome.FAILED
    (step,) = result.steps  # no readiness wait, no warmup
    assert step.exit_status == 1 and step.stderr_tail == "sudo: a password is required\n"
    assert step.message == (
        f"sudo on spark1 needs a password for 'systemctl restart {unit}': allow it without a password "
        "(see docs/actions.md)"
    )
    assert (
        result.message
        == f"restart spark1/v: failed at step 1/3 (restart systemd unit {unit} on spark1): {step.message}"
    )
    assert fresh_sshd.calls() == [f"sudo -n systemctl restart {unit}"]  # systemctl itself never ran


async def test_read_only_runner_refuses_every_action_and_sends_nothing(sshd: Sshd, tmp_path: Path) -> None:
    fleet = fleet_of(
        with_vllm(sshd.node("spark1"), ServerSpec(name="v", url="http://127.0.0.1:1", unit="vllm-ro.service"))
    )
    (view,) = views_with(fleet, {"spark1": host_sample()})
    runner = ActionRunner(fleet, read_only=True, audit=AuditLog(tmp_path / "audit.log"))
    assert runner.read_only
    before = len(sshd.calls())
    for kind in ActionKind:
        plan = plan_action(kind, fleet, "spark1", views=(view,), settings=FAST)
        async with asyncio.timeout(10):
            result = await runner.run(plan)
        assert result.outcome is Outcome.REFUSED
        assert "read-only" in result.message and "--read-only or --kiosk" in result.message
    assert len(sshd.calls()) == before
    assert [r["result"] for r in AuditLog(tmp_path / "audit.log").records()] == ["refused"] * len(ActionKind)


async def test_one_action_at_a_time_per_node_while_another_node_proceeds(
    sshd_factory: Callable[[str], Sshd], tmp_path: Path
) -> None:
    slow, other = sshd_factory("spark1"), sshd_factory("spark2")
    slow.sudo_hold()  # spark1's drop-caches runs until released: spark2's may take as long as it takes
    fleet = fleet_of(slow.node("spark1"), other.node("spark2"))
    views = views_with(fleet, {"spark1": host_sample(), "spark2": host_sample()})
    first = plan_action("drop-caches", fleet, "spark1", views=views, settings=FAST)
    second = plan_action("drop-caches", fleet, "spark1", views=views, settings=FAST)
    elsewhere = plan_action("drop-caches", fleet, "spark2", views=views, settings=FAST)
    assert isinstance(first, ActionPlan) and isinstance(second, ActionPlan) and isinstance(elsewhere, ActionPlan)
    runner = runner_for(fleet, tmp_path)
    try:
        async with asyncio.timeout(30):
            running = asyncio.create_task(runner.run(first))
            await wait_until(lambda: runner.busy("spark1") is not None, 10.0, what="spark1 busy with the first action")
            assert runner.busy("spark1") == "drop-caches spark1"
            refused = await runner.run(second)
            assert refused.outcome is Outcome.REFUSED
            assert refused.message == (
                "drop-caches spark1: refused: spark1 is busy: drop-caches spark1 is running; one action at a time "
                "per node, wait for it to finish (not queued)"
            )
            proceeded = await runner.run(elsewhere)
            assert proceeded.ok and not running.done()  # spark2 ran while spark1 was still busy
            slow.sudo_hold(False)
            assert (await running).ok
    finally:
        slow.sudo_hold(False)
        await runner.close()
    assert runner.busy("spark1") is None
    assert len(calls_with(slow, "drop_caches")) == 1  # the refused one sent nothing


async def test_a_hanging_command_times_out_and_releases_the_node(fresh_sshd: Sshd, tmp_path: Path) -> None:
    fleet = fleet_of(fresh_sshd.node("spark1"))
    (view,) = views_with(fleet, {"spark1": host_sample()})
    fresh_sshd.sudo_sleep(30)
    plan = plan_drop_caches(fleet, "spark1", view, settings=replace(FAST, command_timeout_s=1.0))
    assert isinstance(plan, ActionPlan)
    runner = runner_for(fleet, tmp_path)
    try:
        started = time.monotonic()
        async with asyncio.timeout(20):
            result = await runner.run(plan)
        assert time.monotonic() - started < 10
        assert result.outcome is Outcome.FAILED
        (step,) = result.steps
        assert step.timed_out
        assert step.message == (
            "timed out: `sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'` on spark1 did not finish within 1 s"
        )
        assert runner.busy("spark1") is None
        # The overall timeout ends a plan whose steps would take longer, and frees the node too.
        overall = replace(plan, steps=(replace(plan.steps[0], timeout_s=20.0),), timeout_s=1.0)
        async with asyncio.timeout(20):
            cut = await runner.run(overall)
        assert cut.outcome is Outcome.FAILED and "did not finish within 1 s overall" in cut.message
        assert cut.steps[0].timed_out and runner.busy("spark1") is None
        fresh_sshd.sudo_sleep(None)
        async with asyncio.timeout(20):
            assert (await runner.run(plan)).ok  # the node takes actions again
    finally:
        await runner.close()


async def test_warmup_streams_tiny_completions_and_measures_ttft(demo: DemoFleet, tmp_path: Path) -> None:
    url = demo_url(demo)
    node = NodeSpec(name="spark1", host="127.0.0.1", ssh=SshSpec(enabled=False), vllm=(ServerSpec(name="q", url=url),))
    fleet = fleet_of(node)
    instance = demo.node("spark1").instances[0]
    count = instance.exposition.registry.get_sample_value(
        "vllm:time_to_first_token_seconds_count", {"engine": "0", "model_name": QWEN36}
    )
    plan = plan_warmup(fleet, "spark1", settings=replace(FAST, warmup_ttft_target_s=0.000001, warmup_max_requests=2))
    assert isinstance(plan, ActionPlan)
    (step,) = plan.steps
    assert step.command == (
        f'POST {url}/v1/chat/completions {{"model":"<first id of /v1/models>","messages":[{{"role":"user",'
        '"content":"Hi"}],"max_tokens":3,"stream":true}'
    )
    runner = runner_for(fleet, tmp_path)
    async with asyncio.timeout(60):
        result = await runner.run(plan)
    assert result.ok, result.lines()
    warmup = result.warmup
    assert warmup is not None and warmup.model == QWEN36
    assert len(warmup.ttfts_s) == 2 and all(0 < t < 10 for t in warmup.ttfts_s)  # the limit ended it
    assert not warmup.reached and "not under" in result.message
    after = instance.exposition.registry.get_sample_value(
        "vllm:time_to_first_token_seconds_count", {"engine": "0", "model_name": QWEN36}
    )
    assert count is not None and after == count + 2  # the engine served both requests


async def test_restart_on_the_demo_fleet_waits_for_readiness_and_warms_the_cold_jit(tmp_path: Path) -> None:
    """Through the demo's own SSH server: the restart really restarts the simulated unit; the readiness
    check waits out the model load and the warmup the cold JIT (timed on the simulation's clock)."""
    async with fast_demo(seed=11) as fleet:
        runner: ActionRunner | None = None
        try:
            spec = parse_config(fleet.config_toml(), source="demo.toml")
            monitor, _now = await collect(spec, polls=2, interval_s=0.3)
            plan = plan_restart(spec, "spark1", views=monitor.views, settings=FAST)
            assert isinstance(plan, ActionPlan), plan
            assert plan.steps[2].warmup is not None and plan.steps[2].warmup.model == QWEN36
            # Its clients have failed over (as in the incident): the warmup's request is the first after the start.
            fleet.node("spark1").instances[0].engine.load_factor = 0.0
            runner = runner_for(spec, tmp_path, clock=lambda: fleet.now)
            async with asyncio.timeout(60):
                result = await runner.run(plan)
            assert result.ok, result.lines()
            demo_ssh = fleet.node("spark1").ssh
            assert demo_ssh is not None and "sudo -n systemctl restart vllm-qwen36.service" in demo_ssh.commands
            assert result.steps[1].duration_s >= 40.0  # the model load (48 s simulated on this Spark)
            warmup = result.warmup
            assert warmup is not None and warmup.first_s is not None and warmup.last_s is not None
            assert warmup.first_s > 20.0  # the cold JIT
            assert warmup.last_s < FAST.warmup_ttft_target_s and warmup.reached
            assert result.ttft_before_s is not None
            assert f"TTFT before {fmt_seconds(result.ttft_before_s)}, after restart {fmt_seconds(warmup.first_s)}" in (
                result.message
            )
        finally:
            if runner is not None:
                await runner.close()


def local_stubs(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The SSH sessions' stubs on this process's PATH (sudo, sync: tests/stubs), for a local node's
    commands, their state in a folder of the test's own (returned)."""
    state = tmp_path / "state"
    for sub in ("shm", "sudo"):
        (state / sub).mkdir(parents=True)
    (state / "calls.log").write_text("")
    monkeypatch.setenv("PATH", f"{sshd.stub_dir}:/usr/bin:/bin")
    monkeypatch.setenv("SPARKTUI_STUB_STATE", str(state))
    return state


async def test_local_node_runs_the_commands_here_without_ssh(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = local_stubs(sshd, tmp_path, monkeypatch)
    fleet = fleet_of(NodeSpec(name="here", host="127.0.0.1", local=True))
    plan = plan_drop_caches(fleet, "here", None, settings=FAST)
    assert isinstance(plan, ActionPlan)
    runner = runner_for(fleet, tmp_path, memory=lambda _node: None, memory_settle_s=0.1)
    async with asyncio.timeout(20):
        result = await runner.run(plan)
    assert result.ok, result.lines()
    assert (state / "calls.log").read_text().splitlines()[0] == "sudo -n sh -c sync; echo 3 > /proc/sys/vm/drop_caches"
    assert (state / "drop_caches").read_text() == "3\n"
    assert "MemAvailable before/after unknown" in result.message


async def test_the_controller_holds_the_cores_wedge_detectors_while_an_action_runs_and_as_it_settles(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard's controller tells its core what an action touches: held from the start of the
    run, released ``ACTION_SETTLE_S`` after its end on the core's clock."""
    local_stubs(sshd, tmp_path, monkeypatch)
    fleet = fleet_of(NodeSpec(name="here", host="127.0.0.1", local=True))
    core = Monitor(fleet, catalogue_for(fleet.diagnosis))
    now = [100.0]
    runner = runner_for(fleet, tmp_path, memory=lambda _node: None, memory_settle_s=0.1)
    controller = ActionController(runner, core=core, clock=lambda: now[0])
    held_before: list[bool] = []
    held_during: list[bool] = []

    async def plan(spec: ActionSpec, node: str) -> ActionPlan | Refusal:
        return plan_drop_caches(fleet, node, None, settings=FAST)

    async def confirm(_planned: object) -> bool:
        held_before.append(core.diagnosis.held("here", "any", now[0]))
        return True

    def progress(_message: str) -> None:
        held_during.append(core.diagnosis.held("here", "any", now[0]))

    spec = action_spec("drop-caches")
    assert spec is not None
    async with asyncio.timeout(20):
        result = await controller.request(spec, "here", plan=plan, confirm=confirm, progress=progress)
    assert result.ok, result.lines()
    assert held_before == [False] and held_during and all(held_during)
    assert core.diagnosis.held("here", "any", 100.0 + ACTION_SETTLE_S - 1.0)
    assert not core.diagnosis.held("here", "any", 100.0 + ACTION_SETTLE_S)


async def test_a_local_commands_output_is_kept_to_its_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    """A local node's command that prints without end does not fill memory: each stream keeps its last
    MAX_COMMAND_OUTPUT characters, as over SSH, and a character split between two reads stays whole."""
    from sparktui.actions import runner as runner_module

    monkeypatch.setattr(runner_module, "MAX_COMMAND_OUTPUT", 1000)
    command = (
        "python3 -c \"import sys; sys.stdout.write('é' * 200_000 + 'END'); "
        "sys.stderr.write('x' * 5000 + '\\x1b]0;pwned\\x07')\""
    )
    ran = await runner_module._run_local(command, timeout_s=30)
    assert ran.exit_status == 0
    assert ran.stdout.startswith("[199,003 characters of output dropped; the last 1,000 follow]\n")
    assert ran.stdout.endswith("é" * 997 + "END") and "\ufffd" not in ran.stdout
    assert "x" * 900 in ran.stderr and len(ran.stderr) < 1100
    assert "\x1b" not in ran.stderr  # an escape sequence is removed, as from an SSH command


async def test_audit_log_lines_name_time_user_node_target_command_status_duration_result(
    fresh_sshd: Sshd, tmp_path: Path
) -> None:
    fleet = fleet_of(fresh_sshd.node("spark1"))
    (view,) = views_with(fleet, {"spark1": host_sample(shm=(ShmEntry("psm_1", 10, "psm"),))})
    (fresh_sshd.shm_dir / "psm_1").write_text("x")
    plan = plan_drop_caches(fleet, "spark1", view, settings=FAST)
    assert isinstance(plan, ActionPlan)
    audit = AuditLog(tmp_path / "state" / "audit.log", user="milo")
    runner = ActionRunner(fleet, audit=audit)
    try:
        async with asyncio.timeout(30):
            result = await runner.run(plan)
    finally:
        await runner.close()
    assert result.ok
    lines = (tmp_path / "state" / "audit.log").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["event"] for r in records] == ["started", "step", "step", "action"]
    opened, first, second, done = records
    assert (opened["user"], opened["node"], opened["action"]) == ("milo", "spark1", "drop-caches")
    assert opened["command"] == list(plan.commands) and opened["time"].endswith("+00:00")
    assert opened["action_id"] == first["action_id"]
    assert {"time", "user", "node", "target", "command", "exit_status", "duration_s", "result"} <= set(first)
    assert (first["user"], first["node"], first["exit_status"], first["result"]) == ("milo", "spark1", 0, "ok")
    assert first["command"] == "sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'"
    assert second["command"] == "sudo -n rm -f -- /dev/shm/psm_1"
    assert first["target"][0].startswith("the page cache: MemAvailable ")
    assert isinstance(first["duration_s"], float) and first["time"].endswith("+00:00")
    assert first["action_id"] == second["action_id"] == done["action_id"]
    assert (done["result"], done["command"]) == ("ok", list(plan.commands))
    assert (tmp_path / "state" / "audit.log").stat().st_mode & 0o777 == 0o600


async def test_an_unwritable_audit_log_refuses_the_action(fresh_sshd: Sshd, tmp_path: Path) -> None:
    fleet = fleet_of(fresh_sshd.node("spark1"))
    plan = plan_drop_caches(fleet, "spark1", None, settings=FAST)
    assert isinstance(plan, ActionPlan)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    runner = ActionRunner(fleet, audit=AuditLog(blocker / "audit.log"))
    result = await runner.run(plan)
    assert result.outcome is Outcome.REFUSED
    assert result.message == (
        f"drop-caches spark1: refused: cannot write the audit log {blocker}/audit.log: {blocker} is a file, "
        f"not a folder; fix that or set {AUDIT_ENV} to a writable file"
    )
    assert fresh_sshd.calls() == []


# --- sparktui action ----------------------------------------------------------------------------------


@pytest.fixture
def vllm_server() -> Iterator[FixtureServer]:
    server = FixtureServer(Endpoint(name="act-vllm")).start()
    yield server
    server.stop()


def test_cli_without_yes_and_without_a_terminal_prints_the_plan_and_refuses(
    sshd: Sshd,
    vllm_server: FixtureServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    unit = "vllm-cli-noyes.service"
    config = tmp_path / "config.toml"
    config.write_text(config_for(sshd, vllm_server.url, unit))
    monkeypatch.setenv(AUDIT_ENV, str(tmp_path / "audit.log"))
    code = main(["--config", str(config), "action", "spark1", "restart"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "restart spark1/qwen36?" in out
    assert f"1. on spark1: sudo -n systemctl restart {unit}" in out
    assert (
        err.strip()
        == "sparktui action: not run: no terminal to confirm on; pass --yes to run it without a confirmation"
    )
    assert calls_with(sshd, f"restart {unit}") == []


def test_cli_read_only_refuses_and_audits(
    fresh_sshd: Sshd,
    vllm_server: FixtureServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A server of its own: on the shared one, a command an earlier test's host sampler had sent was
    # seen to land during this test under load (an nvidia-smi call), though this one sent nothing.
    config = tmp_path / "config.toml"
    config.write_text(config_for(fresh_sshd, vllm_server.url, "vllm-cli-ro.service"))
    monkeypatch.setenv(AUDIT_ENV, str(tmp_path / "audit.log"))
    code = main(["--config", str(config), "--read-only", "action", "spark1", "drop-caches", "--yes"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.strip() == (
        "sparktui action: drop-caches spark1: refused: read-only: drop-caches refused "
        "(sparktui runs with --read-only or --kiosk)"
    )
    assert fresh_sshd.calls() == []  # refused before anything was collected or sent
    assert [r["event"] for r in AuditLog(tmp_path / "audit.log").records()] == ["refused"]


def test_cli_with_yes_drops_caches_reports_memory_and_audits(
    fresh_sshd: Sshd,
    vllm_server: FixtureServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(config_for(fresh_sshd, vllm_server.url, "vllm-cli-drop.service"))
    monkeypatch.setenv(AUDIT_ENV, str(tmp_path / "audit.log"))
    code = main(["--config", str(config), "action", "spark1", "drop-caches", "--yes"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "1. on spark1: sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'" in out
    assert "drop-caches spark1: ok in " in out and "MemAvailable " in out and "unknown" not in out
    # The drop, run through sudo (the stub then runs the sync). The sampler reads this machine's real
    # /dev/shm: leftovers of a vLLM killed earlier would add their removal as a further step.
    calls = fresh_sshd.calls()
    drop = calls.index("sudo -n sh -c sync; echo 3 > /proc/sys/vm/drop_caches")
    assert calls[drop + 1] == "sync "
    records = AuditLog(tmp_path / "audit.log").records()
    assert [r["event"] for r in records][:2] == ["started", "step"]
    assert (records[-1]["event"], records[-1]["result"]) == ("action", "ok")
    assert all(r["result"] == "ok" for r in records[1:])


def test_cli_kills_a_real_stale_worker_found_by_the_host_sampler(  # noqa: PLR0917 - fixtures
    fresh_sshd: Sshd,
    vllm_server: FixtureServer,
    worker_process: subprocess.Popen[bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    unit = "vllm-cli-kill.service"
    fresh_sshd.set_unit(unit, {"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead"})
    fresh_sshd.sudo_may_kill([worker_process.pid])
    config = tmp_path / "config.toml"
    config.write_text(config_for(fresh_sshd, vllm_server.url, unit))
    monkeypatch.setenv(AUDIT_ENV, str(tmp_path / "audit.log"))
    code = main(["--config", str(config), "action", "spark1", "kill-workers", "--yes"])
    out, err = capsys.readouterr()
    kills = [c for c in fresh_sshd.calls() if c.startswith("sudo -n kill")]
    assert len(kills) == 1 and str(worker_process.pid) in kills[0].split(), out + err
    assert f"pid {worker_process.pid} (VLLM::Worker_TP1_EP1" in out
    if code == 0:
        assert worker_process.wait(timeout=5) == -9
    else:  # another VLLM::Worker on this machine was in the list, and the sudo stub refused it
        assert "Operation not permitted" in out


def test_cli_on_a_terminal_asks_and_a_no_sends_nothing(
    sshd: Sshd, vllm_server: FixtureServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unit = "vllm-cli-ask.service"
    fleet = parse_config(config_for(sshd, vllm_server.url, unit), source="ask.toml")
    asked: list[str] = []

    def answer(prompt: str) -> str:
        asked.append(prompt)
        return "n"

    audit = AuditLog(tmp_path / "audit.log")
    code = actions_main(fleet, "spark1", "restart", interactive=True, ask=answer, audit=audit)
    out, err = capsys.readouterr()
    assert code == 2 and asked == ["run it? [y/N] "]
    assert f"1. on spark1: sudo -n systemctl restart {unit}" in out
    assert err.strip() == "sparktui action: not run (not confirmed)"
    assert calls_with(sshd, f"restart {unit}") == []


def test_cli_fix_confirms_every_step_with_yes_and_stops_at_the_failing_one(
    fresh_sshd: Sshd,
    vllm_server: FixtureServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    unit = "vllm-cli-fix.service"
    config = tmp_path / "config.toml"
    config.write_text(config_for(fresh_sshd, vllm_server.url, unit))
    monkeypatch.setenv(AUDIT_ENV, str(tmp_path / "audit.log"))
    code = main(["--config", str(config), "action", "spark1", "fix"])  # one poll of a healthy node finds nothing
    out, err = capsys.readouterr()
    assert code == 2
    assert "no open finding on spark1 has a fix" in err and "name the finding with --finding ID" in err

    code = main(["--config", str(config), "action", "spark1", "fix", "--finding", FIX_FINDING])
    out, err = capsys.readouterr()
    assert code == 2 and "not run: no terminal to confirm on" in err  # no terminal, no --yes: plan only
    assert f"fix spark1: {FIX_FINDING}?" in out and "step 3/3: warmup spark1/qwen36" in out
    assert not [c for c in fresh_sshd.calls() if "drop_caches" in c or "systemctl restart" in c]

    code = main(["--config", str(config), "action", "spark1", "fix", "--finding", FIX_FINDING, "--yes"])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    for number, name in enumerate(("drop-caches spark1", "restart spark1/qwen36", "warmup spark1/qwen36"), 1):
        assert f"step {number}/3: {name}" in out
    calls = fresh_sshd.calls()
    assert calls.index("sudo -n sh -c sync; echo 3 > /proc/sys/vm/drop_caches") < calls.index(
        f"sudo -n systemctl restart {unit}"
    )
    # The fixture server answers no chat completion: the warm-up, the last step, fails and says why.
    assert f"fix spark1: {FIX_FINDING}: stopped at step 3/3: warmup spark1/qwen36: failed at step 1/1" in out
    records = AuditLog(tmp_path / "audit.log").records()
    assert records[-1]["event"] == "fix" and records[-1]["result"] == "failed"
