"""Replicas of one model: sparktui's fleet percentiles from merged buckets are Prometheus's own
``histogram_quantile(q, sum by (le) (increase(x_bucket[w])))`` over the same samples.

Three real HTTP servers on 127.0.0.1 serve real vLLM 0.33 scrapes of one model (two fixture runs,
one of them twice at other points of its run, that third replica's TTFT buckets thinned to fewer
bounds); a real Prometheus scrapes them every second. Each server holds one scrape (state 0) until
Prometheus has scraped it for 5 s and sparktui has polled it once, then the next (state 1) until
Prometheus has scraped it for several seconds more and sparktui has polled it again. So both sides
see, per replica, the increase state 1 - state 0 (so does sparktui reading them through Prometheus), and:

- ``sum by (le) (x_bucket) - sum by (le) (x_bucket offset Ns)`` (no extrapolation) gives
  sparktui's merged quantiles to 1e-9;
- ``increase(x_bucket[Ns])`` extrapolates each series by (samples' span + the gaps to the window's
  ends) / samples' span. With a window of a whole number N of scrape intervals, evaluated at an
  instant that no replica's scrapes come near, every replica has N samples in the window, so every
  series is scaled by the same N / (N - 1) (up to the scrape timestamps' jitter) and the quantile,
  which does not change when every bucket is scaled alike, is sparktui's to ``EXTRAPOLATED``;
- the TTFT buckets, whose bounds differ between replicas, agree once PromQL keeps only the bounds
  every replica has (``le=~"..."``): the merge sparktui does.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.engines.vllm.scrape import HISTOGRAMS
from sparktui.model.fleet import FleetState
from sparktui.model.replicas import REPLICA_LATENCY_KEYS, ModelReplicas, model_replicas
from sparktui.sources.http import make_client
from sparktui.sources.poller import FleetPoller, fleet_origins
from sparktui.sources.prometheus import PrometheusSource
from tests.support.fixture_fleet import Endpoint, FixtureServer, scenario_scrapes
from tests.support.prometheus_server import PrometheusServer, require_prometheus
from tests.support.wait import wait_until

pytestmark = pytest.mark.prometheus

MODEL = "RedHatAI/Qwen3.6-35B-A3B-NVFP4"
EXACT = 1e-9
# Prometheus stamps a scrape with its start, aligned to the schedule within 2 ms; with samples ~1 s
# apart, a window of N >= 8 intervals scales two replicas' series alike to ~2e-3 / 7 at worst (seen:
# 2e-15, the stamps were aligned). The fleet's p90 and the replicas' averaged p90s differ by ~10 %.
EXTRAPOLATED = 1e-3
QUANTILES = (0.5, 0.9, 0.99)
THINNED = ('le="0.75"', 'le="7.5"', 'le="40.0"')  # bounds the third replica's TTFT histogram lacks
# (replica, fixture run, scrape of state 0, scrape of state 1, TTFT buckets thinned)
REPLICAS = (
    ("spark1", "mtp2-steady", 2, 29, False),
    ("spark2", "mtp3-poor-pos2", 0, 20, False),
    ("spark3", "mtp2-steady", 10, 25, True),
)


def thin_ttft(text: str) -> str:
    return "\n".join(
        line
        for line in text.splitlines()
        if not (line.startswith("vllm:time_to_first_token_seconds_bucket") and any(le in line for le in THINNED))
    )


@dataclass
class Replica:
    name: str
    endpoint: Endpoint
    server: FixtureServer
    last: int


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    started: list[Replica] = []
    try:
        for name, run, first, last, thinned in REPLICAS:
            scrapes = scenario_scrapes(run)
            if thinned:
                scrapes = [thin_ttft(text) + "\n" for text in scrapes]
            endpoint = Endpoint(name=name, scrapes=scrapes, index=first)
            started.append(Replica(name, endpoint, FixtureServer(endpoint).start(), last))
        yield started
    finally:
        for replica in started:
            replica.server.stop()


def fleet_toml(replicas: list[Replica]) -> str:
    nodes = "".join(
        f'\n[[nodes]]\nname = "{r.name}"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
        f'[[nodes.vllm]]\nname = "qwen"\nurl = "{r.server.url}"\n'
        for r in replicas
    )
    return "poll_interval_s = 1.0\ntimeout_s = 2.0\n" + nodes


async def last_scrapes(server: PrometheusServer) -> list[float]:
    return [float(str(r["value"][1])) for r in await server.query("timestamp(up)")]  # type: ignore[index]


async def scraped_after(server: PrometheusServer, wall: float, count: int, timeout_s: float = 20.0) -> None:
    async def scraped() -> bool:
        times = await last_scrapes(server)
        return len(times) >= count and min(times) > wall

    await wait_until(scraped, timeout_s, what=f"Prometheus scraping every target after {wall:.3f}", interval_s=0.05)


def far_from_scrapes(after: float, scrapes: list[float]) -> float:
    """An instant in [after, after + 1) whose fraction of a second is as far as can be from every
    target's scrape phase (1 s interval): no sample falls on a window's end."""
    phases = [s % 1.0 for s in scrapes]

    def distance(phase: float) -> float:
        return min(min(abs(phase - p), 1.0 - abs(phase - p)) for p in phases)

    best = max((i / 100 for i in range(100)), key=distance)
    base = math.floor(after)
    at = base + best
    return at if at >= after else at + 1.0


def selector(key: str, bounds: tuple[str, ...] | None) -> str:
    matchers = [f'model_name="{MODEL}"']
    if bounds is not None:
        # A regex inside a PromQL string: its backslashes are escaped once more.
        matchers.append('le=~"' + "|".join(re.escape(b).replace("\\", "\\\\") for b in bounds) + '"')
    return f"{HISTOGRAMS[key][0]}_bucket{{{','.join(matchers)}}}"


def common_le(texts: list[str]) -> tuple[str, ...]:
    """The ``le`` label values of the TTFT buckets that every replica's scrape has, as exposed."""
    sets = [
        {
            m.group(1)
            for line in text.splitlines()
            if line.startswith("vllm:time_to_first_token_seconds_bucket")
            for m in [re.search(r'le="([^"]+)"', line)]
            if m is not None
        }
        for text in texts
    ]
    return tuple(sorted(set.intersection(*sets)))


