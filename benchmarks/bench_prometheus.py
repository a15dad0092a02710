"""One refresh of a 64-node fleet read from Prometheus: how many queries, how long, how many bytes.

    python benchmarks/bench_prometheus.py [--nodes 64] [--refreshes 30] [--scrape-interval 5 1]
                                          [--write docs/performance.md]

Starts ``sparktui demo --nodes N`` in its own process and, for each scrape interval, a real Prometheus
server (Debian's package, ``tests/support/prometheus_server.py``) scraping its vLLM servers and GPU exporters,
waits until every target is up, then runs ``PrometheusSource.refresh()`` once a second in this
process and applies what it returns to a ``FleetState`` and takes the fleet screen's views, as the
dashboard does. It reports the Prometheus requests per refresh, the bytes of their answers, and the
time of a refresh (query, answer parsed, observations built, side services checked in parallel) and of
applying it and rendering the views.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from _common import cpu_s, demo_fleet, quantile, write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from _screen import ScreenRecorder  # noqa: E402

from sparktui.config import load_config, parse_config  # noqa: E402
from sparktui.engines import readings  # noqa: E402
from sparktui.model.fleet import FleetState  # noqa: E402
from sparktui.model.observations import NodeObservation  # noqa: E402
from sparktui.model.specs import FleetSpec  # noqa: E402
from sparktui.sources.http import make_client, origin_of  # noqa: E402
from sparktui.sources.prometheus import PrometheusClient, PrometheusSource  # noqa: E402
from sparktui.ui.app import make_app  # noqa: E402
from tests.support.prometheus_server import (  # noqa: E402
    PrometheusServer,
    ScrapingServer,
    fleet_metrics_urls,
    prometheus_binary,
)

QUICK_ARGS = ("--refreshes", "10")  # benchmarks/run_all.py --quick


async def _measure(
    config: Path,
    refreshes: int,
    demo_pid: int,
    scrape_s: float,
    *,
    server_class: type[ScrapingServer] = PrometheusServer,
    dashboard: bool = True,
) -> dict[str, float]:
    """``refreshes`` refreshes of the fleet of ``config`` from a ``server_class`` scraping it every
    ``scrape_s``; with ``dashboard``, then the dashboard itself for as long."""
    direct = load_config(config)
    text = await asyncio.to_thread(config.read_text)
    urls = fleet_metrics_urls(direct)
    async with server_class(urls, interval_s=scrape_s, ready_timeout_s=120.0) as server:
        fleet = parse_config(text + f'\n[prometheus]\nurl = "{server.url}"\n', env={})
        source = PrometheusSource(fleet)
        state = FleetState(fleet, readings())
        origins = [origin_of(server.url)] + [origin_of(s.url) for n in fleet.nodes for s in n.services]
        refresh_s: list[float] = []
        apply_s: list[float] = []
        queries: list[int] = []
        answer_bytes: list[int] = []
        request_s: list[float] = []
        refresh_cpu_s: list[float] = []  # this process's CPU time in refresh(), and in applying it
        apply_cpu_s: list[float] = []
        observations = 0
        async with make_client(origins) as client:
            assert fleet.prometheus is not None
            source.prometheus = PrometheusClient(fleet.prometheus, client, 10.0)
            stats = source.prometheus.stats
            cold_started = time.perf_counter()
            for found in await source.refresh():
                state.apply(found)
            cold = time.perf_counter() - cold_started
            assert server.process is not None
            others = {"demo": demo_pid, "prometheus": server.process.pid, "bench": os.getpid()}
            cpu0 = {name: cpu_s(pid) for name, pid in others.items()}
            wall0 = time.monotonic()
            next_at = time.monotonic()
            for _ in range(refreshes):
                next_at += 1.0
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                before_queries, before_bytes, before_s = stats.queries, stats.bytes, stats.seconds
                started, cpu_started = time.perf_counter(), time.process_time()
                found_now = await source.refresh()
                refreshed, cpu_refreshed = time.perf_counter(), time.process_time()
                for found in found_now:
                    state.apply(found)
                views = state.view(time.monotonic(), window_s=60.0)
                done = time.perf_counter()
                refresh_cpu_s.append(cpu_refreshed - cpu_started)
                apply_cpu_s.append(time.process_time() - cpu_refreshed)
                refresh_s.append(refreshed - started)
                apply_s.append(done - refreshed)
                queries.append(stats.queries - before_queries)
                answer_bytes.append(stats.bytes - before_bytes)
                request_s.append(stats.seconds - before_s)
                observations += len(found_now)
            wall = time.monotonic() - wall0
            cpu = {name: (cpu_s(pid) - cpu0[name]) / wall * 100 for name, pid in others.items()}
        screen = await _dashboard(fleet, refreshes) if dashboard else {}
        up = sum(1 for view in views if view.status.state.value == "up")
        with_rates = sum(1 for view in views for i in view.instances if i.rates is not None)
    total = [a + b for a, b in zip(refresh_s, apply_s, strict=True)]
    return {
        "scrape_s": scrape_s,
        "nodes": len(fleet.nodes),
        "targets": len(urls),
        "services": sum(len(n.services) for n in fleet.nodes),
        "refreshes": refreshes,
        "queries_max": max(queries),
        "queries_mean": statistics.mean(queries),
        "kib_mean": statistics.mean(answer_bytes) / 1024,
        "cold_ms": cold * 1000,
        "refresh_p50_ms": statistics.median(refresh_s) * 1000,
        "request_p50_ms": statistics.median(request_s) * 1000,
        "refresh_max_ms": max(refresh_s) * 1000,
        "apply_p50_ms": statistics.median(apply_s) * 1000,
        "total_p50_ms": statistics.median(total) * 1000,
        "total_p95_ms": quantile(total, 0.95) * 1000,
        "total_max_ms": max(total) * 1000,
        "refresh_cpu_ms": statistics.mean(refresh_cpu_s) * 1000,
        "apply_cpu_ms": statistics.mean(apply_cpu_s) * 1000,
        "observations_per_refresh": observations / refreshes,
        "nodes_up": up,
        "instances_with_rates": with_rates,
        "demo_cpu_pct": cpu["demo"],
        "prometheus_cpu_pct": cpu["prometheus"],
        "bench_cpu_pct": cpu["bench"],
        **screen,
    }


async def _dashboard(fleet: FleetSpec, seconds: float) -> dict[str, float]:
    """The dashboard itself on the Prometheus-backed fleet (headless, every frame kept): from the start of
    each refresh to the first frame drawn after its observations were applied."""
    refreshes: list[tuple[float, float, int]] = []  # (started, observations handed over, queries)
    original = PrometheusSource.refresh

    async def timed(self: PrometheusSource, client: httpx.AsyncClient | None = None) -> list[NodeObservation]:
        before = self.prometheus.stats.queries if self.prometheus is not None else 0
        started = time.monotonic()
        found = await original(self, client)
        queries = (self.prometheus.stats.queries if self.prometheus is not None else 0) - before
        refreshes.append((started, time.monotonic(), queries))
        return found

    PrometheusSource.refresh = timed  # type: ignore[method-assign]
    try:
        app = make_app(fleet, freeze_gc=True)  # as the CLI's dashboard runs
        async with app.run_test(headless=True, size=(160, 48)):
            recorder = ScreenRecorder(app, 160, 48)
            await asyncio.sleep(2.0)  # the first refresh and the first full frame
            refreshes.clear()
            await asyncio.sleep(seconds)
            frames = [frame.t for frame in recorder.drain()]
            shown = "\n".join(recorder.lines())
    finally:
        PrometheusSource.refresh = original  # type: ignore[method-assign]
    if f"{len(fleet.nodes)} nodes" not in shown:
        raise SystemExit(f"bench_prometheus: the dashboard did not show the fleet:\n{shown}")
    latency = []
    for started, handed, _ in refreshes:
        after = [t for t in frames if t >= handed]
        if after:
            latency.append(after[0] - started)
    if not latency:
        raise SystemExit("bench_prometheus: no frame followed a refresh in the dashboard")
    return {
        "screen_refreshes": len(latency),
        "screen_queries_max": max(q for *_, q in refreshes),
        "screen_p50_ms": statistics.median(latency) * 1000,
        "screen_p95_ms": quantile(latency, 0.95) * 1000,
        "screen_max_ms": max(latency) * 1000,
    }


def measure(nodes: int, refreshes: int, scrape_intervals: Sequence[float]) -> list[dict[str, float]]:
    if prometheus_binary() is None:
        raise SystemExit("bench_prometheus: /usr/bin/prometheus is missing; apt-get install prometheus")
    with demo_fleet(nodes) as demo:
        return [asyncio.run(_measure(demo.config, refreshes, demo.pid, scrape_s)) for scrape_s in scrape_intervals]


def report(results: Sequence[dict[str, float]]) -> str:
    lines = [
        "| Prometheus scrapes every | nodes | targets | side services (direct) | refreshes | requests per refresh | "
        "answer per refresh | refresh p50 / max | apply + views p50 | whole refresh p50 / p95 / max | CPU: demo, "
        "Prometheus, sparktui |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['scrape_s']:g} s | {r['nodes']:.0f} | {r['targets']:.0f} | {r['services']:.0f} | "
            f"{r['refreshes']:.0f} | {r['queries_max']:.0f} (mean {r['queries_mean']:.2f}) | "
            f"{r['kib_mean']:.0f} KiB | {r['refresh_p50_ms']:.0f} / {r['refresh_max_ms']:.0f} ms "
            f"(Prometheus's answer {r['request_p50_ms']:.0f} ms) | {r['apply_p50_ms']:.0f} ms | "
            f"**{r['total_p50_ms']:.0f}** / {r['total_p95_ms']:.0f} / {r['total_max_ms']:.0f} ms | "
            f"{r['demo_cpu_pct']:.0f} %, {r['prometheus_cpu_pct']:.0f} %, {r['bench_cpu_pct']:.0f} % of a core |"
        )
    lines += [
        "",
        "The dashboard itself on that fleet (`make_app` with the `[prometheus]` config, headless at 160x48, every "
        "frame kept): from the start of a refresh to the first frame drawn after its observations were applied.",
        "",
        "| Prometheus scrapes every | refreshes | requests per refresh (max) | refresh → fleet screen drawn "
        "p50 / p95 / max |",
        "|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['scrape_s']:g} s | {r['screen_refreshes']:.0f} | {r['screen_queries_max']:.0f} | "
            f"**{r['screen_p50_ms']:.0f}** / {r['screen_p95_ms']:.0f} / {r['screen_max_ms']:.0f} ms |"
        )
    last = results[-1]
    lines += [
        "",
        f"A refresh after the first applies about {last['observations_per_refresh']:.0f} observations; at the end "
        f"{last['nodes_up']:.0f} of {last['nodes']:.0f} nodes were up and {last['instances_with_rates']:.0f} instances "
        f"had rates. Measured on CPython {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores "
        f"(load average {os.getloadavg()[0]:.1f} at the end), with the demo and Prometheus on the same machine. "
        "Prometheus's default scrape interval is 15 s; 5 s is already a busy lab, 1 s the tests' setting.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--refreshes", type=int, default=30)
    ap.add_argument("--scrape-interval", type=float, nargs="+", default=[5.0, 1.0], metavar="SECONDS")
    ap.add_argument("--write", type=Path)
    args = ap.parse_args()
    table = report(measure(args.nodes, args.refreshes, args.scrape_interval))
    print(table)
    if args.write:
        write_section(args.write, "bench_prometheus", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
