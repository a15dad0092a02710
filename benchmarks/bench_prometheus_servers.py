"""The Prometheus source's refresh cost by server and fleet size: Prometheus and VictoriaMetrics.

    python benchmarks/bench_prometheus_servers.py [--nodes 8 32 64] [--refreshes 15] [--scrape-interval 1]
                                                  [--write docs/performance.md]

For each fleet size, starts ``sparktui demo --nodes N`` in its own process and then, one after the
other, a real Prometheus and a real VictoriaMetrics (Debian's packages, ``tests/support/prometheus_server.py``)
scraping it, and runs ``bench_prometheus``'s measurement on each (``PrometheusSource.refresh()`` once a
second, applied to a ``FleetState`` and the fleet screen's views taken, no dashboard). It reports the
wall time of the query (request sent to answer read), this process's CPU time per refresh (the query's
answer parsed and written back as expositions; then applied and derived), and the server's CPU, and
how each grows per scrape target from the smallest fleet to the largest.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path

from _common import demo_fleet, write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_prometheus import _measure  # noqa: E402

from tests.support.prometheus_server import (  # noqa: E402
    PrometheusServer,
    ScrapingServer,
    VictoriaMetricsServer,
    prometheus_binary,
    victoria_metrics_binary,
)

QUICK_ARGS = ("--nodes", "8", "--refreshes", "5")  # benchmarks/run_all.py --quick
SERVERS: dict[str, type[ScrapingServer]] = {"Prometheus": PrometheusServer, "VictoriaMetrics": VictoriaMetricsServer}

Result = tuple[str, dict[str, float]]  # the server's name, bench_prometheus's figures


def measure(fleet_sizes: Sequence[int], refreshes: int, scrape_s: float) -> list[Result]:
    if prometheus_binary() is None or victoria_metrics_binary() is None:
        raise SystemExit("bench_prometheus_servers: apt-get install prometheus victoria-metrics (Debian's packages)")
    results: list[Result] = []
    for nodes in fleet_sizes:
        with demo_fleet(nodes) as demo:
            for name, server_class in SERVERS.items():
                figures = asyncio.run(
                    _measure(demo.config, refreshes, demo.pid, scrape_s, server_class=server_class, dashboard=False)
                )
                results.append((name, figures))
                print(f"{name} at {nodes} nodes: done", file=sys.stderr)
    return results


def per_target(results: Sequence[Result], name: str, key: str) -> float | None:
    """How ``key`` grows per scrape target from the smallest fleet measured to the largest."""
    mine = sorted((r["targets"], r[key]) for server, r in results if server == name)
    if len(mine) < 2 or mine[-1][0] == mine[0][0]:
        return None
    (t0, v0), (t1, v1) = mine[0], mine[-1]
    return (v1 - v0) / (t1 - t0)


def report(results: Sequence[Result], scrape_s: float) -> str:
    lines = [
        f"| server (scrapes every {scrape_s:g} s) | nodes | scrape targets | answer per refresh | query wall time p50 "
        "| sparktui CPU per refresh: refresh + apply | whole refresh p50 | server CPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results:
        lines.append(
            f"| {name} | {r['nodes']:.0f} | {r['targets']:.0f} | {r['kib_mean']:.0f} KiB | "
            f"{r['request_p50_ms']:.0f} ms | **{r['refresh_cpu_ms'] + r['apply_cpu_ms']:.1f} ms** "
            f"({r['refresh_cpu_ms']:.1f} + {r['apply_cpu_ms']:.1f}) | {r['total_p50_ms']:.0f} ms | "
            f"{r['prometheus_cpu_pct']:.0f} % of a core |"
        )
    lines += ["", "Growth per scrape target, from the smallest fleet measured to the largest:", ""]
    for name in SERVERS:
        cpu_refresh = per_target(results, name, "refresh_cpu_ms")
        cpu_apply = per_target(results, name, "apply_cpu_ms")
        wall = per_target(results, name, "request_p50_ms")
        answer = per_target(results, name, "kib_mean")
        if cpu_refresh is None or cpu_apply is None or wall is None or answer is None:
            continue
        lines.append(
            f"- {name}: sparktui's CPU {cpu_refresh + cpu_apply:.2f} ms per target per refresh "
            f"({cpu_refresh:.2f} refresh + {cpu_apply:.2f} apply), the query's wall time {wall:.2f} ms "
            f"per target, the answer {answer:.0f} KiB per target."
        )
    lines += [
        "",
        f"{results[0][1]['refreshes']:.0f} refreshes per row, one run each. Measured on CPython "
        f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores (load average "
        f"{os.getloadavg()[0]:.1f} at the end), with the demo and the server on the same machine.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, nargs="+", default=[8, 32, 64])
    ap.add_argument("--refreshes", type=int, default=15)
    ap.add_argument("--scrape-interval", type=float, default=1.0, metavar="SECONDS")
    ap.add_argument("--write", type=Path)
    args = ap.parse_args()
    table = report(measure(args.nodes, args.refreshes, args.scrape_interval), args.scrape_interval)
    print(table)
    if args.write:
        write_section(args.write, "bench_prometheus_servers", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
