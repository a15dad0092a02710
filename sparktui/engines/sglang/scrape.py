"""What SGLang serves at ``/metrics`` (only with ``--enable-metrics``), read into the engine-neutral scrape.

Read as SGLang 0.5.23's own metrics code writes it (``sglang/srt/observability/metrics_collector.py``;
``tests/data/sglang-0.5.23/`` has expositions made by that code, and the scenarios they come from).
``/metrics`` is prometheus_client's multiprocess registry: the tokenizer process writes the request
totals, each scheduler rank (one process per rank) its own gauges.

- Tokenizer side, labels ``model_name, engine_type`` (``is_streaming`` on the request totals and the
  latency histograms): ``prompt_tokens_total``, ``generation_tokens_total``, ``num_requests_total``,
  ``num_aborted_requests_total``, ``cached_tokens_total{cache_source}`` (``device``, ``host``,
  ``storage``; ``total`` where the request gave no split), and the histograms
  ``time_to_first_token_seconds``, ``inter_token_latency_seconds``, ``e2e_request_latency_seconds``,
  ``request_time_per_output_token_seconds``. Each is summed over ``is_streaming``: the requests are
  distinct.
- Scheduler side, labels ``model_name, engine_type, tp_rank, pp_rank, moe_ep_rank`` (and ``dp_rank``
  with data parallelism): ``num_running_reqs``, ``num_queue_reqs``, ``token_usage``, ``kv_used_tokens``,
  ``kv_available_tokens``, ``kv_evictable_tokens``, ``cache_hit_rate``, ``spec_accept_length``,
  ``spec_accept_rate``, ``queue_time_seconds``. Every rank of one data-parallel engine logs the state of
  the same scheduler batch: its gauges are one engine's state seen once per rank, so the engine's value
  is its lowest rank's (``tp_rank``, then ``pp_rank``, ``moe_ep_rank``), never a sum over ranks. The
  engines of data parallelism (``dp_rank``) are distinct: their requests add up, and each has its own
  KV usage.

The neutral keys it fills (``docs/metrics.md`` has the formulas that read them):

- ``prompt_tokens``, ``generation_tokens``: the totals; ``prompt_tokens_cached``: the sum of
  ``cached_tokens_total`` over its sources; ``prompt_by_source:local_cache_hit`` that sum and
  ``prompt_by_source:local_compute`` the prompt tokens less it (each request's cached tokens are part
  of its prompt, so both only grow); ``cached_by_tier:device|host|storage`` where the split is served;
- ``finished:completed`` ``num_requests_total`` less ``num_aborted_requests_total`` and
  ``finished:abort`` the aborted ones: SGLang's tokenizer manager counts an abort as it sends it, and
  the request then ends and is counted in ``num_requests_total`` too (no other reason is counted);
- ``running``, ``waiting``: summed over engines; ``kv_usage_by_engine``: each engine's ``token_usage``;
  ``prefix_hit_rate_by_engine``: each engine's ``cache_hit_rate`` (a ratio SGLang computes itself);
- ``reported`` (``spec_accept_length``, ``spec_accept_rate``): speculative decoding as SGLang reports
  it, gauges over its own recent batches, shown as reported and never windowed; SGLang exports no
  draft or accepted-token counter, so there is no acceptance per draft position (``lacks``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sparktui.model.numbers import COUNT, COUNTER, FINITE, FRACTION, NumberKind, label_int
from sparktui.model.promtext import Exposition, Labels
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.scrape import (
    CacheConfig,
    EngineScrape,
    HistogramSample,
    ModelScrape,
    ScrapeProblem,
    bucket_bound,
    checked,
    histogram_sample,
)

PREFIX = "sglang:"
MAX_MODELS = 8  # one server serves one model (its LoRA adapters share its model_name)
MAX_ENGINES = 64  # data-parallel engines of one server
RANK_LABELS = ("tp_rank", "pp_rank", "moe_ep_rank")

PROMPT = "sglang:prompt_tokens_total"
GENERATION = "sglang:generation_tokens_total"
CACHED = "sglang:cached_tokens_total"
REQUESTS = "sglang:num_requests_total"
ABORTED = "sglang:num_aborted_requests_total"
COUNTERS = (PROMPT, GENERATION, CACHED, REQUESTS, ABORTED)
CACHE_TIERS = frozenset({"device", "host", "storage"})  # cache_source values other than "total"

# Histograms: neutral key -> base name (``_bucket``/``_sum``/``_count`` appended).
HISTOGRAMS: Mapping[str, str] = {
    "ttft": "sglang:time_to_first_token_seconds",
    "itl": "sglang:inter_token_latency_seconds",
    "tpot": "sglang:request_time_per_output_token_seconds",
    "e2e": "sglang:e2e_request_latency_seconds",
    "queue": "sglang:queue_time_seconds",
}

RUNNING = "sglang:num_running_reqs"
WAITING = "sglang:num_queue_reqs"
TOKEN_USAGE = "sglang:token_usage"
KV_TOKENS = ("sglang:kv_used_tokens", "sglang:kv_available_tokens", "sglang:kv_evictable_tokens")
HIT_RATE = "sglang:cache_hit_rate"
# Gauges SGLang computes over its own recent batches: neutral key -> wire name.
REPORTED: Mapping[str, str] = {
    "spec_accept_length": "sglang:spec_accept_length",
    "spec_accept_rate": "sglang:spec_accept_rate",
}
GAUGES: Mapping[str, NumberKind] = {
    RUNNING: COUNT,
    WAITING: COUNT,
    TOKEN_USAGE: FRACTION,
    HIT_RATE: FRACTION,
    **dict.fromkeys(KV_TOKENS, COUNT),
    **dict.fromkeys(REPORTED.values(), FINITE),
}

LACKS: Mapping[str, str] = {
    "mfu": "SGLang exports no bandwidth or FLOP counters",
    "spec_positions": "SGLang exports speculative acceptance as gauges (as it reports them), not per draft position",
}

# The names read, for ``/metrics?name[]=...`` (prometheus_client's filter) and the Prometheus source.
SERIES: tuple[str, ...] = (
    *COUNTERS,
    *(f"{base}{suffix}" for base in HISTOGRAMS.values() for suffix in ("_bucket", "_sum", "_count")),
    *GAUGES,
)
WANTED = frozenset(SERIES)


@dataclass
class _Model:
    """One model's sums while the scrape is read."""

    counters: dict[str, float] = field(default_factory=dict)
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)
    totals: dict[str, list[float]] = field(default_factory=dict)  # key -> [sum, count]
    # engine (dp_rank) -> wire -> (the rank's labels as numbers, value): the lowest rank's value wins
    gauges: dict[str, dict[str, tuple[tuple[int, ...], float]]] = field(default_factory=dict)


