"""The findings of the demo's ``incident`` live as long as the fault, in the dashboard (issue 18).

The dashboard on the demo fleet (its clock SPEED times faster than the app's): the page-cache finding
opens with the first failed start, drop caches and restart through the keys (``d y``, ``r y``) bring
spark1 back, the finding clears as the restart's warmup is served (well within the rule's
``healthy_s``), and the warmup's cold request, 30 simulated seconds without a token, opens no
"engine wedged" finding: the dashboard told the core its action was running.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from textual.pilot import Pilot

from sparktui.demo.fleet import DemoFleet
from sparktui.diagnosis.engine import Finding
from sparktui.model.fleet import InstanceView
from sparktui.model.status import State
from sparktui.ui.actions_ui import ConfirmAction
from sparktui.ui.app import SparkApp, make_app
from tests.support.demo_clock import launch_ready, running_incident
from tests.support.wait import wait_until

SPEED = 6.0  # slow enough that the warmup's cold request spans more polls than engine-wedged needs
PAGE_CACHE = "page-cache-blocks-start"
FIRST_FAILURE_S = 83.0  # the restarted unit's first attempt fails vLLM's memory check (docs/demo.md)
ATTEMPT_S = 18.0  # systemd's RestartSec 10 s + an 8 s attempt


@dataclass
class Ticks:
    """A ``MonitorObserver``: spark1's active findings at each tick, with the demo's time then, and the
    polls at which its instance looked wedged (requests running, no token since the last scrape)."""

    app: SparkApp | None = None
    fleet: DemoFleet | None = None
    seen: list[tuple[float, frozenset[str]]] = field(default_factory=list)  # (demo elapsed, finding ids)
    wedge_shaped: list[float] = field(default_factory=list)  # app clock times
    action_running: bool = False
    problem: str | None = None  # it never stops

    def tick(self, now: float) -> None:
        assert self.app is not None
        if not self.action_running:
            return
        instance = _spark1(self.app)
        rates = self.app.state.nodes["spark1"].instances["qwen36"].tracker.last_interval_rates()
        generated = rates.generation_tokens_per_s if rates is not None else None
        serving = instance.status.state.serving  # failing too: a CRIT open while it serves
        if serving and (instance.running or 0) + (instance.waiting or 0) > 0 and generated == 0:
            self.wedge_shaped.append(now)

    def findings(self, node: str, active: Sequence[Finding], now: float | None = None) -> None:
        if node == "spark1" and self.fleet is not None:
            self.seen.append((self.fleet.elapsed, frozenset(f.id for f in active)))

    def alert(self, reason: str, node: str | None = None) -> None:
        pass

    def ids_since(self, elapsed: float) -> frozenset[str]:
        return frozenset(i for at, ids in self.seen if at >= elapsed for i in ids)


@dataclass
class Incident:
    app: SparkApp
    fleet: DemoFleet
    ticks: Ticks


@pytest.fixture
async def incident(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Incident]:
    monkeypatch.setenv("SPARKTUI_AUDIT_LOG", str(tmp_path / "audit.log"))
    async with running_incident(SPEED, paced_by="spark1") as (fleet, spec):
        app = make_app(spec, clock=lambda: fleet.now)  # the app on the demo's clock: backoffs, ticks, actions
        ticks = Ticks(app, fleet)
        app.monitor.observers.append(ticks)
        yield Incident(app, fleet, ticks)


def _spark1(app: SparkApp) -> InstanceView:
    view = next(v for v in app.views if v.name == "spark1")
    return view.instances[0]


def _active(app: SparkApp) -> set[str]:
    return {f.id for f in app.findings.get("spark1", ())}


async def _until(app: SparkApp, what: str, check: object, timeout_s: float) -> None:
    await wait_until(
        check,  # type: ignore[arg-type]
        timeout_s,
        what=what,
        detail=lambda: f"spark1: {_spark1(app).status}; findings {sorted(_active(app))}",
        interval_s=0.05,
    )


async def _confirm(pilot: Pilot[None], key: str, command: str) -> None:
    """Press an action's key on the node screen and confirm the plan, which runs ``command``."""
    await pilot.press(key)
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, ConfirmAction)
    assert command in "\n".join(screen.plan.commands)
    await pilot.press("y")


