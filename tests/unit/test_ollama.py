"""Ollama's reading (pure): ``/api/ps`` and ``/v1/models`` into the models it holds and has, what each
holds, an overdue model, "–" for every number it does not export, its canary (only to a model it holds,
keeping its expiry; ``test_ollama_canary.py``), and its models' bytes
as their own part of the unified-memory ledger. Bodies as docs.ollama.com/api/ps and
docs.ollama.com/api/openai-compatibility give them; hostile ones too."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparktui.config import parse_config
from sparktui.engines import readings, registry
from sparktui.engines.ollama import LACKS
from sparktui.engines.ollama.ps import MAX_LISTED, MAX_LOADED, OVERDUE_GRACE_S, expiry, read_ps, served_models
from sparktui.model.fleet import FleetState, InstanceView
from sparktui.model.host import MemoryLedger, ledger
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.model.reading import Answers
from sparktui.model.scrape import ModelLoad, ScrapeProblem, ServedModel
from sparktui.model.status import State
from tests.support.ollama_data import CONFIG, EXPIRES, MODELS, PS, serving_sample

OLLAMA = registry()["ollama"]


def _body(found: object) -> bytes:
    return json.dumps(found).encode()


def test_the_docs_example_is_one_loaded_model_and_what_it_holds() -> None:
    (model,) = read_ps(_body(PS), wall=EXPIRES - 60)
    assert (model.id, model.load) == ("gemma3", ModelLoad.LOADED)
    assert (model.size_bytes, model.gpu_bytes, model.context_tokens) == (6591830464, 5333539264, 4096)
    assert model.gpu_share == pytest.approx(0.809, abs=1e-3)
    assert model.expires_at == "2025-10-17T16:47:07.93355-07:00"
    assert model.expires_wall == pytest.approx(EXPIRES)
    assert model.overdue_s is None
    assert model.words == "gemma3 loaded (6.1 GiB, 81% in GPU memory, context 4096)"


def test_a_model_still_loaded_past_its_expiry_and_the_grace_is_overdue() -> None:
    (inside,) = read_ps(_body(PS), wall=EXPIRES + OVERDUE_GRACE_S)
    assert inside.overdue_s is None  # the unload itself, and a small clock difference
    (late,) = read_ps(_body(PS), wall=EXPIRES + 300)
    assert late.overdue_s == pytest.approx(300)
    assert late.words.endswith("; overdue: 5m00s past its keep-alive)")
    (unjudged,) = read_ps(_body(PS), wall=None)
    assert unjudged.overdue_s is None


def test_every_model_it_has_the_loaded_ones_first() -> None:
    loaded = read_ps(_body(PS), wall=EXPIRES)
    every = served_models(loaded, _body(MODELS))
    assert [(m.id, m.load) for m in every] == [("gemma3", ModelLoad.LOADED), ("qwen3:8b", ModelLoad.UNLOADED)]
    assert served_models(loaded, None) == loaded  # /v1/models not answered yet
    assert served_models((), b"not json") == ()


def test_the_reading_says_what_ollama_does_not_export_and_never_counts() -> None:
    read = OLLAMA.reading.read_body
    assert read is not None
    scrape = read(_body(PS), Answers(models=_body(MODELS), wall=EXPIRES))
    (model,) = scrape.models.values()
    assert model.model_name == "gemma3" and model.lacks == LACKS
    assert (model.running, model.waiting, dict(model.counters), dict(model.histograms)) == (None, None, {}, {})
    assert scrape.served is not None and [m.id for m in scrape.served] == ["gemma3", "qwen3:8b"]
    assert OLLAMA.reading.canary_plan is not None and OLLAMA.reading.canary_plan.path == "/api/generate"
    assert (OLLAMA.polling.health_path, OLLAMA.polling.metrics_path, OLLAMA.polling.info_path) == (
        "/",
        "/api/ps",
        "/api/version",
    )
    assert OLLAMA.reading.version({"version": "0.12.6"}) == "0.12.6"


@pytest.mark.parametrize(
    "body",
    [b"", b"\xff\xfe\x00garbage", b"[]", b'{"models": {}}', b'{"models": "gemma3"}', b"null", b"[" * 5000],
)
def test_a_body_that_is_not_the_list_of_running_models_is_one_line(body: bytes) -> None:
    with pytest.raises(ScrapeProblem, match=r"^/api/ps: not Ollama's list of running models$"):
        read_ps(body, wall=EXPIRES)


def test_hostile_entries_are_skipped_or_unknown_never_zero() -> None:
    entries = [
        "gemma3",
        {"model": 7},
        {"name": "", "model": "  "},
        {
            "name": "big\x1b[31m",
            "size": 10**400,
            "size_vram": -1,
            "context_length": "4096",
            "expires_at": "tomorrow",
        },
        {"name": "zero", "size": True, "size_vram": 1.5, "context_length": 0, "expires_at": "0001-01-01T00:00:00Z"},
        {"name": "zero", "size": 1},  # listed twice: its first entry
        {"model": "by-model", "expires_at": "2025-10-17T16:47:07"},  # no offset: no time
    ]
    found = read_ps(_body({"models": entries}), wall=EXPIRES + 10**6)
    assert [m.id for m in found] == ["big", "zero", "by-model"]  # the escape sequence stripped
    for model in found:
        assert (model.size_bytes, model.gpu_bytes, model.context_tokens) == (None, None, None)
        assert (model.expires_at, model.expires_wall, model.overdue_s) == (None, None, None)
        assert model.gpu_share is None


def test_a_huge_list_is_bounded() -> None:
    many = {"models": [{"name": f"m{i}", "size": i} for i in range(5000)]}
    assert len(read_ps(_body(many), wall=None)) == MAX_LOADED
    cards = {"data": [{"id": f"u{i}"} for i in range(5000)]}
    assert len(served_models((), _body(cards))) == MAX_LISTED


@pytest.mark.parametrize(
    ("text", "wall"),
    [
        ("2025-10-17T16:47:07.93355-07:00", EXPIRES),
        ("2024-06-04T14:38:31.837533912-07:00", datetime(2024, 6, 4, 21, 38, 31, 837533, tzinfo=UTC).timestamp()),
        ("2318-03-05T10:00:00Z", datetime(2318, 3, 5, 10, tzinfo=UTC).timestamp()),  # keep_alive -1
        ("0001-01-01T00:00:00Z", None),  # Go's zero time
        ("9999-99-99T00:00:00Z", None),
        ("2025-10-17", None),
        (12345, None),
        ("2025-10-17T16:47:07Z" + "0" * 100, None),
    ],
)
def test_expiry(text: object, wall: float | None) -> None:
    assert expiry(text) == (pytest.approx(wall) if wall is not None else None)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
FIELDS = ("name", "model", "size", "size_vram", "context_length", "expires_at", "details")


@given(st.lists(st.dictionaries(st.sampled_from(FIELDS), JSON) | JSON, max_size=5))
def test_any_json_is_read_or_refused_in_one_line(entries: list[object]) -> None:
    try:
        body = json.dumps({"models": entries}).encode()
    except ValueError:
        return
    try:
        found = read_ps(body, wall=EXPIRES)
    except ScrapeProblem as exc:  # NaN or Infinity: not JSON
        assert str(exc) == "/api/ps: not Ollama's list of running models"
        return
    for model in found:
        assert model.load is ModelLoad.LOADED and "\x1b" not in model.words
        assert model.size_bytes is None or model.size_bytes >= 0
        assert model.overdue_s is None or model.overdue_s > OVERDUE_GRACE_S


# --- the instance, end to end through the fleet state ------------------------------------------------


def _ok(body: bytes, status: int = 200) -> HttpResult:
    return HttpResult(url="http://10.0.0.1:11434", kind=FetchKind.OK, status=status, body=body, elapsed_s=0.01)


def _poll(state: FleetState, t: float, ps: bytes) -> InstanceView:
    served = ServerObservation(
        name="ollama",
        health=_ok(b"Ollama is running"),
        metrics=_ok(ps),
        version=_ok(b'{"version":"0.12.6"}'),
        models=_ok(_body(MODELS)),
    )
    state.apply(NodeObservation(node="spark1", t=t, wall=EXPIRES + t, vllm=(served,)))
    (node,) = state.view(t, window_s=None)
    (instance,) = node.instances
    return instance


def test_an_ollama_instance_is_up_with_its_models_and_no_number_is_made_up() -> None:
    state = FleetState(parse_config(CONFIG, source="test.toml"), readings())
    for t in range(0, 40):
        view = _poll(state, float(t), _body(PS))
        assert state.canaries_due("spark1", float(t)) == ()  # never: its one model is at or past its expiry
    assert view.status.state is State.UP
    assert view.status.reasons == ("ollama: loads models on demand: 1 of 2 loaded (gemma3)",)
    assert [(m.id, m.load) for m in view.models] == [("gemma3", ModelLoad.LOADED), ("qwen3:8b", ModelLoad.UNLOADED)]
    assert (view.running, view.waiting, view.model_name) == (None, None, None)
    assert view.canary is not None and view.canary.sent == 0
    assert view.rates is None or view.rates.generation_tokens_per_s is None
    assert view.lacks == LACKS and view.version == "0.12.6" and view.engine == "Ollama"


def test_an_overdue_model_degrades_the_instance_and_says_what_it_holds() -> None:
    state = FleetState(parse_config(CONFIG, source="test.toml"), readings())
    view = _poll(state, 600.0, _body(PS))
    assert view.status.state is State.DEGRADED
    assert view.status.reasons == (
        "ollama: gemma3 still loaded holding 6.1 GiB, 10m00s past its keep-alive (2025-10-17T16:47:07.93355-07:00)",
    )


def test_nothing_loaded_is_up_and_an_unreadable_ps_is_degraded() -> None:
    state = FleetState(parse_config(CONFIG, source="test.toml"), readings())
    view = _poll(state, 0.0, b'{"models":[]}')
    assert view.status.state is State.UP and not view.engine_stats
    assert [m.load for m in view.models] == [ModelLoad.UNLOADED, ModelLoad.UNLOADED]
    view = _poll(state, 1.0, b"\xff")
    assert view.status.state is State.DEGRADED
    assert view.status.reasons == ("ollama: /api/ps: not Ollama's list of running models",)


# --- the unified-memory ledger -----------------------------------------------------------------------


def _ledger(models_held: float | None) -> MemoryLedger:
    gib = 2**30
    return MemoryLedger(
        total=128 * gib,
        available=60 * gib,
        free=40 * gib,
        buffers=1 * gib,
        vllm_rss=50 * gib,
        vllm_used=50 * gib,
        other_used=20 * gib,
        reclaimable_cache=15 * gib,
        shmem=2 * gib,
        shm_leftovers=0.0,
        vllm_running=True,
        models_held=models_held,
    )


def test_the_models_an_ollama_holds_are_their_own_part_of_the_ledger() -> None:
    gib = 2**30
    plain = _ledger(None).segments()
    assert [label for label, _ in plain] == ["vLLM", "other", "reclaimable cache", "shmem", "free"]
    held = _ledger(6 * gib).segments()
    assert [label for label, _ in held] == ["vLLM", "models held", "other", "reclaimable cache", "shmem", "free"]
    assert dict(held)["models held"] == 6 * gib and dict(held)["other"] == 14 * gib
    assert sum(size for _, size in held) == sum(size for _, size in plain) == 128 * gib


def test_the_held_bytes_are_a_part_of_other_at_most_all_of_it() -> None:
    first = serving_sample()
    book = ledger(first, None, 6591830464)
    assert book.models_held == 6591830464
    assert sum(v for _, v in book.segments()) == book.total
    capped = ledger(first, None, 10**15)
    assert capped.models_held == capped.other_used
    assert ledger(first).models_held is None


def test_served_model_words_of_a_router_are_unchanged() -> None:
    assert ServedModel("b", ModelLoad.FAILED, "exit code 1").words == "b failed (exit code 1)"
    assert ServedModel("a", ModelLoad.LOADED).words == "a loaded"


def test_the_nodes_ledger_shows_what_its_ollama_holds() -> None:
    sample = serving_sample()
    state = FleetState(parse_config(CONFIG, source="test.toml"), readings())
    state.apply_host(HostUpdate(node="spark1", t=0.0, sample=sample))
    _poll(state, 0.0, _body(PS))
    (node,) = state.view(0.0, window_s=None)
    assert node.ledger is not None and node.ledger.models_held == 6591830464
    state.apply_host(HostUpdate(node="spark1", t=1.0, sample=sample))
    _poll(state, 1.0, b'{"models":[]}')
    (node,) = state.view(1.0, window_s=None)
    assert node.ledger is not None and node.ledger.models_held is None


def test_a_failed_ps_is_named_by_its_path() -> None:
    state = FleetState(parse_config(CONFIG, source="test.toml"), readings())
    failed = HttpResult(url="http://10.0.0.1:11434/api/ps", kind=FetchKind.OK, status=500, body=b"", elapsed_s=0.01)
    served = ServerObservation(name="ollama", health=_ok(b"Ollama is running"), metrics=failed)
    state.apply(NodeObservation(node="spark1", t=0.0, wall=EXPIRES, vllm=(served,)))
    (node,) = state.view(0.0, window_s=None)
    assert node.instances[0].status.reasons == ("ollama: /api/ps: HTTP 500",)
