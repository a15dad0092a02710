"""Replicas of one model across nodes: fleet latency from merged buckets, never averaged percentiles.

The buckets are small enough to check by hand (``histogram_quantile``: rank = q * count, linear
inside the bucket the rank falls in).
"""

from __future__ import annotations

import json
import math

import pytest

from sparktui.headless.snapshot import render_snapshot, views_json
from sparktui.model.derive import EngineRates, LatencySummary, histogram_quantile
from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.replicas import SLOWEST_MIN_REQUESTS, merge_histograms, model_replicas
from sparktui.model.scrape import HistogramSample
from sparktui.model.status import UP
from sparktui.model.units import fmt_seconds

INF = math.inf
# spark1 served 100 requests, 80 under 0.1 s; spark2 served 20, all between 0.5 s and 1 s.
FAST = HistogramSample(bounds=(0.1, 0.5, 1.0, INF), cumulative=(80, 90, 100, 100), sum=20.0, count=100)
SLOW = HistogramSample(bounds=(0.1, 0.5, 1.0, INF), cumulative=(0, 0, 20, 20), sum=15.0, count=20)
# Two slow requests: a p90 of 2 s on nothing but noise.
NOISY = HistogramSample(bounds=(0.1, 0.5, 1.0, 2.5, INF), cumulative=(0, 0, 0, 2, 2), sum=4.0, count=2)


def rates(**histograms: HistogramSample) -> EngineRates:
    return EngineRates(
        seconds=60.0,
        reset=False,
        generation_tokens_per_s=None,
        prompt_tokens_per_s=None,
        prompt_tokens_computed_per_s=None,
        prompt_tokens_cached_per_s=None,
        requests_finished_per_s=None,
        finished_by_reason={},
        prefix_cache_hit_rate=None,
        preemptions=None,
        preemptions_per_s=None,
        spec_decode=None,
        latency={key: LatencySummary.of(hist) for key, hist in histograms.items()},
        histograms=histograms,
    )


def instance(
    name: str, model: str | None, rated: EngineRates | None, url: str | None = "http://x:8000"
) -> InstanceView:
    return InstanceView(
        name=name,
        url=url,
        role="single" if url else "worker",
        status=UP,
        version="0.33.0",
        engine="vLLM",
        served_models=(model,) if model else (),
        max_model_len=None,
        model_name=model,
        engine_stats=True,
        running=None,
        waiting=None,
        kv_usage=None,
        kv_capacity_tokens=None,
        rates=rated,
        launch=None,
    )


def node(name: str, *instances: InstanceView) -> NodeView:
    return NodeView(
        name=name,
        host=name,
        status=UP,
        instances=instances,
        services=(),
        gpu=None,
        host_memory=None,
        pressure=None,
        polled_wall=None,
    )


def test_merged_buckets_are_the_sum_of_each_replicas_increases() -> None:
    merged = merge_histograms([FAST, SLOW])
    assert merged == HistogramSample(bounds=(0.1, 0.5, 1.0, INF), cumulative=(80, 90, 120, 120), sum=35.0, count=120)
    # rank 0.9 * 120 = 108 falls in (0.5, 1]: 0.5 + 0.5 * (108 - 90) / (120 - 90)
    assert histogram_quantile(0.9, merged.bounds, merged.cumulative) == pytest.approx(0.8)


def test_averaged_percentiles_differ_from_the_merged_one() -> None:
    fast_p90 = LatencySummary.of(FAST).p90  # rank 90 at the top of (0.1, 0.5]: 0.5
    slow_p90 = LatencySummary.of(SLOW).p90  # rank 18 in (0.5, 1]: 0.5 + 0.5 * 18 / 20 = 0.95
    assert fast_p90 is not None and slow_p90 is not None
    assert fast_p90 == pytest.approx(0.5) and slow_p90 == pytest.approx(0.95)
    merged = model_replicas(
        [node("spark1", instance("a", "m", rates(ttft=FAST))), node("spark2", instance("b", "m", rates(ttft=SLOW)))]
    )
    fleet_p90 = merged[0].latency["ttft"].p90
    assert fleet_p90 is not None and fleet_p90 == pytest.approx(0.8)
    assert abs(fleet_p90 - (fast_p90 + slow_p90) / 2) > 0.07  # the average, 0.725, is nobody's p90
    weighted = (100 * fast_p90 + 20 * slow_p90) / 120  # weighting by requests does not fix it: 0.575
    assert abs(fleet_p90 - weighted) > 0.2
    assert merged[0].latency["ttft"].count == 120


def test_replicas_with_different_bounds_merge_on_the_bounds_they_share() -> None:
    finer = HistogramSample(bounds=(0.1, 0.25, 0.5, 1.0, INF), cumulative=(80, 85, 90, 100, 100), sum=20.0, count=100)
    merged = merge_histograms([finer, SLOW])
    assert merged is not None
    assert merged.bounds == (0.1, 0.5, 1.0, INF)  # 0.25 is only in one: dropped, its observations kept above it
    assert merged.cumulative == (80, 90, 120, 120) and merged.count == 120
    views = [
        node("spark1", instance("a", "m", rates(ttft=finer))),
        node("spark2", instance("b", "m", rates(ttft=SLOW))),
    ]
    (found,) = model_replicas(views)
    assert found.coarsened == ("ttft",)
    assert found.latency["ttft"].p90 == pytest.approx(0.8)
    same = model_replicas(
        [node("spark1", instance("a", "m", rates(ttft=FAST))), node("spark2", instance("b", "m", rates(ttft=SLOW)))]
    )
    assert same[0].coarsened == ()


