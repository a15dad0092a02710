"""``sparktui action NODE ACTION``: a recovery action from a script, with the dashboard's checks.

It collects the fleet's current state first (as ``sparktui snapshot`` does: one HTTP poll of every
node and the host state over SSH), prints the plan (node, target, exact commands), asks for a
confirmation on a terminal unless ``--yes`` (with no terminal and no ``--yes`` it refuses), runs it
through ``ActionController``, as the dashboard does (the same table, refusals and audit log: its
"started" record is on disk before the first command is sent, or nothing is), prints the progress
and the result. Exit
status: 0 done, 1 failed, 2 refused (or not confirmed, or a config error).

``fix`` runs a finding's whole fix (``sparktui.actions.plans.plan_fix``): the finding named with
``--finding``, else the worst one open on the node after one diagnosis of the collected state (one poll
sees only what shows at once: the dashboard, or ``--finding``, knows more).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TextIO

from sparktui.actions.audit import AuditLog
from sparktui.actions.controller import ActionController, Plan, Shown, plan_for
from sparktui.actions.plans import (
    DEFAULT_SETTINGS,
    ActionSettings,
    FixPlan,
    Refusal,
    plan_finding_fix,
    plan_fix,
)
from sparktui.actions.registry import ActionKind, ActionSpec, PlannedBy, action_spec, cli_choices
from sparktui.actions.runner import ActionResult, ActionRunner, Outcome
from sparktui.headless.snapshot import collect
from sparktui.model.specs import FleetSpec
from sparktui.monitor.core import Monitor

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2


def exit_status(result: ActionResult) -> int:
    return {Outcome.OK: EXIT_OK, Outcome.FAILED: EXIT_FAILED, Outcome.REFUSED: EXIT_REFUSED}[result.outcome]


def main(
    fleet: FleetSpec,
    node: str,
    action: str,
    *,
    instance: str | None = None,
    finding: str | None = None,
    yes: bool = False,
    read_only: bool = False,
    interactive: bool | None = None,
    ask: Callable[[str], str] = input,
    out: TextIO | None = None,
    err: TextIO | None = None,
    audit: AuditLog | None = None,
    settings: ActionSettings = DEFAULT_SETTINGS,
) -> int:
    """Run one action (or a finding's fix) as ``sparktui action`` does; returns the exit status."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    spec = action_spec(action)
    if spec is None or not spec.in_cli:
        print(f"sparktui action: unknown action {action!r}; choose one of: {', '.join(cli_choices())}", file=err)
        return EXIT_REFUSED
    runner = ActionRunner(fleet, read_only=read_only, audit=audit)
    controller = ActionController(runner)
    not_run: list[str] = []
    confirmed_title: list[str] = []

    async def plan(spec: ActionSpec, node: str) -> Plan | Refusal:
        """Refused before anything is collected: a node not in the config, an audit log that cannot
        even be opened (a full disk shows when the runner writes the "started" record, before any
        command is sent); else one poll of the node and those of its jobs, and the plan on it."""
        if fleet.node(node) is None:
            return Refusal(spec.id, node, _no_node(fleet, node))
        problem = runner.audit.check()
        if problem is not None:
            return Refusal(spec.id, node, problem)
        involved = _involved(fleet, node)
        say(f"collecting the state of {', '.join(n.name for n in involved.nodes)}…")
        monitor, _now = await collect(involved, polls=1, interval_s=0.0)
        if spec.planned_by is PlannedBy.FIX:
            return _plan_fix(fleet, node, monitor, finding=finding, instance=instance, settings=settings)
        shown = Shown(fleet, views=monitor.views, settings=settings)
        return plan_for(spec, node, shown, instance=instance)

    async def confirm(planned: Plan) -> bool:
        confirmed_title.append(planned.title)
        for line in planned.confirmation():
            say(line)
        if yes:
            return True
        if not (interactive if interactive is not None else _isatty(sys.stdin)):
            not_run.append("not run: no terminal to confirm on; pass --yes to run it without a confirmation")
            return False
        try:
            answer = await asyncio.to_thread(ask, "run it? [y/N] ")
        except EOFError:
            answer = ""
        return answer.strip().lower() in ("y", "yes")

    def progress(line: str) -> None:
        # A refusal at run time (the audit log) goes to stderr, once.
        if not line.startswith(f"{confirmed_title[-1]}: refused: "):
            say(line)

    async def request() -> ActionResult:
        try:
            return await controller.request(spec, node, plan=plan, confirm=confirm, progress=progress)
        finally:
            await runner.close()

    result = asyncio.run(request())
    if result.outcome is Outcome.REFUSED:
        print(f"sparktui action: {not_run[0] if not_run else result.message}", file=err)
        return EXIT_REFUSED
    for line in result.lines()[1:]:
        say(line)
    return exit_status(result)


def _involved(fleet: FleetSpec, node: str) -> FleetSpec:
    """The fleet narrowed to the node and the nodes that share a multi-node job with it."""
    spec = fleet.node(node)
    jobs = {v.job for v in spec.vllm if v.job is not None} if spec is not None else set()
    nodes = tuple(n for n in fleet.nodes if n.name == node or any(v.job in jobs for v in n.vllm if v.job))
    return fleet.model_copy(update={"nodes": nodes})


def _plan_fix(
    fleet: FleetSpec,
    node: str,
    monitor: Monitor,
    *,
    finding: str | None,
    instance: str | None,
    settings: ActionSettings,
) -> FixPlan | Refusal:
    """The fix of the finding named, or of the worst one the one-shot core's diagnosis found open."""
    catalogue = monitor.catalogue
    views = monitor.views
    if finding is not None:
        if finding not in catalogue.ids:
            return Refusal(ActionKind.FIX, node, f"the failure catalogue has no rule {finding!r} (docs/diagnosis.md)")
        rule = catalogue.rule(finding)
        actions = rule.fix_actions
        return plan_fix(
            fleet,
            node,
            actions,
            finding=rule.id,
            finding_title=rule.title,
            instance=instance,
            views=views,
            settings=settings,
        )
    found = monitor.findings.get(node, ())
    plan = plan_finding_fix(fleet, node, found, catalogue, views=views, settings=settings)
    if isinstance(plan, Refusal):
        return Refusal(
            ActionKind.FIX,
            node,
            f"{plan.reason} (one poll sees only what shows at once: name the finding with --finding ID)",
        )
    return plan


def _no_node(fleet: FleetSpec, node: str) -> str:
    names = ", ".join(n.name for n in fleet.nodes)
    return f"no node named {node!r} in the config (nodes: {names})"


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
