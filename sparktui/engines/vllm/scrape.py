"""vLLM ``/metrics`` normalisation: wire names across versions -> one ``EngineScrape``.

Every metric name and version fallback lives in the tables at the top of this module
(``../shared/reference/vllm/metrics.md``). Engine series are summed over the ``engine`` label and kept
apart by ``model_name``; per-engine KV usage is kept because the max over engines matters. A
data-parallel server (``--data-parallel-size N``) exports each series once per engine: every engine's
own numbers are kept too (``ModelScrape.per_engine``), and the sums are made from those parts.

A scrape that parses but cannot be read as numbers (a bucket bound that is not a number, ``NaN`` or
``±Inf`` where a count or gauge is needed) raises ``ScrapeProblem``, one line naming the metric: the
instance shows it as its reason, like a ``ParseError``, and no number from that scrape is used.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from functools import lru_cache

from sparktui.model.numbers import COUNT, COUNTER, FINITE, FRACTION, NumberKind, label_int
from sparktui.model.promtext import Exposition, Sample, parse_number
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.scrape import (
    MAX_ENGINES,
    MAX_MODELS,
    CacheConfig,
    EngineScrape,
    HistogramSample,
    ModelScrape,
    ScrapeProblem,
    Sleep,
    engine_order,
)

# Counters: logical key -> wire names, first present wins (newest name first).
COUNTERS: Mapping[str, tuple[str, ...]] = {
    "generation_tokens": ("vllm:generation_tokens_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "prompt_tokens_cached": ("vllm:prompt_tokens_cached_total",),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "external_prefix_cache_queries": ("vllm:external_prefix_cache_queries_total",),
    "external_prefix_cache_hits": ("vllm:external_prefix_cache_hits_total",),
    "preemptions": ("vllm:num_preemptions_total",),
    "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
    # vLLM's own per-GPU estimates, counting only with --enable-mfu-metrics (always registered, at 0)
    "estimated_flops": ("vllm:estimated_flops_per_gpu_total",),
    "estimated_read_bytes": ("vllm:estimated_read_bytes_per_gpu_total",),
    "estimated_write_bytes": ("vllm:estimated_write_bytes_per_gpu_total",),
}

# Counters split by one label: logical key -> (wire name, label). Keys become "key:labelvalue".
LABELLED_COUNTERS: Mapping[str, tuple[str, str]] = {
    "spec_accepted_pos": ("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position"),
    "finished": ("vllm:request_success_total", "finished_reason"),
    # local_compute | local_cache_hit | external_kv_transfer (<=0.16)
    "prompt_by_source": ("vllm:prompt_tokens_by_source_total", "source"),
    # the cache tier of the hits: device | host | p2p | disk | external_unspecified (0.32)
    "cached_by_tier": ("vllm:prompt_tokens_cached_by_source_total", "source"),
    # the API server's queue limits: max_num_queued_reqs | max_num_queued_tokens; no engine label (0.32)
    "admission_rejected": ("vllm:admission_rejections_total", "reason"),
}

# Histograms: logical key -> wire base names (``_bucket``/``_sum``/``_count`` appended).
HISTOGRAMS: Mapping[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot": ("vllm:request_time_per_output_token_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "queue": ("vllm:request_queue_time_seconds",),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
    "prompt_len": ("vllm:request_prompt_tokens",),
    "gen_len": ("vllm:request_generation_tokens",),
    # tokens of one engine step (computed prompt + generated): the batch size per step; a histogram
    # whose name ends in _total (all versions)
    "iteration_tokens": ("vllm:iteration_tokens_total",),
    # prompt tokens a finished request computed (prompt - cached) (0.13)
    "prefill_kv_computed": ("vllm:request_prefill_kv_computed_tokens",),
}

GAUGES: Mapping[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    # V0 only: the prefix-cache hit rate, already a ratio (``docs/metrics.md``, prefix-cache hit rate); V1
    # exports counters instead
    "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
}

# Labels of LABELLED_COUNTERS that hold a whole number (ASCII digits: ``model/numbers.py``).
INTEGER_LABELS = frozenset({"position"})

CACHE_CONFIG = "vllm:cache_config_info"
WAITING_BY_REASON = "vllm:num_requests_waiting_by_reason"  # capacity | deferred, summing to waiting (<=0.20)
SLEEP_STATE = "vllm:engine_sleep_state"  # 0/1 flags: awake | weights_offloaded | discard_all (0.12)


PROCESS_START = "process_start_time_seconds"


def _checked(wire: str, series: list[Sample], kind: NumberKind = FINITE) -> list[Sample]:
    """``series`` when every value is a number of its ``kind`` (``model/numbers.py``), else
    ``ScrapeProblem`` naming ``wire`` and the value. The range is tested first, in one pass: a scrape
    of good numbers costs no call per sample."""
    low, high = kind.low, kind.high
    if all(low <= value <= high for _labels, value in series):
        return series
    for _labels, value in series:
        problem = kind.problem(value)
        if problem is not None:
            raise ScrapeProblem(f"{problem} in {wire}" if problem in _NON_FINITE else f"{wire} is {problem}")
    return series


_NON_FINITE = frozenset({"NaN", "+Inf", "-Inf"})


def _counter(wire: str, series: list[Sample]) -> list[Sample]:
    return _checked(wire, series, COUNTER)


def _bucket_bound(wire: str, le: str) -> float:
    bound = _cached_bound(le) if len(le) <= _CACHED_LE_CHARS else _bound(le)
    if bound is None:
        raise ScrapeProblem(f"bad bucket bound le={le[:40]!r} in {wire}")
    return bound


def _bound(le: str) -> float | None:
    """A bucket's ``le`` as a number; None when it is none (+Inf is the last bucket; -Inf is none)."""
    bound = parse_number(le)
    if bound is None or math.isnan(bound) or bound == -math.inf:
        return None
    return bound


