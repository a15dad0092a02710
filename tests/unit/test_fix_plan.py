"""A finding's fix as one plan of plans (drop caches → restart → warm up), planned up front and refused
as a whole; the warnings of the restart and kill-workers confirmations; the catalogue's ``fix_steps``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sparktui.actions.audit import AuditLog
from sparktui.actions.plans import (
    ActionPlan,
    FixPlan,
    Refusal,
    StepKind,
    finding_fix,
    plan_finding_fix,
    plan_fix,
    plan_kill_workers,
    plan_restart,
)
from sparktui.actions.registry import ActionKind
from sparktui.actions.runner import ActionRunner, Outcome
from sparktui.config import load_catalogue
from sparktui.diagnosis.catalogue import CatalogueError, Severity, parse_catalogue
from sparktui.diagnosis.engine import Finding
from sparktui.engines import readings
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.host import HostProcess, HostSample, ServiceState
from sparktui.model.memory import GIB, HostMemory
from sparktui.model.observations import HostUpdate
from sparktui.model.specs import FleetSpec, NodeSpec, ServerSpec
from sparktui.model.status import State, Status

CATALOGUE = load_catalogue()
UNIT = "vllm-qwen36.service"
PAGE_CACHE = ("drop-caches", "restart", "warmup")
EPOCH = 1_800_000_000.0


def spark1(**vllm: object) -> NodeSpec:
    settings: dict[str, object] = {"name": "qwen36", "url": "http://10.0.0.1:8000", "unit": UNIT, **vllm}
    return NodeSpec(name="spark1", host="10.0.0.1", vllm=(ServerSpec.model_validate(settings),))


def sample(service: ServiceState, processes: tuple[HostProcess, ...] = ()) -> HostSample:
    memory = HostMemory(
        mem_total=119.67 * GIB, mem_available=7 * GIB, mem_free=3 * GIB, buffers=0.1 * GIB, cached=100 * GIB, shmem=GIB
    )
    return HostSample(
        remote_epoch=EPOCH,
        memory=memory,
        pressure=None,
        pressure_problem=None,
        shm=(),
        processes=processes,
        load=(0.1, 0.1, 0.1),
        uptime_s=86400.0,
        services={service.instance: service},
        problems=(),
        refreshed=dict.fromkeys(("meminfo", "shm", "processes", "services"), EPOCH),
    )


def unit(state: str, sub_state: str) -> ServiceState:
    return ServiceState("qwen36", "systemd", UNIT, state=state, sub_state=sub_state, restarts=0)


def view_of(
    fleet: FleetSpec,
    service: ServiceState,
    *,
    status: State = State.UP,
    running: float | None = None,
    waiting: float | None = None,
    processes: tuple[HostProcess, ...] = (),
) -> NodeView:
    """spark1's view with its unit in ``service`` and its instance as its last poll saw it."""
    state = FleetState(fleet, readings())
    state.apply_host(HostUpdate("spark1", 0.0, sample=sample(service, processes)))
    (view,) = state.view(1.0)
    instance = replace(view.instances[0], status=Status(status), running=running, waiting=waiting)
    return replace(view, instances=(instance,))


def finding(rule_id: str, severity: Severity, *, node: str = "spark1", cleared: bool = False) -> Finding:
    rule = CATALOGUE.rule(rule_id)
    return Finding(
        id=rule_id,
        node=node,
        instance=None,
        severity=severity,
        title=rule.title,
        evidence=(),
        explanation=rule.explanation,
        fix=rule.fix,
        action=rule.action,
        opened_at=1.0,
        last_seen=1.0,
        cleared_at=2.0 if cleared else None,
    )


# --- the catalogue ------------------------------------------------------------------------------------


def test_the_page_cache_finding_is_fixed_by_drop_caches_restart_and_warmup() -> None:
    rule = CATALOGUE.rule("page-cache-blocks-start")
    assert rule.fix_actions == PAGE_CACHE
    assert CATALOGUE.rule("engine-dead").fix_actions == ("restart",)  # one action: its own key
    assert CATALOGUE.rule("oom-during-load").fix_actions == ()


RULE = """
format = 1
[log]
attempt_start = 'Starting'
error = 'Error'
[defaults.log]
quiet_s = 10.0
healthy_s = 10.0
[defaults.detector]
open_after = 1.0
clear_after_s = 10.0
[[rule]]
id = "r"
section = "s"
severity = "warn"
title = "t"
where = ["log"]
looks_at = "l"
explanation = "e"
fix = "f"
action = "drop-caches"
{steps}
[rule.log]
any = ['x']
"""


