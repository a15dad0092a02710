"""``sparktui bench``, the pure half: the workloads, the statistics of a case, the server's own counters
over the case's span, the operators' markdown tables and the JSON result (``docs/bench.md``).

The I/O (streaming completions, scraping ``/metrics``) is ``sparktui.sources.bench``. Everything here is
a function of what it measured, so a test can call it with made-up times.

Prompts are built from a fixed seed, so two runs send the same text; each run's ``run_tag`` opens every
prompt, so a run does not find the previous run's prompts in the prefix cache (only the
repeated-system-prompt case is meant to hit it, and it hits its own first request).

A case's numbers:

- client side (streamed): TTFT (send to the first chunk with text), decode tok/s per request
  ((completion tokens − 1) / (end of the answer − first chunk), the server's token count from ``usage``),
  aggregate tok/s (every request's completion tokens / the case's span, first send to last answer);
- server side, from ``/metrics`` scraped just before the first send and just after the last answer,
  through the same tracker and formulas as the dashboard (``model.tracker``): generated tokens and
  their rate over the scrapes' span, acceptance per draft position, mean acceptance length, prefix-cache
  hit rate, preemptions, and the memory-bandwidth share of the GPU's peak where vLLM estimates it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from sparktui.model.roofline import GB10_MEMORY_BANDWIDTH_GB_S, Roofline
from sparktui.model.safe_text import safe_text
from sparktui.model.scrape import EngineScrape
from sparktui.model.tracker import ScrapeTracker
from sparktui.model.units import NO_DATA, fmt_count, fmt_number, fmt_pct, fmt_seconds

SCHEMA_VERSION = 1
SEED = 22
DEFAULT_CONCURRENCY = (1, 2, 4, 8)
DEFAULT_REQUESTS = 2  # requests per workload case (one at a time)
PREFILL_MAX_TOKENS = 16  # a prefill case measures the prompt: it generates only a few tokens
PREFILL_START = 1024
PREFIX_REQUESTS = 4
SYSTEM_PROMPT_WORDS = 1024  # the repeated system prompt: long enough to fill several KV blocks
CALIBRATION_WORDS = 256  # the warmup's prompt: its token count tells the tokenizer's tokens per word
# Prompt lengths are in tokens, turned into words of the filler by the tokens per word the warmup
# measured; the prompt's own words around the filler and the measurement's error are why the prefill
# sweep stays under this share of what the context leaves for the prompt.
PREFILL_HEADROOM = 0.8

CASE_KINDS = ("workload", "concurrency", "prefill", "prefix")


@dataclass(frozen=True, slots=True)
class Workload:
    """One workload of the operators' tables: a kind of prompt and how many tokens it asks for."""

    name: str
    label: str
    max_tokens: int
    openers: tuple[str, ...]  # the prompt's first sentence, one chosen by the seed
    topics: tuple[str, ...]
    context_words: int  # background text given with the question


_TOPICS = (
    "the unified memory of a DGX Spark",
    "continuous batching in an inference server",
    "a paged KV cache",
    "speculative decoding with a draft model",
    "NVFP4 quantisation of a mixture-of-experts model",
    "prefix caching for chat assistants",
    "tensor parallelism across two machines",
    "memory bandwidth as the limit of decode speed",
)

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "short",
            "Short (64 tok)",
            64,
            ("In two sentences, what is {topic}?", "Give a one-line definition of {topic}."),
            _TOPICS,
            40,
        ),
        Workload(
            "medium",
            "Medium (300 tok)",
            300,
            ("Explain {topic} to a new engineer on the team.", "Write a short briefing on {topic}."),
            _TOPICS,
            120,
        ),
        Workload(
            "long",
            "Long (600 tok)",
            600,
            ("Write a detailed essay on {topic}, with its history, trade-offs and a worked example.",),
            _TOPICS,
            200,
        ),
        Workload(
            "code",
            "Code (300 tok)",
            300,
            (
                "Write a Python function, with type hints and a docstring, that simulates {topic}.",
                "Implement a small Python class that models {topic}, with unit tests.",
            ),
            _TOPICS,
            120,
        ),
        Workload(
            "reasoning",
            "Reasoning (300 tok)",
            300,
            (
                "A server decodes 55 tokens per second at batch 1 and 160 at batch 4. Reason step by step: "
                "how long do 12 requests of 300 tokens take, one at a time and four at a time? Relate it to {topic}.",
                "Think step by step: if a prompt of 8,000 tokens prefills at 3,000 tokens per second and "
                "half of it is cached, what is the time to first token? Then discuss {topic}.",
            ),
            _TOPICS,
            80,
        ),
    )
}

