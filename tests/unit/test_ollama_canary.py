"""Ollama's canary (pure): which model it may name and the ``keep_alive`` it asks (a loaded model: the
seconds left before its expiry; held for ever: -1; unloaded, overdue or near its expiry: none), how its
answer is judged (Ollama's ``"response"`` and ``"done": true``, not OpenAI's ``"choices"``) and timed
(the engine's own TTFT and decode rate), through the fleet state as the monitor runs it."""

from __future__ import annotations

import json

import pytest

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.engines.ollama.canary import (
    CANARY,
    CANARY_TOKENS,
    FOREVER,
    FOREVER_S,
    MIN_LEFT_S,
    canary_request,
    keep_alive_for,
    read_answer,
)
from sparktui.model.canary import CanaryAsk, CanaryResult, CanaryView, canary_text, judge
from sparktui.model.fleet import CanaryOrder, FleetState, InstanceView
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation
from sparktui.model.scrape import ModelLoad, ServedModel
from tests.support.ollama_data import CONFIG, EXPIRES, MODELS, PS
from tests.support.ollama_server import GENERATED

WALL = 1_760_000_000.0
NS = 1e9
TTFT_S = (int(GENERATED["load_duration"]) + int(GENERATED["prompt_eval_duration"])) / NS  # type: ignore[call-overload]
DECODE = int(GENERATED["eval_count"]) / (int(GENERATED["eval_duration"]) / NS)  # type: ignore[call-overload]


def _loaded(name: str, left_s: float | None, overdue_s: float | None = None) -> ServedModel:
    expires = WALL + left_s if left_s is not None else None
    return ServedModel(name, ModelLoad.LOADED, expires_wall=expires, overdue_s=overdue_s)


def _ok(body: bytes, elapsed: float = 0.5) -> HttpResult:
    return HttpResult(
        url="http://10.0.0.1:11434/api/generate", kind=FetchKind.OK, status=200, body=body, elapsed_s=elapsed
    )


# --- the keep_alive it asks, and the model it names ---------------------------------------------------


def test_a_loaded_model_is_asked_to_stay_exactly_as_long_as_it_had_left() -> None:
    assert keep_alive_for(_loaded("gemma3", 240.0), WALL) == 240
    assert keep_alive_for(_loaded("gemma3", 240.9), WALL) == 240  # rounded down: never later than it was


def test_a_model_held_for_ever_is_asked_for_ever() -> None:
    assert keep_alive_for(_loaded("gemma3", FOREVER_S + 1), WALL) == FOREVER == -1


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(ServedModel("qwen3:8b", ModelLoad.UNLOADED), id="unloaded: a request would load it"),
        pytest.param(_loaded("gemma3", -600.0, overdue_s=600.0), id="overdue"),
        pytest.param(_loaded("gemma3", -5.0), id="past its expiry, not overdue yet"),
        pytest.param(_loaded("gemma3", MIN_LEFT_S - 1), id="near its expiry: it could race the unload"),
        pytest.param(_loaded("gemma3", None), id="no expiry known"),
    ],
)
def test_no_canary_names_a_model_it_would_load_or_keep(model: ServedModel) -> None:
    assert keep_alive_for(model, WALL) is None
    assert canary_request(CanaryAsk("Hi", model.id, (model,), WALL)) is None


def test_no_wall_time_no_canary() -> None:
    assert keep_alive_for(_loaded("gemma3", 240.0), None) is None


def test_the_first_model_a_canary_may_name_gets_it_with_its_own_keep_alive() -> None:
    models = (
        _loaded("qwen3:8b", -600.0, overdue_s=600.0),
        _loaded("llama3.2:1b", 10.0),
        _loaded("gemma3", 240.0),
        ServedModel("mistral", ModelLoad.UNLOADED),
    )
    found = canary_request(CanaryAsk("Hi", "qwen3:8b", models, WALL))
    assert found is not None
    model, payload = found
    assert model == "gemma3"
    assert payload == {
        "model": "gemma3",
        "prompt": "Hi",
        "stream": False,
        "keep_alive": 240,
        "options": {"num_predict": CANARY_TOKENS, "temperature": 0},
    }


# --- its answer ---------------------------------------------------------------------------------------


def test_the_answer_gives_the_engines_own_ttft_and_decode_rate() -> None:
    answer = read_answer(json.dumps(GENERATED).encode())
    assert answer is not None
    assert answer.ttft_s == pytest.approx(TTFT_S)
    assert answer.decode_tokens_per_s == pytest.approx(DECODE)