def normalise(expo: Exposition) -> EngineScrape:
    """One scrape of an SGLang server as the neutral scrape of its model(s). ``ScrapeProblem`` (one line
    naming the metric) for what cannot be read; an exposition with none of SGLang's names is one too
    (a server started without ``--enable-metrics`` serves no ``/metrics``)."""
    if not any(name in expo for name in WANTED):
        raise ScrapeProblem("/metrics: no sglang: metric in the answer (is SGLang started with --enable-metrics?)")
    models: dict[str, _Model] = {}

    def model_of(labels: Labels) -> _Model:
        name = safe_text(labels.get("model_name", ""), LABEL_LIMIT) or "sglang"
        found = models.get(name)
        if found is None:
            if len(models) >= MAX_MODELS:
                raise ScrapeProblem(f"more than {MAX_MODELS} model_name labels (a server serves one model)")
            found = models[name] = _Model()
        return found

    for wire in COUNTERS:
        for labels, value in checked(wire, expo.get(wire), COUNTER):
            counters = model_of(labels).counters
            key = f"{wire}:{labels.get('cache_source', '')}" if wire == CACHED else wire
            counters[key] = counters.get(key, 0.0) + value
    for key, base in HISTOGRAMS.items():
        _read_histogram(expo, key, base, model_of)
    for wire, kind in GAUGES.items():
        for labels, value in checked(wire, expo.get(wire), kind):
            engine = _engine_of(labels)
            rank = _rank_of(wire, labels)
            per_engine = model_of(labels).gauges.setdefault(engine, {})
            if len(model_of(labels).gauges) > MAX_ENGINES:
                raise ScrapeProblem(f"{wire} has more than {MAX_ENGINES} dp_rank values")
            held = per_engine.get(wire)
            if held is None or rank < held[0]:
                per_engine[wire] = (rank, value)
    return EngineScrape(
        models={name: _freeze(name, model) for name, model in models.items()},
        cache_config=_cache_config(models),
    )


