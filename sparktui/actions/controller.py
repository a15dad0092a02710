"""The one way an action runs, whoever asks: plan → refuse → confirm → run → audit.

The dashboard's keys and palette, ``sparktui action`` and the dashboard's bench all call
``ActionController.request``; what differs between them is given to it: how the state is had to plan
on (the dashboard's, or one collected poll), how the operator confirms (a dialog, a terminal prompt,
``--yes``) and where the progress goes. The table (``sparktui.actions.registry``) says how each
action is planned and which modes refuse it; the runner runs it and writes its ``started`` record
before anything is sent. Every refusal, wherever it is decided, is one line in the audit log.

A controller given the monitor core (``core``: the dashboard's) tells it what each step touches while
it runs and when it ended (``Monitor.action_started`` / ``action_ended``): an action's own restart
and warmup are no wedge. A one-shot ``sparktui action`` has no core that outlives it, and passes none.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from sparktui.actions.plans import (
    DEFAULT_SETTINGS,
    ActionPlan,
    ActionSettings,
    BenchPlan,
    FixPlan,
    Refusal,
    plan_action,
    plan_bench,
    plan_finding_fix,
)
from sparktui.actions.registry import ActionSpec, Mode, PlannedBy
from sparktui.actions.runner import ActionResult, ActionRunner, BenchWork, Outcome, ProgressCallback
from sparktui.diagnosis.catalogue import Catalogue
from sparktui.diagnosis.engine import Finding
from sparktui.model.fleet import NodeView
from sparktui.model.specs import FleetSpec
from sparktui.monitor.core import Monitor

Plan = ActionPlan | FixPlan | BenchPlan
Planner = Callable[[ActionSpec, str], Awaitable[Plan | Refusal]]
Confirm = Callable[[Plan], Awaitable[bool]]
RunBench = Callable[[BenchPlan], BenchWork]  # how the entry point runs and shows a bench
Refused = Callable[[str, str], None]  # (where, the one line): the entry point says it (or not: the kiosk)
BeforeRun = Callable[[Plan], None]  # confirmed, about to run
# It ran (or the runner refused it at the last moment); None: it was cancelled (sparktui stopping).
AfterRun = Callable[[Plan, ActionResult | None], None]

NOT_CONFIRMED = "not run (not confirmed)"


@dataclass(frozen=True, slots=True)
class Shown:
    """The state an action is planned on: what the dashboard shows, or one collected poll."""

    fleet: FleetSpec
    views: Iterable[NodeView] = ()
    findings: Mapping[str, Iterable[Finding]] | None = None
    catalogue: Catalogue | None = None
    settings: ActionSettings = DEFAULT_SETTINGS


def plan_for(spec: ActionSpec, node: str, shown: Shown, *, instance: str | None = None) -> Plan | Refusal:
    """The plan of ``spec`` on ``node``, made as the table says (``PlannedBy``)."""
    if spec.planned_by is PlannedBy.BENCH:
        return plan_bench(shown.fleet, node)
    views = tuple(shown.views)
    if spec.planned_by is PlannedBy.FIX:
        if shown.catalogue is None:
            return Refusal(spec.id, node, "a fix needs the diagnosis of the node")
        findings = (shown.findings or {}).get(node, ())
        return plan_finding_fix(shown.fleet, node, findings, shown.catalogue, views=views, settings=shown.settings)
    return plan_action(spec.id, shown.fleet, node, instance=instance, views=views, settings=shown.settings)


class ActionController:
    """Takes an action from the table to its audited end. A runner made read-only (``sparktui
    --read-only action``) refuses every action, before anything is planned or collected."""

    def __init__(
        self,
        runner: ActionRunner,
        *,
        core: Monitor | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``core`` (with ``clock``, the core's tick clock) is told of each run (the module docstring)."""
        self.runner = runner
        self.core = core
        self.clock = clock

    async def request(
        self,
        spec: ActionSpec,
        node: str | None,
        *,
        mode: Mode | None = None,
        plan: Planner,
        confirm: Confirm,
        refused: Refused | None = None,
        progress: ProgressCallback | None = None,
        run_bench: RunBench | None = None,
        before_run: BeforeRun | None = None,
        after_run: AfterRun | None = None,
    ) -> ActionResult:
        """Plan, refuse, confirm, run, audit. ``mode`` is the dashboard's mode when the action was asked
        for (read-only or kiosk; None when actions are on), not when this runs: an unlock key pressed
        just after an action key leaves that key refused by the kiosk. Never raises (but cancellation):
        every way it ends is an ``ActionResult`` with a one-line message; every refusal before the run is audited here
        (``refused_by``: the mode, ``dashboard``, ``plan`` or ``runner``), the run by the runner."""

        async def refuse(reason: str, where: str, planned: Plan | Refusal | None = None) -> ActionResult:
            if refused is not None:
                refused(where, reason)
            await self.runner.audit_refusal(spec.id.value, node, reason, plan=planned, where=where)
            title = planned.title if isinstance(planned, Plan) else f"{spec.id.value} {node or ''}".rstrip()
            return ActionResult(spec.id, node or "", title, Outcome.REFUSED, f"{title}: refused: {reason}")

        if mode is not None and mode in spec.refused_in:
            return await refuse(f"{mode.value}: actions are off", mode.value)
        if self.runner.read_only:
            return await refuse(self.runner.refusal(Refusal(spec.id, node or "", "")) or "", Mode.READ_ONLY.value)
        if node is None:
            return await refuse("pick a node first", "dashboard")
        planned = await plan(spec, node)
        if isinstance(planned, Refusal):
            return await refuse(planned.reason, "plan", planned)
        reason = self.runner.refusal(planned)
        if reason is not None:
            return await refuse(reason, "runner", planned)
        if not await confirm(planned):
            return ActionResult(spec.id, node, planned.title, Outcome.REFUSED, NOT_CONFIRMED)
        if isinstance(planned, BenchPlan) and run_bench is None:
            return await refuse("a bench runs from the dashboard, or as `sparktui bench`", "runner", planned)
        if before_run is not None:
            before_run(planned)
        self._hold(planned, started=True)
        result: ActionResult | None = None
        try:
            if isinstance(planned, BenchPlan):
                assert run_bench is not None
                result = await self.runner.run_bench(planned, run_bench(planned), progress)
            else:
                result = await self.runner.run(planned, progress)
        finally:
            self._hold(planned, started=False)
            if after_run is not None:
                after_run(planned, result)
        return result

    def _hold(self, planned: Plan, *, started: bool) -> None:
        """Tell the core that the plan's steps on the engine began, or ended (a bench touches none)."""
        if self.core is None:
            return
        steps = planned.plans if isinstance(planned, FixPlan) else (planned,) if isinstance(planned, ActionPlan) else ()
        for step in steps:
            if started:
                self.core.action_started(step.nodes, step.instance)
            else:
                self.core.action_ended(step.nodes, step.instance, self.clock())
