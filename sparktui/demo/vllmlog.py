"""The demo's vLLM logs: what ``journalctl -u UNIT`` or ``docker logs NAME`` shows for one instance.

Each instance keeps a bounded list of records (time, journal identifier, text) that its service and
engine append as the simulation runs: the start-up lines of vLLM 0.33, the periodic
``Engine 000: …`` and ``SpecDecoding metrics: …`` lines (every 10 s, computed from the engine's own
counters over the interval, as ``LoggingStatLogger`` and ``SpecDecodingLogging`` do), uvicorn's
access line per request, and the exact text of a failed start. Records are formatted only when a log
command reads them: ``journalctl -o short-iso`` lines carry the host and ``ident[pid]:``,
``docker logs --timestamps`` lines an RFC 3339 nanosecond stamp; lines systemd writes about the unit
are in the journal only.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

LogFormat = Literal["journal", "docker"]
MAX_RECORDS = 2000
LOG_STATS_INTERVAL_S = 10.0  # VLLM_LOG_STATS_INTERVAL
FOLLOW_QUEUE = 4096  # lines a follower may lag behind before it is cut off (a client that stopped reading)


@dataclass(frozen=True, slots=True)
class LogRecord:
    epoch: float
    ident: str  # the journal's identifier: "vllm[4127]", "systemd[1]"
    text: str
    journal_only: bool = False  # systemd's lines about the unit are not in the container's output


def _stamp(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def journal_line(host: str, record: LogRecord) -> str:
    """``journalctl -o short-iso`` (systemd 255 writes the offset as +00:00)."""
    return f"{_stamp(record.epoch).strftime('%Y-%m-%dT%H:%M:%S+00:00')} {host} {record.ident}: {record.text}"


def docker_line(record: LogRecord) -> str:
    """``docker logs --timestamps``: RFC 3339 with nanoseconds, then the line as written."""
    stamp = _stamp(record.epoch)
    nanos = round((record.epoch % 1) * 1e9) % 1_000_000_000
    return f"{stamp.strftime('%Y-%m-%dT%H:%M:%S')}.{nanos:09d}Z {record.text}"


def vllm_text(epoch: float, level: str, where: str, message: str, process: str | None = None) -> str:
    """A line of vLLM's logger: ``(APIServer pid=4127) INFO 05-30 09:58:47 [file.py:123] message``."""
    prefix = f"({process}) " if process else ""
    return f"{prefix}{level} {_stamp(epoch).strftime('%m-%d %H:%M:%S')} [{where}] {message}"


class LogFollower:
    """One ``-f`` reader: new lines arrive in ``queue``; None means the log command ends
    (``docker logs -f`` exits when its container stops)."""

    def __init__(self, fmt: LogFormat) -> None:
        self.fmt = fmt
        self.queue: asyncio.Queue[str | None] = asyncio.Queue(FOLLOW_QUEUE)
        self.overflowed = False

    def put(self, line: str | None) -> None:
        try:
            self.queue.put_nowait(line)
        except asyncio.QueueFull:
            self.overflowed = True  # the session ends the command: the client was not reading


@dataclass
class InstanceLog:
    """The log of one vLLM instance on one node."""

    host: str
    records: deque[LogRecord] = field(default_factory=lambda: deque(maxlen=MAX_RECORDS))
    followers: set[LogFollower] = field(default_factory=set)

    def add(self, epoch: float, ident: str, text: str, *, journal_only: bool = False) -> None:
        record = LogRecord(epoch, ident, text, journal_only)
        self.records.append(record)
        for follower in self.followers:
            if follower.fmt == "journal":
                follower.put(journal_line(self.host, record))
            elif not journal_only:
                follower.put(docker_line(record))

    def lines(self, fmt: LogFormat, tail: int) -> list[str]:
        """The last ``tail`` lines in the format of ``fmt``."""
        if tail <= 0:
            return []
        picked: list[LogRecord] = []
        for record in reversed(self.records):
            if fmt == "docker" and record.journal_only:
                continue
            picked.append(record)
            if len(picked) >= tail:
                break
        picked.reverse()
        if fmt == "journal":
            return [journal_line(self.host, r) for r in picked]
        return [docker_line(r) for r in picked]

    def follow(self, fmt: LogFormat) -> LogFollower:
        follower = LogFollower(fmt)
        self.followers.add(follower)
        return follower

    def unfollow(self, follower: LogFollower) -> None:
        self.followers.discard(follower)

    def end_docker_followers(self) -> None:
        """The container stopped: ``docker logs -f`` returns."""
        for follower in list(self.followers):
            if follower.fmt == "docker":
                follower.put(None)

    def __iter__(self) -> Iterator[LogRecord]:
        return iter(self.records)


# --- what vLLM logs -------------------------------------------------------------------------------


