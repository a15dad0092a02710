"""A node's one verdict (``diagnosis.verdict``): its open findings raise its status, never lower it."""

from __future__ import annotations

from dataclasses import replace

from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.state import Finding
from sparktui.diagnosis.verdict import judged
from sparktui.engines import readings
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.observations import FetchKind
from sparktui.model.status import State, Status
from tests.unit.test_status import FLEET, SCRAPES, failed, observe, ok


def finding(
    severity: Severity, instance: str | None = "qwen", rule: str = "rule", cleared: float | None = None
) -> Finding:
    return Finding(
        id=rule,
        node="spark1",
        instance=instance,
        severity=severity,
        title=f"the {rule} title",
        evidence=(),
        explanation="",
        fix="",
        action=None,
        opened_at=1.0,
        last_seen=2.0,
        cleared_at=cleared,
    )


def serving_view() -> NodeView:
    state = FleetState(FLEET, readings())
    observe(state, 1.0, ok(), ok(SCRAPES[0]))
    observe(state, 2.0, ok(), ok(SCRAPES[1]))
    (view,) = state.view(2.0, window_s=30.0)
    return view


def down_view() -> NodeView:
    state = FleetState(FLEET, readings())
    observe(state, 1.0, failed(FetchKind.REFUSED, "connection refused"))
    (view,) = state.view(1.0, window_s=30.0)
    return view


def test_a_serving_node_with_a_crit_finding_is_failing_with_the_findings_title_as_reason() -> None:
    view = serving_view()
    assert view.status.state is State.UP
    judged_view = judged(view, [finding(Severity.CRIT, instance=None, rule="gpu-xid")])
    assert judged_view.status.state is State.FAILING
    assert judged_view.status.reasons == ("the gpu-xid title",)
    assert judged_view.status.state.severity == 2 and judged_view.status.state.serving


def test_a_crit_on_an_instance_that_is_not_serving_cleanly_makes_it_down() -> None:
    view = serving_view()
    instance = view.instances[0]
    wedged = replace(view, instances=(replace(instance, status=Status(State.DEGRADED, ("qwen: wedged",))),))
    wedged = replace(wedged, status=Status(State.DEGRADED, ("qwen: wedged",)))
    out = judged(wedged, [finding(Severity.CRIT, rule="engine-wedged")])
    assert out.instances[0].status.state is State.DOWN
    assert out.instances[0].status.reasons == ("qwen: the engine-wedged title", "qwen: wedged")
    assert out.status.state is State.DOWN


def test_a_crit_on_a_serving_instance_makes_it_and_the_node_failing() -> None:
    out = judged(serving_view(), [finding(Severity.CRIT, rule="rank-spinning")])
    assert out.instances[0].status.state is State.FAILING
    assert out.status.state is State.FAILING
    assert "qwen: the rank-spinning title" in out.status.reasons


def test_a_warn_finding_makes_an_up_node_degraded_and_an_info_finding_changes_nothing() -> None:
    view = serving_view()
    assert judged(view, [finding(Severity.WARN, instance=None, rule="shm-leftovers")]).status.state is State.DEGRADED
    assert judged(view, [finding(Severity.INFO, rule="cold-jit")]) is view


def test_a_finding_never_lowers_a_status_and_a_cleared_one_judges_nothing() -> None:
    down = down_view()
    assert down.status.state is State.DOWN
    assert judged(down, [finding(Severity.WARN)]).status == down.status
    assert judged(down, [finding(Severity.CRIT)]).status.state is State.DOWN
    view = serving_view()
    assert judged(view, [finding(Severity.CRIT, cleared=3.0)]) is view


def test_a_stale_node_stays_stale_whatever_its_last_findings_say() -> None:
    state = FleetState(FLEET, readings())
    observe(state, 1.0, ok(), ok(SCRAPES[0]))
    (view,) = state.view(100.0, window_s=30.0)
    assert view.status.state is State.STALE
    assert judged(view, [finding(Severity.CRIT, instance=None)]).status == view.status
