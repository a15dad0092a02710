"""The incident, recovered with keys only: the dashboard on the demo fleet's ``incident`` scenario
(running 12x faster than real time), drop caches and restart through the confirmation dialogs, and the
node ends healthy with a measured warmup TTFT; and an action whose audit record cannot be written is
refused there before anything is sent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Static

from sparktui.actions.audit import AUDIT_ENV
from sparktui.actions.runner import Outcome
from sparktui.model.commands import DROP_CACHES
from sparktui.model.fleet import InstanceView
from sparktui.model.status import State
from sparktui.ui.actions_ui import ConfirmAction
from sparktui.ui.app import SparkApp, make_app
from sparktui.ui.node_screen import NodeScreen
from tests.support.actions import full_device
from tests.support.demo_clock import launch_ready, running_incident
from tests.support.wait import wait_until
from tests.ui.conftest import INCIDENT_SPEED


async def _until(app: SparkApp, what: str, check: Callable[[], bool], timeout_s: float) -> None:
    await wait_until(check, timeout_s, what=what, detail=lambda: f"spark1: {_spark1(app).status}", interval_s=0.1)


def _spark1(app: SparkApp) -> InstanceView:
    view = next(v for v in app.views if v.name == "spark1")
    return view.instances[0]


@pytest.mark.slow
async def test_incident_recovered_with_keys_only(incident: SparkApp, tmp_path: Path) -> None:
    app = incident
    async with app.run_test(size=(160, 48)) as pilot:
        await _until(
            app,
            "the crash loop",
            lambda: _spark1(app).status.state is State.DOWN and "crash-looping" in _spark1(app).status.summary,
            40,
        )
        assert _spark1(app).launch is not None and _spark1(app).launch.ready is False  # type: ignore[union-attr]
        await pilot.press("1")  # open spark1
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "spark1"

        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmAction)
        body = str(app.screen.query_one("#confirm-body", Static).content)
        assert "sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'" in body
        await pilot.press("y")
        await _until(app, "drop caches done", lambda: len(app.action_results) == 1, 30)
        assert app.action_results[0].ok, app.action_results[0].lines()
        await _until(app, "launch readiness", lambda: launch_ready(_spark1(app)), 20)

        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmAction)
        assert "sudo -n systemctl restart vllm-qwen36.service" in str(
            app.screen.query_one("#confirm-body", Static).content
        )
        await pilot.press("y")
        await _until(app, "restart done", lambda: len(app.action_results) == 2, 60)
        restart = app.action_results[1]
        assert restart.ok, restart.lines()
        assert restart.warmup is not None and restart.warmup.first_s is not None  # a measured TTFT
        await _until(app, "spark1 healthy", lambda: _spark1(app).status.state is State.UP, 30)
        assert any("restart" in line for _, lines in app.action_log for line in lines[:1])
    audited = (tmp_path / "audit.log").read_text()
    assert "drop_caches" in audited and "systemctl restart vllm-qwen36.service" in audited


async def test_the_dashboard_refuses_an_action_whose_audit_record_cannot_be_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The disk of the audit log is full (/dev/full: ENOSPC from the kernel): `d` then `y` sends nothing
    to the node and says why in one line."""
    dev_full = full_device()
    monkeypatch.setenv(AUDIT_ENV, str(dev_full))
    async with running_incident(INCIDENT_SPEED) as (demo, spec):
        app = make_app(spec)
        async with app.run_test(size=(160, 48)) as pilot:
            await _until(app, "spark1's first poll", lambda: bool(app.views), 20)
            await pilot.press("1")
            await pilot.pause()
            await pilot.press("d")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmAction)
            await pilot.press("y")
            await _until(app, "the refusal", lambda: len(app.action_results) == 1, 20)
        (result,) = app.action_results
        assert result.outcome is Outcome.REFUSED
        assert result.message == (
            f"drop-caches spark1: refused: cannot write the audit log {dev_full}: the disk is full (No space left "
            f"on device); fix that or set {AUDIT_ENV} to a writable file"
        )
        assert any(str(n.message) == result.message for n in app._notifications)
        ssh = demo.node("spark1").ssh
        assert ssh is not None
        assert not [c for c in ssh.commands if c == DROP_CACHES or c.startswith("cat /proc/")]