@dataclass
class StatsWindow:
    """The counters ``LoggingStatLogger`` and ``SpecDecodingLogging`` sum over one log interval.

    Fed by the engine's metric events (it is a ``MetricsSink`` behind the exposition), so the logged
    numbers are those of the simulation."""

    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    preemptions: float = 0.0
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    accepted_per_pos: dict[int, float] = field(default_factory=dict)
    flops: float = 0.0  # PerfMetricsLogging's totals (--enable-mfu-metrics)
    memory_bytes: float = 0.0
    # Prefix cache hit rate is over recent requests, not the interval (PrefixCachingMetrics):
    # [queried tokens, hit tokens] per request.
    recent_queries: deque[list[float]] = field(default_factory=lambda: deque(maxlen=1000))

    def add(self, counter: str, value: float, labels: dict[str, str]) -> None:
        if counter == "vllm:prompt_tokens":
            self.prompt_tokens += value
        elif counter == "vllm:generation_tokens":
            self.generation_tokens += value
        elif counter == "vllm:num_preemptions":
            self.preemptions += value
        elif counter == "vllm:spec_decode_num_drafts":
            self.drafts += value
        elif counter == "vllm:spec_decode_num_draft_tokens":
            self.draft_tokens += value
        elif counter == "vllm:spec_decode_num_accepted_tokens":
            self.accepted += value
        elif counter == "vllm:prefix_cache_queries":
            self.recent_queries.append([value, 0.0])
        elif counter == "vllm:prefix_cache_hits" and self.recent_queries:
            self.recent_queries[-1][1] += value
        elif counter == "vllm:estimated_flops_per_gpu":
            self.flops += value
        elif counter in ("vllm:estimated_read_bytes_per_gpu", "vllm:estimated_write_bytes_per_gpu"):
            self.memory_bytes += value
        elif counter == "vllm:spec_decode_num_accepted_tokens_per_pos":
            position = int(labels.get("position", "0"))
            self.accepted_per_pos[position] = self.accepted_per_pos.get(position, 0.0) + value

    def hit_rate(self) -> float:
        queries = sum(q for q, _ in self.recent_queries)
        return sum(h for _, h in self.recent_queries) / queries if queries else 0.0

    def reset(self) -> None:
        self.prompt_tokens = self.generation_tokens = self.preemptions = 0.0
        self.drafts = self.draft_tokens = self.accepted = 0.0
        self.accepted_per_pos = {}
        self.flops = self.memory_bytes = 0.0


def engine_stats_line(
    stats: StatsWindow, elapsed_s: float, running: int, waiting: int, kv_usage: float
) -> tuple[str, float, float]:
    """vLLM 0.33's periodic line (``Engine 000: …``), and the prompt and generation throughput."""
    prompt = stats.prompt_tokens / elapsed_s if elapsed_s > 0 else 0.0
    generation = stats.generation_tokens / elapsed_s if elapsed_s > 0 else 0.0
    parts = [
        f"Avg prompt throughput: {prompt:.1f} tokens/s",
        f"Avg generation throughput: {generation:.1f} tokens/s",
        f"Running: {running} reqs",
        f"Waiting: {waiting} reqs",
    ]
    if stats.preemptions > 0:
        parts.append(f"Preemptions: {int(stats.preemptions)}")
    parts += [f"GPU KV cache usage: {kv_usage * 100:.1f}%", f"Prefix cache hit rate: {stats.hit_rate() * 100:.1f}%"]
    return "Engine 000: " + ", ".join(parts), prompt, generation


def spec_decode_line(stats: StatsWindow, elapsed_s: float, k: int) -> str | None:
    """``SpecDecoding metrics: …`` as ``SpecDecodingLogging.log`` writes it; None with no drafts."""
    if k == 0 or stats.drafts <= 0:
        return None
    rate = stats.accepted / stats.draft_tokens * 100 if stats.draft_tokens > 0 else math.nan
    per_pos = ", ".join(f"{stats.accepted_per_pos.get(i, 0.0) / stats.drafts:.3f}" for i in range(k))
    return (
        "SpecDecoding metrics: "
        f"Mean acceptance length: {1 + stats.accepted / stats.drafts:.2f}, "
        f"Accepted throughput: {stats.accepted / elapsed_s:.2f} tokens/s, "
        f"Drafted throughput: {stats.draft_tokens / elapsed_s:.2f} tokens/s, "
        f"Accepted: {int(stats.accepted)} tokens, "
        f"Drafted: {int(stats.draft_tokens)} tokens, "
        f"Per-position acceptance rate: {per_pos}, "
        f"Avg Draft acceptance rate: {rate:.1f}%"
    )


def mfu_line(stats: StatsWindow, elapsed_s: float) -> str | None:
    """``Engine 000: MFU: …`` as ``PerfMetricsLogging.log`` writes it; None when nothing was counted."""
    if elapsed_s <= 0 or not (stats.flops or stats.memory_bytes):
        return None
    tflops, gbps = stats.flops / elapsed_s / 1e12, stats.memory_bytes / elapsed_s / 1e9
    return f"Engine 000: MFU: {tflops:.1f} TF/s/device {gbps:.1f} GB/s/device"


def format_gib(value_bytes: float) -> str:
    """vLLM's ``format_gib``: GiB rounded to 2 decimals, printed as a Python float."""
    return str(round(value_bytes / 1024**3, 2))


def free_memory_error(free_bytes: float, total_bytes: float, utilization: float) -> str:
    """The exact ValueError of ``vllm/v1/worker/utils.py`` ``request_memory``."""
    requested = math.ceil(total_bytes * utilization)
    return (
        f"Free memory on device cuda:0 ({format_gib(free_bytes)}/{format_gib(total_bytes)} GiB) on startup "
        f"is less than desired GPU memory utilization ({utilization}, {format_gib(requested)} GiB). "
        "Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )
