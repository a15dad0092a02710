"""The memory of every store that grows with time, filled to its bound.

    python benchmarks/bench_stores.py [--nodes 8] [--write docs/performance.md]

A long-running dashboard (the kiosk runs for weeks) holds, per node and per vLLM instance, stores
that fill over minutes to hours and then stay at their bound: the history behind the sparklines, the
counter history behind every rate, the logs (each instance's and the node's kernel log), the cleared
findings and the resolved alerts. This script builds each store through the code the dashboard runs,
fills it to its shipped bound with real-shaped data (tests/data/vllm-0.33's mtp2-steady scrapes, the
log lines a busy vLLM writes, the finding the catalogue opens on them), and measures what it holds
with ``tracemalloc`` (Python's own allocations: what the stores cost, not the allocator's slack). The
totals are for a fleet of ``--nodes`` nodes with one vLLM instance each, the soak's fleet: the memory
a dashboard reaches once every store is full, and how long each takes to fill at a 1 s poll.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from _common import machine_line, write_section
from bench_diagnosis import Node, busy_second

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.diagnosis.alerts import DEFAULT_HISTORY as ALERT_HISTORY  # noqa: E402
from sparktui.diagnosis.alerts import Alert, AlertKey  # noqa: E402
from sparktui.diagnosis.engine import DEFAULT_HISTORY as FINDING_HISTORY  # noqa: E402
from sparktui.diagnosis.engine import Finding, last_intervals  # noqa: E402
from sparktui.engines import readings  # noqa: E402
from sparktui.model.fleet import COUNTER_WINDOWS_KEPT, FleetState  # noqa: E402
from sparktui.model.history import History  # noqa: E402
from sparktui.model.logbuffer import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, LogBuffer  # noqa: E402
from sparktui.monitor.core import MAX_ERRORS, UNSHOWN_LOG_LINES, WINDOW_S  # noqa: E402

T = TypeVar("T")
QUICK_ARGS = ("--nodes", "2")  # benchmarks/run_all.py --quick
POLL_S = 1.0
KERNEL_LINE = "NVRM: Xid (PCI:000f:01:00): 43, pid=4242, name=python3, Ch 00000008"

HEADING = """## The stores that grow with time, at their bounds (issue 23)

Target: every store that grows with time has a bound, and its memory at that bound is known, so a
dashboard that runs for weeks is flat once its stores are full (the soak judges the flatness).

Command: `python benchmarks/bench_stores.py --write docs/performance.md`

"""


@dataclass(frozen=True, slots=True)
class Store:
    name: str
    scope: str  # what one store belongs to: "per instance", "per node"
    bound: str  # the bound, as the code states it
    entries: int  # entries held at the bound
    kib: float  # measured at the bound
    fill: str  # how long it takes to fill at a 1 s poll

    @property
    def per_entry(self) -> float:
        return self.kib * 1024 / self.entries if self.entries else 0.0


def measured(build: Callable[[], T]) -> tuple[T, float]:
    """What ``build`` returns, and the KiB its allocations still hold once it returned."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return kept, (after - before) / 1024


def log_buffer(kernel: bool = False) -> tuple[LogBuffer, int]:
    """A log buffer at its shipped bound: a busy vLLM's lines (3 requests a second), or the kernel's."""
    buffer = LogBuffer()
    start = datetime(2026, 5, 30, 10, 0, tzinfo=UTC)
    second = 0
    while buffer.dropped == 0:
        stamp = start + timedelta(seconds=second)
        lines = [f"{KERNEL_LINE} {second}"] if kernel else busy_second(second, 3)
        buffer.append_batch((stamp, line) for line in lines)
        second += 1
    return buffer, second


def counter_history(polls: int) -> FleetState:
    """One instance's fleet state after ``polls`` polls at 1 s: its counter history keeps the
    dashboard's window twice over, beside the latest scrape and the node's other state."""
    node = Node()
    node.fleet = FleetState(node.fleet.spec, readings(), max_age_s=COUNTER_WINDOWS_KEPT * WINDOW_S)
    for i in range(polls):
        node.poll(i * POLL_S)
    return node.fleet


def history(polls: int) -> tuple[History, int]:
    """The sparkline history of one node with one instance, ``polls`` ticks of the real views."""
    node = Node()
    kept = History()
    views = [node.poll(i * POLL_S) for i in range(3)]
    for i in range(polls):
        kept.record((views[i % 3],), float(i) + 10.0)
    return kept, polls


def findings() -> tuple[list[Finding], Finding]:
    """A node's cleared findings at their bound, each like the one the catalogue opens on a busy vLLM's
    log (its evidence, the matching lines); strings are made distinct, as real findings' are."""
    node = Node()
    view = node.poll(0.0)
    node.intervals = last_intervals(node.fleet.nodes["spark1"])
    node.evaluate(view, 0.0)
    (finding, *_) = node.engine.active("spark1")
    return [
        replace(finding, evidence=tuple(f"{line} #{i}" for line in finding.evidence), opened_at=float(i))
        for i in range(FINDING_HISTORY)
    ], finding