def test_one_generated_token_makes_no_decode_rate() -> None:
    answer = read_answer(json.dumps({**GENERATED, "eval_count": 1}).encode())
    assert answer is not None and answer.decode_tokens_per_s is None
    assert answer.ttft_s == pytest.approx(TTFT_S)


def test_the_judge_takes_ollamas_answer_as_proof_and_its_own_times() -> None:
    result = judge(_ok(json.dumps(GENERATED).encode(), elapsed=0.5), 10.0, 10.5, CANARY.read)
    assert result.answered and not result.timed_out and result.engine_timed
    assert result.ttft_s == pytest.approx(TTFT_S)  # the engine's, not the wall's 0.5 s
    assert result.decode_tokens_per_s == pytest.approx(DECODE)


def test_a_cached_prompt_without_its_times_falls_back_to_the_wall_time() -> None:
    cached = {k: v for k, v in GENERATED.items() if not k.startswith("prompt_eval")}
    result = judge(_ok(json.dumps(cached).encode(), elapsed=0.5), 10.0, 10.5, CANARY.read)
    assert result.answered and not result.engine_timed
    assert result.ttft_s == 0.5


@pytest.mark.parametrize(
    "body",
    [
        json.dumps({"id": "cmpl-1", "object": "text_completion", "choices": [{"text": "!"}]}).encode(),
        json.dumps({**GENERATED, "done": False}).encode(),
        json.dumps({"error": "model 'gemma3' not found"}).encode(),
        b"not json",
    ],
)
def test_what_is_not_ollamas_finished_answer_proves_nothing(body: bytes) -> None:
    result = judge(_ok(body), 10.0, 10.5, CANARY.read)
    assert not result.answered and result.problem == "the answer is not a completion"


def test_the_canary_line_shows_the_engines_times_and_a_dash_for_no_rate() -> None:
    def line(decode: float | None) -> str:
        last = CanaryResult(10.0, 10.5, 0.115, False, None, engine_timed=True, decode_tokens_per_s=decode)
        return canary_text(CanaryView(sent=1, in_flight=False, last=last, wedged=False))

    assert line(343.0) == "canary: 1 sent, last answered: TTFT 115 ms, decode 343.0 tok/s (the engine's own timing)"
    assert line(None) == "canary: 1 sent, last answered: TTFT 115 ms, decode – (the engine's own timing)"


# --- through the fleet state --------------------------------------------------------------------------

LEFT_S = 300.0  # the docs' model expires this long after the first poll


def _poll(state: FleetState, t: float, canary: HttpResult | None = None) -> InstanceView:
    served = ServerObservation(
        name="ollama",
        health=_ok(b"Ollama is running"),
        metrics=_ok(json.dumps(PS).encode()),
        version=_ok(b'{"version":"0.12.6"}'),
        models=_ok(json.dumps(MODELS).encode()),
        canary=canary,
    )
    state.apply(NodeObservation(node="spark1", t=t, wall=EXPIRES - LEFT_S + t, vllm=(served,)))
    (node,) = state.view(t, window_s=None)
    (instance,) = node.instances
    return instance


def test_an_idle_ollama_gets_a_canary_to_its_loaded_model_and_shows_its_times() -> None:
    state = FleetState(parse_config(CONFIG, source="test.toml"), readings())
    t = 0.0
    orders: tuple[CanaryOrder, ...] = ()
    while not orders:
        assert t < LEFT_S, "no canary went out while the model had time left"
        _poll(state, t)
        orders = state.canaries_due("spark1", t)
        if not orders:
            t += 1.0
    (order,) = orders
    assert (order.instance, order.model, order.path) == ("ollama", "gemma3", "/api/generate")
    assert order.payload is not None and order.payload["keep_alive"] == int(LEFT_S - t)
    view = _poll(state, t + 1.0, canary=_ok(json.dumps(GENERATED).encode()))
    assert view.canary is not None and view.canary.last is not None
    last = view.canary.last
    assert last.answered and last.engine_timed and last.ttft_s == pytest.approx(TTFT_S)
    assert last.decode_tokens_per_s == pytest.approx(DECODE)


def test_no_canary_near_its_models_expiry() -> None:
    state = FleetState(parse_config(CONFIG, source="test.toml"), readings())
    start = LEFT_S - MIN_LEFT_S + 1  # under MIN_LEFT_S left from the first poll on
    for t in range(int(start), int(start) + 120):
        _poll(state, float(t))
        assert state.canaries_due("spark1", float(t)) == ()
