"""The engine-neutral scrape: what every engine's ``/metrics`` (and the rest it serves) is read into.

An engine's package (``sparktui.engines``) reads what its server answers into an ``EngineScrape``: per
served model, counters under neutral keys (``generation_tokens``, ``prompt_tokens``,
``spec_accepted_pos:0``...), latency histograms where the engine has them, requests running and waiting,
KV cache usage per engine (data-parallel rank), the sleep state, and what the engine exports none of
(``ModelScrape.lacks``). The model, the rules and every screen read this and nothing engine-specific.

A scrape that parses but cannot be read as numbers raises ``ScrapeProblem``, one line naming the metric:
the instance shows it as its reason, and no number from that scrape is used.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from sparktui.model.numbers import NumberKind, label_int
from sparktui.model.promtext import Sample, parse_number
from sparktui.model.units import fmt_duration, fmt_gib


class Sleep(StrEnum):
    """An engine's ``vllm:engine_sleep_state``: awake, or asleep at one of vLLM's levels."""

    AWAKE = "awake"
    KV_RELEASED = "kv_released"  # awake = 0 with neither level flag: release_kv_cache_memory()
    WEIGHTS_OFFLOADED = "weights_offloaded"  # sleep level 1
    DISCARD_ALL = "discard_all"  # sleep level 2
    MODEL_FREED = "model_freed"  # llama-server's --sleep-idle-seconds: the model freed while idle

    @property
    def asleep(self) -> bool:
        return self is not Sleep.AWAKE

    @property
    def description(self) -> str:
        """In the operator's words, for a status reason: "asleep (level 1: weights offloaded)"."""
        return _SLEEP_WORDS[self]


_SLEEP_WORDS = {
    Sleep.AWAKE: "awake",
    Sleep.KV_RELEASED: "asleep (KV cache memory released)",
    Sleep.WEIGHTS_OFFLOADED: "asleep (level 1: weights offloaded to host memory)",
    Sleep.DISCARD_ALL: "asleep (level 2: weights and KV cache discarded)",
    Sleep.MODEL_FREED: "asleep (idle: the model is freed; the next request loads it again)",
}


class ScrapeProblem(ValueError):
    """A parsed scrape the normaliser cannot use; the message names the metric ("NaN in vllm:...")."""


def bucket_bound(wire: str, le: str) -> float:
    """A histogram bucket's ``le`` as a number (``+Inf`` included), else ``ScrapeProblem``."""
    bound = parse_number(le)
    if bound is None or math.isnan(bound) or bound == -math.inf:
        raise ScrapeProblem(f"bad bucket bound le={le[:40]!r} in {wire}")
    return bound


def histogram_sample(wire: str, buckets: Mapping[float, float], total: float, count: float) -> HistogramSample:
    """A histogram from its buckets (bound -> cumulative count), checked as Prometheus requires them: a
    ``+Inf`` bucket and counts that never decrease with the bound (else every quantile would be "–" or
    wrong); ``ScrapeProblem`` naming ``wire`` otherwise."""
    bounds = tuple(sorted(buckets))
    cumulative = tuple(buckets[b] for b in bounds)
    if not bounds or bounds[-1] != math.inf:
        raise ScrapeProblem(f"{wire} has no +Inf bucket")
    if any(below > above for below, above in itertools.pairwise(cumulative)):
        raise ScrapeProblem(f"{wire} is not cumulative")
    return HistogramSample(bounds=bounds, cumulative=cumulative, sum=total, count=count)


def checked(wire: str, series: list[Sample], kind: NumberKind) -> list[Sample]:
    """``series`` when every value is a number of its ``kind`` (``model/numbers.py``), else
    ``ScrapeProblem`` naming ``wire`` and the value ("sglang:token_usage is 1.5, above 1")."""
    for _labels, value in series:
        problem = kind.problem(value)
        if problem is not None:
            raise ScrapeProblem(f"{wire} is {problem}")
    return series


@dataclass(frozen=True, slots=True)
class HistogramSample:
    """A cumulative histogram at one scrape, summed over engines. ``bounds`` ends with +Inf."""

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]
    sum: float
    count: float


@dataclass(frozen=True, slots=True)
class ModelScrape:
    """One served model's engine series at one scrape, summed over engines."""

    model_name: str
    engines: tuple[str, ...]
    counters: Mapping[str, float]
    histograms: Mapping[str, HistogramSample]
    running: float | None
    waiting: float | None
    waiting_by_reason: Mapping[str, float]  # capacity, deferred; empty when the version has no split
    kv_usage_by_engine: Mapping[str, float]
    sleep: Sleep | None  # None: this vLLM publishes no engine_sleep_state
    prefix_hit_rate_by_engine: Mapping[str, float] = field(default_factory=dict)  # V0's ratio gauge
    # Each engine alone when the series carry two or more ``engine`` labels (data parallel); empty
    # with one engine. Series without an engine label (the API server's own) are in the sums only.
    per_engine: Mapping[str, ModelScrape] = field(default_factory=dict)
    # What the engine does not export at all, by what it would show ("latency", "mfu"), and why, in the
    # operator's words ("llama.cpp exports no latency histograms"): the screen says so beside its "–".
    lacks: Mapping[str, str] = field(default_factory=dict)
    # Numbers the engine computes itself over its own recent work and serves as gauges (SGLang's
    # "spec_accept_length", "spec_accept_rate"): shown as the engine reports them, never windowed.
    reported: Mapping[str, float] = field(default_factory=dict)

    @property
    def prefix_hit_rate_gauge(self) -> float | None:
        """V0's ``vllm:gpu_prefix_cache_hit_rate`` (a ratio, averaged over engines); None elsewhere."""
        values = self.prefix_hit_rate_by_engine.values()
        return sum(values) / len(values) if values else None

    @property
    def waiting_for_capacity(self) -> float | None:
        """Waiting for scheduling capacity: the real backlog (None when the version has no split)."""
        return self.waiting_by_reason.get("capacity") if self.waiting_by_reason else None

    @property
    def waiting_deferred(self) -> float | None:
        """Waiting on a transient constraint (LoRA budget, KV transfer, blocked), not on capacity."""
        return self.waiting_by_reason.get("deferred", 0.0) if self.waiting_by_reason else None

    @property
    def asleep(self) -> bool:
        return self.sleep is not None and self.sleep.asleep

    @property
    def kv_usage_max(self) -> float | None:
        return max(self.kv_usage_by_engine.values()) if self.kv_usage_by_engine else None

    @property
    def kv_usage_mean(self) -> float | None:
        values = self.kv_usage_by_engine.values()
        return sum(values) / len(values) if values else None


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """``vllm:cache_config_info`` labels of one engine; every value is a string ("None" possible)."""

    labels: Mapping[str, str]

    def _number(self, key: str) -> float | None:
        raw = self.labels.get(key)
        if raw is None or raw in ("None", ""):
            return None
        number = parse_number(raw)
        return number if number is not None and math.isfinite(number) else None  # "inf" is not a size

    @property
    def capacity_tokens(self) -> float | None:
        """KV capacity in tokens: ``kv_cache_size_tokens`` (0.33), else blocks x block size."""
        direct = self._number("kv_cache_size_tokens")
        if direct is not None:
            return direct
        blocks, block_size = self._number("num_gpu_blocks"), self._number("block_size")
        if blocks is None or block_size is None:
            return None
        return blocks * block_size

    @property
    def gpu_memory_utilization(self) -> float | None:
        return self._number("gpu_memory_utilization")


