"""What TensorRT-LLM's ``trtllm-serve`` serves at ``/prometheus/metrics`` (only with
``return_perf_metrics``), read into the engine-neutral scrape.

Read as its collector writes it (``tensorrt_llm/metrics/collector.py``, ``MetricsCollector``;
``tests/data/trtllm/`` has expositions written from that source, and the scenarios they come from).
Names are ``trtllm_``-prefixed, labelled ``model_name`` and ``engine_type`` (``trtllm-serve`` sets both
to ``"undefined"``: the model's name is taken from ``/v1/models``). The registry is prometheus_client's
multiprocess one: every gauge carries the ``pid`` of the process that set it (one process sets them;
were there several, the largest value is read).

- Per finished request (``log_request_metrics_dict``): ``request_success_total{finished_reason}``,
  ``prompt_tokens_total``, ``generation_tokens_total``, ``prompt_cached_tokens_total``, the histograms
  ``time_to_first_token_seconds``, ``time_per_output_token_seconds`` (one observation per request),
  ``e2e_request_latency_seconds``, ``request_queue_time_seconds``, ``request_prefill_time_seconds``,
  ``request_decode_time_seconds``, and per draft position ``spec_decode_drafted_tokens_total`` and
  ``spec_decode_accepted_tokens_total`` by ``token_position``. Generated tokens therefore move only when
  a request ends: the generation rate of a window is that of the requests that ended in it.
- Per iteration (``log_iteration_stats``): ``num_requests_running``, ``num_requests_waiting``,
  ``kv_cache_utilization`` (used blocks over the maximum), ``kv_cache_max_blocks``,
  ``kv_cache_tokens_per_block``, ``kv_cache_hit_rate``, ``spec_decode_acceptance_length``.

The neutral keys it fills: ``prompt_tokens``, ``generation_tokens``, ``prompt_tokens_cached`` and
``prompt_by_source:local_cache_hit|local_compute``; ``finished:<reason>``; ``spec_drafts`` (the tokens
drafted at position 0: one per draft), ``spec_draft_tokens`` and ``spec_accepted_tokens`` (summed over
positions), ``spec_accepted_pos:N``; ``running``, ``waiting``; ``kv_usage_by_engine["0"]`` the
utilisation; ``prefix_hit_rate_by_engine["0"]`` the hit rate; the KV capacity in tokens
``max_blocks × tokens_per_block``; ``reported["spec_accept_length"]`` the acceptance length gauge,
shown only where the per-position counters are not served.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sparktui.model.numbers import COUNT, COUNTER, FINITE, FRACTION, NumberKind, label_int
from sparktui.model.promtext import Exposition
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

ENGINE = "0"  # one executor per server
UNDEFINED = "undefined"  # trtllm-serve's model_name label
PROMPT = "trtllm_prompt_tokens_total"
GENERATION = "trtllm_generation_tokens_total"
CACHED = "trtllm_prompt_cached_tokens_total"
SUCCESS = "trtllm_request_success_total"
DRAFTED = "trtllm_spec_decode_drafted_tokens_total"
ACCEPTED = "trtllm_spec_decode_accepted_tokens_total"
COUNTERS = (PROMPT, GENERATION, CACHED, SUCCESS, DRAFTED, ACCEPTED)

HISTOGRAMS: Mapping[str, str] = {
    "ttft": "trtllm_time_to_first_token_seconds",
    "tpot": "trtllm_time_per_output_token_seconds",
    "e2e": "trtllm_e2e_request_latency_seconds",
    "queue": "trtllm_request_queue_time_seconds",
    "prefill": "trtllm_request_prefill_time_seconds",
    "decode": "trtllm_request_decode_time_seconds",
}

RUNNING = "trtllm_num_requests_running"
WAITING = "trtllm_num_requests_waiting"
UTILIZATION = "trtllm_kv_cache_utilization"
HIT_RATE = "trtllm_kv_cache_hit_rate"
MAX_BLOCKS = "trtllm_kv_cache_max_blocks"
TOKENS_PER_BLOCK = "trtllm_kv_cache_tokens_per_block"
ACCEPTANCE_LENGTH = "trtllm_spec_decode_acceptance_length"
GAUGES: Mapping[str, NumberKind] = {
    RUNNING: COUNT,
    WAITING: COUNT,
    UTILIZATION: FRACTION,
    HIT_RATE: FRACTION,
    MAX_BLOCKS: COUNT,
    TOKENS_PER_BLOCK: COUNT,
    ACCEPTANCE_LENGTH: FINITE,
}

LACKS: Mapping[str, str] = {"mfu": "TensorRT-LLM exports no bandwidth or FLOP counters"}

SERIES: tuple[str, ...] = (
    *COUNTERS,
    *(f"{base}{suffix}" for base in HISTOGRAMS.values() for suffix in ("_bucket", "_sum", "_count")),
    *GAUGES,
)
WANTED = frozenset(SERIES)


def normalise(expo: Exposition, model_name: str | None) -> EngineScrape:
    """One scrape of a ``trtllm-serve`` as the neutral scrape of its one model: ``model_name`` is the id
    its ``/v1/models`` serves (the labels say "undefined"). ``ScrapeProblem`` (one line naming the
    metric) for what cannot be read; a scrape with none of its names is one too."""
    if not any(name in expo for name in WANTED):
        raise ScrapeProblem(
            "/prometheus/metrics: no trtllm_ metric in the answer (is trtllm-serve started with return_perf_metrics?)"
        )
    counters: dict[str, float] = {}

    def add(key: str, value: float) -> None:
        counters[key] = counters.get(key, 0.0) + value

    for wire, key in ((PROMPT, "prompt_tokens"), (GENERATION, "generation_tokens"), (CACHED, "prompt_tokens_cached")):
        for _labels, value in checked(wire, expo.get(wire), COUNTER):
            add(key, value)
    if "prompt_tokens" in counters:
        cached = counters.get("prompt_tokens_cached", 0.0)
        counters["prompt_by_source:local_cache_hit"] = cached
        counters["prompt_by_source:local_compute"] = max(counters["prompt_tokens"] - cached, 0.0)
    for labels, value in checked(SUCCESS, expo.get(SUCCESS), COUNTER):
        add(f"finished:{safe_text(labels.get('finished_reason', ''), LABEL_LIMIT)}", value)
    _read_positions(expo, add)
    gauges = {wire: _gauge(expo, wire, kind) for wire, kind in GAUGES.items()}
    usage, hit_rate, length = gauges[UTILIZATION], gauges[HIT_RATE], gauges[ACCEPTANCE_LENGTH]
    name = safe_text(model_name or "", LABEL_LIMIT) or "trtllm"
    model = ModelScrape(
        model_name=name,
        engines=(ENGINE,),
        counters=counters,
        histograms={key: h for key, base in HISTOGRAMS.items() if (h := _histogram(expo, base)) is not None},
        running=gauges[RUNNING],
        waiting=gauges[WAITING],
        waiting_by_reason={},
        kv_usage_by_engine={ENGINE: usage} if usage is not None else {},
        sleep=None,
        prefix_hit_rate_by_engine={ENGINE: hit_rate} if hit_rate is not None else {},
        lacks=LACKS,
        reported={"spec_accept_length": length} if length and "spec_drafts" not in counters else {},
    )
    blocks, per_block = gauges[MAX_BLOCKS], gauges[TOKENS_PER_BLOCK]
    capacity = int(blocks * per_block) if blocks and per_block else None
    config = {ENGINE: CacheConfig({"kv_cache_size_tokens": str(capacity)})} if capacity else {}
    return EngineScrape(models={name: model}, cache_config=config)


def _read_positions(expo: Exposition, add: Callable[[str, float], None]) -> None:
    """The per-position draft counters: position 0's drafted tokens are the drafts (every draft
    proposes position 0), the totals are the sums over positions."""
    for wire, total, per_position in (
        (DRAFTED, "spec_draft_tokens", None),
        (ACCEPTED, "spec_accepted_tokens", "spec_accepted_pos"),
    ):
        for labels, value in checked(wire, expo.get(wire), COUNTER):
            raw = labels.get("token_position", "")
            position = label_int(raw)
            if position is None:
                raise ScrapeProblem(f"{wire} has token_position={raw[:40]!r}, which is not a whole number")
            add(total, value)
            if per_position is not None:
                add(f"{per_position}:{position}", value)
            elif position == 0:
                add("spec_drafts", value)


def _gauge(expo: Exposition, wire: str, kind: NumberKind) -> float | None:
    """The gauge's value, whatever ``pid`` set it (the largest where several did); None when absent."""
    series = checked(wire, expo.get(wire), kind)
    return max(value for _labels, value in series) if series else None


def _histogram(expo: Exposition, base: str) -> HistogramSample | None:
    wire = f"{base}_bucket"
    buckets: dict[float, float] = {}
    for labels, value in checked(wire, expo.get(wire), COUNTER):
        bound = bucket_bound(wire, labels.get("le", ""))
        buckets[bound] = buckets.get(bound, 0.0) + value
    if not buckets:
        return None
    total = sum(v for _l, v in checked(f"{base}_sum", expo.get(f"{base}_sum"), FINITE))
    count = sum(v for _l, v in checked(f"{base}_count", expo.get(f"{base}_count"), COUNTER))
    return histogram_sample(wire, buckets, total, count)
