"""Diagnosis rule evaluation per node per poll, with a 10,000-line log buffer.

    python benchmarks/bench_diagnosis.py [--polls 2000] [--write docs/performance.md]

A node of the real model (``FleetState``) serves tests/data/vllm-0.33/mtp2-steady's scrapes with a
host frame from tests/data/host; its instance's ``LogBuffer`` is full (10,000 lines of a busy vLLM:
access lines, the engine's throughput and spec-decode lines, the odd warning). Each poll appends the
lines a busy server writes in one second, then the engine evaluates all 32 rules: ``unread()`` takes
the new lines by the engine's cursor, ``evaluate()`` scans them and judges every detector. The node
view is built outside the timed part (the dashboard builds it anyway); ``last_intervals()`` is timed
on its own row. Figures are the median and 99th percentile over ``--polls`` polls.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import quantile, write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.config import load_catalogue, parse_config  # noqa: E402
from sparktui.diagnosis.engine import DiagnosisEngine, last_intervals, unread  # noqa: E402
from sparktui.engines import readings  # noqa: E402
from sparktui.model.derive import EngineRates  # noqa: E402
from sparktui.model.fleet import FleetState, NodeView  # noqa: E402
from sparktui.model.host import FrameSplitter, HostSample, parse_frame  # noqa: E402
from sparktui.model.logbuffer import LogBuffer  # noqa: E402
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation  # noqa: E402
from tests.support.fixture_fleet import scenario_scrapes  # noqa: E402

QUICK_ARGS = ("--polls", "300")  # benchmarks/run_all.py --quick
TARGET_MS = 1.0
BUFFER_LINES = 10_000
CONFIG = """
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "gptoss"
port = 8000
container = "vllm_gptoss"
gpu_memory_utilization = 0.9
"""

HEADING = """## Diagnosis rules per node per poll (issue: diagnosis)

Target: evaluating every rule of the failure catalogue costs under 1 ms per node per poll, with a
10,000-line log buffer.

How: the engine keeps a cursor per instance (the `seq` of the next log line) and `unread()` takes
only the lines past it from the newest end of the `LogBuffer`, so the buffer's size does not matter.
Each new line goes through one combined prefilter regex (every log rule's patterns as one
alternation); only a line that passes is tried against the rules one by one. Detectors read the node
view the dashboard builds anyway and a few numbers the engine keeps. A poll's new lines are what vLLM
writes in a second at 3 or 30 requests a second (an access line and an "Added request" line each,
and every 10 s its throughput and spec-decode lines). The first evaluation of a node scans whatever
the buffer holds (a cold start), once. The p99 includes the other processes of this 2-core machine.

Command: `python benchmarks/bench_diagnosis.py --write docs/performance.md`

"""


def busy_second(second: int, requests: int) -> list[str]:
    """What a vLLM serving ``requests`` requests a second writes in one second: an access line and an
    "Added request" line each, and every 10 s its throughput and spec-decode lines."""
    lines: list[str] = []
    for i in range(requests):
        client = f"10.0.0.{5 + i % 200}:{51000 + (second + i) % 10000}"
        lines.append(f'INFO:     {client} - "POST /v1/chat/completions HTTP/1.1" 200 OK')
        lines.append(f"INFO [async_llm.py:331] Added request chatcmpl-{second:08x}{i:08x}.")
    if second % 10 == 0:
        lines += [
            "INFO [loggers.py:248] Engine 000: Avg prompt throughput: 10423.1 tokens/s, Avg generation throughput:"
            " 1042.3 tokens/s, Running: 9 reqs, Waiting: 1 reqs, GPU KV cache usage: 21.4%, Prefix cache hit"
            " rate: 71.2%",
            "INFO [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.45, Accepted throughput: 612.10"
            " tokens/s, Drafted throughput: 835.20 tokens/s, Accepted: 6121 tokens, Drafted: 8352 tokens,"
            " Per-position acceptance rate: 0.891, 0.560, Avg Draft acceptance rate: 73.3%",
        ]
    if second % 97 == 0:
        lines.append("WARNING [serving_chat.py:190] Request chatcmpl-x exceeded max_tokens; finished with length")
    return lines


def counter_increase(first: str, last: str) -> dict[str, float]:
    """How much each counter sample (``…_total``, ``…_count``, ``…_sum``, ``…_bucket``) grew between
    two scrapes, by the sample's ``name{labels}``."""
    counters = ("_total", "_count", "_sum", "_bucket")

    def samples(text: str) -> dict[str, float]:
        out = {}
        for line in text.splitlines():
            head, _, value = line.rpartition(" ")
            if head and not line.startswith("#") and head.split("{", 1)[0].endswith(counters):
                out[head] = float(value)
        return out

    before = samples(first)
    return {head: value - before[head] for head, value in samples(last).items() if head in before}


def host_sample() -> HostSample:
    text = (ROOT / "tests" / "data" / "host" / "frames-serving.txt").read_text()
    splitter = FrameSplitter()
    frames = [f for line in text.splitlines() if (f := splitter.feed(line)) is not None]
    return parse_frame(frames[0])


