"""sparktui against a real vLLM engine (vLLM's CPU build, a tiny local model: tests/support/vllm_server.py).

vLLM logs its own computation of the numbers sparktui derives every 10 s: ``Engine 000: Avg prompt
throughput ... Running ... Waiting ... KV cache usage ... Prefix cache hit rate`` and ``SpecDecoding
metrics: Mean acceptance length ... Accepted: N tokens, Drafted: M tokens, Per-position acceptance
rate ...``, each over the interval since its previous log. The test puts a burst of load inside one such
interval (a marker request makes the interval boundary visible in the log, the burst follows at once and
ends well before the next boundary), scrapes ``/metrics`` just before and just after it, and derives the
numbers with sparktui's own parser, normaliser and tracker, as the poller does.

Tolerances, and why: counts (accepted, drafted tokens) are equal exactly, as both sides count the same
engine steps; per-position acceptance and mean acceptance length to the log's rounding (3 and 2
decimals); throughputs are printed per second of vLLM's own interval, whose length the log does not
print (a 10 s timer, late by the event loop's load), so the ratio generation/prompt is compared to the
rounding of the printed values, and the token counts to the printed rate times 10 s within 15 %.
The line's prompt throughput counts the prompt tokens vLLM computed, not those served from the prefix
cache (found here: with a shared prefix of a full block they differ), so it is compared with
sparktui's "computed" prompt rate; KV usage and the prefix-cache hit rate to the line's one decimal.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.engines.vllm.scrape import WANTED, normalise
from sparktui.model.fleet import FleetState
from sparktui.model.promtext import PromParser
from sparktui.model.scrape import EngineScrape
from sparktui.model.specs import FleetSpec
from sparktui.model.status import State
from sparktui.model.tracker import ScrapeTracker
from sparktui.sources.http import fetch, make_poll_client
from sparktui.sources.poller import FleetPoller
from tests.support.vllm_server import (
    LOG_INTERVAL_S,
    NUM_SPECULATIVE_TOKENS,
    SERVED_NAME,
    START_TIMEOUT_S,
    VllmServer,
    require_vllm,
    start_vllm,
)
from tests.support.wait import wait_until

pytestmark = pytest.mark.vllm
MAX_BODY_BYTES = 8 * 1024 * 1024

ENGINE_LINE = re.compile(
    r"Engine 000: Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, "
    r"Avg generation throughput: (?P<generation>[\d.]+) tokens/s, "
    r"Running: (?P<running>\d+) reqs, Waiting: (?P<waiting>\d+) reqs, "
    r".*?KV cache usage: (?P<kv>[\d.]+)%, Prefix cache hit rate: (?P<hit>[\d.]+)%"
)
SPEC_LINE = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (?P<mean_length>[\d.]+), .*?"
    r"Accepted: (?P<accepted>\d+) tokens, Drafted: (?P<drafted>\d+) tokens, "
    r"Per-position acceptance rate: (?P<positions>[\d.]+(?:, [\d.]+)*)"
)
# Prefix-cache hits need a full block in common: vLLM's CPU build caches blocks of 128 tokens.
SHARED_PREFIX = "the spark node serves the model and the cache holds the token " * 20
MAX_BURST_S = LOG_INTERVAL_S - 3.0  # the burst and both scrapes fit in one of vLLM's intervals


@dataclass(frozen=True)
class EngineLine:
    prompt_tps: float
    generation_tps: float
    running: int
    waiting: int
    kv_usage_pct: float
    prefix_hit_pct: float


@dataclass(frozen=True)
class SpecLine:
    mean_length: float
    accepted: int
    drafted: int
    per_position: tuple[float, ...]


def engine_lines(log: str) -> list[EngineLine]:
    return [
        EngineLine(
            float(m["prompt"]),
            float(m["generation"]),
            int(m["running"]),
            int(m["waiting"]),
            float(m["kv"]),
            float(m["hit"]),
        )
        for m in ENGINE_LINE.finditer(log)
    ]


def spec_lines(log: str) -> list[SpecLine]:
    return [
        SpecLine(
            float(m["mean_length"]),
            int(m["accepted"]),
            int(m["drafted"]),
            tuple(float(p) for p in m["positions"].split(", ")),
        )
        for m in SPEC_LINE.finditer(log)
    ]


def logged_after(server: VllmServer, engines: int, specs: int = -1) -> Callable[[], bool]:
    """True once vLLM has logged more than ``engines`` Engine lines and ``specs`` SpecDecoding lines."""
    return lambda: len(engine_lines(server.log_text())) > engines and len(spec_lines(server.log_text())) > specs


async def complete(client: httpx.AsyncClient, server: VllmServer, prompt: str, tokens: int, temperature: float) -> None:
    body = {
        "model": SERVED_NAME,
        "prompt": prompt,
        "max_tokens": tokens,
        "temperature": temperature,
        "ignore_eos": True,  # exactly ``tokens`` generated: the counts are known
    }
    response = await client.post(f"{server.url}/v1/completions", json=body, timeout=120.0)
    assert response.status_code == 200, response.text


async def scrape(server: VllmServer) -> EngineScrape:
    """/metrics as the poller reads it: sparktui's client, parser (with its name filter) and normaliser."""
    async with make_poll_client() as client:
        result = await fetch(client, f"{server.url}/metrics", timeout_s=10.0, max_bytes=MAX_BODY_BYTES)
    assert result.answered, result.error
    return normalise(PromParser(keep=WANTED.__contains__).parse(result.body.decode()))


