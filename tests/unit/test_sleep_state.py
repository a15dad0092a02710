"""An engine put to sleep (``/sleep``) is asleep: up, with the reason; not down, not wedged, sent no
canary, and no finding says it is stuck or cold."""

from __future__ import annotations

from sparktui.config import load_catalogue
from sparktui.diagnosis.engine import DiagnosisEngine
from sparktui.engines import readings
from sparktui.model.canary import canary_text
from sparktui.model.fleet import CanaryOrder, FleetState
from sparktui.model.scrape import Sleep
from sparktui.model.status import State
from tests.support.fixture_fleet import put_to_sleep
from tests.unit.test_canary import FLEET, IDLE, SCRAPES, instance, observe, timed_out

# mtp2-steady's scrape 3 repeated: 11 requests running and no token moving. Awake, that is a wedge.
FROZEN_BUSY = SCRAPES[3]


def test_asleep_is_up_with_its_level_as_the_reason() -> None:
    for level, words in ((1, "asleep (level 1: weights offloaded to host memory)"), (2, "asleep (level 2: weights")):
        state = FleetState(FLEET, readings())
        observe(state, 0.0, put_to_sleep(IDLE, level))
        view = instance(state, 0.0)
        assert view.status.state is State.UP
        assert view.status.reasons[0].startswith(f"qwen: {words}")
        assert view.sleep is (Sleep.WEIGHTS_OFFLOADED if level == 1 else Sleep.DISCARD_ALL) and view.asleep


def test_frozen_gauges_of_a_sleeping_engine_are_not_a_wedge() -> None:
    asleep, awake = FleetState(FLEET, readings()), FleetState(FLEET, readings())
    for t in range(0, 61):
        observe(asleep, float(t), put_to_sleep(FROZEN_BUSY, 1))
        observe(awake, float(t), FROZEN_BUSY)
    assert instance(asleep, 60.0).status.state is State.UP
    assert not any("wedged" in r for r in instance(asleep, 60.0).status.reasons)
    assert any("wedged" in r for r in instance(awake, 60.0).status.reasons)  # the same numbers, awake


def test_no_canary_to_a_sleeping_engine_and_one_once_it_wakes_and_stays_quiet() -> None:
    state = FleetState(FLEET, readings())
    for t in range(0, 61):
        observe(state, float(t), put_to_sleep(IDLE, 1))
        assert state.canaries_due("spark1", float(t)) == (), t
    canary = instance(state, 60.0).canary
    assert canary is not None and canary.sent == 0
    assert canary_text(canary) == "canary: 0 sent; none while the engine is asleep"
    observe(state, 61.0, put_to_sleep(IDLE, 0))  # woken up, and still no token for 61 s
    assert state.canaries_due("spark1", 61.0) == (CanaryOrder("qwen", "qwen3.6"),)


def test_a_canary_that_timed_out_before_the_engine_slept_is_not_a_wedge_while_it_sleeps() -> None:
    state = FleetState(FLEET, readings())
    for t in range(0, 31):
        observe(state, float(t), IDLE)
    state.canaries_due("spark1", 30.0)
    observe(state, 41.0, IDLE, canary=timed_out())
    assert instance(state, 41.0).status.state is State.DEGRADED  # awake: a wedge
    observe(state, 42.0, put_to_sleep(IDLE, 1))
    view = instance(state, 42.0)
    assert view.status.state is State.UP and view.canary is not None and not view.canary.wedged


def test_no_wedge_decode_or_cold_finding_on_a_sleeping_engine() -> None:
    engine = DiagnosisEngine(load_catalogue())
    state = FleetState(FLEET, readings())
    seen: set[str] = set()
    for t in range(0, 61):
        observe(state, float(t), put_to_sleep(FROZEN_BUSY, 1))
        (node,) = state.view(float(t), window_s=None)
        seen.update(f.id for f in engine.evaluate(node, None, float(t)) if f.instance == "qwen")
    assert seen == set()
    # The same minute awake: the engine-wedged finding opens (so the silence above is the sleep's).
    engine, state = DiagnosisEngine(load_catalogue()), FleetState(FLEET, readings())
    for t in range(0, 61):
        observe(state, float(t), FROZEN_BUSY)
        (node,) = state.view(float(t), window_s=None)
        seen.update(f.id for f in engine.evaluate(node, None, float(t)) if f.instance == "qwen")
    assert "engine-wedged" in seen
