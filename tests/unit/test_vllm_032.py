"""vLLM 0.32's operator series, read from a real server's scrapes (``tests/data/vllm-0.32``), and the
fallback where an older version does not publish them: None, shown as "–", never a fake 0."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.engines.vllm.scrape import WANTED, normalise
from sparktui.headless.snapshot import render_snapshot, views_json
from sparktui.model.derive import EngineRates
from sparktui.model.fleet import FleetState
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation
from sparktui.model.promtext import parse
from sparktui.model.scrape import ModelScrape, Sleep
from sparktui.model.tracker import ScrapeTracker
from tests.conftest import DATA, VLLM_FIXTURES
from tests.support.fixture_fleet import put_to_sleep

REAL = DATA / "vllm-0.32"
EXPECTED: dict[str, Any] = json.loads((REAL / "expected.json").read_text())
WINDOW_S = 10.0  # the scrape times were not recorded; the window is ours, the counts are vLLM's


def _real_window() -> tuple[EngineRates, ModelScrape]:
    tracker = ScrapeTracker()
    for t, name in ((0.0, "before.prom"), (WINDOW_S, "after.prom")):
        tracker.observe(t, normalise(parse((REAL / name).read_text(), keep=WANTED.__contains__)))
    rates = tracker.rates()
    assert rates is not None and tracker.latest is not None
    return rates, tracker.latest.models["tiny"]


def test_admission_rejections_by_reason_equal_the_503s_the_burst_got() -> None:
    rates, _model = _real_window()
    assert rates.admission_rejections == EXPECTED["admission_rejections"]  # 12 busy, 4 prefill backlog
    assert rates.admission_rejections_per_s == pytest.approx((12 + 4) / WINDOW_S)


def test_prompt_sources_equal_the_usage_vllm_answered_with() -> None:
    rates, _model = _real_window()
    sources = rates.prompt_sources
    assert sources is not None
    assert sources.tokens == {
        "local_compute": EXPECTED["prompt_tokens_computed"],
        "local_cache_hit": EXPECTED["prompt_tokens_cached"],
        "external_kv_transfer": 0.0,
    }
    assert sources.total == EXPECTED["prompt_tokens"]
    assert sources.share("local_cache_hit") == pytest.approx(768 / 2289)
    assert sources.share("external_kv_transfer") == 0.0  # published, and none came: a real 0


def test_cache_hits_by_tier_are_all_on_the_device_without_an_offload_connector() -> None:
    rates, _model = _real_window()
    tiers = rates.cached_tiers
    assert tiers is not None
    assert tiers.tokens["device"] == EXPECTED["prompt_tokens_cached"]
    assert tiers.share("device") == 1.0 and tiers.share("host") == 0.0


def test_prefill_kv_computed_per_request_is_prompt_minus_cached_over_the_requests_served() -> None:
    rates, _model = _real_window()
    prefill = rates.prefill_computed_per_request
    assert prefill is not None
    assert prefill.count == EXPECTED["requests_succeeded"]
    assert prefill.mean == pytest.approx(EXPECTED["prompt_tokens_computed"] / EXPECTED["requests_succeeded"])


def test_tokens_per_step_add_up_to_the_computed_prompt_and_generated_tokens() -> None:
    rates, _model = _real_window()
    steps = rates.tokens_per_step
    assert steps is not None and steps.mean is not None
    assert steps.count == 127  # engine steps in the burst: the scrapes' _count 167 - 40
    assert steps.mean * steps.count == pytest.approx(EXPECTED["prompt_tokens_computed"] + EXPECTED["generation_tokens"])
    assert steps.p50 is not None and steps.p90 is not None and steps.p50 <= steps.p90


def test_the_real_gauges_waiting_by_reason_and_sleep_state() -> None:
    _rates, model = _real_window()
    assert model.waiting_by_reason == {"capacity": 0.0, "deferred": 0.0}
    assert model.waiting_for_capacity == 0.0 and model.waiting_deferred == 0.0  # published: 0 is real
    assert model.sleep is Sleep.AWAKE and not model.asleep


@pytest.mark.parametrize(("level", "sleep"), [(0, Sleep.AWAKE), (1, Sleep.WEIGHTS_OFFLOADED), (2, Sleep.DISCARD_ALL)])
def test_the_sleep_level_is_read_from_the_flags(level: int, sleep: Sleep) -> None:
    model = normalise(parse(put_to_sleep((REAL / "after.prom").read_text(), level))).models["tiny"]
    assert model.sleep is sleep and model.asleep == (level > 0)


def test_asleep_with_neither_level_flag_is_kv_cache_released() -> None:
    text = 'vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} 0.0\n'
    assert normalise(parse(text)).models["m"].sleep is Sleep.KV_RELEASED


def test_one_engine_asleep_makes_the_model_asleep() -> None:
    text = (
        'vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} 1.0\n'
        'vllm:engine_sleep_state{engine="1",model_name="m",sleep_state="awake"} 0.0\n'
        'vllm:engine_sleep_state{engine="1",model_name="m",sleep_state="weights_offloaded"} 1.0\n'
    )
    assert normalise(parse(text)).models["m"].sleep is Sleep.WEIGHTS_OFFLOADED


def test_waiting_by_reason_is_summed_over_engines() -> None:
    text = (
        'vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 3.0\n'
        'vllm:num_requests_waiting_by_reason{engine="1",model_name="m",reason="capacity"} 2.0\n'
        'vllm:num_requests_waiting_by_reason{engine="1",model_name="m",reason="deferred"} 4.0\n'
    )
    model = normalise(parse(text)).models["m"]
    assert (model.waiting_for_capacity, model.waiting_deferred) == (5.0, 4.0)


# --- fallbacks: the same numbers from the 0.33 fixtures, then with the series gone ------------------

NEW_FAMILIES = (
    "vllm:num_requests_waiting_by_reason",
    "vllm:engine_sleep_state",
    "vllm:admission_rejections",
    "vllm:prompt_tokens_by_source",
    "vllm:prompt_tokens_cached_by_source",
    "vllm:iteration_tokens_total",
    "vllm:request_prefill_kv_computed_tokens",
)
OLD_SERVER = re.compile("^(?:# (?:HELP|TYPE) )?(?:" + "|".join(map(re.escape, NEW_FAMILIES)) + r")[_{ ]")


def _as_older_server(text: str) -> str:
    """A 0.33 scrape without the families an older vLLM does not publish."""
    return "".join(line for line in text.splitlines(keepends=True) if not OLD_SERVER.match(line))


def _fixture_window(older: bool) -> tuple[EngineRates, ModelScrape]:
    scenario = VLLM_FIXTURES / "mtp2-steady"
    tracker = ScrapeTracker()
    for entry in json.loads((scenario / "scrapes.json").read_text())[:10]:
        text = (scenario / entry["file"]).read_text()
        tracker.observe(entry["t"], normalise(parse(_as_older_server(text) if older else text)))
    rates = tracker.rates()
    assert rates is not None and tracker.latest is not None
    return rates, next(iter(tracker.latest.models.values()))


def test_the_0_33_fixtures_give_every_new_number() -> None:
    rates, model = _fixture_window(older=False)
    assert model.sleep is Sleep.AWAKE and model.waiting_for_capacity is not None
    assert set(rates.admission_rejections) == {"max_num_queued_reqs", "max_num_queued_tokens"}
    assert rates.admission_rejections_per_s == 0.0  # published and none happened
    assert rates.prompt_sources is not None and rates.prompt_sources.share("local_cache_hit") is not None
    assert rates.cached_tiers is not None
    assert rates.tokens_per_step is not None and rates.tokens_per_step.mean is not None
    assert rates.prefill_computed_per_request is not None


def test_a_version_without_the_series_gives_none_not_zero() -> None:
    rates, model = _fixture_window(older=True)
    assert model.sleep is None and not model.asleep
    assert model.waiting_for_capacity is None and model.waiting_deferred is None
    assert model.waiting is not None  # the older total is still read
    assert rates.admission_rejections == {} and rates.admission_rejections_per_s is None
    assert rates.prompt_sources is None and rates.cached_tiers is None
    assert rates.tokens_per_step is None and rates.prefill_computed_per_request is None
    assert rates.generation_tokens_per_s is not None  # the rest of the window is unaffected


def test_the_poller_asks_for_every_new_series() -> None:
    for family in NEW_FAMILIES:
        assert any(name.startswith(family) for name in WANTED), family
    text = (REAL / "after.prom").read_text()
    assert normalise(parse(text, keep=WANTED.__contains__)) == normalise(parse(text))


# --- shown where they belong: snapshot text and JSON (the node screen uses the same lines) -----------

FLEET_CONFIG = """
[[nodes]]
name = "spark1"
host = "127.0.0.1"
[[nodes.vllm]]
name = "tiny"
port = 18123
"""


def _snapshot_of(texts: list[str]) -> tuple[str, dict[str, Any]]:
    def ok(body: str) -> HttpResult:
        return HttpResult(url="http://127.0.0.1:18123", kind=FetchKind.OK, status=200, body=body.encode())

    state = FleetState(parse_config(FLEET_CONFIG, source="test.toml"), readings())
    for index, text in enumerate(texts):
        t = index * WINDOW_S
        observation = ServerObservation(name="tiny", health=ok(""), metrics=ok(text))
        state.apply(NodeObservation(node="spark1", t=t, wall=1e9 + t, vllm=(observation,)))
    views = state.view((len(texts) - 1) * WINDOW_S, window_s=None)
    (node,) = json.loads(views_json(views))["nodes"]
    return render_snapshot(views), node


def test_the_snapshot_shows_the_real_numbers_and_json_carries_them() -> None:
    text, node = _snapshot_of([(REAL / "before.prom").read_text(), (REAL / "after.prom").read_text()])
    assert "waiting 0 (capacity 0, deferred 0)" in text
    assert "admission rejections 1.6/s (max_num_queued_reqs 12, max_num_queued_tokens 4)" in text
    assert "prompt computed 66% · cache hit 34% (device 100%) · external 0%" in text
    assert "tokens per step mean 13.6, p50 ≤1, p90 7.1\n" in text
    assert "prefill computed per request mean 152\n" in text
    instance = node["instances"][0]
    assert instance["waiting_for_capacity"] == 0.0 and instance["sleep"] == "awake"
    rates = instance["rates"]
    assert rates["admission_rejections"] == {"max_num_queued_reqs": 12.0, "max_num_queued_tokens": 4.0}
    assert rates["prompt_sources"]["tokens"]["local_cache_hit"] == 768.0
    assert rates["prompt_sources"]["shares"]["local_cache_hit"] == pytest.approx(768 / 2289)
    assert rates["tokens_per_step"]["count"] == 127.0


def test_the_snapshot_shows_a_dash_where_the_version_has_no_series() -> None:
    scenario = VLLM_FIXTURES / "mtp2-steady"
    text, node = _snapshot_of([_as_older_server((scenario / f"scrape-00{i}.prom").read_text()) for i in (0, 1)])
    assert "(capacity –, deferred –)" in text
    assert "admission rejections –" in text
    assert "prompt –\n" in text
    assert "tokens per step –\n" in text and "prefill computed per request –\n" in text
    instance = node["instances"][0]
    assert instance["sleep"] is None and instance["rates"]["prompt_sources"] is None


def test_a_sleeping_instance_reads_as_asleep_in_the_snapshot() -> None:
    text, node = _snapshot_of([put_to_sleep((REAL / "after.prom").read_text(), 1)])
    assert "  tiny  http://127.0.0.1:18123  up" in text
    assert "    tiny: asleep (level 1: weights offloaded to host memory)" in text
    assert node["instances"][0]["sleep"] == "weights_offloaded"