def close(ours: float | None, theirs: float | None, rel: float) -> bool:
    if ours is None or theirs is None:
        return ours is theirs
    return math.isclose(ours, theirs, rel_tol=rel, abs_tol=1e-12)


@pytest.mark.asyncio
@pytest.mark.slow
async def test_merged_percentiles_equal_prometheus_over_the_same_samples(replicas: list[Replica]) -> None:
    require_prometheus()
    fleet = parse_config(fleet_toml(replicas), env={})
    urls = [f"{r.server.url}/metrics" for r in replicas]
    state = FleetState(fleet, readings())
    async with PrometheusServer(urls) as server, make_client([*fleet_origins(fleet), server.url]) as client:
        poller = FleetPoller(fleet, client)
        # The same fleet read from Prometheus (its source rebuilds each target's scrape from its samples).
        prom_fleet = parse_config(fleet_toml(replicas) + f'[prometheus]\nurl = "{server.url}"\n', env={})
        source, via_prometheus = PrometheusSource(prom_fleet), FleetState(prom_fleet, readings())

        async def poll() -> None:
            for observation in await poller.poll_all():
                state.apply(observation)
            for observation in await source.refresh(client):
                via_prometheus.apply(observation)

        # State 0: Prometheus scrapes it for 5 s; sparktui polls it once.
        await scraped_after(server, time.time() + 5.0, len(urls))
        await poll()
        switched = time.time()
        for replica in replicas:
            replica.endpoint.index = replica.last
        # State 1: sparktui polls it once Prometheus has it from every replica; Prometheus keeps it 8 s.
        await scraped_after(server, switched + 0.2, len(urls))
        await poll()
        polled = time.monotonic()  # viewed as then: later, the numbers would be stale (and hidden)
        await scraped_after(server, switched + 8.0, len(urls))
        at = far_from_scrapes(time.time(), await last_scrapes(server))
        window = math.floor(at - switched) + 3  # starts 2-3 s before the switch: state 0's samples
        await scraped_after(server, at, len(urls))  # every sample up to ``at`` is in

        views = state.view(polled, window_s=None)
        (found,) = model_replicas(views)
        assert isinstance(found, ModelReplicas) and found.model == MODEL
        assert found.reporting == 3 and found.coarsened == ("ttft",)
        texts = [r.endpoint.current_scrape() for r in replicas]
        bounds = common_le(texts)
        assert len(bounds) == 23 - len(THINNED)
        checked = 0
        for key in REPLICA_LATENCY_KEYS:
            summary = found.latency[key]
            assert summary.count > 0
            only = bounds if key == "ttft" else None
            for q, ours in zip(QUANTILES, (summary.p50, summary.p90, summary.p99), strict=True):
                series = selector(key, only)
                exact = f"histogram_quantile({q}, sum by (le) ({series}) - sum by (le) ({series} offset {window}s))"
                increase = f"histogram_quantile({q}, sum by (le) (increase({series}[{window}s])))"
                for expr, rel in ((exact, EXACT), (increase, EXTRAPOLATED)):
                    answer = await server.query(expr, at=at)
                    assert len(answer) == 1, (expr, answer)
                    theirs = float(str(answer[0]["value"][1]))  # type: ignore[index]
                    assert close(ours, theirs, rel), (key, q, expr, ours, theirs)
                    checked += 1
        assert checked == len(REPLICA_LATENCY_KEYS) * len(QUANTILES) * 2
        # Read through the Prometheus source, the fleet's numbers are the same: nothing to add there.
        (from_prometheus,) = model_replicas(via_prometheus.view(polled, window_s=None))
        assert from_prometheus.latency == found.latency and from_prometheus.slowest == found.slowest

        # Each replica's own p90 TTFT is Prometheus's for that replica alone; their average is not the fleet's.
        own: list[float] = []
        for replica, seen in zip(replicas, found.replicas, strict=True):
            assert seen.ttft is not None and seen.ttft.p90 is not None
            port = replica.server.port
            series = f'vllm:time_to_first_token_seconds_bucket{{instance="127.0.0.1:{port}"}}'
            expr = f"histogram_quantile(0.9, sum by (le) ({series}) - sum by (le) ({series} offset {window}s))"
            (alone,) = await server.query(expr, at=at)
            assert close(seen.ttft.p90, float(str(alone["value"][1])), EXACT)  # type: ignore[index]
            own.append(seen.ttft.p90)
        fleet_p90 = found.latency["ttft"].p90
        assert fleet_p90 is not None
        assert abs(sum(own) / len(own) - fleet_p90) > 10 * EXTRAPOLATED * fleet_p90
