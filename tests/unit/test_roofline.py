"""The roofline: memory bandwidth and FLOP/s per GPU from vLLM's estimated counters, and their share of
the node's peaks (model/roofline.py); "–" with the reason when there is no estimate."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sparktui.config import ConfigError, parse_config
from sparktui.engines import readings
from sparktui.engines.vllm.scrape import WANTED, normalise
from sparktui.headless.snapshot import render_snapshot, views_json
from sparktui.model.derive import EngineRates
from sparktui.model.fleet import FleetState
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation
from sparktui.model.promtext import parse
from sparktui.model.roofline import (
    GB10_MEMORY_BANDWIDTH_GB_S,
    IDLE,
    MFU_HINT,
    NOT_EXPORTED,
    Achieved,
    Roofline,
    share_of_peak,
)
from sparktui.model.tracker import ScrapeTracker
from sparktui.model.units import roofline_parts
from tests.conftest import DATA

REAL = DATA / "vllm-0.32"  # a real server started without --enable-mfu-metrics


def _scrape(flops: float, read: float, write: float, generated: float = 100.0, engines: int = 1) -> str:
    lines = []
    for engine in range(engines):
        labels = f'engine="{engine}",model_name="m"'
        lines += [
            f"vllm:generation_tokens_total{{{labels}}} {generated / engines}",
            f"vllm:estimated_flops_per_gpu_total{{{labels}}} {flops / engines}",
            f"vllm:estimated_read_bytes_per_gpu_total{{{labels}}} {read / engines}",
            f"vllm:estimated_write_bytes_per_gpu_total{{{labels}}} {write / engines}",
        ]
    return "\n".join(lines) + "\n"


def _rates(first: str, second: str, seconds: float = 4.0) -> EngineRates:
    tracker = ScrapeTracker()
    tracker.observe(0.0, normalise(parse(first, keep=WANTED.__contains__)))
    tracker.observe(seconds, normalise(parse(second, keep=WANTED.__contains__)))
    rates = tracker.rates()
    assert rates is not None and rates.mfu is not None
    return rates


def test_flops_and_bytes_per_second_are_the_counters_increases_over_the_window() -> None:
    rates = _rates(_scrape(1e12, 5e9, 1e9), _scrape(3e12, 9e9, 2e9), seconds=4.0)
    assert rates.mfu == Achieved(flops_per_s=(3e12 - 1e12) / 4, memory_bytes_per_s=((9e9 - 5e9) + (2e9 - 1e9)) / 4)


def test_data_parallel_engines_give_the_mean_per_gpu() -> None:
    """The normaliser sums the engines' counters; each engine has its own GPUs, so per GPU is the mean."""
    one = _rates(_scrape(0, 1e9, 0), _scrape(0, 9e9, 0), seconds=2.0)
    two = _rates(_scrape(0, 1e9, 0, engines=2), _scrape(0, 9e9, 0, engines=2), seconds=2.0)
    assert one.mfu is not None and two.mfu is not None
    assert one.mfu.memory_bytes_per_s == 4e9
    assert two.mfu.memory_bytes_per_s == 2e9


def test_a_real_server_without_the_flag_says_to_start_it_with_the_flag() -> None:
    rates = _rates((REAL / "before.prom").read_text(), (REAL / "after.prom").read_text(), seconds=10.0)
    assert rates.generation_tokens_per_s  # it generated tokens, yet the counters stayed at 0
    assert rates.mfu == Achieved(None, None, MFU_HINT)


def test_absent_counters_say_the_version_has_none() -> None:
    old = 'vllm:generation_tokens_total{engine="0",model_name="m"} 5\n'
    new = 'vllm:generation_tokens_total{engine="0",model_name="m"} 9\n'
    assert _rates(old, new).mfu == Achieved(None, None, NOT_EXPORTED)


def test_flat_counters_are_no_data_not_zero() -> None:
    busy_before = _scrape(1e12, 5e9, 1e9)
    assert _rates(busy_before, busy_before).mfu == Achieved(None, None, IDLE)  # flag on, idle window
    never = _scrape(0, 0, 0, generated=0)
    assert _rates(never, never).mfu == Achieved(None, None, IDLE)  # nothing served yet: cannot tell


def test_the_share_of_the_peak_is_achieved_over_peak_and_none_without_a_peak() -> None:
    roofline = Roofline.of(Achieved(2e12, 136.5e9), GB10_MEMORY_BANDWIDTH_GB_S, None)
    assert roofline.memory_share == pytest.approx(0.5)
    assert roofline.flops_share is None
    assert Roofline.of(Achieved(2e12, 136.5e9), 273.0, 100.0).flops_share == pytest.approx(0.02)
    assert share_of_peak(None, 273.0) is None and share_of_peak(1.0, 0.0) is None


