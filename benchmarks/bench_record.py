"""What recording 8 demo nodes at a 1 s interval costs: bytes on disk per hour, and the recorder's CPU.

    python benchmarks/bench_record.py [--nodes 8] [--seconds 180] [--write docs/performance.md]

Starts ``sparktui demo --serve-only --nodes N`` in its own process, and in this one collects it with
``LiveFleet`` (HTTP polls every second, the host sampler and the log stream of every node over SSH)
into a ``Recorder`` chained next to a counting sink, with a tick recorded every second as the
dashboard does. Measured: the file's size on disk after the run (SQLite pages included), extrapolated
to an hour; the recorder's CPU, that of its writer thread (encoding, compression, SQLite) plus the
time its sink methods take on the event loop, as a share of one core. The file is then read back in
full, and the same observations are compressed with zlib alone for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

from _common import demo_fleet, write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.config import load_config  # noqa: E402
from sparktui.model.logbuffer import LogLine  # noqa: E402
from sparktui.model.observations import HostUpdate, NodeObservation  # noqa: E402
from sparktui.record.recorder import Recorder  # noqa: E402
from sparktui.record.store import RecordingReader  # noqa: E402
from sparktui.record.types import Kind  # noqa: E402
from sparktui.sources.live import LiveFleet  # noqa: E402

QUICK_ARGS = ("--seconds", "60")  # benchmarks/run_all.py --quick
TARGET_MB_PER_HOUR = 50.0
TARGET_CPU_PCT = 2.0
MB = 1_000_000

HEADING = """## Recording 8 nodes at 1 s (issue: record and replay)

Target: recording 8 nodes at a 1 s interval for an hour costs under 50 MB on disk and under 2 % of one
core.

How: the recorder's sink methods only queue what arrives; a writer thread encodes, compresses and
writes it to SQLite (WAL, one transaction a second). A /metrics body is stored as a line delta
against the node's previous scrape (the values that changed, and counts of lines copied), then each
record is compressed with zlib using the same stream's previous record as its preset dictionary; every
5 minutes every stream starts afresh (an epoch) so reading can start there. Host samples and log
batches are JSON, compressed the same way. docs/record.md describes the file.

Command: `python benchmarks/bench_record.py --write docs/performance.md`

"""


class CountingSink:
    """The consumer next to the recorder: counts what arrives, and times the recorder's calls."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.counts = {"observations": 0, "host": 0, "log_lines": 0, "errors": 0}
        self.call_cpu_s = 0.0

    def _timed(self, call: object) -> None:
        start = time.thread_time()
        assert callable(call)
        call()
        self.call_cpu_s += time.thread_time() - start

    def observation(self, observation: NodeObservation) -> None:
        self.counts["observations"] += 1
        self._timed(lambda: self.recorder.observation(observation))

    def host(self, update: HostUpdate) -> None:
        self.counts["host"] += 1
        self._timed(lambda: self.recorder.host(update))

    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None:
        self.counts["log_lines"] += len(lines)
        self._timed(lambda: self.recorder.log_batch(node, instance, lines))

    def error(self, node: str, exc: Exception) -> None:
        self.counts["errors"] += 1
        self._timed(lambda: self.recorder.error(node, exc))


async def _collect(config: Path, path: Path, seconds: float) -> dict[str, float]:
    fleet = load_config(config)
    recorder = Recorder(path, fleet)
    sink = CountingSink(recorder)

    async def ticks() -> None:
        next_at = time.monotonic()
        while True:
            next_at += fleet.poll_interval_s
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            sink._timed(lambda: recorder.tick(time.monotonic()))

    started = time.monotonic()
    tasks = [asyncio.create_task(LiveFleet(fleet).deliver(sink)), asyncio.create_task(ticks())]
    await asyncio.sleep(seconds)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    elapsed = time.monotonic() - started
    await recorder.aclose()
    if recorder.problem is not None:
        raise SystemExit(recorder.problem)
    return {
        "seconds": elapsed,
        "writer_cpu_s": recorder.cpu_s,
        "sink_cpu_s": sink.call_cpu_s,
        "records": recorder.records_written,
        "blob_bytes": recorder.bytes_written,
        "dropped": recorder.dropped,
        **{k: float(v) for k, v in sink.counts.items()},
    }


