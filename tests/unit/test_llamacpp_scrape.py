"""llama-server's own bodies (tests/data/llamacpp-11434, served by the real server) read into the
engine-neutral scrape: the counts the requests that drove it imply, and one line for what cannot be."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.engines.llamacpp.scrape import (
    ENDED,
    Slot,
    context_usage,
    normalise,
    read_props,
    read_slots,
)
from sparktui.model.counters import CounterHistory, flatten
from sparktui.model.derive import derive_rates
from sparktui.model.promtext import parse
from sparktui.model.scrape import EngineScrape, ScrapeProblem, Sleep

DATA = Path(__file__).resolve().parents[1] / "data" / "llamacpp-11434"
MODEL = "tiny.gguf"


def scrape(state: str, *, slots: bool = True, props: str | None = None) -> EngineScrape:
    expo = parse((DATA / f"{state}-metrics.txt").read_text())
    read = read_slots((DATA / f"{state}-slots.json").read_bytes()) if slots else None
    found = read_props((DATA / f"{props}-props.json").read_bytes()) if props else None
    return normalise(expo, MODEL, slots=read, props=found)


def test_the_prompt_and_generated_counts_are_those_of_the_requests_that_ended() -> None:
    (model,) = scrape("done").models.values()
    assert model.counters["prompt_tokens"] == 5 + 9  # every prompt token, computed or cached
    assert model.counters["prompt_by_source:local_compute"] == 13  # B found A's BOS in the slot's cache
    assert model.counters["prompt_tokens_cached"] == model.counters["prompt_by_source:local_cache_hit"] == 1
    assert model.counters["generation_tokens"] == 40 + 60
    assert "spec_drafts" not in model.counters  # served at 0 without a draft: no speculative decoding shown
    assert (model.running, model.waiting) == (0, 0)


def test_a_running_request_counts_its_prompt_at_once_and_its_tokens_as_they_are_generated() -> None:
    (model,) = scrape("running", props="running").models.values()
    assert model.counters["prompt_tokens"] == 5 + 9 + 4
    (slot,) = [s for s in read_slots((DATA / "running-slots.json").read_bytes()) if s.processing]
    assert slot.sequence_tokens is not None and slot.decoded is not None and slot.decoded > 0
    assert model.counters[ENDED] == 100  # llama-server counts C's tokens only when it ends...
    assert model.counters["generation_tokens"] == 100 + slot.decoded  # ...its slot says how many so far
    assert model.running == 1
    assert slot.sequence_tokens - slot.decoded in (3, 4)  # the prompt and what it generated, off by one at most
    assert model.kv_usage_by_engine == {"0": slot.sequence_tokens / (2 * 2048)}
    assert model.sleep is Sleep.AWAKE


def test_the_live_count_never_goes_back_while_the_server_runs_and_starts_again_after_a_restart() -> None:
    before = normalise(parse("llamacpp:tokens_predicted_total 100\n"), MODEL, slots=(Slot(0, 2048, True, 60, 50),))
    assert before.models[MODEL].counters["generation_tokens"] == 150
    # The request ended between this poll's /metrics and /slots: in neither, for one poll.
    gap = normalise(parse("llamacpp:tokens_predicted_total 100\n"), MODEL, slots=(), previous=before)
    assert gap.models[MODEL].counters["generation_tokens"] == 150  # held, not a counter going back
    ended = normalise(parse("llamacpp:tokens_predicted_total 160\n"), MODEL, slots=(), previous=gap)
    assert ended.models[MODEL].counters["generation_tokens"] == 160
    restarted = normalise(parse("llamacpp:tokens_predicted_total 3\n"), MODEL, slots=(), previous=ended)
    assert restarted.models[MODEL].counters["generation_tokens"] == 3  # a new process: counted again from 0


def test_the_rates_of_a_window_are_the_requests_that_ended_in_it() -> None:
    history = CounterHistory()
    history.add(10.0, flatten(next(iter(scrape("idle").models.values()))))
    latest = next(iter(scrape("done").models.values()))
    history.add(12.0, flatten(latest))
    deltas = history.window()
    assert deltas is not None
    rates = derive_rates(deltas, latest)
    assert rates is not None
    assert rates.generation_tokens_per_s == pytest.approx(100 / 2.0)
    assert rates.prompt_tokens_per_s == pytest.approx(14 / 2.0)


def test_without_slots_or_props_the_context_and_sleep_are_unknown_not_zero() -> None:
    (model,) = scrape("running", slots=False).models.values()
    assert model.kv_usage_by_engine == {} and model.kv_usage_max is None
    assert model.sleep is None


def test_an_idle_server_read_without_its_slots_has_none_of_its_context_in_use() -> None:
    idle = scrape("done", slots=False, props="idle")  # no request running: /slots is not read
    (model,) = idle.models.values()
    assert model.kv_usage_by_engine == {"0": 0.0}
    assert idle.kv_capacity_tokens == 2 * 2048  # total_slots x each slot's n_ctx, from /props
    busy = scrape("running", slots=False, props="running")  # running, but /slots not read: unknown
    assert busy.models[MODEL].kv_usage_by_engine == {} and busy.kv_capacity_tokens is None


def test_props_and_slots_shapes() -> None:
    props = read_props((DATA / "idle-props.json").read_bytes())
    assert (props.total_slots, props.n_ctx, props.build, props.sleeping) == (2, 2048, "b0-unknown", False)
    slots = read_slots((DATA / "idle-slots.json").read_bytes())
    assert [(s.id, s.n_ctx, s.processing, s.sequence_tokens) for s in slots] == [
        (0, 2048, False, None),
        (1, 2048, False, None),
    ]
    assert context_usage(slots) == 0.0


def test_speculative_counters_are_read_once_a_draft_is_used() -> None:
    text = (
        "llamacpp:spec_decode_num_drafts_total 10\nllamacpp:spec_decode_num_draft_tokens_total 40\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 13\n"
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 9\n'
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 4\n'
    )
    counters = normalise(parse(text), MODEL).models[MODEL].counters
    assert (counters["spec_drafts"], counters["spec_draft_tokens"], counters["spec_accepted_tokens"]) == (10, 40, 13)
    assert (counters["spec_accepted_pos:0"], counters["spec_accepted_pos:1"]) == (9, 4)


def test_an_idle_slots_leftover_prompt_is_no_context_in_use() -> None:
    slots = (Slot(0, 1000, False, 900, None), Slot(1, 1000, True, 250, 200))
    assert context_usage(slots) == 250 / 2000


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "llamacpp:tokens_predicted_total -5\n",
            "llamacpp:tokens_predicted_total is -5, and a counter cannot be negative",
        ),
        ("llamacpp:requests_processing NaN\n", "NaN"),
        ("llamacpp:requests_processing 1e300\n", "llamacpp:requests_processing is"),
        ('llamacpp:prompt_tokens_total 1\nllamacpp:prompt_tokens_total{a="b"} 2\n', "appears 2 times"),
        (
            'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="²"} 1\n',
            "position that is not a whole number",
        ),
        ("vllm:num_requests_running 1\n", "no llamacpp: metric"),
    ],
)
def test_a_number_that_cannot_be_is_one_line_naming_it(text: str, reason: str) -> None:
    with pytest.raises(ScrapeProblem) as caught:
        normalise(parse(text), MODEL)
    assert reason in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "body",
    [b"{}", b"[1]", b'[{"id": 0, "n_ctx": 2048}]', b'[{"id": -1, "n_ctx": 1, "is_processing": false}]', b"not json"],
)
def test_slots_that_are_not_llama_servers_are_refused_in_one_line(body: bytes) -> None:
    with pytest.raises(ScrapeProblem) as caught:
        read_slots(body)
    assert str(caught.value).startswith("/slots: ")


def test_props_fields_of_the_wrong_type_are_unknown() -> None:
    props = read_props(
        b'{"total_slots": "2", "is_sleeping": 1, "build_info": "\\u001b]0;x\\u0007b1",'
        b' "default_generation_settings": {"n_ctx": 1e400}}'
    )
    assert (props.total_slots, props.sleeping, props.n_ctx) == (None, None, None)
    assert props.build is not None and "\x1b" not in props.build
