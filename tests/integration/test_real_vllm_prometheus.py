"""A real Prometheus scraping the real engine: sparktui's numbers from Prometheus's samples equal
Prometheus's own ``rate()``, ``histogram_quantile()`` and ratios over the same window.

The engine serves a mix of greedy and sampled completions (speculative decoding moves per position,
the prefix cache hits on a shared prefix) while Prometheus (Debian's package,
``tests/support/prometheus_server.py``) scrapes its ``/metrics`` every second. sparktui reads the same
samples through its Prometheus source; the PromQL side is evaluated at the last scrape sparktui used,
over a window that starts exactly at the first one (range selectors include both ends: no
extrapolation), so both sides see the same samples and must agree to float rounding (1e-9).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time

import httpx
import pytest

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.headless import compare
from sparktui.model.fleet import FleetState
from sparktui.sources.http import make_client
from sparktui.sources.prometheus import PrometheusClient, PrometheusSource
from tests.support.prometheus_server import PrometheusServer, require_prometheus
from tests.support.vllm_server import SERVED_NAME, VllmServer

pytestmark = [pytest.mark.vllm, pytest.mark.prometheus]
EXACT = 1e-9
RATE_EXACT = 1e-7  # a rate's window is a difference of Unix times in float seconds (test_prometheus.py)
REFRESHES = 12  # one a scrape: about 12 s of load in the window
PREFIX = "the spark serves the model and the prefix cache keeps the shared part of every prompt " * 4


def close(key: str, a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    rel = RATE_EXACT if key.endswith("_per_s") else EXACT
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


async def load(server: VllmServer) -> None:
    """Completions one after another until cancelled: greedy and sampled in turn, a shared prefix."""
    async with httpx.AsyncClient(timeout=60.0) as client:
        for i in range(10_000):
            body = {
                "model": SERVED_NAME,
                "prompt": f"{PREFIX} request {i}",
                "max_tokens": 16,
                "temperature": 0.0 if i % 2 == 0 else 1.0,
                "ignore_eos": True,
            }
            response = await client.post(f"{server.url}/v1/completions", json=body)
            assert response.status_code == 200, response.text


async def test_prometheus_functions_on_the_real_engine_equal_sparktuis_numbers(real_vllm: VllmServer) -> None:
    require_prometheus()
    toml = (
        f'[[nodes]]\nname = "cpu1"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
        f'[[nodes.vllm]]\nname = "{SERVED_NAME}"\nport = {real_vllm.port}\n'
    )
    async with PrometheusServer([f"{real_vllm.url}/metrics"]) as server:
        fleet = parse_config(f'{toml}[prometheus]\nurl = "{server.url}"\n', source="real-vllm.toml", env={})
        assert fleet.prometheus is not None
        source = PrometheusSource(fleet, logs=False)
        state = FleetState(fleet, readings())
        async with make_client([server.url]) as client:
            driving = asyncio.create_task(load(real_vllm))
            try:
                for _ in range(REFRESHES):
                    await _next_scrape(server, time.time())
                    assert not driving.done(), driving.exception()
                    for observation in await source.refresh(client):
                        state.apply(observation)
            finally:
                driving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await driving
            ended = time.monotonic()
            (view,) = state.view(ended, window_s=None)
            (instance,) = view.instances
            (target,) = [t for t in source.targets if t.kind == "vllm"]
            span = source.scrape_span(target)
            assert span is not None
            first, last = span
            prometheus = PrometheusClient(fleet.prometheus, client, 10.0)
            theirs = (await compare.promql_numbers(prometheus, [target], at=last, window_s=last - first))[target]
    ours = compare.view_numbers(instance)
    assert set(ours) == set(theirs), set(ours) ^ set(theirs)
    checked = [key for key, value in ours.items() if value is not None]
    for key, value in ours.items():
        assert close(key, value, theirs[key]), (key, value, theirs[key])
    # Real traffic moved every kind of number: rates, ratios, quantiles, per-position acceptance.
    assert {"generation_tokens_per_s", "prefix_cache_hit_rate", "ttft_p90", "itl_p50", "per_position:0"} <= set(
        checked
    ), checked
    assert ours["generation_tokens_per_s"] and ours["prefix_cache_hit_rate"]
    assert len(checked) >= 25


async def _next_scrape(server: PrometheusServer, after_wall: float) -> None:
    """Until Prometheus has scraped the engine again after ``after_wall``."""

    async def newest() -> float:
        result = await server.query("timestamp(up)")
        return max((float(str(r["value"][1])) for r in result), default=0.0)  # type: ignore[index]

    deadline = time.monotonic() + 15.0
    while await newest() <= after_wall:
        assert time.monotonic() < deadline, "Prometheus stopped scraping the engine"
        await asyncio.sleep(0.1)