class Node:
    """The benchmark node: its fleet state, log buffer and engine, polled once a second."""

    def __init__(self) -> None:
        self.fleet = FleetState(parse_config(CONFIG, source="bench.toml"), readings())
        self.engine = DiagnosisEngine(load_catalogue())
        self.buffer = LogBuffer(max_lines=BUFFER_LINES)
        self.scrapes = scenario_scrapes("mtp2-steady")
        self.lap_increase = counter_increase(self.scrapes[0], self.scrapes[-1])
        self.t0 = datetime(2026, 5, 30, 10, 0, tzinfo=UTC)
        self.second = 0
        self.intervals: Mapping[str, EngineRates | None] = {}
        self.fleet.apply_host(HostUpdate("spark1", 0.0, sample=host_sample()))
        while len(self.buffer) < BUFFER_LINES or self.buffer.dropped == 0:
            self.write_second(3)
        # One line the catalogue knows, so a finding is open while the benchmark runs.
        self.buffer.append(self.t0, "WARNING [envs.py:1530] Unknown vLLM environment variable detected: VLLM_X")

    def write_second(self, requests: int) -> None:
        stamp = self.t0 + timedelta(seconds=self.second)
        self.buffer.append_batch((stamp, line) for line in busy_second(self.second, requests))
        self.second += 1

    def scrape(self, index: int) -> str:
        """mtp2-steady played in a loop, each lap's counters continuing from the last (no reset)."""
        lap, i = divmod(index, len(self.scrapes) - 1)
        if lap == 0:
            return self.scrapes[i]
        out = []
        for line in self.scrapes[i].splitlines():
            head, _, value = line.rpartition(" ")
            step = self.lap_increase.get(head)
            out.append(f"{head} {float(value) + lap * step}" if step is not None else line)
        return "\n".join(out) + "\n"

    def poll(self, t: float) -> NodeView:
        scrape = self.scrape(int(t))
        health = HttpResult(url="http://10.0.0.1:8000", kind=FetchKind.OK, status=200)
        metrics = HttpResult(url="http://10.0.0.1:8000", kind=FetchKind.OK, status=200, body=scrape.encode())
        self.fleet.apply(
            NodeObservation(
                node="spark1", t=t, wall=1780134000.0 + t, vllm=(ServerObservation("gptoss", health, metrics),)
            )
        )
        (view,) = self.fleet.view(t)
        return view

    def evaluate(self, view: NodeView, t: float) -> int:
        engine = self.engine
        lines = unread(self.buffer, engine.cursor("spark1", "gptoss"))
        findings = engine.evaluate(view, {"gptoss": lines}, t, self.intervals)
        return len(findings)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def run(polls: int, requests: int) -> tuple[float, float, float, float, int]:
    """(median ms, p99 ms, cold first evaluation ms, last_intervals median ms, findings open)."""
    node = Node()
    view = node.poll(0.0)
    node.intervals = last_intervals(node.fleet.nodes["spark1"])
    cold = timed(lambda: node.evaluate(view, 0.0))
    times: list[float] = []
    interval_times: list[float] = []
    found = 0
    for i in range(1, polls + 1):
        t = float(i)
        node.write_second(requests)
        view = node.poll(t)
        state = node.fleet.nodes["spark1"]
        start = time.perf_counter()
        node.intervals = last_intervals(state)
        interval_times.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        found = node.evaluate(view, t)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), quantile(times, 0.99), cold, statistics.median(interval_times), found


def report(polls: int) -> str:
    rows = [
        ("busy: 3 requests/s, ~6 new lines per poll", *run(polls, 3)),
        ("chatty: 30 requests/s, ~60 new lines per poll", *run(polls, 30)),
    ]
    lines = [
        "| log traffic | median ms per node per poll | p99 ms | first evaluation (whole buffer) ms "
        "| last_intervals() ms | findings open |",
        "|---|---|---|---|---|---|",
    ]
    for name, median, p99, cold, intervals, found in rows:
        lines.append(f"| {name} | {median:.3f} | {p99:.3f} | {cold:.1f} | {intervals:.3f} | {found} |")
    worst = max(row[1] for row in rows)
    verdict = "under" if worst < TARGET_MS else "OVER"
    machine = f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}"
    return (
        "\n".join(lines)
        + f"\n\n{verdict} the {TARGET_MS:g} ms target (worst median {worst:.3f} ms). {polls} polls each, "
        f"{BUFFER_LINES:,}-line buffer, 32 rules, on {machine}.\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--polls", type=int, default=2000)
    ap.add_argument("--write", type=Path, help="replace the diagnosis section of this markdown file")
    args = ap.parse_args()
    table = report(args.polls)
    print(table)
    if args.write:
        write_section(args.write, "bench_diagnosis", table, heading=HEADING)
    return 0


if __name__ == "__main__":
    sys.exit(main())