def _freeze(name: str, model: _Model) -> ModelScrape:
    raw = model.counters
    counters: dict[str, float] = {}
    for wire, key in ((PROMPT, "prompt_tokens"), (GENERATION, "generation_tokens")):
        if wire in raw:
            counters[key] = raw[wire]
    by_source = {k.removeprefix(f"{CACHED}:"): v for k, v in raw.items() if k.startswith(f"{CACHED}:")}
    if by_source or PROMPT in raw:
        cached = sum(by_source.values(), 0.0)
        counters["prompt_tokens_cached"] = cached
        counters["prompt_by_source:local_cache_hit"] = cached
        if PROMPT in raw:
            counters["prompt_by_source:local_compute"] = max(raw[PROMPT] - cached, 0.0)
        for source, value in by_source.items():
            if source in CACHE_TIERS:
                counters[f"cached_by_tier:{source}"] = value
    if REQUESTS in raw:
        aborted = raw.get(ABORTED, 0.0)
        counters["finished:completed"] = max(raw[REQUESTS] - aborted, 0.0)
        counters["finished:abort"] = aborted
    histograms = {key: _histogram(HISTOGRAMS[key], model, key) for key in model.buckets}
    engines = sorted(model.gauges, key=lambda e: (label_int(e) is None, label_int(e) or 0, e))

    def each(wire: str) -> dict[str, float]:
        return {e: model.gauges[e][wire][1] for e in engines if wire in model.gauges[e]}

    running, waiting = each(RUNNING), each(WAITING)
    reported = {key: _mean(each(wire)) for key, wire in REPORTED.items() if each(wire)}
    if not any(reported.values()):
        reported = {}  # SGLang serves both at 0 on a server that does not speculate
    return ModelScrape(
        model_name=name,
        engines=tuple(engines),
        counters=counters,
        histograms=histograms,
        running=sum(running.values()) if running else None,
        waiting=sum(waiting.values()) if waiting else None,
        waiting_by_reason={},
        kv_usage_by_engine=each(TOKEN_USAGE),
        sleep=None,
        prefix_hit_rate_by_engine=each(HIT_RATE),
        reported=reported,
        lacks=LACKS,
    )


def _cache_config(models: Mapping[str, _Model]) -> dict[str, CacheConfig]:
    """Each engine's KV pool in tokens: used + free + evictable (what ``token_usage`` is a share of)."""
    out: dict[str, CacheConfig] = {}
    for model in models.values():
        for engine, gauges in model.gauges.items():
            if all(wire in gauges for wire in KV_TOKENS):
                pool = sum(gauges[wire][1] for wire in KV_TOKENS)
                if pool > 0:
                    out[engine] = CacheConfig({"kv_cache_size_tokens": str(int(pool))})
    return out


def _mean(values: Mapping[str, float]) -> float:
    return sum(values.values()) / len(values)


def _engine_of(labels: Labels) -> str:
    """The data-parallel engine a scheduler gauge is of ("0" without data parallelism)."""
    return safe_text(labels.get("dp_rank", "0"), LABEL_LIMIT)


def _rank_of(wire: str, labels: Labels) -> tuple[int, ...]:
    ranks = []
    for name in RANK_LABELS:
        value = labels.get(name, "0")
        rank = label_int(value)
        if rank is None:
            raise ScrapeProblem(f"{wire} has {name}={value[:40]!r}, which is not a whole number")
        ranks.append(rank)
    return tuple(ranks)


def _read_histogram(expo: Exposition, key: str, base: str, model_of: Callable[[Labels], _Model]) -> None:
    """A histogram's buckets, sum and count, summed over the label sets of one model (``is_streaming``)."""
    wire = f"{base}_bucket"
    for labels, value in checked(wire, expo.get(wire), COUNTER):
        bound = bucket_bound(wire, labels.get("le", ""))
        buckets = model_of(labels).buckets.setdefault(key, {})
        buckets[bound] = buckets.get(bound, 0.0) + value
    for index, suffix in ((0, "_sum"), (1, "_count")):
        for labels, value in checked(f"{base}{suffix}", expo.get(f"{base}{suffix}"), COUNTER):
            model_of(labels).totals.setdefault(key, [0.0, 0.0])[index] += value


def _histogram(base: str, model: _Model, key: str) -> HistogramSample:
    buckets = model.buckets[key]
    total, count = model.totals.get(key, [0.0, max(buckets.values(), default=0.0)])
    return histogram_sample(f"{base}_bucket", buckets, total, count)