def _read_back(path: Path) -> dict[str, float]:
    reader = RecordingReader(path)
    start = time.perf_counter()
    observations = 0
    body_bytes = zlib_bytes = 0
    for record in reader.records(synthesize_ticks=False):
        if record.kind is Kind.OBSERVATION and isinstance(record.payload, NodeObservation):
            observations += 1
            for vllm in record.payload.vllm:
                for result in (vllm.health, vllm.metrics, vllm.version, vllm.models):
                    if result is not None and result.body:
                        body_bytes += len(result.body)
                        zlib_bytes += len(zlib.compress(result.body, 6))
            for result in (record.payload.gpu_exporter, record.payload.node_exporter):
                if result is not None and result.body:
                    body_bytes += len(result.body)
                    zlib_bytes += len(zlib.compress(result.body, 6))
    read_s = time.perf_counter() - start
    if reader.problem is not None:
        raise SystemExit(reader.problem)
    return {
        "read_s": read_s,
        "read_observations": observations,
        "body_bytes": body_bytes,
        "zlib_bytes": zlib_bytes,
    }


def measure(nodes: int, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fleet.db"
        with demo_fleet(nodes) as demo:
            found = asyncio.run(_collect(demo.config, path, seconds))
        wal = path.with_name(path.name + "-wal")
        found["file_bytes"] = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        found.update(_read_back(path))
    found["nodes"] = nodes
    return found


def report(r: dict[str, float]) -> str:
    hour = 3600 / r["seconds"]
    mb_hour = r["file_bytes"] * hour / MB
    cpu_pct = (r["writer_cpu_s"] + r["sink_cpu_s"]) / r["seconds"] * 100
    lines = [
        "| nodes | seconds | records | observations | host samples | log lines | file | **per hour** "
        "| recorder CPU | of which on the event loop | read back |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {r['nodes']:.0f} | {r['seconds']:.0f} | {r['records']:,.0f} | {r['observations']:,.0f} "
        f"| {r['host']:,.0f} | {r['log_lines']:,.0f} | {r['file_bytes'] / MB:.2f} MB | **{mb_hour:.1f} MB** "
        f"| **{cpu_pct:.2f} % of a core** | {r['sink_cpu_s'] / r['seconds'] * 100:.3f} % "
        f"| {r['read_observations'] / max(r['read_s'], 1e-9):,.0f} observations/s |",
    ]
    verdict_size = "under" if mb_hour < TARGET_MB_PER_HOUR else "OVER"
    verdict_cpu = "under" if cpu_pct < TARGET_CPU_PCT else "OVER"
    raw_mb_hour = r["body_bytes"] * hour / MB
    zlib_mb_hour = r["zlib_bytes"] * hour / MB
    machine = f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}"
    return (
        "\n".join(lines) + f"\n\n{mb_hour:.1f} MB per hour is {verdict_size} the {TARGET_MB_PER_HOUR:g} MB target, and "
        f"{cpu_pct:.2f} % of a core {verdict_cpu} the {TARGET_CPU_PCT:g} % target. For comparison, the HTTP "
        f"bodies alone come to {raw_mb_hour:,.0f} MB per hour raw, {zlib_mb_hour:,.0f} MB compressed one by one "
        f"with zlib. {r['dropped']:.0f} records dropped. Extrapolated from a {r['seconds']:.0f} s run (its "
        f"first epoch's keyframes included), on {machine}, {os.cpu_count()} CPUs.\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--write", type=Path, help="replace the recording section of this markdown file")
    args = ap.parse_args()
    table = report(measure(args.nodes, args.seconds))
    print(table)
    if args.write:
        write_section(args.write, "bench_record", table, heading=HEADING)
    return 0


if __name__ == "__main__":
    sys.exit(main())