@dataclass(frozen=True)
class Window:
    before: EngineScrape
    after: EngineScrape
    seconds: float
    engine: EngineLine
    spec: SpecLine


async def burst_in_one_interval(server: VllmServer, attempts: int = 3) -> Window:
    """A burst of load confined to one of vLLM's log intervals, with sparktui's scrapes around it."""
    async with httpx.AsyncClient() as client:
        for _ in range(attempts):
            seen = len(engine_lines(server.log_text()))
            await complete(client, server, "marker", 2, 0.0)  # makes the next interval's line appear
            await wait_until(logged_after(server, seen), 3 * LOG_INTERVAL_S, what="vLLM's log line for the marker")
            started = time.monotonic()  # just after a boundary
            before = await scrape(server)
            engine_seen, spec_seen = len(engine_lines(server.log_text())), len(spec_lines(server.log_text()))
            # One request at a time: with random weights the draft's and the target's logits are nearly
            # flat, and batched kernels change them enough to flip greedy tokens; alone, a greedy request
            # is accepted at every position and a sampled one almost never, so acceptance lands between.
            for i in range(8):
                await complete(client, server, f"{SHARED_PREFIX} request {i}", 24, 0.0 if i % 2 == 0 else 1.0)
            after = await scrape(server)
            seconds = time.monotonic() - started
            await wait_until(
                logged_after(server, engine_seen, spec_seen),
                3 * LOG_INTERVAL_S,
                what="vLLM's log lines for the burst's interval",
            )
            if seconds < MAX_BURST_S:
                log = server.log_text()
                return Window(before, after, seconds, engine_lines(log)[engine_seen], spec_lines(log)[spec_seen])
    raise AssertionError(f"the burst never fit in one of vLLM's {LOG_INTERVAL_S:g} s intervals")


async def test_spec_decoding_and_throughput_equal_vllms_own_log_lines(real_vllm: VllmServer) -> None:
    window = await burst_in_one_interval(real_vllm)
    tracker = ScrapeTracker()
    tracker.observe(0.0, window.before)
    tracker.observe(window.seconds, window.after)
    rates = tracker.rates(window_s=None)
    assert rates is not None and rates.spec_decode is not None
    spec, log = rates.spec_decode, window.spec

    accepted = spec.accepted_tokens_per_s * rates.seconds
    drafted = spec.draft_tokens_per_s * rates.seconds
    assert accepted == pytest.approx(log.accepted, abs=1e-6)
    assert drafted == pytest.approx(log.drafted, abs=1e-6)
    assert spec.num_speculative_tokens == NUM_SPECULATIVE_TOKENS == len(log.per_position)
    for ours, theirs in zip(spec.per_position, log.per_position, strict=True):
        assert ours is not None and ours == pytest.approx(theirs, abs=0.0005 + 1e-9)
    assert spec.mean_acceptance_length is not None
    assert spec.mean_acceptance_length == pytest.approx(log.mean_length, abs=0.005 + 1e-9)
    # The mix of greedy and sampled requests moves acceptance: neither all nor none accepted.
    assert 0 < log.accepted < log.drafted

    prompt = (rates.prompt_tokens_per_s or 0.0) * rates.seconds
    computed = (rates.prompt_tokens_computed_per_s or 0.0) * rates.seconds
    generation = (rates.generation_tokens_per_s or 0.0) * rates.seconds
    engine = window.engine
    assert generation == pytest.approx(8 * 24, abs=1e-6)  # ignore_eos: exactly what was asked (rate x seconds)
    # vLLM's line counts the prompt tokens it computed: those served from the prefix cache are not
    # prefill work. /metrics' prompt_tokens_total counts them all (sparktui's "prompt" beside "computed").
    assert computed < prompt
    low = (engine.generation_tps - 0.05) / (engine.prompt_tps + 0.05)
    high = (engine.generation_tps + 0.05) / (engine.prompt_tps - 0.05)
    assert low <= generation / computed <= high
    for tokens, per_s in ((computed, engine.prompt_tps), (generation, engine.generation_tps)):
        assert tokens == pytest.approx(per_s * LOG_INTERVAL_S, rel=0.15)
    # Idle at the end of the interval on both sides.
    (model,) = window.after.models.values()
    assert (model.running, model.waiting) == (0.0, 0.0) == (float(engine.running), float(engine.waiting))
    # KV usage at the end: vLLM prints it to one decimal of a percent (the pool's null block keeps the
    # gauge a hair above 0).
    assert model.kv_usage_max is not None
    assert 100 * model.kv_usage_max == pytest.approx(engine.kv_usage_pct, abs=0.05 + 1e-9)
    # vLLM's prefix-cache hit rate is over its last 1,000 requests: fewer have been sent to this server,
    # and none between the last scrape and the line, so it is the counters' ratio since start.
    hits, queries = model.counters["prefix_cache_hits"], model.counters["prefix_cache_queries"]
    assert hits > 0  # the shared prefix was served from the cache
    assert 100 * hits / queries == pytest.approx(engine.prefix_hit_pct, abs=0.05 + 1e-9)
    # ... and over the window, sparktui's own ratio of sums.
    assert rates.prefix_cache_hit_rate is not None and 0 < rates.prefix_cache_hit_rate <= 1


