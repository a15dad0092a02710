"""The demo fleet's roofline: its simulated vLLM counts the estimated FLOPs and bytes per GPU as vLLM
does with --enable-mfu-metrics, at what a GB10 moves decoding these models, and spark2's server, started
without the flag, shows "–" with the flag to add."""

from __future__ import annotations

import pytest

from sparktui.config import parse_config
from sparktui.demo.fleet import DemoFleet
from sparktui.engines import readings
from sparktui.engines.vllm.scrape import normalise
from sparktui.headless.snapshot import render_snapshot
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.promtext import parse
from sparktui.model.roofline import MFU_HINT
from sparktui.model.status import State
from sparktui.model.tracker import ScrapeTracker
from sparktui.sources.http import make_client
from sparktui.sources.poller import FleetPoller
from tests.integration.test_demo import running_fleet

__all__ = ["running_fleet"]  # the fixture, used here


def _mfu_over(fleet: DemoFleet, node: str, seconds: int = 300) -> ScrapeTracker:
    instance = fleet.node(node).instances[0]
    tracker = ScrapeTracker()
    for second in range(0, seconds + 1, 30):
        if second:
            fleet._fast_forward(30.0)
        tracker.observe(float(second), normalise(parse(instance.exposition.render().decode())))
    return tracker


def test_a_spark_decoding_a_35b_moe_reads_100_to_200_gb_per_second() -> None:
    tracker = _mfu_over(DemoFleet(seed=11, warmup_s=0), "spark1")
    rates = tracker.rates()
    assert rates is not None and rates.mfu is not None and rates.generation_tokens_per_s
    assert rates.mfu.memory_bytes_per_s is not None and 80e9 < rates.mfu.memory_bytes_per_s < 220e9
    # 2 FLOPs per active parameter (3 B) per token, prompt and generated: some TFLOP/s, far under the roof.
    assert rates.mfu.flops_per_s is not None and 0.1e12 < rates.mfu.flops_per_s < 100e12


def test_a_server_started_without_the_flag_exports_flat_counters() -> None:
    rates = _mfu_over(DemoFleet(seed=11, warmup_s=0), "spark2", seconds=120).rates()
    assert rates is not None and rates.generation_tokens_per_s
    assert rates.mfu is not None and rates.mfu.reason == MFU_HINT and rates.mfu.memory_bytes_per_s is None


async def _polled(fleet: DemoFleet, steps: int = 4, dt: float = 5.0) -> tuple[NodeView, ...]:
    """The demo stepped ``dt`` simulated seconds between polls, timed on its clock (rates per simulated
    second, as the dashboard over a demo run from the wall clock sees them)."""
    spec = parse_config(fleet.config_toml(), source="demo.toml")
    state = FleetState(spec, readings())
    async with make_client() as client:
        poller = FleetPoller(spec, client, clock=lambda: fleet.now)
        for index in range(steps):
            if index:
                await fleet.advance(dt)
            for obs in await poller.poll_all():
                state.apply(obs)
    return state.view(fleet.now, window_s=None)


async def test_the_polled_demo_shows_the_share_and_the_reason(running_fleet: DemoFleet) -> None:
    views = await _polled(running_fleet)
    by_name = {v.name: v for v in views}
    assert by_name["spark1"].status.state is State.UP
    spark1 = by_name["spark1"].instances[0].roofline
    assert spark1 is not None and spark1.memory_share is not None and spark1.memory_bytes_per_s is not None
    assert spark1.memory_share == pytest.approx(spark1.memory_bytes_per_s / 273e9)
    assert 0.2 < spark1.memory_share < 0.9
    spark2 = by_name["spark2"].instances[0].roofline
    assert spark2 is not None and spark2.reason == MFU_HINT and spark2.memory_share is None
    text = render_snapshot(views)
    assert "roofline: memory bandwidth –   (start vLLM with --enable-mfu-metrics)" in text
    service = running_fleet.node("spark1").instances[0].service
    assert "--enable-mfu-metrics" in service.serve_args()
    assert "--enable-mfu-metrics" not in running_fleet.node("spark2").instances[0].service.serve_args()