def test_the_figures_read_as_the_operator_says_them() -> None:
    shown = roofline_parts(Roofline.of(Achieved(3.2e12, 151e9), 273.0, None))
    assert shown == ["memory 151 GB/s (55% of 273 GB/s)", "compute 3.2 TFLOP/s"]
    with_peak = roofline_parts(Roofline.of(Achieved(3.2e12, 151e9), 273.0, 160.0))
    assert with_peak[1] == "compute 3.2 TFLOP/s (2% of 160 TFLOP/s)"
    missing = roofline_parts(Roofline.of(Achieved(None, None, MFU_HINT), 273.0, None))
    assert missing == ["memory bandwidth –", "(start vLLM with --enable-mfu-metrics)"]
    assert roofline_parts(None) == ["memory bandwidth –"]


# --- the node's peaks in the config, and the view, snapshot text and JSON that use them ------------

NODE = '[[nodes]]\nname = "spark1"\nhost = "127.0.0.1"\n'
INSTANCE = '[[nodes.vllm]]\nname = "m"\nport = 18123\n'


def test_a_node_has_gb10s_bandwidth_unless_configured() -> None:
    (node,) = parse_config(NODE, source="fleet.toml").nodes
    assert (node.peak_memory_bandwidth_gb_s, node.peak_tflops) == (273.0, None)
    (h100,) = parse_config(NODE + "peak_memory_bandwidth_gb_s = 3350\npeak_tflops = 989\n", source="f.toml").nodes
    assert (h100.peak_memory_bandwidth_gb_s, h100.peak_tflops) == (3350.0, 989.0)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("peak_memory_bandwidth_gb_s = 0", "fleet.toml: nodes[0].peak_memory_bandwidth_gb_s: must be > 0 (got 0)"),
        (
            "peak_memory_bandwidth_gb_s = -1.0",
            "fleet.toml: nodes[0].peak_memory_bandwidth_gb_s: must be > 0 (got -1)",
        ),
        ("peak_tflops = 1e9", "fleet.toml: nodes[0].peak_tflops: must be <= 100000 (got 1e+09)"),
        (
            'peak_tflops = "lots"',
            "fleet.toml: nodes[0].peak_tflops: must be a number written without quotes (got 'lots')",
        ),
    ],
)
def test_a_bad_peak_is_one_clear_line(line: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(NODE + line + "\n", source="fleet.toml")
    assert caught.value.errors == [message]


def _view_of(config: str, texts: list[str]) -> tuple[str, dict[str, Any]]:
    def ok(body: str) -> HttpResult:
        return HttpResult(url="http://127.0.0.1:18123", kind=FetchKind.OK, status=200, body=body.encode())

    state = FleetState(parse_config(config, source="test.toml"), readings())
    for index, text in enumerate(texts):
        observation = ServerObservation(name="m", health=ok(""), metrics=ok(text))
        state.apply(NodeObservation(node="spark1", t=index * 5.0, wall=1e9 + index * 5.0, vllm=(observation,)))
    views = state.view((len(texts) - 1) * 5.0, window_s=None)
    (node,) = json.loads(views_json(views))["nodes"]
    return render_snapshot(views), node["instances"][0]["roofline"]


def test_the_snapshot_shows_the_share_of_the_nodes_peak_in_text_and_json() -> None:
    texts = [_scrape(0, 0, 0, generated=0), _scrape(5e12, 500e9, 46e9, generated=250)]
    text, roofline = _view_of(NODE + "peak_memory_bandwidth_gb_s = 546\n" + INSTANCE, texts)
    assert "    roofline: memory 109 GB/s (20% of 546 GB/s)   compute 1.0 TFLOP/s\n" in text
    assert roofline["memory_bytes_per_s"] == pytest.approx(546e9 / 5)
    assert roofline["memory_share"] == pytest.approx(0.2)
    assert roofline["flops_per_s"] == pytest.approx(1e12) and roofline["flops_share"] is None
    assert roofline["peak_memory_bytes_per_s"] == 546e9 and roofline["reason"] is None


def test_the_snapshot_says_why_there_is_no_roofline() -> None:
    texts = [
        (REAL / "before.prom").read_text().replace("tiny", "m"),
        (REAL / "after.prom").read_text().replace("tiny", "m"),
    ]
    text, roofline = _view_of(NODE + INSTANCE, texts)
    assert "    roofline: memory bandwidth –   (start vLLM with --enable-mfu-metrics)\n" in text
    assert roofline["memory_bytes_per_s"] is None and roofline["memory_share"] is None
    assert roofline["reason"] == MFU_HINT