# Every scrape repeats the same few dozen ``le`` strings: each is read once. A long one (no real bound
# is) is not kept, so a hostile endpoint cannot fill the cache with kilobytes of label values.
_CACHED_LE_CHARS = 40
_cached_bound = lru_cache(maxsize=512)(_bound)


def wanted_sample_names() -> tuple[str, ...]:
    """Every sample name the normaliser reads: for ``/metrics?name[]=...`` and the parser filter."""
    names: list[str] = [PROCESS_START, CACHE_CONFIG, WAITING_BY_REASON, SLEEP_STATE]
    for wires in (*COUNTERS.values(), *GAUGES.values()):
        names.extend(wires)
    names.extend(wire for wire, _label in LABELLED_COUNTERS.values())
    for bases in HISTOGRAMS.values():
        for base in bases:
            names.extend((f"{base}_bucket", f"{base}_sum", f"{base}_count"))
    return tuple(names)


WANTED = frozenset(wanted_sample_names())


def _first_present(expo: Exposition, names: tuple[str, ...]) -> str | None:
    for name in names:
        if name in expo:
            return name
    return None


class _ModelAccumulator:
    __slots__ = (
        "counters",
        "engines",
        "hist",
        "kv",
        "prefix_hit_rate",
        "running",
        "sleep_flags",
        "waiting",
        "waiting_by_reason",
    )

    def __init__(self) -> None:
        self.engines: set[str] = set()
        self.counters: dict[str, float] = {}
        # histogram key -> (bucket le -> cumulative count, [sum, count])
        self.hist: dict[str, tuple[dict[float, float], list[float]]] = {}
        self.kv: dict[str, float] = {}
        self.prefix_hit_rate: dict[str, float] = {}
        self.running: float | None = None
        self.waiting: float | None = None
        self.waiting_by_reason: dict[str, float] = {}
        self.sleep_flags: dict[str, dict[str, float]] = {}  # engine -> sleep_state -> value

    def add_counter(self, key: str, value: float) -> None:
        self.counters[key] = self.counters.get(key, 0.0) + value

    def add(self, part: _ModelAccumulator) -> None:
        """Sum another engine's part into this one (gauges summed, per-engine maps joined)."""
        self.engines |= part.engines
        for key, value in part.counters.items():
            self.add_counter(key, value)
        for key, (buckets, (total, count)) in part.hist.items():
            mine, totals = self.hist.setdefault(key, ({}, [0.0, 0.0]))
            for bound, value in buckets.items():
                mine[bound] = mine.get(bound, 0.0) + value
            totals[0] += total
            totals[1] += count
        self.kv.update(part.kv)
        self.prefix_hit_rate.update(part.prefix_hit_rate)
        if part.running is not None:
            self.running = _gauge_sum(self.running, part.running)
        if part.waiting is not None:
            self.waiting = _gauge_sum(self.waiting, part.waiting)
        for reason, value in part.waiting_by_reason.items():
            self.waiting_by_reason[reason] = self.waiting_by_reason.get(reason, 0.0) + value
        self.sleep_flags.update(part.sleep_flags)