# Filler vocabulary: common words, each about one token with its leading space.
_FILLER_TEXT = (
    "the model serves requests from a queue while the scheduler keeps the batch full and the cache warm "
    "every step reads the weights once and each token of context adds a little more memory traffic so "
    "the speed of decode follows the bandwidth of the memory and the size of the active experts when the "
    "prompt is long the first token waits for the prefill which runs at a much higher rate than decode "
    "because it works on many tokens at once operators tune the flags then measure again before and after"
)
_WORDS = tuple(_FILLER_TEXT.split())


@dataclass(frozen=True, slots=True)
class BenchCase:
    """One case: the prompts it sends (one per request), how many at once, and how many tokens each asks."""

    name: str
    label: str
    kind: str  # one of CASE_KINDS
    prompts: tuple[str, ...]
    max_tokens: int
    concurrency: int = 1
    prompt_tokens: int | None = None  # the prefill sweep's target length


def _filler(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _workload_prompt(workload: Workload, rng: random.Random, run_tag: str, index: int) -> str:
    opener = rng.choice(workload.openers).format(topic=rng.choice(workload.topics))
    context = _filler(rng, workload.context_words)
    return f"[{run_tag}-{workload.name}-{index}] Background notes: {context}.\n\n{opener}"


def workload_case(workload: Workload, run_tag: str, requests: int = DEFAULT_REQUESTS, seed: int = SEED) -> BenchCase:
    rng = random.Random(f"{seed}:{workload.name}")
    prompts = tuple(_workload_prompt(workload, rng, run_tag, i) for i in range(requests))
    return BenchCase(workload.name, workload.label, "workload", prompts, workload.max_tokens)


def concurrency_case(concurrency: int, run_tag: str, seed: int = SEED) -> BenchCase:
    """``concurrency`` medium requests sent at once: tok/s per request and in aggregate."""
    workload = WORKLOADS["medium"]
    rng = random.Random(f"{seed}:concurrent:{concurrency}")
    prompts = tuple(_workload_prompt(workload, rng, f"{run_tag}-c{concurrency}", i) for i in range(concurrency))
    return BenchCase(
        f"concurrent-{concurrency}",
        f"Concurrent {concurrency}×",
        "concurrency",
        prompts,
        workload.max_tokens,
        concurrency=concurrency,
    )


def prefill_lengths(
    max_model_len: int | None, cap: int | None = None, max_tokens: int = PREFILL_MAX_TOKENS
) -> tuple[int, ...]:
    """Prompt lengths (in tokens) of the prefill sweep: 1k, 2k, 4k, ... doubling while they fit in
    ``max_model_len`` with the answer's tokens and the headroom (and under ``cap``, when given); the
    largest that fits ends the sweep. Empty when the context is unknown or smaller than the first length."""
    if max_model_len is None:
        return ()
    limit = int((max_model_len - max_tokens - 64) * PREFILL_HEADROOM)
    if cap is not None:
        limit = min(limit, cap)
    lengths: list[int] = []
    length = PREFILL_START
    while length <= limit:
        lengths.append(length)
        length *= 2
    if lengths and limit - lengths[-1] >= lengths[-1] // 2:
        lengths.append(limit)
    return tuple(lengths)


def prefill_case(tokens: int, run_tag: str, tokens_per_word: float = 1.0, seed: int = SEED) -> BenchCase:
    """One prompt of about ``tokens`` tokens (``tokens_per_word``: the tokenizer's, from the warmup)."""
    rng = random.Random(f"{seed}:prefill:{tokens}")
    words = max(1, int(tokens / tokens_per_word))
    prompt = f"[{run_tag}-prefill-{tokens}] {_filler(rng, words)}\n\nSummarise the text above in one sentence."
    return BenchCase(
        f"prefill-{tokens}",
        f"Prefill {_thousands(tokens)}",
        "prefill",
        (prompt,),
        PREFILL_MAX_TOKENS,
        prompt_tokens=tokens,
    )


def _thousands(tokens: int) -> str:
    return f"{tokens / 1024:g}k" if tokens % 512 == 0 else f"{tokens:,}"


def calibration_prompt(seed: int = SEED) -> str:
    """The warmup's prompt: ``CALIBRATION_WORDS`` words of the filler and nothing else, so its
    ``usage.prompt_tokens`` over the words is the tokenizer's tokens per word (``tokens_per_word``)."""
    return _filler(random.Random(f"{seed}:calibration"), CALIBRATION_WORDS)


def tokens_per_word(prompt_tokens: int | None) -> float:
    """Tokens per filler word from the warmup's prompt token count (1 when the server sent no count)."""
    if prompt_tokens is None or prompt_tokens <= 0:
        return 1.0
    return max(0.25, prompt_tokens / CALIBRATION_WORDS)


def prefix_case(
    run_tag: str,
    requests: int = PREFIX_REQUESTS,
    seed: int = SEED,
    *,
    max_model_len: int | None = None,
    tokens_per_word: float = 1.0,
) -> BenchCase:
    """One long system prompt, then a different short question each time, one after the other: every
    request after the first finds the system prompt in the prefix cache (when it is on). The system
    prompt is ``SYSTEM_PROMPT_WORDS`` words, or fewer to fill at most half a small context."""
    rng = random.Random(f"{seed}:prefix")
    words = SYSTEM_PROMPT_WORDS
    if max_model_len is not None:
        words = max(16, min(words, int(max_model_len / 2 / tokens_per_word)))
    notes = _filler(rng, words)
    system = f"[{run_tag}-system] You are the operations assistant of a DGX Spark cluster. {notes}"
    questions = [rng.choice(WORKLOADS["short"].openers).format(topic=rng.choice(_TOPICS)) for _ in range(requests)]
    prompts = tuple(f"{system}\n\nQuestion {i + 1}: {q}" for i, q in enumerate(questions))
    return BenchCase("prefix-repeat", "Repeated system prompt", "prefix", prompts, 64)


def build_cases(
    names: Sequence[str],
    run_tag: str,
    *,
    max_model_len: int | None = None,
    concurrency: Sequence[int] = DEFAULT_CONCURRENCY,
    requests: int = DEFAULT_REQUESTS,
    prefill_max: int | None = None,
    tokens_per_word: float = 1.0,
    seed: int = SEED,
) -> list[BenchCase]:
    """The cases named (workload names, ``concurrency``, ``prefill``, ``prefix``), in that order; the
    prefill sweep up to ``max_model_len`` (and ``prefill_max`` tokens, when given), its prompts sized by
    ``tokens_per_word`` (the warmup's measure of the tokenizer).

    Raises ``ValueError`` naming an unknown case."""
    cases: list[BenchCase] = []
    for name in names:
        if name in WORKLOADS:
            cases.append(workload_case(WORKLOADS[name], run_tag, requests, seed))
        elif name == "concurrency":
            cases.extend(concurrency_case(c, run_tag, seed) for c in concurrency)
        elif name == "prefill":
            lengths = prefill_lengths(max_model_len, prefill_max)
            cases.extend(prefill_case(tokens, run_tag, tokens_per_word, seed) for tokens in lengths)
        elif name == "prefix":
            cases.append(prefix_case(run_tag, seed=seed, max_model_len=max_model_len, tokens_per_word=tokens_per_word))
        else:
            raise ValueError(f"unknown bench case {name!r}: choose from {', '.join(CASE_NAMES)}")
    return cases


CASE_NAMES = (*WORKLOADS, "concurrency", "prefill", "prefix")
DEFAULT_CASES = ("short", "medium", "long", "code", "reasoning", "concurrency", "prefill", "prefix")


# --- measuring ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One streamed request, its times in seconds from the case's start. ``chunk_times``: when each
    chunk carrying text arrived; ``completion_tokens``/``prompt_tokens``: the server's ``usage``
    (None when it sent none); ``error``: why it failed, one line (None: it answered)."""

    sent_t: float
    done_t: float
    chunk_times: tuple[float, ...] = ()
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ttft_s(self) -> float | None:
        return self.chunk_times[0] - self.sent_t if self.chunk_times else None

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Tokens after the first over the time from the first chunk to the end of the answer: 1 / TPOT as
        ``vllm bench serve`` defines it ((latency − TTFT) / (output tokens − 1)). The end, not the last
        text chunk: a stream's last chunks may arrive in one read. None with no first chunk, fewer than
        two tokens or no token count from the server (nothing to time)."""
        tokens = self.completion_tokens
        if tokens is None or tokens < 2 or not self.chunk_times:
            return None
        span = self.done_t - self.chunk_times[0]
        return (tokens - 1) / span if span > 0 else None

    @property
    def inter_chunk_s(self) -> tuple[float, ...]:
        times = self.chunk_times
        return tuple(b - a for a, b in itertools.pairwise(times))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0-1) of ``values`` with linear interpolation between ranks (numpy's default,
    as ``vllm bench serve`` reports); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True, slots=True)
