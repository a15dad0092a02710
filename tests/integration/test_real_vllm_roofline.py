"""The roofline against a real vLLM engine: sparktui's FLOP/s and memory bytes/s per GPU, from
``vllm:estimated_*_per_gpu_total``, equal vLLM's own ``Engine 000: MFU: x TF/s/device y GB/s/device``
line (the session's server runs with ``--enable-mfu-metrics``: tests/support/vllm_server.py).

What window the line covers (``vllm/v1/metrics/perf.py`` ``PerfMetricsLogging.log``): the totals since
the last *printed* MFU line, over ``time.monotonic()`` since then; an interval with no engine step prints
nothing and does not restart the clock. So a marker request first makes the line print at a boundary;
the burst then runs inside the next interval, and that interval's MFU line and ``Engine 000`` line cover
the same span (their clocks are read microseconds apart). Its length is not printed: it is the
generation throughput's, Δ generated tokens / printed tok/s, known to that print's rounding (0.05 tok/s
of a few hundred). sparktui's counters are flat between the boundary and its first scrape and between
its last scrape and the next boundary (no request runs there), so its tracker fed the two scrapes that
span apart gives the line's numbers; they must agree to the line's printed rounding (0.05).

On this CPU build with a 2-layer model the numbers are small: a few tenths of a GB/s and 0.0 TF/s as
printed. The load is long decodes over long cached prompts (the KV reads dominate vLLM's estimate), as
many as keep the burst inside one interval.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass

import httpx
import pytest

from sparktui.model.roofline import Roofline
from sparktui.model.scrape import EngineScrape
from sparktui.model.tracker import ScrapeTracker
from tests.integration.test_real_vllm import MAX_BURST_S, SHARED_PREFIX, EngineLine, complete, engine_lines, scrape
from tests.support.vllm_server import LOG_INTERVAL_S, VllmServer
from tests.support.wait import wait_until

pytestmark = pytest.mark.vllm

MFU_LINE = re.compile(r"Engine 000: MFU: (?P<tflops>[\d.]+) TF/s/device (?P<gbps>[\d.]+) GB/s/device")
PRINTED = 0.05 + 1e-9  # the line prints one decimal
# About 1,650 prompt tokens (4.5 shared prefixes of about 365), under --max-model-len 2048 with the
# output: every decode step reads that context's KV for each running request.
LONG_PREFIX = SHARED_PREFIX * 4 + SHARED_PREFIX[: len(SHARED_PREFIX) // 2]
STREAMS = 32
LOAD_S = 3.5  # new requests start for this long; the last ones end within a few seconds


@dataclass(frozen=True)
class MfuLine:
    tflops: float
    gbps: float


def mfu_lines(log: str) -> list[MfuLine]:
    return [MfuLine(float(m["tflops"]), float(m["gbps"])) for m in MFU_LINE.finditer(log)]


@dataclass(frozen=True)
class MfuWindow:
    before: EngineScrape
    after: EngineScrape
    engine: EngineLine
    mfu: MfuLine


def _counts(server: VllmServer) -> tuple[int, int]:
    log = server.log_text()
    return len(engine_lines(log)), len(mfu_lines(log))


async def _logged_past(server: VllmServer, engines: int, mfus: int, what: str) -> None:
    def past() -> bool:
        now_engines, now_mfus = _counts(server)
        return now_engines > engines and now_mfus > mfus

    await wait_until(past, 3 * LOG_INTERVAL_S, what=what, interval_s=0.1)


async def _long_decodes(client: httpx.AsyncClient, server: VllmServer) -> None:
    deadline = time.monotonic() + LOAD_S

    async def stream(index: int) -> None:
        sent = 0
        while sent == 0 or time.monotonic() < deadline:
            await complete(client, server, f"{LONG_PREFIX} stream {index} request {sent}", 48, 0.0)
            sent += 1

    await asyncio.gather(*(stream(i) for i in range(STREAMS)))


async def load_in_one_mfu_interval(server: VllmServer, attempts: int = 3) -> MfuWindow:
    """Long decodes confined to one of vLLM's log intervals whose MFU line starts at its boundary."""
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=STREAMS + 4)) as client:
        for _ in range(attempts):
            engines, mfus = _counts(server)
            await complete(client, server, "marker", 2, 0.0)  # an engine step: the MFU line prints
            await _logged_past(server, engines, mfus, "vLLM's log lines for the marker")
            started = time.monotonic()  # just after a boundary that printed an MFU line
            before = await scrape(server)
            engines, mfus = _counts(server)
            await _long_decodes(client, server)
            after = await scrape(server)
            seconds = time.monotonic() - started
            await _logged_past(server, engines, mfus, "vLLM's log lines for the load's interval")
            if seconds < MAX_BURST_S:
                log = server.log_text()
                return MfuWindow(before, after, engine_lines(log)[engines], mfu_lines(log)[mfus])
    raise AssertionError(f"the load never fit in one of vLLM's {LOG_INTERVAL_S:g} s intervals")


def _roofline(window: MfuWindow, seconds: float) -> Roofline:
    """sparktui's roofline of the two scrapes taken ``seconds`` apart, as the poller's tracker makes it."""
    tracker = ScrapeTracker()
    tracker.observe(0.0, window.before)
    tracker.observe(seconds, window.after)
    rates = tracker.rates(window_s=None)
    assert rates is not None and rates.mfu is not None
    assert rates.mfu.reason is None, rates.mfu.reason
    return Roofline.of(rates.mfu, 273.0, None)


async def test_bandwidth_and_flops_per_gpu_equal_vllms_mfu_log_line(real_vllm: VllmServer) -> None:
    window = await load_in_one_mfu_interval(real_vllm)
    (before,) = window.before.models.values()
    (after,) = window.after.models.values()
    generated = after.counters["generation_tokens"] - before.counters["generation_tokens"]
    printed_tps = window.engine.generation_tps
    # The line's interval, from its generation throughput: between the rounding's two ends.
    longest, shortest = generated / (printed_tps - 0.05), generated / (printed_tps + 0.05)
    assert 0.9 * LOG_INTERVAL_S < shortest <= longest < 1.5 * LOG_INTERVAL_S  # one interval, not more
    slow, fast = _roofline(window, longest), _roofline(window, shortest)
    assert slow.memory_bytes_per_s is not None and fast.memory_bytes_per_s is not None
    assert slow.flops_per_s is not None and fast.flops_per_s is not None
    mfu = window.mfu
    assert mfu.gbps > 0  # the load moved enough bytes for the line to show them
    # sparktui's GB/s over the line's interval, within the line's rounding.
    assert slow.memory_bytes_per_s / 1e9 - PRINTED <= mfu.gbps <= fast.memory_bytes_per_s / 1e9 + PRINTED
    assert slow.flops_per_s / 1e12 - PRINTED <= mfu.tflops <= fast.flops_per_s / 1e12 + PRINTED
    # The share of the peak is the same bytes/s over 273 GB/s.
    assert slow.memory_share == pytest.approx(slow.memory_bytes_per_s / 273e9)
