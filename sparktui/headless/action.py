"""``sparktui action NODE ACTION``: a recovery action from a script, with the dashboard's checks.

It collects the fleet's current state first (as ``sparktui snapshot`` does: one HTTP poll of every
node and the host state over SSH), prints the plan (node, target, exact commands), asks for a
confirmation on a terminal unless ``--yes`` (with no terminal and no ``--yes`` it refuses), runs it
through ``ActionRunner`` (the same refusals and audit log as the dashboard: its "started" record is
on disk before the first command is sent, or nothing is), prints the progress and the result. Exit
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
from sparktui.actions.plans import (
    DEFAULT_SETTINGS,
    ActionKind,
    ActionPlan,
    ActionSettings,
    FixPlan,
    Refusal,
    plan_action,
    plan_finding_fix,
    plan_fix,
)
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

    try:
        kind = ActionKind(action)
    except ValueError:
        choices = ", ".join(k.value for k in ActionKind)
        print(f"sparktui action: unknown action {action!r}; choose one of: {choices}", file=err)
        return EXIT_REFUSED
    runner = ActionRunner(fleet, read_only=read_only, audit=audit)
    if read_only or fleet.node(node) is None:
        # Refused before anything is collected; the runner words it (read-only first) and audits it.
        early = Refusal(kind, node, _no_node(fleet, node) if fleet.node(node) is None else "read-only")
        result = asyncio.run(runner.run(early))
        print(f"sparktui action: {result.message}", file=err)
        return EXIT_REFUSED
    # A log that cannot even be opened refuses before anything is collected; a full disk shows when the
    # runner writes the action's "started" record, which it does before any command is sent.
    problem = runner.audit.check()
    if problem is not None:
        print(f"sparktui action: {kind.value} {node}: refused: {problem}", file=err)
        return EXIT_REFUSED
    involved = _involved(fleet, node)
    say(f"collecting the state of {', '.join(n.name for n in involved.nodes)}…")
    monitor, _now = asyncio.run(collect(involved, polls=1, interval_s=0.0))
    if kind is ActionKind.FIX:
        plan: ActionPlan | FixPlan | Refusal = _plan_fix(
            fleet, node, monitor, finding=finding, instance=instance, settings=settings
        )
    else:
        plan = plan_action(kind, fleet, node, instance=instance, views=monitor.views, settings=settings)
    refused = runner.refusal(plan)
    if refused is not None or isinstance(plan, Refusal):
        result = asyncio.run(runner.run(plan))
        print(f"sparktui action: {result.message}", file=err)
        return EXIT_REFUSED
    for line in plan.confirmation():
        say(line)
    if not yes:
        if interactive is None:
            interactive = _isatty(sys.stdin)
        if not interactive:
            print(
                "sparktui action: not run: no terminal to confirm on; pass --yes to run it without a confirmation",
                file=err,
            )
            return EXIT_REFUSED
        try:
            answer = ask("run it? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("sparktui action: not run (not confirmed)", file=err)
            return EXIT_REFUSED
    refused_here = f"{plan.title}: refused: "

    def progress(line: str) -> None:
        if not line.startswith(refused_here):  # a refusal at run time (the audit log) goes to stderr, once
            say(line)

    result = asyncio.run(_run(runner, plan, progress))
    if result.outcome is Outcome.REFUSED:
        print(f"sparktui action: {result.message}", file=err)
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


async def _run(runner: ActionRunner, plan: ActionPlan | FixPlan, say: Callable[[str], None]) -> ActionResult:
    try:
        return await runner.run(plan, on_progress=say)
    finally:
        await runner.close()


def _no_node(fleet: FleetSpec, node: str) -> str:
    names = ", ".join(n.name for n in fleet.nodes)
    return f"no node named {node!r} in the config (nodes: {names})"


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
