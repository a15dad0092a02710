"""The numbers on the screen, from counter increases (``docs/metrics.md``, "The numbers").

Ratios are ratios of sums over the window; a zero denominator is "no traffic" (``None``), never 0 and
never NaN. Quantiles follow Prometheus ``histogram_quantile`` on bucket increases.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sparktui.model.counters import Deltas, histogram_deltas
from sparktui.model.numbers import label_int
from sparktui.model.roofline import Achieved, achieved
from sparktui.model.scrape import HistogramSample, ModelScrape


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``; None ("no traffic") when either is unknown or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def histogram_quantile(q: float, bounds: Sequence[float], cumulative: Sequence[float]) -> float | None:
    """Prometheus ``histogram_quantile`` over cumulative bucket counts whose last bound is +Inf.

    Buckets are made monotonic first (as Prometheus does after subtracting windows). None when the
    histogram holds no observations.
    """
    return histogram_quantiles((q,), bounds, cumulative)[0]


def histogram_quantiles(
    qs: Sequence[float], bounds: Sequence[float], cumulative: Sequence[float]
) -> tuple[float | None, ...]:
    """``histogram_quantile`` for each of ``qs`` (ascending), the buckets made monotonic once."""
    if not bounds or not math.isinf(bounds[-1]):
        return (None,) * len(qs)
    fixed: list[float] = []
    running_max = 0.0
    for value in cumulative:
        running_max = max(running_max, value)
        fixed.append(running_max)
    total = fixed[-1]
    if total <= 0:
        return (None,) * len(qs)
    out: list[float | None] = []
    index, lower, below = 0, 0.0, 0.0
    last = len(bounds) - 1
    for q in qs:
        rank = q * total
        while index < last and fixed[index] < rank:  # the bucket the rank falls in (+Inf at the latest)
            lower, below = bounds[index], fixed[index]
            index += 1
        bound, count = bounds[index], fixed[index]
        if math.isinf(bound):
            # The rank falls in +Inf: Prometheus answers the largest finite bound.
            out.append(lower if len(bounds) > 1 else None)
        elif count == below:
            out.append(bound)
        else:
            out.append(lower + (bound - lower) * (rank - below) / (count - below))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """A latency histogram over a window. ``floor`` is the first bucket bound: a quantile at or below
    it only says "under floor" (the buckets have no finer resolution)."""

    count: float
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    floor: float | None

    @classmethod
    def of(cls, hist: HistogramSample) -> LatencySummary:
        bounds = hist.bounds
        p50, p90, p99 = histogram_quantiles((0.5, 0.9, 0.99), bounds, hist.cumulative)
        floor = bounds[0] if bounds and not math.isinf(bounds[0]) else None
        return cls(count=hist.count, mean=ratio(hist.sum, hist.count), p50=p50, p90=p90, p99=p99, floor=floor)


# Accepted tokens per verify step below which the last draft position is dead weight; the failure
# catalogue's spec-position-collapse uses "below about 0.2".
WEAK_POSITION_YIELD = 0.2


@dataclass(frozen=True, slots=True)
class SpecDecodeStats:
    """Speculative decoding over a window (``docs/metrics.md``: acceptance rate, mean length, per position)."""

    num_speculative_tokens: int
    drafts: float
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    per_position: tuple[float | None, ...]
    conditional: tuple[float | None, ...]
    draft_tokens_per_s: float
    accepted_tokens_per_s: float
    draft_share_of_output: float | None

    @property
    def weak_last_position(self) -> int | None:
        """The last draft position when it adds fewer than ``WEAK_POSITION_YIELD`` tokens per verify step.

        Position i adds ``per_position[i]`` accepted tokens per step on average, while every draft
        position costs a drafter forward pass: below the threshold, ``k - 1`` usually decodes faster.
        """
        if self.num_speculative_tokens < 2:
            return None
        last = self.per_position[-1]
        if last is None or last >= WEAK_POSITION_YIELD:
            return None
        return self.num_speculative_tokens - 1


@dataclass(frozen=True, slots=True)
class PromptShares:
    """Tokens by source over a window and each source's share of them (ratio of sums). ``shares`` is
    None for every source when the window has no tokens ("no traffic", never 0 %)."""

    tokens: Mapping[str, float]

    JSON_PROPERTIES = ("total", "shares")

    @property
    def total(self) -> float:
        return sum(self.tokens.values())

    @property
    def shares(self) -> Mapping[str, float | None]:
        total = self.total
        return {source: ratio(value, total) for source, value in self.tokens.items()}

    def share(self, source: str) -> float | None:
        """``source``'s share; None with no tokens, 0 when the source is published but gave none."""
        return ratio(self.tokens.get(source), self.total) if source in self.tokens else None

    @classmethod
    def of(cls, by_source: Mapping[str, float]) -> PromptShares | None:
        return cls(dict(by_source)) if by_source else None