@pytest.mark.parametrize(
    ("steps", "says"),
    [
        ('fix_steps = ["drop-caches", "reboot"]', "'fix_steps' may list"),
        ('fix_steps = ["drop-caches"]', "two or more different actions"),
        ('fix_steps = ["drop-caches", "restart", "restart"]', "two or more different actions"),
        ('fix_steps = ["restart", "drop-caches"]', "must start with the rule's 'action'"),
        ('fix_steps = "drop-caches"', "'fix_steps' must be a list of strings"),
    ],
)
def test_fix_steps_are_validated_against_the_known_actions(steps: str, says: str) -> None:
    with pytest.raises(CatalogueError, match=says):
        parse_catalogue(RULE.format(steps=steps))
    good = parse_catalogue(RULE.format(steps='fix_steps = ["drop-caches", "restart"]'))
    assert good.rule("r").fix_actions == ("drop-caches", "restart")


# --- the plan of plans --------------------------------------------------------------------------------


def test_a_fix_plans_every_action_in_order_with_one_warmup_and_lists_every_command() -> None:
    fleet = FleetSpec(nodes=(spark1(),))
    view = view_of(fleet, unit("inactive", "dead"), status=State.DOWN)
    plan = plan_fix(fleet, "spark1", PAGE_CACHE, finding="page-cache-blocks-start", views=(view,))
    assert isinstance(plan, FixPlan), plan
    assert plan.actions == (ActionKind.DROP_CACHES, ActionKind.RESTART, ActionKind.WARMUP)
    assert plan.sequence == "drop caches → restart → warm up"
    kinds = [step.kind for sub in plan.plans for step in sub.steps]
    assert kinds == [StepKind.COMMAND, StepKind.COMMAND, StepKind.WAIT_HEALTHY, StepKind.WARMUP]  # warmed once
    assert plan.commands[:3] == (
        "sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'",
        f"sudo -n systemctl restart {UNIT}",
        "GET http://10.0.0.1:8000/health until 200 (every 1 s)",
    )
    assert plan.commands[3].startswith("POST http://10.0.0.1:8000/v1/chat/completions ")
    assert plan.timeout_s == sum(sub.timeout_s for sub in plan.plans)
    text = "\n".join(plan.confirmation())
    assert text.startswith("fix spark1: page-cache-blocks-start?")
    for number, sub in enumerate(plan.plans, 1):
        assert f"step {number}/3: {sub.title}" in text
    for command in plan.commands:
        assert command in text
    assert text.index("drop_caches") < text.index("systemctl restart") < text.index("/v1/chat/completions")


def test_one_refused_step_refuses_the_whole_fix() -> None:
    fleet = FleetSpec(nodes=(spark1(unit=None),))  # no unit or container: the restart cannot be planned
    view = view_of(fleet, unit("inactive", "dead"), status=State.DOWN)
    refusal = plan_fix(fleet, "spark1", PAGE_CACHE, finding="page-cache-blocks-start", views=(view,))
    assert isinstance(refusal, Refusal)
    assert refusal.kind is ActionKind.FIX
    assert refusal.reason.startswith("step 2/3 (restart) is refused, so nothing runs: ")
    no_ssh = FleetSpec(nodes=(spark1().model_copy(update={"ssh": spark1().ssh.model_copy(update={"enabled": False})}),))
    first = plan_fix(no_ssh, "spark1", PAGE_CACHE, finding="page-cache-blocks-start")
    assert isinstance(first, Refusal) and first.reason.startswith("step 1/3 (drop-caches) is refused")


