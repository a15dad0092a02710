"""The canary's rules (pure): when one is due, what its answer means, and how a wedge while idle shows
in the instance's status, its view and the engine-wedged finding."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from sparktui.config import load_catalogue, parse_config
from sparktui.diagnosis.engine import ACTION_SETTLE_S, DiagnosisEngine
from sparktui.engines import readings
from sparktui.model.canary import CanaryClock, canary_text, judge
from sparktui.model.fleet import CanaryOrder, FleetState, InstanceView
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation
from sparktui.model.status import State
from sparktui.monitor.core import Monitor
from tests.support.fixture_fleet import scenario_scrapes

CONFIG = """
poll_interval_s = 1.0
[canary]
idle_s = 30
interval_s = 40
timeout_s = 10
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "qwen"
port = 8001
[[nodes.vllm]]
name = "quiet"
port = 8002
canary = false
"""
FLEET = parse_config(CONFIG, source="test.toml")
SCRAPES = scenario_scrapes("mtp2-steady")
MODELS = json.dumps({"object": "list", "data": [{"id": "qwen3.6", "object": "model"}]})
# Idle: the same scrape, nothing running (an engine that hangs while idle shows exactly this, frozen).
IDLE = re.sub(r"^(vllm:num_requests_(?:running|waiting)\{[^}]*\}) \S+$", r"\1 0.0", SCRAPES[3], flags=re.MULTILINE)
COMPLETION = json.dumps({"id": "cmpl-1", "object": "text_completion", "choices": [{"index": 0, "text": "!"}]})


def ok(body: str = "", status: int = 200, elapsed: float = 0.01) -> HttpResult:
    return HttpResult(
        url="http://10.0.0.1:8001", kind=FetchKind.OK, status=status, body=body.encode(), elapsed_s=elapsed
    )


def timed_out(after: float = 10.0) -> HttpResult:
    return HttpResult(
        url="http://10.0.0.1:8001", kind=FetchKind.TIMEOUT, error="no answer within 10 s", elapsed_s=after
    )


def observe(
    state: FleetState,
    t: float,
    scrape: str,
    *,
    health: int = 200,
    canary: HttpResult | None = None,
    health_path: str = "/health",
) -> None:
    state.apply(_observation(t, scrape, health=health, canary=canary, health_path=health_path))


def _observation(
    t: float, scrape: str, *, health: int = 200, canary: HttpResult | None = None, health_path: str = "/health"
) -> NodeObservation:
    vllm = tuple(
        ServerObservation(
            name=name,
            health=dataclasses.replace(ok(status=health), url=f"http://10.0.0.1:8001{health_path}"),
            metrics=ok(scrape),
            models=ok(MODELS),
            canary=canary if name == "qwen" else None,
        )
        for name in ("qwen", "quiet")
    )
    return NodeObservation(node="spark1", t=t, wall=1e9 + t, vllm=vllm)


def instance(state: FleetState, t: float, name: str = "qwen") -> InstanceView:
    (node,) = state.view(t, window_s=None)
    return next(i for i in node.instances if i.name == name)


def test_no_canary_while_tokens_move_and_one_after_idle_s_without_a_token() -> None:
    state = FleetState(FLEET, readings())
    for t in range(0, 29):  # every scrape a new one: generation counter rising
        observe(state, float(t), SCRAPES[t])
        assert state.canaries_due("spark1", float(t)) == ()
    frozen = SCRAPES[28]
    for t in range(29, 58):  # idle from t=28: nothing moves
        observe(state, float(t), frozen)
        assert state.canaries_due("spark1", float(t)) == (), t
    observe(state, 58.0, frozen)
    assert state.canaries_due("spark1", 58.0) == (CanaryOrder("qwen", "qwen3.6"),)  # 30 s idle; not "quiet"
    assert instance(state, 58.0).canary is not None and instance(state, 58.0, "quiet").canary is None


def test_never_two_in_flight_nor_two_within_interval_s() -> None:
    clock = CanaryClock(idle_s=30.0, interval_s=40.0)
    clock.scraped(0.0, tokens_moved=False)
    assert clock.due(30.0, healthy=True)
    clock.send(30.0)
    assert not clock.due(35.0, healthy=True)  # in flight
    clock.done(judge(ok(COMPLETION, elapsed=0.05), 30.0, 31.0))
    assert not clock.due(69.0, healthy=True)  # answered, but 39 s after the last one went out
    assert clock.due(70.0, healthy=True)
    assert not clock.due(70.0, healthy=False)  # /health not 200: down is down, no canary
    assert clock.sent == 1


def test_a_canary_answered_proves_the_engine_alive_and_gives_its_ttft() -> None:
    result = judge(ok(COMPLETION, elapsed=0.042), 10.0, 10.5)
    assert result.answered and result.ttft_s == 0.042 and not result.timed_out
    clock = CanaryClock(30.0, 30.0)
    clock.send(10.0)
    clock.done(result)
    assert not clock.wedged()
    assert canary_text(clock.view(10.5)) == "canary: 1 sent, last answered in 42 ms (TTFT of 1 token)"


def test_an_http_error_is_a_failed_canary_not_a_wedge() -> None:
    for answer, problem in (
        (ok('{"error": "Unauthorized"}', status=401), "HTTP 401"),
        (ok("<html>proxy</html>"), "the answer is not a completion"),
        (HttpResult(url="u", kind=FetchKind.REFUSED, error="connection refused"), "connection refused"),
    ):
        result = judge(answer, 1.0, 2.0)
        assert (result.problem, result.timed_out) == (problem, False)
        clock = CanaryClock(30.0, 30.0)
        clock.done(result)
        assert not clock.wedged()


def test_an_unanswered_canary_while_health_says_200_is_a_wedge_until_a_token_moves_or_one_answers() -> None:
    state = FleetState(FLEET, readings())
    frozen = IDLE
    for t in range(0, 31):
        observe(state, float(t), frozen)
    assert state.canaries_due("spark1", 30.0) == (CanaryOrder("qwen", "qwen3.6"),)
    observe(state, 41.0, frozen, canary=timed_out())
    view = instance(state, 41.0)
    assert view.status.state is State.DEGRADED
    assert view.status.reasons == (
        "qwen: wedged: the canary (a 1-token completion) got no answer within 10 s, no token for 41 s",
    )
    assert view.canary is not None and view.canary.wedged and view.canary.last is not None
    assert view.canary.last.sent_t == 30.0  # live: the clock's own send time, not the poll's
    assert canary_text(view.canary) == "canary: 1 sent, last wedged: no answer within 10 s"
    # The engine resumes: a token moves after the canary went out, so the wedge is over.
    observe(state, 42.0, SCRAPES[4])  # (its counters are past IDLE's)
    assert instance(state, 42.0).status.state is State.UP
    assert not instance(state, 42.0).canary.wedged  # type: ignore[union-attr]


def test_a_wedge_is_only_a_wedge_while_health_says_200() -> None:
    state = FleetState(FLEET, readings())
    for t in range(0, 31):
        observe(state, float(t), IDLE)
    state.canaries_due("spark1", 30.0)
    observe(state, 41.0, IDLE, health=503, canary=timed_out())
    view = instance(state, 41.0)
    assert view.status.state is State.DOWN and view.status.reasons == ("qwen: engine dead (/health 503)",)
    assert state.canaries_due("spark1", 80.0) == ()  # down: no canary


def test_a_replayed_canary_result_is_counted_and_judged_without_the_send() -> None:
    state = FleetState(FLEET, readings())
    for t in range(0, 31):
        observe(state, float(t), IDLE)
    observe(state, 41.5, IDLE, canary=timed_out(10.0))  # no canaries_due call: a recording's result
    canary = instance(state, 41.5).canary
    assert canary is not None and canary.sent == 1 and canary.wedged
    assert canary.last is not None and canary.last.sent_t == 31.5


def test_the_engine_wedged_finding_opens_on_an_unanswered_canary_with_its_evidence_and_clears() -> None:
    state = FleetState(FLEET, readings())
    engine = DiagnosisEngine(load_catalogue())
    for t in range(0, 31):
        observe(state, float(t), IDLE)
    state.canaries_due("spark1", 30.0)
    opened = None
    for t in range(41, 50):
        observe(state, float(t), IDLE, canary=timed_out() if t == 41 else None)
        (node,) = state.view(float(t), window_s=None)
        found = [f for f in engine.evaluate(node, None, float(t)) if f.id == "engine-wedged" and f.instance == "qwen"]
        if found and opened is None:
            opened = t
            evidence = found[0].evidence
    assert opened == 45, evidence  # open_after: 5 evaluations in a row
    assert any("canary (1-token completion) sent at" in line and "no answer within 10 s" in line for line in evidence)
    assert any("/health answers 200" in line for line in evidence)
    # A canary that answers: the condition is false; the finding clears after clear_after_s (30 s).
    state.canaries_due("spark1", 80.0)
    observe(state, 80.5, IDLE, canary=ok(COMPLETION, elapsed=0.05))
    for at in (81.0, 100.0):
        observe(state, at, IDLE)
        (node,) = state.view(at, window_s=None)
        assert any(f.id == "engine-wedged" and f.instance == "qwen" for f in engine.evaluate(node, None, at))
    observe(state, 112.0, IDLE)
    (node,) = state.view(112.0, window_s=None)
    assert not any(f.id == "engine-wedged" and f.instance == "qwen" for f in engine.evaluate(node, None, 112.0))


def test_the_canary_line_says_why_none_was_sent() -> None:
    clock = CanaryClock(idle_s=30.0, interval_s=30.0)
    assert canary_text(clock.view(0.0)) == "canary: none sent yet"  # nothing scraped yet
    clock.scraped(0.0, tokens_moved=True)
    assert canary_text(clock.view(5.0)) == "canary: none needed while tokens move (one after 30 s without a token)"
    assert canary_text(clock.view(31.0)) == "canary: none sent yet"
    clock.send(31.0)
    assert canary_text(clock.view(32.0)) == "canary: 1 sent, one waiting for its answer"


def test_no_canary_to_an_instance_an_action_runs_on_until_it_has_settled() -> None:
    """A restart's warmup is the probe: a canary sent as the restarted engine's first request would wait
    out its JIT and time out as a wedge. The instance's clock is left as it was, so one goes after."""
    monitor = Monitor(FLEET, load_catalogue())
    for t in range(0, 31):  # idle: nothing moves, a canary is due from t=30
        monitor.observation(_observation(float(t), IDLE))
    monitor.action_started(["spark1"], "qwen")
    assert monitor.canaries_due("spark1", 30.0) == ()
    monitor.action_ended(["spark1"], "qwen", 40.0)
    assert monitor.canaries_due("spark1", 40.0 + ACTION_SETTLE_S - 1) == ()  # settling
    assert monitor.canaries_due("spark1", 40.0 + ACTION_SETTLE_S) == (CanaryOrder("qwen", "qwen3.6"),)


@pytest.mark.parametrize("health_path", ["/health", "/ready", "/v1/health/ready"])
def test_the_wedge_evidence_names_the_health_check_its_engine_is_asked_at(health_path: str) -> None:
    # vLLM's /health, SGLang's /ready, NIM's /v1/health/ready: the evidence quotes the one that said 200.
    state = FleetState(FLEET, readings())
    engine = DiagnosisEngine(load_catalogue())
    for t in range(0, 31):
        observe(state, float(t), IDLE, health_path=health_path)
    state.canaries_due("spark1", 30.0)
    evidence: tuple[str, ...] = ()
    for t in range(41, 47):
        observe(state, float(t), IDLE, canary=timed_out() if t == 41 else None, health_path=health_path)
        (node,) = state.view(float(t), window_s=None)
        found = [f for f in engine.evaluate(node, None, float(t)) if f.id == "engine-wedged" and f.instance == "qwen"]
        evidence = found[0].evidence if found else evidence
    assert f"{health_path} answers 200 (degraded)" in evidence  # degraded: the canary went unanswered