class CaseStats:
    """What the client measured over one case."""

    requests: int
    failed: int
    span_s: float | None  # first send to last answer
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    inter_chunk_p50_s: float | None
    decode_tokens_per_s: float | None  # per request, the mean over the requests that answered
    aggregate_tokens_per_s: float | None  # every completion token of the case over its span
    completion_tokens: int | None
    prompt_tokens: int | None
    prefill_tokens_per_s: float | None  # prompt tokens over TTFT, mean over requests (the prefill sweep)


def case_stats(results: Sequence[RequestResult]) -> CaseStats:
    ok = [r for r in results if r.ok]
    ttfts = [t for r in ok if (t := r.ttft_s) is not None]
    decode = [d for r in ok if (d := r.decode_tokens_per_s) is not None]
    gaps = [g for r in ok for g in r.inter_chunk_s]
    counted = [r.completion_tokens for r in ok if r.completion_tokens is not None]
    prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    span = max(r.done_t for r in results) - min(r.sent_t for r in results) if results else None
    tokens = sum(counted) if counted else None
    prefill = [
        r.prompt_tokens / ttft
        for r in ok
        if r.prompt_tokens is not None and (ttft := r.ttft_s) is not None and ttft > 0
    ]
    return CaseStats(
        requests=len(results),
        failed=len(results) - len(ok),
        span_s=span,
        ttft_p50_s=percentile(ttfts, 0.5),
        ttft_p90_s=percentile(ttfts, 0.9),
        inter_chunk_p50_s=percentile(gaps, 0.5),
        decode_tokens_per_s=_mean(decode),
        aggregate_tokens_per_s=tokens / span if tokens is not None and span else None,
        completion_tokens=tokens,
        prompt_tokens=sum(prompts) if prompts else None,
        prefill_tokens_per_s=_mean(prefill),
    )


