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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.config import load_config  # noqa: E402
from sparktui.model.observations import NodeObservation  # noqa: E402
from sparktui.sources.http import make_client  # noqa: E402
from sparktui.sources.poller import FleetPoller, fleet_origins  # noqa: E402


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _poll(config: Path, seconds: float) -> tuple[list[NodeObservation], float]:
    fleet = load_config(config)
    seen: list[NodeObservation] = []
    me = psutil.Process()
    cpu0 = me.cpu_times()
    async with make_client(fleet_origins(fleet)) as client:
        task = asyncio.create_task(FleetPoller(fleet, client).run(seen.append))
        await asyncio.sleep(seconds)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    cpu1 = me.cpu_times()
    return seen, (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)


def measure(nodes: int, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "demo.toml"
        sparktui = Path(sys.executable).parent / "sparktui"
        demo = subprocess.Popen(
            [str(sparktui), "demo", "--serve-only", "--nodes", str(nodes), "--write-config", str(config)],
            stdout=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        try:
            deadline = time.monotonic() + 60
            while not config.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(1.0)
            proc = psutil.Process(demo.pid)
            demo_cpu0 = proc.cpu_times()
            started = time.monotonic()
            observations, poll_cpu = asyncio.run(_poll(config, seconds))
            wall = time.monotonic() - started
            demo_cpu1 = proc.cpu_times()
        finally:
            demo.terminate()
            demo.wait(timeout=10)
    latencies = [v.metrics.elapsed_s for o in observations for v in o.vllm if v.metrics is not None and v.metrics.ok]
    failures = sum(1 for o in observations for v in o.vllm if v.metrics is not None and not v.metrics.ok)
    per_node: dict[str, int] = {}
    for o in observations:
        per_node[o.node] = per_node.get(o.node, 0) + 1
    demo_cpu = (demo_cpu1.user - demo_cpu0.user) + (demo_cpu1.system - demo_cpu0.system)
    return {
        "nodes": nodes,
        "seconds": wall,
        "scrapes": len(latencies),
        "failures": failures,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": _quantile(latencies, 0.99) * 1000,
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
        start, end = "<!-- bench_demo:start -->", "<!-- bench_demo:end -->"
        doc = args.write.read_text() if args.write.exists() else ""
        block = f"{start}\n{table}{end}"
        if start in doc and end in doc:
            doc = doc[: doc.index(start)] + block + doc[doc.index(end) + len(end) :]
        else:
            doc += "\n" + block + "\n"
        args.write.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