def _engine_key(labels: Mapping[str, str]) -> str:
    """The engine a per-engine gauge belongs to ("0" on a server without the label, as vLLM V0)."""
    return safe_text(labels.get("engine", "0"), LABEL_LIMIT)


def _gauge_sum(current: float | None, value: float) -> float:
    return value if current is None else current + value


def normalise(expo: Exposition) -> EngineScrape:
    """Turn one parsed vLLM scrape into per-model sums over engines, each engine's part kept."""
    models = _ScrapeModels()
    _read_counters(expo, models)
    _read_histograms(expo, models)
    _read_gauges(expo, models)
    cache_config = {
        _engine_key(labels): CacheConfig({k: v for k, v in labels.items() if k != "engine"})
        for labels, _value in expo.get(CACHE_CONFIG)
    }
    return EngineScrape(
        models={name: _freeze_model(name, parts, models.hist_wires) for name, parts in models.models.items()},
        cache_config=cache_config,
        process_start=_process_start(expo),
    )


class _ScrapeModels:
    """The models of one scrape as ``normalise`` fills them: model name -> engine label (None: a
    series without one) -> that engine's part."""

    def __init__(self) -> None:
        self.models: dict[str, dict[str | None, _ModelAccumulator]] = {}
        # The accumulator of each (model_name, engine) pair as the labels spell them: a scrape repeats
        # the same few pairs on hundreds of series, and each is made safe to show once.
        self.seen: dict[tuple[str, str | None], _ModelAccumulator] = {}
        self.hist_wires: dict[str, str] = {}  # histogram key -> the ``_bucket`` wire name read for it

    def of(self, labels: Mapping[str, str]) -> _ModelAccumulator:
        """The part of the model and engine a series' labels name."""
        raw = (labels.get("model_name", ""), labels.get("engine"))
        acc = self.seen.get(raw)
        if acc is not None:
            return acc
        name = safe_text(raw[0], LABEL_LIMIT)  # cut to the length a screen shows
        parts = self.models.get(name)
        if parts is None:
            if len(self.models) >= MAX_MODELS:
                raise ScrapeProblem(f"more than {MAX_MODELS} model_name labels (a server serves one model)")
            parts = self.models[name] = {}
        engine = raw[1] if raw[1] is None else safe_text(raw[1], LABEL_LIMIT)
        acc = parts.get(engine)
        if acc is None:
            acc = parts[engine] = _ModelAccumulator()
            if engine is not None:
                acc.engines.add(engine)
        self.seen[raw] = acc
        return acc