@dataclass(frozen=True, slots=True)
class ServerStats:
    """The server's own counters over the case (two ``/metrics`` scrapes ``seconds`` apart)."""

    seconds: float
    generation_tokens: float | None
    generation_tokens_per_s: float | None
    prompt_tokens: float | None
    acceptance_by_position: tuple[float | None, ...] = ()  # accepted per draft, position by position
    mean_acceptance_length: float | None = None
    acceptance_rate: float | None = None
    prefix_cache_hit_rate: float | None = None
    preemptions: float | None = None
    memory_bandwidth_share: float | None = None  # of the GB10's 273 GB/s, from vLLM's MFU estimate
    reset: bool = False  # the server restarted during the case: its numbers are not the case's


def server_stats(
    before: EngineScrape, before_t: float, after: EngineScrape, after_t: float, model: str | None = None
) -> ServerStats | None:
    """The case's server numbers from the scrapes around it, by the dashboard's own formulas; None when
    the server publishes no engine stats (``--disable-log-stats``) or the scrapes have no span."""
    tracker = ScrapeTracker(max_age_s=max(1.0, after_t - before_t) * 2)
    tracker.observe(before_t, before)
    tracker.observe(after_t, after)
    rates = tracker.rates(model)
    if rates is None:
        return None
    seconds = rates.seconds
    spec = rates.spec_decode
    generated = None if rates.generation_tokens_per_s is None else rates.generation_tokens_per_s * seconds
    prompt = None if rates.prompt_tokens_per_s is None else rates.prompt_tokens_per_s * seconds
    share = None
    if rates.mfu is not None:
        share = Roofline.of(rates.mfu, GB10_MEMORY_BANDWIDTH_GB_S, None).memory_share
    return ServerStats(
        seconds=seconds,
        generation_tokens=generated,
        generation_tokens_per_s=rates.generation_tokens_per_s,
        prompt_tokens=prompt,
        acceptance_by_position=spec.per_position if spec is not None else (),
        mean_acceptance_length=spec.mean_acceptance_length if spec is not None else None,
        acceptance_rate=spec.acceptance_rate if spec is not None else None,
        prefix_cache_hit_rate=rates.prefix_cache_hit_rate,
        preemptions=rates.preemptions,
        memory_bandwidth_share=share,
        reset=rates.reset,
    )