def test_the_fix_key_takes_the_worst_open_finding_of_the_node_that_has_a_fix() -> None:
    fleet = FleetSpec(nodes=(spark1(),))
    view = view_of(fleet, unit("inactive", "dead"), status=State.DOWN)
    findings = [
        finding("cold-jit", Severity.INFO),
        finding("oom-during-load", Severity.CRIT),  # worse, but no fix sparktui can apply
        finding("engine-dead", Severity.CRIT, cleared=True),  # cleared
        finding("engine-dead", Severity.CRIT, node="spark2"),  # another node
        finding("page-cache-blocks-start", Severity.CRIT),
    ]
    plan = plan_finding_fix(fleet, "spark1", findings, CATALOGUE, views=(view,))
    assert isinstance(plan, FixPlan) and plan.finding == "page-cache-blocks-start"
    assert finding_fix(findings[0], CATALOGUE) == ("warmup",)
    only_info = plan_finding_fix(fleet, "spark1", findings[:1], CATALOGUE, views=(view,))
    assert isinstance(only_info, FixPlan) and only_info.actions == (ActionKind.WARMUP,)
    none = plan_finding_fix(fleet, "spark1", findings[1:4], CATALOGUE, views=(view,))
    assert isinstance(none, Refusal) and none.reason == "no open finding on spark1 has a fix that sparktui can apply"


async def test_a_read_only_runner_refuses_a_fix_and_audits_it(tmp_path: Path) -> None:
    fleet = FleetSpec(nodes=(spark1(),))
    plan = plan_fix(fleet, "spark1", PAGE_CACHE, finding="page-cache-blocks-start")
    assert isinstance(plan, FixPlan)
    audit = AuditLog(tmp_path / "audit.log", user="tester")
    result = await ActionRunner(fleet, read_only=True, audit=audit).run(plan)
    assert result.outcome is Outcome.REFUSED and "read-only: fix refused" in result.message
    (record,) = audit.records()
    assert (record["event"], record["action"], record["command"]) == ("refused", "fix", list(plan.commands))


# --- warnings -----------------------------------------------------------------------------------------


def test_restart_warns_of_the_requests_it_cuts_off_and_of_a_load_under_way() -> None:
    fleet = FleetSpec(nodes=(spark1(),))
    busy = view_of(fleet, unit("active", "running"), running=8, waiting=3)
    plan = plan_restart(fleet, "spark1", views=(busy,))
    assert isinstance(plan, ActionPlan)
    assert plan.warnings == ("spark1/qwen36: 8 requests running, 3 waiting will be cut off",)
    assert "  warning: spark1/qwen36: 8 requests running, 3 waiting will be cut off" in plan.confirmation()
    starting = f"the unit {UNIT} on spark1 is still starting: a restart begins the load again"
    activating = view_of(fleet, unit("activating", "start"), status=State.LOADING, running=0, waiting=0)
    loading = view_of(fleet, unit("active", "running"), status=State.LOADING)  # the unit runs, vLLM loads
    for busy_loading in (activating, loading):
        plan = plan_restart(fleet, "spark1", views=(busy_loading,))
        assert isinstance(plan, ActionPlan)
        assert plan.warnings == (starting,), busy_loading.instances[0]
    idle = view_of(fleet, unit("active", "running"), running=0, waiting=0)
    lost = view_of(fleet, unit("failed", "failed"), status=State.DOWN, running=8, waiting=3)  # already cut off
    between = view_of(fleet, unit("activating", "auto-restart"), status=State.LOADING)  # a crash loop's wait
    for quiet in (idle, lost, between):
        plan = plan_restart(fleet, "spark1", views=(quiet,))
        assert isinstance(plan, ActionPlan) and plan.warnings == (), quiet.instances[0]


def test_a_fix_warns_once_of_what_its_restart_cuts_off() -> None:
    fleet = FleetSpec(nodes=(spark1(),))
    busy = view_of(fleet, unit("active", "running"), running=1, waiting=0)
    plan = plan_fix(fleet, "spark1", PAGE_CACHE, finding="page-cache-blocks-start", views=(busy,))
    assert isinstance(plan, FixPlan)
    assert plan.warnings == ("spark1/qwen36: 1 request running will be cut off",)
    assert sum("will be cut off" in line for line in plan.confirmation()) == 1


def test_kill_workers_warns_of_requests_the_instance_still_counts() -> None:
    fleet = FleetSpec(nodes=(spark1(),))
    worker = HostProcess(4242, 1, 2 * GIB, EPOCH - 60, "worker", "VLLM::Worker_TP0", start_ticks=123_456)
    stuck = view_of(fleet, unit("inactive", "dead"), status=State.DEGRADED, waiting=2, processes=(worker,))
    plan = plan_kill_workers(fleet, "spark1", stuck)
    assert isinstance(plan, ActionPlan), plan
    assert plan.warnings == ("spark1/qwen36: 2 requests waiting will be cut off",)