def _read_counters(expo: Exposition, models: _ScrapeModels) -> None:
    """The counters, and the counters split by a label (``key:value``)."""
    for key, wires in COUNTERS.items():
        wire = _first_present(expo, wires)
        if wire is not None:
            for labels, value in _counter(wire, expo.get(wire)):
                models.of(labels).add_counter(key, value)
    for key, (wire, label) in LABELLED_COUNTERS.items():
        for labels, value in _counter(wire, expo.get(wire)):
            split = labels.get(label, "")
            if label in INTEGER_LABELS and label_int(split) is None:
                raise ScrapeProblem(f"{wire} has {label}={split[:40]!r}, which is not a whole number")
            models.of(labels).add_counter(f"{key}:{split}", value)


def _read_histograms(expo: Exposition, models: _ScrapeModels) -> None:
    """Each histogram's buckets, sum and count, checked cumulative with a ``+Inf`` bucket."""
    for key, bases in HISTOGRAMS.items():
        base = _first_present(expo, tuple(f"{b}_count" for b in bases))
        if base is None:
            continue
        base = base[: -len("_count")]
        wire = f"{base}_bucket"
        for labels, value in _counter(wire, expo.get(wire)):
            le = labels.get("le")
            if le is None:
                continue
            hist = models.of(labels).hist
            found = hist.get(key)
            if found is None:
                found = hist[key] = ({}, [0.0, 0.0])
            buckets = found[0]
            bound = _bucket_bound(wire, le)
            buckets[bound] = buckets.get(bound, 0.0) + value
        for suffix, index in (("_sum", 0), ("_count", 1)):
            for labels, value in _counter(f"{base}{suffix}", expo.get(f"{base}{suffix}")):
                _buckets, totals = models.of(labels).hist.setdefault(key, ({}, [0.0, 0.0]))
                totals[index] += value
        models.hist_wires[key] = wire


def _read_gauges(expo: Exposition, models: _ScrapeModels) -> None:
    """Requests running and waiting (by reason too), KV cache usage, prefix hit rate, sleep state."""
    running = _first_present(expo, GAUGES["running"])
    for labels, value in _checked(running, expo.get(running), COUNT) if running else ():
        acc = models.of(labels)
        acc.running = _gauge_sum(acc.running, value)
    waiting = _first_present(expo, GAUGES["waiting"])
    for labels, value in _checked(waiting, expo.get(waiting), COUNT) if waiting else ():
        acc = models.of(labels)
        acc.waiting = _gauge_sum(acc.waiting, value)
    for labels, value in _checked(WAITING_BY_REASON, expo.get(WAITING_BY_REASON), COUNT):
        reason = safe_text(labels.get("reason", ""), LABEL_LIMIT)
        by_reason = models.of(labels).waiting_by_reason
        by_reason[reason] = by_reason.get(reason, 0.0) + value
    kv = _first_present(expo, GAUGES["kv_usage"])
    for labels, value in _checked(kv, expo.get(kv), FRACTION) if kv else ():
        models.of(labels).kv[_engine_key(labels)] = value
    hit_rate = _first_present(expo, GAUGES["prefix_hit_rate"])
    for labels, value in _checked(hit_rate, expo.get(hit_rate), FRACTION) if hit_rate else ():
        models.of(labels).prefix_hit_rate[_engine_key(labels)] = value
    for labels, value in _checked(SLEEP_STATE, expo.get(SLEEP_STATE)):
        flags = models.of(labels).sleep_flags.setdefault(_engine_key(labels), {})
        flags[labels.get("sleep_state", "")] = value


def _check_buckets(wire: str, bounds: tuple[float, ...], cumulative: tuple[float, ...]) -> None:
    """A histogram's buckets as Prometheus requires them: a ``+Inf`` bucket, cumulative counts that
    never decrease with the bound. Without them every quantile would be silently "–" or wrong."""
    if not bounds or bounds[-1] != math.inf:
        raise ScrapeProblem(f"{wire} has no +Inf bucket")
    if not all(below <= above for below, above in itertools.pairwise(cumulative)):
        at = next(i for i in range(1, len(cumulative)) if cumulative[i] < cumulative[i - 1])
        raise ScrapeProblem(f"{wire} is not cumulative: the le={bounds[at]:g} bucket counts fewer than the one below")