@dataclass(frozen=True, slots=True)
class EngineScrape:
    """One engine scrape, normalised. ``has_engine_stats`` is False when it names no model (vLLM under
    ``--disable-log-stats``)."""

    models: Mapping[str, ModelScrape]
    cache_config: Mapping[str, CacheConfig] = field(default_factory=dict)
    process_start: float | None = None
    # A server that loads and unloads models on demand and says so in what its reading reads (Ollama's
    # /api/ps): each model and where it is, as ``EngineReading.served`` gives it from /v1/models for a
    # llama.cpp router. None: this scrape says nothing of it.
    served: tuple[ServedModel, ...] | None = None

    @property
    def has_engine_stats(self) -> bool:
        return bool(self.models)

    @property
    def kv_capacity_tokens(self) -> float | None:
        capacities = [c.capacity_tokens for c in self.cache_config.values()]
        known = [c for c in capacities if c is not None]
        return sum(known) if known else None

    def kv_capacity_of(self, engine: str) -> float | None:
        """One engine's KV capacity in tokens (``vllm:cache_config_info`` is per engine)."""
        config = self.cache_config.get(engine)
        return config.capacity_tokens if config is not None else None


def engine_order(engine: str) -> tuple[bool, int, str]:
    """Sort key of engine labels: "2" before "10", any label that is not a number after them."""
    number = label_int(engine)
    return (number is None, number or 0, engine)


# Data-parallel engines of one model in one scrape: far more than a fleet of Sparks runs (one GPU each, up
# to eight nodes). More is a broken or hostile exporter, refused in one line, not kept engine by engine.
MAX_ENGINES = 64
# Served models one scrape may name: vLLM serves one (LoRA adapters share its model_name). Every model
# costs its own sums and history; thousands of names (a hostile endpoint) would cost the loop seconds.
MAX_MODELS = 16


class ModelLoad(StrEnum):
    """A model a server loads and unloads on demand (a llama.cpp router): where it is."""

    LOADED = "loaded"  # in memory, serving
    LOADING = "loading"  # being loaded: not answering yet
    SLEEPING = "sleeping"  # its server answers, the model freed while idle
    UNLOADED = "unloaded"  # not in memory: the next request for it loads it
    FAILED = "failed"  # its last load failed
    UNKNOWN = "unknown"  # a state this reading does not know


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One model of a server that loads models on demand, and where it is (``detail``: why it failed).

    What a server says of a loaded model's memory, where it says it (Ollama's ``/api/ps``):
    ``size_bytes`` it holds in all, ``gpu_bytes`` of them in GPU memory, the ``context_tokens`` it was
    loaded with, when it is due to be unloaded (``expires_at``, the server's own text, and ``expires_wall``,
    that time as a unix time) and ``overdue_s``: how long past that time it was still loaded at the poll
    (None: not overdue, or not known)."""

    id: str
    load: ModelLoad
    detail: str | None = None
    size_bytes: int | None = None
    gpu_bytes: int | None = None
    context_tokens: int | None = None
    expires_at: str | None = None
    expires_wall: float | None = None
    overdue_s: float | None = None

    @property
    def gpu_share(self) -> float | None:
        """The share of what it holds that is in GPU memory (Ollama's "100% GPU"); None where unknown."""
        if self.size_bytes is None or self.gpu_bytes is None or self.size_bytes <= 0:
            return None
        return min(1.0, self.gpu_bytes / self.size_bytes)

    @property
    def words(self) -> str:
        """For people: "a loaded", "b failed (exit code 1)", "c loaded (4.2 GiB, 100% in GPU memory,
        context 4096; overdue: 2m05s past its keep-alive)"."""
        facts = [self.detail] if self.detail else []
        if self.size_bytes is not None:
            facts.append(fmt_gib(self.size_bytes))
        share = self.gpu_share
        if share is not None:
            facts.append(f"{share:.0%} in GPU memory")
        if self.context_tokens is not None:
            facts.append(f"context {self.context_tokens}")
        said = ", ".join(facts)
        if self.overdue_s is not None:
            said += f"{'; ' if said else ''}overdue: {fmt_duration(self.overdue_s)} past its keep-alive"
        return f"{self.id} {self.load.value}" + (f" ({said})" if said else "")
