"""Data-parallel engines: each engine's numbers beside the totals, the KV cache in one kind, and the
imbalance marker, checked on the two-engine fixture (tests/data/vllm-0.32/dp2) against its
expected.json (computed from the simulation, never from the scrapes)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sparktui.diagnosis.alerts import read_rules
from sparktui.engines.vllm.scrape import WANTED, normalise
from sparktui.headless.snapshot import render_snapshot, views_json
from sparktui.model.engines import imbalanced, kv_line, kv_load, share_ratios
from sparktui.model.fleet import InstanceView
from sparktui.model.promtext import PromParser
from sparktui.model.scrape import EngineScrape
from sparktui.model.specs import AlertRuleSpec, Thresholds
from sparktui.model.tracker import ScrapeTracker
from sparktui.model.units import fmt_pct, fmt_rate
from sparktui.ui.kiosk_figures import kiosk_tile
from tests.support.dp_data import CONFIG, EXPECTED, dp2_fleet, dp2_scrapes
from tests.unit.test_vllm_fixtures import _check

MODEL = EXPECTED["model_name"]
ENGINES = EXPECTED["engines"]


def _normalised() -> list[tuple[float, EngineScrape]]:
    parser = PromParser(keep=WANTED.__contains__)
    return [(t, normalise(parser.parse(body))) for t, body in dp2_scrapes()]


def _tracker() -> ScrapeTracker:
    tracker = ScrapeTracker()
    for t, scrape in _normalised():
        tracker.observe(t, scrape)
    return tracker


def _instance(config: str = CONFIG) -> InstanceView:
    state, now = dp2_fleet(config)
    (view,) = state.view(now, window_s=None)
    return view.instances[0]


def _capacity(scrape: EngineScrape, engine: str) -> float:
    labels = scrape.cache_config[engine].labels  # num_gpu_blocks x block_size: kv_cache_size_tokens is "None"
    return float(labels["num_gpu_blocks"]) * float(labels["block_size"])


# --- the fixture's answers ------------------------------------------------------------------------


def test_the_window_total_and_each_engines_own_numbers_match_expected() -> None:
    tracker = _tracker()
    window = EXPECTED["window_first_to_last"]
    total = tracker.rates(MODEL)
    assert total is not None
    _check(total, window["total"])
    by_engine = tracker.engine_rates(MODEL)
    assert sorted(by_engine) == sorted(window["per_engine"]) == ENGINES
    for engine, want in window["per_engine"].items():
        rates = by_engine[engine]
        assert rates is not None
        _check(rates, want)


def test_every_interval_of_each_engine_matches_expected() -> None:
    scrapes = _normalised()
    assert len(scrapes) == len(EXPECTED["intervals"]) + 1
    for index, want in enumerate(EXPECTED["intervals"], start=1):
        tracker = ScrapeTracker()  # the interval alone: its two scrapes
        tracker.observe(*scrapes[index - 1])
        tracker.observe(*scrapes[index])
        for engine, expected in want["per_engine"].items():
            rates = tracker.engine_rates(MODEL)[engine]
            assert rates is not None
            _check(rates, expected)
        total = tracker.rates(MODEL)
        assert total is not None
        _check(total, want["total"])


@pytest.mark.parametrize("which", ["first_scrape", "last_scrape"])
def test_each_engines_gauges_match_expected(which: str) -> None:
    want = EXPECTED[which]
    scrapes = _normalised()
    _t, scrape = scrapes[0] if which == "first_scrape" else scrapes[-1]
    model = scrape.models[MODEL]
    assert list(model.per_engine) == ENGINES
    for engine, part in model.per_engine.items():
        assert part.running == want["num_requests_running"][engine]
        assert part.waiting == want["num_requests_waiting"][engine]
        assert part.kv_usage_max == pytest.approx(want["kv_cache_usage_perc"][engine])
        assert part.engines == (engine,)
        assert part.per_engine == {}
    assert model.running == want["num_requests_running_sum"]
    assert model.waiting == want["num_requests_waiting_sum"]
    assert model.kv_usage_max == pytest.approx(want["kv_cache_usage_perc_max_over_engines"])


def test_the_instance_shows_each_engine_and_the_kv_cache_in_one_kind() -> None:
    instance = _instance()
    window, last = EXPECTED["window_first_to_last"]["per_engine"], EXPECTED["last_scrape"]
    _t, scrape = _normalised()[-1]
    assert [e.engine for e in instance.engines] == ENGINES
    for engine in instance.engines:
        assert engine.rates is not None
        assert engine.rates.generation_tokens_per_s == pytest.approx(window[engine.engine]["generation_tokens_per_s"])
        assert engine.running == last["num_requests_running"][engine.engine]
        assert engine.kv_capacity_tokens == _capacity(scrape, engine.engine)
    kv = instance.kv
    assert kv is not None
    usage = last["kv_cache_usage_perc"]
    used = sum(usage[e] * _capacity(scrape, e) for e in ENGINES)
    capacity = sum(_capacity(scrape, e) for e in ENGINES)
    assert kv.used_tokens == pytest.approx(used)
    assert kv.capacity_tokens == capacity
    assert kv.usage == pytest.approx(used / capacity)
    busiest = max(ENGINES, key=lambda e: usage[e])
    assert kv.busiest_engine == busiest
    assert kv.busiest_usage == pytest.approx(usage[busiest])
    # The busiest engine's share, not the whole instance's, is what the threshold judges (it preempts).
    assert instance.kv_usage == pytest.approx(last["kv_cache_usage_perc_max_over_engines"])
    assert kv.usage is not None and kv.usage < kv.busiest_usage


def test_an_engine_off_its_share_of_generation_is_marked_at_the_default_threshold_only() -> None:
    window = EXPECTED["window_first_to_last"]
    generation = {e: window["per_engine"][e]["generation_tokens_per_s"] for e in ENGINES}
    total = window["total"]["generation_tokens_per_s"]
    instance = _instance()
    for engine in instance.engines:
        assert engine.share_ratio == pytest.approx(generation[engine.engine] * len(ENGINES) / total, rel=1e-4)
    off = max(abs(e.share_ratio - 1) for e in instance.engines if e.share_ratio is not None)
    assert off > Thresholds().engine_imbalance_warn  # 832 against 1,449 tok/s is imbalanced by default
    assert instance.imbalanced_engines == tuple(ENGINES)  # one over its share, one under
    looser = f"poll_interval_s = 1.0\n[thresholds]\nengine_imbalance_warn = {off + 0.01:.2f}"
    tolerant = _instance(CONFIG.replace("poll_interval_s = 1.0", looser))
    assert tolerant.imbalanced_engines == ()


def test_the_kv_warning_names_the_busiest_engine() -> None:
    config = CONFIG.replace("poll_interval_s = 1.0", "poll_interval_s = 1.0\n[thresholds]\nkv_usage_warn = 0.30")
    instance = _instance(config)
    busiest = max(ENGINES, key=lambda e: EXPECTED["last_scrape"]["kv_cache_usage_perc"][e])
    reasons = [r for r in instance.status.reasons if "KV cache" in r]
    assert reasons == [f"qwen-dp2: KV cache 35% on engine {busiest} (warn at 30%)"]


def test_the_kv_alert_says_its_figure_is_the_busiest_engines() -> None:
    state, now = dp2_fleet()
    rule = AlertRuleSpec(name="kv", metric="kv_usage", above=0.30)
    (reading,) = read_rules([rule], state.view(now, window_s=None), {})
    usage = EXPECTED["last_scrape"]["kv_cache_usage_perc"]
    busiest = max(ENGINES, key=lambda e: usage[e])
    assert reading.firing
    assert reading.value == pytest.approx(usage[busiest])
    assert any(f"busiest engine {busiest}: {fmt_pct(usage[busiest])}" in line for line in reading.evidence)


def test_the_kiosk_says_its_kv_figure_is_the_busiest_engines() -> None:
    state, now = dp2_fleet()
    (view,) = state.view(now, window_s=None)
    kv = next(f for f in kiosk_tile(view).figures if f.key == "kv")
    usage = EXPECTED["last_scrape"]["kv_cache_usage_perc"]
    busiest = max(ENGINES, key=lambda e: usage[e])
    assert kv.label == f"KV cache on engine {busiest}"
    assert kv.text == fmt_pct(usage[busiest], 0)


def test_snapshot_text_and_json_carry_each_engine() -> None:
    state, now = dp2_fleet()
    views = state.view(now, window_s=None)
    text = render_snapshot(views)
    window = EXPECTED["window_first_to_last"]
    generation = [window["per_engine"][e]["generation_tokens_per_s"] for e in ENGINES]
    total = window["total"]["generation_tokens_per_s"]
    usage = EXPECTED["last_scrape"]["kv_cache_usage_perc"]
    busiest = max(ENGINES, key=lambda e: usage[e])
    assert f"busiest engine {busiest}: {fmt_pct(usage[busiest])}" in text
    shares = " / ".join(f"{g * len(ENGINES) / total:.2f}x" for g in generation)
    rates = " / ".join(fmt_rate(g, "") for g in generation)
    summary = f"data parallel: 2 engines, generation {rates} tok/s ({shares} an even share), imbalanced: engine 0, 1"
    assert summary in text
    engine_lines = [line.strip() for line in text.splitlines() if line.strip().startswith("engine ")]
    assert len(engine_lines) == len(ENGINES)
    for engine, line, gen in zip(ENGINES, engine_lines, generation, strict=True):
        assert line.startswith(f"engine {engine}: generation {fmt_rate(gen, ' tok/s')} (")
        assert "imbalanced" in line
    payload: dict[str, Any] = json.loads(views_json(views))
    instance = payload["nodes"][0]["instances"][0]
    assert [e["engine"] for e in instance["engines"]] == ENGINES
    per_engine = EXPECTED["window_first_to_last"]["per_engine"]
    for engine in instance["engines"]:
        assert engine["rates"]["generation_tokens_per_s"] == pytest.approx(
            per_engine[engine["engine"]]["generation_tokens_per_s"]
        )
        assert engine["imbalanced"] is True
    assert instance["kv"]["busiest_engine"] == "1"
    assert instance["kv"]["usage"] == pytest.approx(instance["kv"]["used_tokens"] / instance["kv"]["capacity_tokens"])


# --- one engine: nothing extra --------------------------------------------------------------------


def test_a_single_engine_server_has_no_per_engine_breakdown() -> None:
    from tests.conftest import VLLM_FIXTURES

    text = (VLLM_FIXTURES / "mtp2-steady" / "scrape-015.prom").read_text()
    scrape = normalise(PromParser(keep=WANTED.__contains__).parse(text))
    model = next(iter(scrape.models.values()))
    assert model.engines == ("0",) and model.per_engine == {}
    kv = kv_load(model.kv_usage_by_engine, {"0": scrape.kv_capacity_of("0")})
    assert kv is not None and kv.engines == 1
    assert kv.usage is not None and kv.usage == model.kv_usage_max
    assert kv_line(kv) == f"{kv.usage * 100:.1f}% of 983k tokens"


# --- the pure parts ---------------------------------------------------------------------------------

TWO_ENGINES = """\
vllm:generation_tokens_total{engine="0",model_name="m"} 100
vllm:generation_tokens_total{engine="1",model_name="m"} 300
vllm:num_requests_running{engine="0",model_name="m"} 2
vllm:num_requests_running{engine="1",model_name="m"} 5
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25
vllm:admission_rejections_total{model_name="m",reason="max_num_queued_reqs"} 4
"""


def test_totals_are_the_sums_of_the_engines_and_the_api_servers_own_series_are_in_the_totals_only() -> None:
    model = normalise(PromParser().parse(TWO_ENGINES)).models["m"]
    zero, one = model.per_engine["0"], model.per_engine["1"]
    assert model.counters["generation_tokens"] == zero.counters["generation_tokens"] + one.counters["generation_tokens"]
    assert model.running == (zero.running or 0) + (one.running or 0)
    assert dict(model.kv_usage_by_engine) == {"0": 0.5, "1": 0.25}
    assert model.counters["admission_rejected:max_num_queued_reqs"] == 4
    assert "admission_rejected:max_num_queued_reqs" not in {**zero.counters, **one.counters}


def test_engines_are_in_numeric_order() -> None:
    text = "".join(f'vllm:num_requests_running{{engine="{e}",model_name="m"}} 1\n' for e in ("10", "2", "1"))
    model = normalise(PromParser().parse(text)).models["m"]
    assert model.engines == ("1", "2", "10")
    assert list(model.per_engine) == ["1", "2", "10"]


def test_kv_of_one_kind_falls_back_to_the_busiest_engine_named_when_a_capacity_is_unknown() -> None:
    usage = {"0": 0.5, "1": 0.25}
    known = kv_load(usage, {"0": 1000.0, "1": 3000.0})
    assert known is not None
    assert (known.used_tokens, known.capacity_tokens) == (1250.0, 4000.0)
    assert known.usage == 1250.0 / 4000.0
    assert (known.busiest_engine, known.busiest_usage) == ("0", 0.5)
    assert kv_line(known) == "31.2% of 4,000 tokens (1,250 used), busiest engine 0: 50.0%"
    unknown = kv_load(usage, {"0": 1000.0, "1": None})
    assert unknown is not None
    assert (unknown.usage, unknown.used_tokens, unknown.capacity_tokens) == (None, None, None)
    assert kv_line(unknown) == "– (the engines' capacity is not known), busiest engine 0: 50.0%"
    alone = kv_load({"0": 0.4}, {})
    assert alone is not None and alone.usage == 0.4 and kv_line(alone) == "40.0% of – tokens"
    assert kv_load({}, {}) is None and kv_line(None) == "–"


def test_share_ratios_and_imbalance() -> None:
    assert share_ratios({"0": 100.0, "1": 300.0}) == {"0": 0.5, "1": 1.5}
    assert share_ratios({"0": 0.0, "1": 0.0}) == {"0": None, "1": None}  # no traffic: no imbalance
    assert share_ratios({"0": 100.0, "1": None}) == {"0": None, "1": None}
    assert imbalanced(0.79, 0.2) and imbalanced(1.21, 0.2)
    assert not imbalanced(0.81, 0.2) and not imbalanced(1.19, 0.2) and not imbalanced(None, 0.2)