@dataclass(frozen=True, slots=True)
class CaseResult:
    name: str
    label: str
    kind: str
    concurrency: int
    max_tokens: int
    stats: CaseStats
    server: ServerStats | None
    requests: tuple[RequestResult, ...] = ()


def case_result(case: BenchCase, results: Sequence[RequestResult], server: ServerStats | None) -> CaseResult:
    return CaseResult(
        name=case.name,
        label=case.label,
        kind=case.kind,
        concurrency=case.concurrency,
        max_tokens=case.max_tokens,
        stats=case_stats(results),
        server=server,
        requests=tuple(results),
    )


@dataclass(frozen=True, slots=True)
class BenchRun:
    """One ``sparktui bench`` run: what was measured on what. ``complete`` is False when it was stopped
    (Ctrl-C) or a case could not run: the cases kept are those that finished."""

    target: str  # NODE/INSTANCE
    url: str
    started_at: str  # ISO 8601, UTC
    model: str | None
    version: str | None  # the instance's vLLM version (/version)
    max_model_len: int | None
    flags: Mapping[str, object]  # /v1/models card, the config's instance, vllm:cache_config_info
    node_state: Mapping[str, object]  # the instance's load when the run began
    settings: Mapping[str, object]  # seed, cases asked for, concurrency levels, requests per case
    cases: tuple[CaseResult, ...]
    complete: bool = True
    problem: str | None = None  # why it stopped early
    schema_version: int = SCHEMA_VERSION
    sparktui_version: str | None = None


