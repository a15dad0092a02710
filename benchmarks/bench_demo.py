"""Can the demo serve 64 nodes at a 1 s scrape interval on this machine without falling behind?

    python benchmarks/bench_demo.py [--nodes 64] [--seconds 30] [--write docs/performance.md]

Starts ``sparktui demo --nodes N`` in its own process, polls every node every second with
sparktui's own collector (in this process) for the given time, and reports: scrape latency of
``/metrics`` (p50, p99, max), failed requests, polls per node, and the CPU used by the demo
process and by the polling process. "Falling behind" would show as latency near the 1 s interval,
failures, or fewer polls than seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

from _common import cpu_s, demo_fleet, quantile, write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.config import load_config  # noqa: E402
from sparktui.model.observations import NodeObservation  # noqa: E402
from sparktui.sources.http import make_client  # noqa: E402
from sparktui.sources.poller import FleetPoller, fleet_origins  # noqa: E402

QUICK_ARGS = ("--seconds", "10")  # benchmarks/run_all.py --quick


async def _poll(config: Path, seconds: float) -> tuple[list[NodeObservation], float]:
    fleet = load_config(config)
    seen: list[NodeObservation] = []
    cpu0 = cpu_s(os.getpid())
    async with make_client(fleet_origins(fleet)) as client:
        task = asyncio.create_task(FleetPoller(fleet, client).run(seen.append))
        await asyncio.sleep(seconds)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return seen, cpu_s(os.getpid()) - cpu0


def measure(nodes: int, seconds: float) -> dict[str, float]:
    with demo_fleet(nodes) as demo:
        demo_cpu0 = cpu_s(demo.pid)
        started = time.monotonic()
        observations, poll_cpu = asyncio.run(_poll(demo.config, seconds))
        wall = time.monotonic() - started
        demo_cpu1 = cpu_s(demo.pid)
    latencies = [v.metrics.elapsed_s for o in observations for v in o.vllm if v.metrics is not None and v.metrics.ok]
    failures = sum(1 for o in observations for v in o.vllm if v.metrics is not None and not v.metrics.ok)
    per_node: dict[str, int] = {}
    for o in observations:
        per_node[o.node] = per_node.get(o.node, 0) + 1
    demo_cpu = demo_cpu1 - demo_cpu0
    return {
        "nodes": nodes,
        "seconds": wall,
        "scrapes": len(latencies),
        "failures": failures,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": quantile(latencies, 0.99) * 1000,
        "max_ms": max(latencies) * 1000,
        "min_polls_per_node": min(per_node.values()),
        "demo_cpu_pct": demo_cpu / wall * 100,
        "poller_cpu_pct": poll_cpu / wall * 100,
    }


def report(r: dict[str, float]) -> str:
    return (
        "| nodes | seconds | /metrics scrapes | failed | p50 | p99 | max | fewest polls of a node | "
        "demo CPU | poller CPU |\n|---|---|---|---|---|---|---|---|---|---|\n"
        f"| {r['nodes']:.0f} | {r['seconds']:.0f} | {r['scrapes']:.0f} | {r['failures']:.0f} | "
        f"{r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms | {r['max_ms']:.1f} ms | "
        f"{r['min_polls_per_node']:.0f} | "
        f"{r['demo_cpu_pct']:.0f} % of a core | {r['poller_cpu_pct']:.0f} % of a core |\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args()
    table = report(measure(args.nodes, args.seconds))
    print(table)
    if args.write:
        write_section(args.write, "bench_demo", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