def alerts(example: Finding) -> list[Alert]:
    return [
        Alert(
            key=AlertKey(example.id, example.node, f"{example.id}/{example.instance}"),
            name=example.id,
            node=example.node,
            instance=example.instance,
            severity=example.severity,
            summary=f"{example.title} #{i}",
            evidence=tuple(f"{line} #{i}" for line in example.evidence),
            fix=example.fix,
            value=None,
            since=float(i),
            fired_at=float(i),
            fired_wall=1780134000.0 + i,
            resolved_at=float(i) + 60.0,
            resolved_wall=1780134060.0 + i,
        )
        for i in range(ALERT_HISTORY)
    ]


def errors() -> list[str]:
    return [
        f"spark{i % 8}: GET http://10.0.0.{i % 8}:8000/metrics: timed out after 5 s ({i})" for i in range(MAX_ERRORS)
    ]


def minutes(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def measure() -> list[Store]:
    stores: list[Store] = []
    (kept, seconds), kib = measured(log_buffer)
    stores.append(
        Store(
            "an instance's log",
            "per instance",
            f"{DEFAULT_MAX_LINES:,} lines or {DEFAULT_MAX_BYTES // 2**20} MiB of text",
            len(kept),
            kib,
            f"{minutes(seconds)} at 3 requests/s",
        )
    )
    (kernel, seconds), kib = measured(lambda: log_buffer(kernel=True))
    stores.append(
        Store(
            "the node's kernel log",
            "per node",
            f"{DEFAULT_MAX_LINES:,} lines or {DEFAULT_MAX_BYTES // 2**20} MiB of text",
            len(kernel),
            kib,
            f"{minutes(seconds)} at a line a second (a faulty node); days on a healthy one",
        )
    )
    points = int(COUNTER_WINDOWS_KEPT * WINDOW_S / POLL_S) + 1
    _one, first_kib = measured(lambda: counter_history(1))
    _full, kib = measured(lambda: counter_history(points + 10))
    kib -= first_kib  # the points alone: the latest scrape and the rest of the state are there after one poll
    stores.append(
        Store(
            "counter history (rates)",
            "per instance",
            f"{COUNTER_WINDOWS_KEPT:g} windows of {WINDOW_S:g} s",
            points,
            kib,
            minutes(COUNTER_WINDOWS_KEPT * WINDOW_S),
        )
    )
    max_points = History().max_points
    (sparklines, _polls), kib = measured(lambda: history(max_points))
    stores.append(
        Store(
            "sparkline history (one node, one instance, fleet series)",
            "per node",
            f"{max_points} points a series",
            len(sparklines),
            kib,
            "at once: a series' arrays are made at the bound with its first point",
        )
    )
    (made, example), kib = measured(findings)
    stores.append(Store("cleared findings", "per node", f"{FINDING_HISTORY}", len(made), kib, "as faults come"))
    made_alerts, kib = measured(lambda: alerts(example))
    stores.append(Store("resolved alerts", "fleet", f"{ALERT_HISTORY}", len(made_alerts), kib, "as faults come"))
    made_errors, kib = measured(errors)
    stores.append(Store("collection errors", "fleet", f"{MAX_ERRORS}", len(made_errors), kib, "as faults come"))
    return stores


def total_kib(stores: list[Store], nodes: int) -> float:
    count = {"per instance": nodes, "per node": nodes, "fleet": 1}
    return sum(store.kib * count[store.scope] for store in stores)


def report(stores: list[Store], nodes: int) -> str:
    lines = [
        "| store | one is | bound | entries at the bound | memory at the bound | per entry | fills in |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in stores:
        lines.append(
            f"| {s.name} | {s.scope} | {s.bound} | {s.entries:,} | {s.kib / 1024:.2f} MiB | {s.per_entry:,.0f} B "
            f"| {s.fill} |"
        )
    total = total_kib(stores, nodes)
    logs = sum(s.kib for s in stores if "log" in s.name) * nodes
    unshown = logs * UNSHOWN_LOG_LINES / DEFAULT_MAX_LINES
    lines += [
        "",
        f"With {nodes} nodes of one vLLM instance each (the soak's fleet), every store full holds "
        f"**{total / 1024:.1f} MiB**, {logs / 1024:.1f} MiB of it logs. The logs fill last: an instance's "
        "in the time the table says at a busy server's rate (hours on a quiet one), the kernel's on a "
        "faulty node only, so a dashboard's memory grows by up to this much over its first hours and "
        "is flat after. Where no one scrolls a log (`sparktui watch`, the kiosk) it keeps "
        f"{UNSHOWN_LOG_LINES:,} lines: {unshown / 1024:.1f} MiB for the same fleet's logs, full ten times sooner.",
        "",
        f"Measured with tracemalloc on {machine_line()}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--write", type=Path, help="replace the bench_stores section of this file")
    args = parser.parse_args()
    stores = measure()
    text = report(stores, args.nodes)
    print(text)
    if args.write:
        write_section(args.write, "bench_stores", text, heading=HEADING)


if __name__ == "__main__":
    main()