def _fleet(server: VllmServer) -> FleetSpec:
    toml = (
        "poll_interval_s = 0.5\ntimeout_s = 2.0\n"
        f'[[nodes]]\nname = "cpu1"\nhost = "127.0.0.1"\n[[nodes.vllm]]\nname = "{SERVED_NAME}"\nport = {server.port}\n'
    )
    return parse_config(toml, source="real-vllm.toml")


async def test_a_starting_server_is_down_until_it_answers_then_up_and_a_killed_engine_is_down_with_the_reason(
    tiny_model: Path, tmp_path: Path
) -> None:
    """The lifecycle of a real server through sparktui's poller and fleet model: connection refused while
    it loads (no unit to ask, so down with that reason), up once /health answers, down with "engine dead
    (/health 503)" when its engine core is killed, and refused once the API server is gone.

    By default vLLM's API server exits by itself a second or so after its engine dies (its watchdog), a
    window a poll on a busy machine can miss. The server runs with vLLM's own switch
    ``VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1``, so it stays, answering /health 503, until the test stops it:
    the state lasts as long as the test needs, however slow the machine."""
    server = start_vllm(
        require_vllm(), tiny_model, tmp_path / "vllm.log", extra_env={"VLLM_KEEP_ALIVE_ON_ENGINE_DEATH": "1"}
    )
    fleet = _fleet(server)
    state = FleetState(fleet, readings())
    reasons: list[tuple[State, str]] = []

    def now_status() -> tuple[State, str]:
        (view,) = state.view(time.monotonic(), window_s=None)
        (instance,) = view.instances
        return instance.status.state, " ".join(instance.status.reasons)

    async def poll(poller: FleetPoller) -> None:
        for observation in await poller.poll_all():
            state.apply(observation)
        reasons.append(now_status())

    async def poll_until(done: Callable[[tuple[State, str]], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not done(reasons[-1]):
            assert time.monotonic() < deadline, (what, reasons[-5:], server.log_text()[-2000:])
            await asyncio.sleep(0.1)
            await poll(poller)

    try:
        async with make_poll_client() as client:
            poller = FleetPoller(fleet, client)
            await poll(poller)
            assert reasons[0][0] is State.DOWN and "refused" in reasons[0][1]  # loading: the port is not open yet
            deadline = time.monotonic() + START_TIMEOUT_S
            while now_status()[0] is not State.UP:
                assert time.monotonic() < deadline, server.log_text()[-2000:]
                assert server.process.is_running(), server.log_text()[-2000:]
                await asyncio.sleep(0.5)
                await poll(poller)
            core = server.engine_core()
            assert core is not None, "no VLLM::EngineCore child"
            core.kill()
            seen = len(reasons)
            await poll_until(lambda r: "engine dead (/health 503)" in r[1], 60.0, "the engine dead")
            assert reasons[-1][0] is State.DOWN
            await poll(poller)  # the server is held: the next poll says the same
            assert reasons[-1][0] is State.DOWN and "engine dead (/health 503)" in reasons[-1][1]
            server.process.terminate()  # what the watchdog does by itself without the switch
            await poll_until(lambda r: r[0] is State.DOWN and "refused" in r[1], 60.0, "refused once it exited")
    finally:
        server.stop()
    after_kill = reasons[seen:]
    down_from = next(i for i, (state_, _) in enumerate(after_kill) if state_ is State.DOWN)
    assert all(state_ is State.DOWN for state_, _ in after_kill[down_from:])  # never up again
