"""From finding to fix in one key: the demo's ``incident`` (12x real time), spark1 crash-looping on the
page cache; ``x`` offers the finding's whole fix (drop caches → restart → warm up) in one confirmation
that lists every step and its commands, ``y`` runs the steps in order with progress for each, and the
node serves again (read-only and kiosk refuse it: tests/ui/test_ui.py)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Static

from sparktui.actions.plans import FixPlan
from sparktui.actions.registry import ActionKind
from sparktui.actions.runner import ActionResult
from sparktui.model.fleet import InstanceView
from sparktui.model.status import State
from sparktui.ui.actions_ui import ConfirmAction
from sparktui.ui.app import SparkApp
from sparktui.ui.node_screen import NodeScreen
from tests.support.wait import wait_until

FINDING = "page-cache-blocks-start"


def _spark1(app: SparkApp) -> InstanceView:
    return next(v for v in app.views if v.name == "spark1").instances[0]


def _plain(widget: Static) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def _told(app: SparkApp, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every notification the app posts from now on, kept as it is posted: a toast lives a few seconds,
    which a poll of ``app._notifications`` on a busy machine can miss. The app's own notify still runs."""
    told: list[str] = []
    notify = app.notify

    def keep(message: str, **options: Any) -> None:
        told.append(str(message))
        notify(message, **options)

    monkeypatch.setattr(app, "notify", keep)
    return told


@pytest.mark.slow
async def test_x_shows_every_step_of_the_fix_and_runs_them_in_order(
    incident: SparkApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = incident
    seen = _told(app, monkeypatch)  # the toasts: only the fix's end (its progress is on screen instead)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(
            lambda: any(f.id == FINDING for f in app.findings.get("spark1", ())),
            60,
            what=f"the {FINDING} finding on spark1",
            detail=lambda: f"spark1: {_spark1(app).status}; findings {[f.id for f in app.findings.get('spark1', ())]}",
            interval_s=0.1,
        )
        await pilot.press("1")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "spark1"
        findings = _plain(app.screen.query_one("#findings", Static))
        assert "[x: drop caches → restart → warm up]" in findings

        await pilot.press("x")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ConfirmAction) and isinstance(dialog.plan, FixPlan)
        plan = dialog.plan
        assert plan.finding == FINDING
        assert plan.actions == (ActionKind.DROP_CACHES, ActionKind.RESTART, ActionKind.WARMUP)
        title = _plain(dialog.query_one("#confirm-title", Static))
        body = _plain(dialog.query_one("#confirm-body", Static))
        assert f"fix spark1: {FINDING}?" in title
        for number, step in enumerate(plan.plans, 1):
            assert f"step {number}/3: {step.title}" in body
            for command in step.commands:
                assert command in body, command
        assert "sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'" in body
        assert "sudo -n systemctl restart vllm-qwen36.service" in body
        assert body.index("drop_caches") < body.index("systemctl restart") < body.index("/v1/chat/completions")

        await pilot.press("y")
        # On screen from its first second: above the node's reasons, its step and its time.
        await wait_until(lambda: bool(app.running_actions), 10, what="the fix running", interval_s=0.05)
        running = app.running_actions[0]
        assert running.title == plan.title and running.nodes == ("spark1",)
        await wait_until(
            lambda: f"⟳ {plan.title} · running" in _plain(app.screen.query_one("#reasons", Static)),
            10,
            what="the running fix above the node's reasons",
            detail=lambda: _plain(app.screen.query_one("#reasons", Static)),
            interval_s=0.05,
        )

        def done() -> ActionResult | None:
            return app.action_results[0] if app.action_results else None

        await wait_until(
            done, 90, what="the fix to finish", detail=lambda: "\n".join(running.lines[-6:]), interval_s=0.1
        )
        result = app.action_results[0]
        assert not app.running_actions  # ended: in the action log, no longer running
        assert seen == [result.message]  # one toast, at the end: none piled over the table while it ran
        assert result.ok, result.lines()
        assert result.kind is ActionKind.FIX
        assert [part.kind for part in result.parts] == list(plan.actions)
        assert all(part.ok for part in result.parts)
        assert result.warmup is not None and result.warmup.first_s is not None  # a measured TTFT
        # Progress for each step, in order.
        starts = [running.lines.index(f"step {n}/3: {step.title}") for n, step in enumerate(plan.plans, 1)]
        assert starts == sorted(starts)
        await wait_until(
            lambda: _spark1(app).status.state is State.UP,
            30,
            what="spark1 serving",
            detail=lambda: str(_spark1(app).status),
            interval_s=0.1,
        )
    records = (tmp_path / "audit.log").read_text()
    assert '"event": "fix"' in records and f'"finding": "{FINDING}"' in records