@dataclass(frozen=True, slots=True)
class EngineRates:
    """Everything derived from counter increases over one window for one served model."""

    seconds: float
    reset: bool
    generation_tokens_per_s: float | None
    prompt_tokens_per_s: float | None
    prompt_tokens_computed_per_s: float | None
    prompt_tokens_cached_per_s: float | None
    requests_finished_per_s: float | None
    finished_by_reason: Mapping[str, float]
    prefix_cache_hit_rate: float | None
    preemptions: float | None
    preemptions_per_s: float | None
    spec_decode: SpecDecodeStats | None
    latency: Mapping[str, LatencySummary]
    histograms: Mapping[str, HistogramSample] = field(default_factory=dict)  # bucket increases in the window
    # vLLM >= 0.32 (each None or empty where the version does not publish the series)
    admission_rejections: Mapping[str, float] = field(default_factory=dict)  # by reason, over the window
    admission_rejections_per_s: float | None = None
    prompt_sources: PromptShares | None = None  # where the window's prompt tokens came from
    cached_tiers: PromptShares | None = None  # which cache tier supplied the window's cache hits
    tokens_per_step: LatencySummary | None = None  # vllm:iteration_tokens_total: the batch of one engine step
    prefill_computed_per_request: LatencySummary | None = None  # prompt tokens a finished request computed
    # FLOP/s and memory bytes/s per GPU from vLLM's estimated counters, or why not (model/roofline.py)
    mfu: Achieved | None = None
    # Rates past what any engine can do (``MAX_RATES``), each "what, how much": shown as a reason on
    # the instance, never charted; the rate itself is None.
    implausible: tuple[str, ...] = ()


# What no engine does, per second over a window: an 8-GPU server prefills about a million tokens a second
# and finishes thousands of requests. A counter that jumps past these (a broken exporter, a hostile
# endpoint, a counter written by hand) is flagged on its instance, not charted as a 21-digit rate.
MAX_TOKENS_PER_S = 1e7
MAX_EVENTS_PER_S = 1e6
# One GPU: the fastest memory reads about 8 TB/s and the fastest tensor cores do about 10 PFLOP/s at FP4.
MAX_BYTES_PER_S = 1e14
MAX_FLOPS_PER_S = 1e17


def _per_s(value: float | None, seconds: float) -> float | None:
    return ratio(value, seconds)