def test_every_latency_is_merged_and_a_missing_one_is_left_out() -> None:
    views = [
        node("spark1", instance("a", "m", rates(ttft=FAST, e2e=FAST, itl=SLOW))),
        node("spark2", instance("b", "m", rates(ttft=SLOW, e2e=SLOW))),
    ]
    (found,) = model_replicas(views)
    assert found.latency["e2e"].count == 120
    assert found.latency["itl"].count == 20  # only spark1 published it
    assert "queue" not in found.latency and "tpot" not in found.latency


def test_the_slowest_replica_is_named_by_its_own_p90_over_enough_requests() -> None:
    assert NOISY.count < SLOWEST_MIN_REQUESTS
    views = [
        node("spark1", instance("a", "m", rates(ttft=FAST))),
        node("spark2", instance("b", "m", rates(ttft=SLOW))),
        node("spark3", instance("c", "m", rates(ttft=NOISY))),  # p90 2.35 s, the highest, over 2 requests
    ]
    (found,) = model_replicas(views)
    assert LatencySummary.of(NOISY).p90 == pytest.approx(2.35)
    assert found.slowest is not None and found.slowest.where == "spark2/b"
    assert found.slowest.requests == 20
    assert [r.requests for r in found.replicas] == [100, 20, 2]
    assert found.latency["ttft"].count == 122  # the noisy replica's requests are in the fleet's numbers


def test_no_slowest_without_two_replicas_to_compare() -> None:
    views = [
        node("spark1", instance("a", "m", rates(ttft=FAST))),
        node("spark2", instance("b", "m", rates(ttft=NOISY))),
    ]
    (found,) = model_replicas(views)
    assert found.slowest is None
    assert found.latency["ttft"].count == 102


def test_one_model_on_one_node_is_not_a_replica_set() -> None:
    views = [
        node("spark1", instance("a", "m", rates(ttft=FAST))),
        node("spark2", instance("b", "other", rates(ttft=SLOW))),
        # A tensor-parallel worker serves no HTTP: it is part of its head, not a second replica.
        node("spark3", instance("w", "m", None, url=None)),
    ]
    assert model_replicas(views) == ()


def test_a_replica_without_rates_is_listed_but_not_merged() -> None:
    views = [
        node("spark1", instance("a", "m", rates(ttft=FAST))),
        node("spark2", instance("b", "m", rates(ttft=SLOW))),
        node("spark3", instance("c", "m", None)),  # stopped answering: its last numbers are not current
    ]
    (found,) = model_replicas(views)
    assert found.reporting == 2 and len(found.replicas) == 3
    assert found.replicas[2].requests is None
    assert found.latency["ttft"].count == 120


def test_no_histograms_merge_to_nothing() -> None:
    assert merge_histograms([]) is None
    views = [node("spark1", instance("a", "m", None)), node("spark2", instance("b", "m", None))]
    (found,) = model_replicas(views)
    assert found.latency == {} and found.slowest is None and found.reporting == 0


def test_snapshot_text_and_json_give_the_fleet_numbers_and_the_slowest_replica() -> None:
    views = [
        node("spark1", instance("a", "m", rates(ttft=FAST))),
        node("spark2", instance("b", "m", rates(ttft=SLOW))),
        node("spark3", instance("c", "m", rates(ttft=NOISY))),
    ]
    text = render_snapshot(views)
    block = text[text.index("replicas of m") :]
    assert block.startswith("replicas of m: 3 instances (spark1/a, spark2/b, spark3/c), 3 reporting\n")
    assert "fleet over 122 requests (merged buckets):" in block
    merged = model_replicas(views)[0].latency["ttft"]
    assert f"TTFT p50 {fmt_seconds(merged.p50, 0.1)} p90 {fmt_seconds(merged.p90, 0.1)}" in block
    assert (
        "per replica TTFT p90: spark1/a 500 ms (100 req)   spark2/b 950 ms (20 req)   spark3/c 2.35 s (2 req)" in block
    )
    assert "slowest: spark2/b, TTFT p90 950 ms over 20 requests" in block
    (found,) = json.loads(views_json(views))["replicas"]
    assert found["model"] == "m" and found["reporting"] == 3
    assert found["latency"]["ttft"]["count"] == 122
    assert found["slowest"]["node"] == "spark2" and found["slowest"]["ttft"]["p90"] == pytest.approx(0.95)


def test_snapshot_of_a_model_served_once_has_no_replica_block() -> None:
    views = [node("spark1", instance("a", "m", rates(ttft=FAST))), node("spark2", instance("b", "n", rates(ttft=SLOW)))]
    assert "replicas of" not in render_snapshot(views)
    assert json.loads(views_json(views))["replicas"] == []
    few = [node("spark1", instance("a", "m", rates(ttft=FAST))), node("spark2", instance("b", "m", rates(ttft=NOISY)))]
    assert f"slowest: – (needs two replicas with {SLOWEST_MIN_REQUESTS} requests or more each)" in render_snapshot(few)