def _process_start(expo: Exposition) -> float | None:
    series = _counter(PROCESS_START, expo.get(PROCESS_START))
    return series[0][1] if series else None


def _sleep(flags_by_engine: Mapping[str, Mapping[str, float]]) -> Sleep | None:
    """The model's sleep state: vLLM puts every engine to sleep together, so one asleep engine is
    enough (the deepest level wins); None when no engine publishes an ``awake`` flag."""
    found: Sleep | None = None
    for flags in flags_by_engine.values():
        awake = flags.get("awake")
        if awake is None:
            continue
        if awake != 0:
            state = Sleep.AWAKE
        elif flags.get("discard_all", 0) != 0:
            state = Sleep.DISCARD_ALL
        elif flags.get("weights_offloaded", 0) != 0:
            state = Sleep.WEIGHTS_OFFLOADED
        else:
            state = Sleep.KV_RELEASED
        if found is None or _SLEEP_DEPTH[state] > _SLEEP_DEPTH[found]:
            found = state
    return found


_SLEEP_DEPTH = {Sleep.AWAKE: 0, Sleep.KV_RELEASED: 1, Sleep.WEIGHTS_OFFLOADED: 2, Sleep.DISCARD_ALL: 3}


def _freeze_model(name: str, parts: Mapping[str | None, _ModelAccumulator], wires: Mapping[str, str]) -> ModelScrape:
    """The model's sums made from its engines' parts, and each engine alone when there are several."""
    labelled = len(parts) - (None in parts)  # the series without an engine label are no engine
    if labelled > MAX_ENGINES:
        raise ScrapeProblem(f"{labelled} engine labels for model {name[:60]!r} (at most {MAX_ENGINES})")
    if len(parts) == 1:
        return _freeze(name, next(iter(parts.values())), wires)
    total = _ModelAccumulator()
    for part in parts.values():
        total.add(part)
    engines = sorted((e for e in parts if e is not None), key=engine_order)
    per_engine = {e: _freeze(name, parts[e], wires) for e in engines} if len(engines) > 1 else {}
    return _freeze(name, total, wires, per_engine)


def _freeze(
    name: str,
    acc: _ModelAccumulator,
    wires: Mapping[str, str],
    per_engine: Mapping[str, ModelScrape] | None = None,
) -> ModelScrape:
    # Finite values can still sum past the largest float over engines.
    sums = {**acc.counters, "running": acc.running or 0.0, "waiting": acc.waiting or 0.0}
    sums.update({f"waiting:{reason}": value for reason, value in acc.waiting_by_reason.items()})
    sums.update({f"{key}_bucket": sum(buckets.values()) + sum(totals) for key, (buckets, totals) in acc.hist.items()})
    for key, value in sums.items():
        if not math.isfinite(value):
            raise ScrapeProblem(f"{key} of model {name[:60]!r} is out of range")
    histograms: dict[str, HistogramSample] = {}
    for key, (buckets, (total, count)) in acc.hist.items():
        bounds = tuple(sorted(buckets))
        cumulative = tuple(buckets[b] for b in bounds)
        _check_buckets(wires.get(key, key), bounds, cumulative)
        histograms[key] = HistogramSample(
            bounds=bounds,
            cumulative=cumulative,
            sum=total,
            count=count,
        )
    return ModelScrape(
        model_name=name,
        engines=tuple(sorted(acc.engines, key=engine_order)),
        counters=acc.counters,
        histograms=histograms,
        running=acc.running,
        waiting=acc.waiting,
        waiting_by_reason=acc.waiting_by_reason,
        kv_usage_by_engine=acc.kv,
        sleep=_sleep(acc.sleep_flags),
        prefix_hit_rate_by_engine=acc.prefix_hit_rate,
        per_engine=per_engine or {},
    )
