"""The demo's llama-server: its bodies in the real server's shapes (tests/data/llamacpp-11434), and read
through sparktui's llama.cpp reading they give the numbers the simulation implies."""

from __future__ import annotations

import json
import random
from pathlib import Path

from sparktui.demo.llamaserver import PROFILES, LlamaEngine
from sparktui.engines.llamacpp import scrape
from sparktui.engines.llamacpp.demo import metrics_body, models_body, props_body, slots_body
from sparktui.model.promtext import parse

DATA = Path(__file__).resolve().parents[1] / "data" / "llamacpp-11434"


def engine(seed: int = 3) -> LlamaEngine:
    return LlamaEngine(PROFILES["qwen3-8b"], random.Random(seed))


def _keys(value: object) -> object:
    """The JSON's keys, in order, all the way down (a list by its first item)."""
    if isinstance(value, dict):
        return [(key, _keys(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [_keys(value[0])] if value else []
    return None


def test_metrics_have_the_real_servers_names_help_and_type_lines_in_its_order() -> None:
    served = metrics_body(engine().state).decode().splitlines()
    real = (DATA / "idle-metrics.txt").read_text().splitlines()
    assert [line for line in served if line.startswith("#")] == [line for line in real if line.startswith("#")]
    assert [line.split()[0] for line in served if not line.startswith("#")] == [
        line.split()[0] for line in real if not line.startswith("#")
    ]


def test_props_models_and_slots_have_the_real_servers_keys() -> None:
    sim = engine()
    state = sim.state
    assert _keys(json.loads(props_body(state))) == _keys(json.loads((DATA / "idle-props.json").read_text()))
    assert _keys(json.loads(models_body(state))) == _keys(json.loads((DATA / "models.json").read_text()))
    assert json.loads(slots_body(state)) == [
        {"id": i, "n_ctx": 16384, "speculative": False, "is_processing": False} for i in range(2)
    ]
    while not state.processing:  # a request runs: its slot has every key the real running one has
        sim.advance(0.25)
    sim.advance(1.0)
    (running,) = [slot for slot in json.loads(slots_body(state)) if slot["is_processing"]]
    (real,) = [s for s in json.loads((DATA / "running-slots.json").read_text()) if s["is_processing"]]
    assert _keys(running) == _keys(real)
    while state.processing:  # and once it ended, the idle slot keeps its last task as the real one does
        sim.advance(0.25)
    ended = next(slot for slot in json.loads(slots_body(state)) if "id_task" in slot)
    (real,) = [s for s in json.loads((DATA / "done-slots.json").read_text()) if "id_task" in s]
    assert _keys(ended) == _keys(real)
    assert ended["next_token"] == [{"has_next_token": False, "has_new_line": False, "n_remain": -1, "n_decoded": 0}]


def test_read_by_sparktui_the_bodies_give_the_simulated_requests_tokens() -> None:
    sim = engine()
    state = sim.state
    seen_running = seen_ended = 0
    for _ in range(2400):  # ten simulated minutes, read every quarter second
        sim.advance(0.25)
        expo = parse(metrics_body(state).decode())
        state.books.scraped()
        slots = scrape.read_slots(slots_body(state))
        props = scrape.read_props(props_body(state))
        (model,) = scrape.normalise(expo, "qwen3-8b", slots=slots, props=props).models.values()
        tally = sim.tally
        assert model.counters["prompt_tokens"] == tally.prompt_tokens
        assert model.counters["prompt_tokens_cached"] == tally.cached_tokens
        assert model.counters[scrape.ENDED] == tally.generated_ended  # llama-server's count: ended requests
        assert model.counters["generation_tokens"] == sim.generated_so_far()  # sparktui's: as they come
        assert expo.get("llamacpp:n_decode_total")[0][1] == tally.decode_calls
        assert model.running == state.processing and model.waiting == state.deferred
        used = sum(s.run.sequence_tokens for s in state.slots if s.run is not None)
        assert model.kv_usage_by_engine == {"0": used / 32768}
        seen_running += state.processing > 0
        seen_ended = tally.requests_ended
    assert seen_ended >= 10 and 0.1 < seen_running / 2400 < 0.6  # a trickle: one slot busy now and then
    assert 24_000 > sim.tally.generated_ended > 1_000


def test_generated_tokens_reach_metrics_only_when_the_request_ends() -> None:
    sim = engine()
    state = sim.state
    while not state.processing:
        sim.advance(0.25)
    ended_before = state.books.tokens_predicted_total
    decode_before = state.books.n_decode_total
    while state.processing and sim.tally.requests_ended == 0:
        sim.advance(0.25)
        if sim.tally.requests_ended == 0:
            assert state.books.tokens_predicted_total == ended_before
            assert state.books.n_decode_total > decode_before  # one llama_decode() per step
    assert state.books.tokens_predicted_total == ended_before + sim.tally.generated_ended


def test_a_boot_answers_503_loading_then_serves_fresh_counters() -> None:
    from sparktui.engines.llamacpp.demo import health_body

    sim = engine()
    for _ in range(400):
        sim.advance(0.25)
    assert sim.state.books.n_decode_total > 0
    sim.boot(load_s=5.0)
    status, body = health_body(sim.state)
    assert (status, json.loads(body)) == (
        503,
        {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}},
    )
    sim.advance(5.0)
    assert health_body(sim.state) == (200, b'{"status":"ok"}')
    assert sim.state.books.tokens_predicted_total == 0