def node_state(scrape: EngineScrape | None) -> dict[str, object]:
    """The instance's load when the run began, from its first scrape: a bench on a busy engine
    measures the other traffic too, and the result file should say so."""
    if scrape is None or not scrape.models:
        return {"engine_stats": False}
    running = sum(m.running or 0.0 for m in scrape.models.values())
    waiting = sum(m.waiting or 0.0 for m in scrape.models.values())
    kv = [u for m in scrape.models.values() if (u := m.kv_usage_max) is not None]
    asleep = any(m.asleep for m in scrape.models.values())
    return {
        "engine_stats": True,
        "running": running,
        "waiting": waiting,
        "kv_usage": max(kv) if kv else None,
        "asleep": asleep,
    }


# --- tables ---------------------------------------------------------------------------------------


def _tok_s(value: float | None) -> str:
    return NO_DATA if value is None else f"{value:,.1f} tok/s"


def _positions(server: ServerStats | None) -> str:
    if server is None or not server.acceptance_by_position:
        return NO_DATA
    return " / ".join(fmt_pct(p, 0) for p in server.acceptance_by_position)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


TABLE_HEADER = (
    "Case",
    "Requests",
    "TTFT p50",
    "TTFT p90",
    "Decode tok/s/req",
    "Aggregate tok/s",
    "Server tok/s",
    "Acceptance by position",
    "Mean acc. length",
    "Prefix hit",
    "Preemptions",
    "Bandwidth",
)


def result_row(case: CaseResult) -> list[str]:
    """One case's cells, in ``TABLE_HEADER``'s order: the markdown table's and the dashboard's."""
    s, server = case.stats, case.server
    requests = str(s.requests) if not s.failed else f"{s.requests} ({s.failed} failed)"
    decode = _tok_s(s.prefill_tokens_per_s) + " prefill" if case.kind == "prefill" else _tok_s(s.decode_tokens_per_s)
    return [
        case.label,
        requests,
        fmt_seconds(s.ttft_p50_s),
        fmt_seconds(s.ttft_p90_s),
        decode,
        _tok_s(s.aggregate_tokens_per_s),
        _tok_s(server.generation_tokens_per_s if server else None),
        _positions(server),
        fmt_number(server.mean_acceptance_length if server else None, 2),
        fmt_pct(server.prefix_cache_hit_rate if server else None),
        fmt_number(server.preemptions if server else None),
        fmt_pct(server.memory_bandwidth_share if server else None),
    ]


def results_table(cases: Sequence[CaseResult]) -> str:
    """The operators' markdown table, one row per case."""
    lines = [_row(TABLE_HEADER), _row(["---"] + ["---:"] * (len(TABLE_HEADER) - 1))]
    lines += [_row(result_row(case)) for case in cases]
    return "\n".join(lines) + "\n"


def run_heading(run: BenchRun) -> list[str]:
    """What was measured, on what, and whether it ran to its end."""
    head = [
        f"model {run.model or NO_DATA}, vLLM {run.version or NO_DATA}, max_model_len "
        f"{fmt_number(run.max_model_len)}, started {run.started_at}",
    ]
    if not run.complete:
        head.append(f"stopped early: {run.problem or 'interrupted'}; the cases below finished")
    return head


def failure_lines(cases: Sequence[CaseResult]) -> list[str]:
    """Why requests failed, a line per case and reason with how many: a row's "(2 failed)" explained."""
    lines: list[str] = []
    for case in cases:
        reasons: dict[str, int] = {}
        for request in case.requests:
            if request.error is not None:
                reason = safe_text(request.error, 200)
                reasons[reason] = reasons.get(reason, 0) + 1
        lines += [f"- {case.label}: {count} × {reason}" for reason, count in reasons.items()]
    return ["Failed requests:", *lines] if lines else []


def render_run(run: BenchRun) -> str:
    """The heading lines, the table ``sparktui bench`` prints, and why requests failed (if any did)."""
    head = [f"# sparktui bench {run.target} ({run.url})", "", *run_heading(run)]
    failed = failure_lines(run.cases)
    tail = "\n" + "\n".join(failed) + "\n" if failed else ""
    return "\n".join(head) + "\n\n" + results_table(run.cases) + tail