class _Plausible:
    """Per-second rates of one window, each checked against its bound; what failed is kept."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.failed: list[str] = []

    def rate(self, what: str, value: float | None, bound: float) -> float | None:
        per_s = _per_s(value, self.seconds)
        if per_s is not None and per_s > bound:
            self.failed.append(f"{what} {per_s:.3g}/s")
            return None
        return per_s

    def achieved(self, found: Achieved) -> Achieved:
        """``found`` (vLLM's per-GPU estimates), or none with the reason when past any GPU."""
        memory, flops = found.memory_bytes_per_s, found.flops_per_s
        if (memory or 0.0) > MAX_BYTES_PER_S or (flops or 0.0) > MAX_FLOPS_PER_S:
            self.failed.append(f"estimated {memory or 0:.3g} B/s, {flops or 0:.3g} FLOP/s a GPU")
            return Achieved(None, None, "vLLM's estimated counters jumped past what any GPU does")
        return found


def spec_decode_stats(deltas: Deltas, check: _Plausible | None = None) -> SpecDecodeStats | None:
    """Speculative decoding over the window; None without its counters, and None with what failed
    noted on ``check`` when the counters say what no drafter can do: more accepted than drafted at a
    position or overall (each verify step accepts at most one token per position), or a token rate
    past ``MAX_TOKENS_PER_S``."""
    drafts = deltas.get("spec_drafts")
    draft_tokens = deltas.get("spec_draft_tokens")
    accepted = deltas.get("spec_accepted_tokens")
    if drafts is None or draft_tokens is None or accepted is None:
        return None
    by_position = deltas.labelled("spec_accepted_pos")
    positions = sorted(by_position, key=lambda p: label_int(p) or 0)
    counts = [by_position[p] for p in positions]
    per_position = tuple(ratio(c, drafts) for c in counts)
    conditional = tuple(ratio(c, drafts if i == 0 else counts[i - 1]) for i, c in enumerate(counts))
    mean_length = ratio(accepted, drafts)
    seconds = deltas.seconds
    if check is not None:
        shares = [*per_position, ratio(accepted, draft_tokens)]
        over = max((share for share in shares if share is not None), default=0.0)
        if over > 1.0 + 1e-9:
            check.failed.append(f"spec decode accepted {over:.3g} tokens a drafted one")
            return None
        if check.rate("spec decode drafted", draft_tokens, MAX_TOKENS_PER_S) is None and draft_tokens:
            return None
    return SpecDecodeStats(
        num_speculative_tokens=len(counts),
        drafts=drafts,
        acceptance_rate=ratio(accepted, draft_tokens),
        mean_acceptance_length=None if mean_length is None else 1.0 + mean_length,
        per_position=per_position,
        conditional=conditional,
        draft_tokens_per_s=draft_tokens / seconds if seconds > 0 else 0.0,
        accepted_tokens_per_s=accepted / seconds if seconds > 0 else 0.0,
        draft_share_of_output=ratio(accepted, deltas.get("generation_tokens")),
    )


LATENCY_KEYS = ("ttft", "itl", "tpot", "e2e", "queue", "prefill", "decode")


def _window_summary(deltas: Deltas, latest: ModelScrape, key: str) -> LatencySummary | None:
    """Mean and quantiles of histogram ``key`` over the window (None when it was not scraped)."""
    hist = latest.histograms.get(key)
    if hist is None:
        return None
    window = histogram_deltas(deltas, key, hist.bounds)
    return LatencySummary.of(window) if window is not None else None


def _prefix_hit_rate(deltas: Deltas, latest: ModelScrape) -> float | None:
    """Hits over queries in the window; on V0, which has no such counters, its own ratio gauge (the
    latest value: V0 computes it over its own recent requests; ``docs/metrics.md``, prefix-cache hit rate)."""
    queries = deltas.get("prefix_cache_queries")
    if queries is None:
        return latest.prefix_hit_rate_gauge
    return ratio(deltas.get("prefix_cache_hits"), queries)


def derive_rates(deltas: Deltas, latest: ModelScrape) -> EngineRates | None:
    """Derive the window numbers; None for an empty window (two scrapes with the same time)."""
    seconds = deltas.seconds
    if seconds <= 0:
        return None
    finished = deltas.labelled("finished")
    # Prompt tokens actually prefilled; a server without the by-source counter (< 0.16) has only the
    # total, which its own log line reported as the prompt throughput (``docs/metrics.md``, prompt tok/s).
    computed = (
        deltas.get("prompt_by_source:local_compute")
        if deltas.labelled("prompt_by_source")
        else deltas.get("prompt_tokens")
    )
    cached = deltas.get("prompt_tokens_cached")
    if cached is None:
        cached = deltas.get("prompt_by_source:local_cache_hit")
    latency: dict[str, LatencySummary] = {}
    histograms: dict[str, HistogramSample] = {}
    for key in LATENCY_KEYS:
        hist = latest.histograms.get(key)
        if hist is None:
            continue
        window = histogram_deltas(deltas, key, hist.bounds)
        if window is not None:
            latency[key] = LatencySummary.of(window)
            histograms[key] = window
    preemptions = deltas.get("preemptions")
    rejections = deltas.labelled("admission_rejected")
    check = _Plausible(seconds)
    generation = check.rate("generation", deltas.get("generation_tokens"), MAX_TOKENS_PER_S)
    prompt = check.rate("prompt", deltas.get("prompt_tokens"), MAX_TOKENS_PER_S)
    prompt_computed = check.rate("prompt computed", computed, MAX_TOKENS_PER_S)
    prompt_cached = check.rate("prompt cached", cached, MAX_TOKENS_PER_S)
    requests = check.rate("requests", sum(finished.values()), MAX_EVENTS_PER_S) if finished else None
    preemptions_per_s = check.rate("preemptions", preemptions, MAX_EVENTS_PER_S)
    return EngineRates(
        seconds=seconds,
        reset=deltas.reset,
        generation_tokens_per_s=generation,
        prompt_tokens_per_s=prompt,
        prompt_tokens_computed_per_s=prompt_computed,
        prompt_tokens_cached_per_s=prompt_cached,
        requests_finished_per_s=requests,
        finished_by_reason=finished,
        prefix_cache_hit_rate=_prefix_hit_rate(deltas, latest),
        preemptions=preemptions,
        preemptions_per_s=preemptions_per_s,
        spec_decode=spec_decode_stats(deltas, check),
        latency=latency,
        histograms=histograms,
        admission_rejections=rejections,
        admission_rejections_per_s=_per_s(sum(rejections.values()), seconds) if rejections else None,
        prompt_sources=PromptShares.of(deltas.labelled("prompt_by_source")),
        cached_tiers=PromptShares.of(deltas.labelled("cached_by_tier")),
        tokens_per_step=_window_summary(deltas, latest, "iteration_tokens"),
        prefill_computed_per_request=_window_summary(deltas, latest, "prefill_kv_computed"),
        mfu=check.achieved(achieved(deltas, latest)),
        implausible=tuple(check.failed),
    )
