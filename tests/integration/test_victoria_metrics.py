"""The Prometheus source against VictoriaMetrics (Debian's single-node ``victoria-metrics``, scraping the
demo fleet by itself with the same scrape config as the Prometheus tests; ``tests/support/prometheus_server.py``).

sparktui reads only the latest raw samples and their scrape times from the server and computes every
number itself, so what VictoriaMetrics changes is where those samples come from, not how they are
turned into numbers. The same stepped run as ``test_prometheus.py`` shows it:

- every number from VictoriaMetrics equals direct mode's as it does from Prometheus (ratios, quantiles,
  gauges and counter increases to 1e-9; rates within the scrape-versus-poll instants' tolerance);
- VictoriaMetrics's own MetricsQL gives sparktui's numbers over the same window, every one of them to
  1e-9 (rates to 1e-7, as for Prometheus). MetricsQL's ``rate()`` and ``increase()`` do not
  extrapolate: they take the last sample *before* the window as its start, so over a window
  ``(first, last]`` they are ``(v_last - v_first) / (t_last - t_first)``, as Prometheus's are over
  ``[first, last]`` and as sparktui computes. They part from Prometheus's where the window does not
  start on a scrape: half an interval later, MetricsQL's answer is still the same, where Prometheus
  would extrapolate the increase between the scrapes inside the window to its ends;
- a target down is down with VictoriaMetrics's own scrape error, discovery finds the nodes, and a
  VictoriaMetrics with its default 30 s ``-search.latencyOffset`` still gives the latest scrape.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from sparktui.sources.http import make_client
from sparktui.sources.prometheus import PrometheusSource, short_scrape_error
from tests.support.prometheus_run import (
    Run,
    assert_a_target_down_is_down_here,
    assert_discovery_finds_the_demo_node,
    assert_mixed_mode,
    assert_numbers_match_direct,
    assert_server_gives_sparktuis_numbers,
    assert_snapshot_has_rates_at_once,
    stepped_run,
    with_prometheus,
)
from tests.support.prometheus_server import VictoriaMetricsServer, fleet_metrics_urls, require_victoria_metrics

pytestmark = pytest.mark.prometheus

STEPS = 10
# VictoriaMetrics keeps a sample's value as a decimal of at most 12 significant digits: a counter of
# size V is off by up to V * 5e-12, and an increase I of it by up to V / I * 1e-11 of itself. Seen on
# the demo: every number within 1e-9, a histogram's sum increase off by 9e-12 of itself (not equal, as
# with Prometheus). 1e-7 holds for counters up to 1e4 times their increase over the window.
STORED_DIGITS_EXACT = 1e-7


# --- without a server ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("last_error", "shown"),
    [
        # VictoriaMetrics 1.79's /api/v1/targets
        (
            'error when scraping "http://127.0.0.1:8000/metrics": '
            "dial tcp4 127.0.0.1:8000: connect: connection refused",
            "dial tcp4 127.0.0.1:8000: connect: connection refused",
        ),
        # Prometheus's
        (
            'Get "http://127.0.0.1:8000/metrics": dial tcp 127.0.0.1:8000: connect: connection refused',
            "dial tcp 127.0.0.1:8000: connect: connection refused",
        ),
        (
            "server returned HTTP status 500 Internal Server Error",
            "server returned HTTP status 500 Internal Server Error",
        ),
    ],
)
def test_the_scrape_error_is_shown_without_the_request_it_failed(last_error: str, shown: str) -> None:
    assert short_scrape_error(last_error) == shown


# --- against a real VictoriaMetrics scraping the demo fleet ----------------------------------------------


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def run() -> AsyncIterator[Run]:
    require_victoria_metrics()
    async with stepped_run(VictoriaMetricsServer, STEPS) as found:
        yield found


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_every_number_from_victoria_metrics_matches_direct_computation(run: Run) -> None:
    assert_numbers_match_direct(run, exact=STORED_DIGITS_EXACT)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_metricsql_rate_and_histogram_quantile_give_sparktuis_numbers(run: Run) -> None:
    await assert_server_gives_sparktuis_numbers(run)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_metricsql_rate_starts_at_the_last_scrape_before_its_window(run: Run) -> None:
    """Half a scrape interval into the window, Prometheus's ``rate()`` would extrapolate the increase
    between the scrapes inside it; MetricsQL's still starts at the scrape before the window: the first
    one sparktui used, so its numbers are still sparktui's."""
    await assert_server_gives_sparktuis_numbers(run, window_starts_after_s=run.server.interval_s / 2)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_snapshot_from_victoria_metrics_has_rates_at_once(run: Run) -> None:
    await assert_snapshot_has_rates_at_once(run)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_discovery_finds_the_nodes_victoria_metrics_scrapes(run: Run) -> None:
    await assert_discovery_finds_the_demo_node(run)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_mixed_mode_metrics_from_victoria_metrics_host_state_over_ssh(run: Run) -> None:
    await assert_mixed_mode(run)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_the_default_latency_offset_does_not_hide_the_last_scrape(run: Run) -> None:
    """VictoriaMetrics answers "now" as of 30 s ago by default; sparktui's queries ask it not to."""
    urls = fleet_metrics_urls(run.fleet)
    async with VictoriaMetricsServer(urls, flags=()) as server:
        # Asked without sparktui's form field, it answers as of 30 s ago, when there was nothing yet.
        async with httpx.AsyncClient(trust_env=False) as plain:
            answer = (await plain.post(f"{server.url}/api/v1/query", data={"query": "up"})).json()
        assert answer["status"] == "success" and answer["data"]["result"] == [], answer
        fleet = with_prometheus(run.demo.config_toml(), server.url)
        async with make_client([server.url]) as client:
            source = PrometheusSource(fleet)
            observations = await source.refresh(client)
        assert {o.node for o in observations if o.vllm and o.vllm[0].metrics and o.vllm[0].metrics.ok} == {
            n.name for n in fleet.nodes
        }
        for target in source.targets:
            span = source.scrape_span(target)
            assert span is not None and time.time() - span[1] < 10.0, (target, span)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_a_target_down_in_victoria_metrics_is_down_here(run: Run) -> None:
    # Runs last: it powers a node off.
    reasons = await assert_a_target_down_is_down_here(run)
    # VictoriaMetrics's lastError ("connect: connection refused", or the keep-alive connection the node
    # dropped, by which scrape saw it first), without its 'error when scraping "http://…": ' prefix.
    assert re.search(r'\(up == 0 for \{instance="127\.0\.0\.1:\d+"\}\): \w', reasons), reasons
    assert "error when scraping" not in reasons, reasons