@pytest.mark.slow
async def test_the_page_cache_finding_opens_in_time_clears_after_the_fix_and_the_warmup_opens_no_wedge(
    incident: Incident,
) -> None:
    app, fleet, ticks = incident.app, incident.fleet, incident.ticks
    async with app.run_test(size=(160, 48)) as pilot:
        # Opens with the first failed start: before the second attempt fails.
        await _until(app, "the page-cache finding", lambda: PAGE_CACHE in _active(app), 240 / SPEED)
        opened_at = next(at for at, ids in ticks.seen if PAGE_CACHE in ids)
        assert FIRST_FAILURE_S <= opened_at < FIRST_FAILURE_S + ATTEMPT_S
        # The node is down from the same failed start: by the finding itself (its one verdict: a CRIT on
        # an instance that does not serve), or by the manager's "crash-looping" once its word comes.
        await _until(app, "spark1 down", lambda: _spark1(app).status.state is State.DOWN, 60)
        summary = _spark1(app).status.summary
        assert "crash-looping" in summary or "Page cache holds the memory vLLM needs" in summary, summary
        assert fleet.elapsed < FIRST_FAILURE_S + ATTEMPT_S

        await pilot.press("1")  # spark1's node screen
        await pilot.pause()
        await _confirm(pilot, "d", "drop_caches")
        await _until(app, "drop caches done", lambda: len(app.action_results) == 1, 60)
        assert app.action_results[0].ok, app.action_results[0].lines()
        await _until(app, "launch readiness", lambda: launch_ready(_spark1(app)), 30)

        ticks.action_running = True
        restart_from = fleet.elapsed
        canary = app.state.nodes["spark1"].instances["qwen36"].canary
        assert canary is not None
        canaries_before = canary.sent
        await _confirm(pilot, "r", "systemctl restart vllm-qwen36.service")
        await _until(app, "restart done", lambda: len(app.action_results) == 2, 120)
        ticks.action_running = False
        # The warmup was the restarted engine's first request: no canary went while the action ran (one
        # would have paid the JIT in its place).
        assert canary.sent == canaries_before
        restart = app.action_results[1]
        assert restart.ok, restart.lines()
        assert restart.warmup is not None and restart.warmup.first_s is not None  # the cold request was served
        done_at = app.clock()

        # The finding clears once a request is served (the warmup's), not after healthy_s (120 s) of
        # serving: the times are the demo's (the app runs on its clock).
        healthy_s = app.diagnosis.catalogue.rule(PAGE_CACHE).param("healthy_s")
        await _until(app, "the page-cache finding to clear", lambda: PAGE_CACHE not in _active(app), 60)
        (cleared,) = [f for f in app.diagnosis.history("spark1") if f.id == PAGE_CACHE]
        assert cleared.cleared_at is not None and cleared.cleared_at - done_at < healthy_s / 2
        await _until(app, "spark1 serving", lambda: _spark1(app).status.state is State.UP, 60)

        # The warmup's cold request looked like a wedge for more polls than engine-wedged needs to open,
        # and none opened: not while the action ran, not in its settle time.
        open_after = app.diagnosis.catalogue.rule("engine-wedged").param("open_after")
        assert len(ticks.wedge_shaped) >= open_after, ticks.wedge_shaped
        settled = done_at + 5.0
        await _until(app, "a few ticks after the action", lambda: app.clock() > settled, 30)
        assert "engine-wedged" not in ticks.ids_since(restart_from), sorted(ticks.ids_since(restart_from))