# --- comparing ------------------------------------------------------------------------------------

# (the metric as the table names it, its key in _metric, whether higher is better)
_COMPARED: tuple[tuple[str, str, bool], ...] = (
    ("decode tok/s/req", "decode", True),
    ("aggregate tok/s", "aggregate", True),
    ("prefill tok/s", "prefill", True),
    ("TTFT p50", "ttft", False),
    ("prefix hit", "prefix", True),
    ("mean acc. length", "acceptance", True),
)


def _metric(case: CaseResult, key: str) -> float | None:
    s, server = case.stats, case.server
    match key:
        case "decode":
            return s.decode_tokens_per_s
        case "aggregate":
            return s.aggregate_tokens_per_s
        case "prefill":
            return s.prefill_tokens_per_s if case.kind == "prefill" else None
        case "ttft":
            return s.ttft_p50_s
        case "prefix":
            return server.prefix_cache_hit_rate if server else None
        case "acceptance":
            return server.mean_acceptance_length if server else None
    raise KeyError(key)


def change(before: float | None, after: float | None) -> float | None:
    """The change from ``before`` to ``after`` as a fraction of ``before`` (None when either is missing
    or ``before`` is 0)."""
    if before is None or after is None or before == 0:
        return None
    return (after - before) / before


def _fmt_metric(key: str, value: float | None) -> str:
    if key == "ttft":
        return fmt_seconds(value)
    if key == "prefix":
        return fmt_pct(value)
    if key == "acceptance":
        return fmt_number(value, 2)
    return _tok_s(value)


def _fmt_change(value: float | None) -> str:
    if value is None:
        return NO_DATA
    return f"{value * 100:+.1f}%"


@dataclass(frozen=True, slots=True)
class ComparedRow:
    case: str
    metric: str
    before: float | None
    after: float | None

    @property
    def change(self) -> float | None:
        return change(self.before, self.after)


def compare(before: BenchRun, after: BenchRun) -> list[ComparedRow]:
    """Every case of either run (in ``after``'s order, then cases only ``before`` has), and for each the
    metrics either run measured, before and after."""
    old = {c.name: c for c in before.cases}
    new = {c.name: c for c in after.cases}
    names = [c.name for c in after.cases] + [c.name for c in before.cases if c.name not in new]
    rows: list[ComparedRow] = []
    for name in names:
        b, a = old.get(name), new.get(name)
        label = a.label if a is not None else b.label if b is not None else name
        for metric, key, _higher in _COMPARED:
            bv = _metric(b, key) if b is not None else None
            av = _metric(a, key) if a is not None else None
            if bv is None and av is None:
                continue
            rows.append(ComparedRow(label, metric, bv, av))
    return rows


def compare_table(before: BenchRun, after: BenchRun) -> str:
    """The write-ups' before/after table with the change in percent."""
    keys = {metric: key for metric, key, _ in _COMPARED}
    lines = [
        f"Before: {before.target} {before.started_at} ({before.model or NO_DATA}, vLLM {before.version or NO_DATA})",
        f"After:  {after.target} {after.started_at} ({after.model or NO_DATA}, vLLM {after.version or NO_DATA})",
        "",
        _row(("Case", "Metric", "Before", "After", "Change")),
        _row(("---", "---", "---:", "---:", "---:")),
    ]
    for row in compare(before, after):
        key = keys[row.metric]
        lines.append(
            _row(
                (
                    row.case,
                    row.metric,
                    _fmt_metric(key, row.before),
                    _fmt_metric(key, row.after),
                    _fmt_change(row.change),
                )
            )
        )
    return "\n".join(lines) + "\n"


# --- the JSON file --------------------------------------------------------------------------------


_Loaded = TypeVar("_Loaded")


class BenchFileError(ValueError):
    """A result file that is not one ``sparktui bench`` wrote (or one of another schema version)."""


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _map(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def _floats(value: object) -> tuple[float | None, ...]:
    return tuple(_float(v) for v in value) if isinstance(value, list) else ()


# How each field's JSON value is read back, by the field's annotation: a wrong type reads as missing.
_READERS: dict[str, Callable[[object], object]] = {
    "int": lambda v: _int(v) or 0,
    "int | None": _int,
    "float": lambda v: _float(v) or 0.0,
    "float | None": _float,
    "bool": lambda v: v is True,
    "tuple[float | None, ...]": _floats,
}


def _fields_from(cls: type[_Loaded], data: Mapping[str, object]) -> _Loaded:
    """A flat dataclass of numbers (``CaseStats``, ``ServerStats``) from its JSON object, field by field."""
    values = {f.name: _READERS[str(f.type)](data.get(f.name)) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**values)


def _stats_from(data: Mapping[str, object]) -> CaseStats:
    return _fields_from(CaseStats, data)


def _server_from(data: object) -> ServerStats | None:
    return _fields_from(ServerStats, data) if isinstance(data, dict) else None


def _request_from(data: object) -> RequestResult | None:
    if not isinstance(data, dict):
        return None
    times = tuple(t for t in _floats(data.get("chunk_times")) if t is not None)
    return RequestResult(
        sent_t=_float(data.get("sent_t")) or 0.0,
        done_t=_float(data.get("done_t")) or 0.0,
        chunk_times=times,
        completion_tokens=_int(data.get("completion_tokens")),
        prompt_tokens=_int(data.get("prompt_tokens")),
        error=_str(data.get("error")),
    )


def run_from_json(data: object) -> BenchRun:
    """A result file's JSON as a ``BenchRun``; ``BenchFileError`` in one sentence when it is not one."""
    if not isinstance(data, dict) or "cases" not in data or "schema_version" not in data:
        raise BenchFileError("not a sparktui bench result (no schema_version and cases)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise BenchFileError(f"schema version {version!r}; this sparktui reads version {SCHEMA_VERSION}")
    cases: list[CaseResult] = []
    for item in data["cases"] if isinstance(data["cases"], list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        requests = tuple(r for raw in item.get("requests") or [] if (r := _request_from(raw)) is not None)
        cases.append(
            CaseResult(
                name=item["name"],
                label=_str(item.get("label")) or item["name"],
                kind=_str(item.get("kind")) or "workload",
                concurrency=_int(item.get("concurrency")) or 1,
                max_tokens=_int(item.get("max_tokens")) or 0,
                stats=_stats_from(_map(item.get("stats"))),
                server=_server_from(item.get("server")),
                requests=requests,
            )
        )
    return BenchRun(
        target=_str(data.get("target")) or NO_DATA,
        url=_str(data.get("url")) or NO_DATA,
        started_at=_str(data.get("started_at")) or NO_DATA,
        model=_str(data.get("model")),
        version=_str(data.get("version")),
        max_model_len=_int(data.get("max_model_len")),
        flags=_map(data.get("flags")),
        node_state=_map(data.get("node_state")),
        settings=_map(data.get("settings")),
        cases=tuple(cases),
        complete=data.get("complete") is not False,
        problem=_str(data.get("problem")),
        sparktui_version=_str(data.get("sparktui_version")),
    )


@dataclass
class BenchProgress:
    """Where a run is, for a progress bar: requests finished of all the run's requests."""

    total_requests: int
    done_requests: int = 0
    case: str | None = None
    cases_done: int = 0
    warming_up: bool = False
    finished: list[CaseResult] = field(default_factory=list)
    case_number: int = 0  # the case running, counted from 1
    total_cases: int = 0


def progress_text(state: BenchProgress) -> str:
    """The progress in words, for the command's bar and lines and the dashboard's screen."""
    if state.warming_up:
        return "warmup (not counted)"
    if state.case is not None:
        return f"{state.case}: case {state.case_number} of {state.total_cases}"
    return f"done: {fmt_count(state.cases_done, 'case')}"
