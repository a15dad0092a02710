"""The ``/metrics`` of the demo's SGLang and TensorRT-LLM servers: the simulated engine's events written
with each engine's own names, labels, buckets and HELP, and only what that engine exports.

The demo's engine (``sim.Engine``) reports what happens in vLLM's words (it is a ``MetricsSink``);
``SglangExposition`` and ``TrtllmExposition`` are sinks that keep what their engine would count and
drop the rest, so each demo server exports what the real one exports and lacks what it lacks:

- SGLang 0.5.23 (``srt/observability/metrics_collector.py``; the expositions of
  ``tests/data/sglang-0.5.23/`` were written by that code): tokenizer-side counters and histograms with
  ``model_name, engine_type`` (``is_streaming`` on the request totals, TTFT and end-to-end), the
  scheduler's gauges with ``tp_rank, pp_rank, moe_ep_rank`` as well. Speculative decoding is two gauges
  over the recent batches (``spec_accept_length``, ``spec_accept_rate``): no draft counters, no
  positions. ``cache_hit_rate`` is SGLang's own ratio over recent batches.
- TensorRT-LLM's ``trtllm-serve`` (``tensorrt_llm/metrics/collector.py``, as
  ``tests/data/trtllm/make_expositions.py`` cites it): ``trtllm_`` names, ``model_name="undefined"``,
  ``engine_type="undefined"``, per-request counters and histograms, the iteration's gauges (KV blocks
  and their utilisation), speculative decoding as drafted and accepted tokens per ``token_position``
  and an acceptance-length gauge.

"Recent batches" are kept as decaying sums (each gauge update keeps ``RECENT_DECAY`` of what came
before), which is what a gauge over the last few logging intervals looks like.
"""

from __future__ import annotations

from collections.abc import Collection

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from sparktui.demo.sim import ModelProfile

RECENT_DECAY = 0.9
Buckets = tuple[float, ...]

# --- SGLang 0.5.23 ------------------------------------------------------------------------------------

SGLANG_TTFT_BUCKETS: Buckets = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
    10.0,
    20.0,
    40.0,
    60.0,
    80.0,
    100.0,
)
SGLANG_TTFT_BUCKETS += (200.0, 400.0)
SGLANG_ITL_BUCKETS: Buckets = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.06,
    0.08,
)
SGLANG_ITL_BUCKETS += (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
SGLANG_E2E_BUCKETS: Buckets = (*SGLANG_TTFT_BUCKETS, 600.0, 1200.0, 1800.0, 2400.0)
SGLANG_RANKS = {"tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}


class _Recent:
    """A ratio over recent batches, as a decaying pair of sums."""

    def __init__(self) -> None:
        self.numerator = 0.0
        self.denominator = 0.0

    def add(self, numerator: float, denominator: float) -> None:
        self.numerator += numerator
        self.denominator += denominator

    def decay(self) -> None:
        self.numerator *= RECENT_DECAY
        self.denominator *= RECENT_DECAY

    def ratio(self) -> float:
        return self.numerator / self.denominator if self.denominator > 0 else 0.0


class SglangExposition:
    """One SGLang server's ``/metrics`` (``--enable-metrics``). A restart is a new one (fresh counters)."""

    def __init__(self, profile: ModelProfile) -> None:
        self.profile = profile
        self.registry = CollectorRegistry()
        r = self.registry
        self._tokenizer = {"model_name": profile.served_name, "engine_type": "unified"}
        self._streamed = {**self._tokenizer, "is_streaming": "false"}
        self._scheduler = {**self._tokenizer, **SGLANG_RANKS}
        tok, streamed, sched = list(self._tokenizer), list(self._streamed), list(self._scheduler)

        def gauge(name: str, help_text: str) -> Gauge:
            made = Gauge(f"sglang:{name}", help_text, sched, registry=r)
            made.labels(**self._scheduler).set(0)
            return made

        self.running = gauge("num_running_reqs", "The number of running requests.")
        self.queued = gauge("num_queue_reqs", "The number of requests in the waiting queue.")
        self.gen_throughput = gauge("gen_throughput", "The generation throughput (token/s).")
        self.cache_hit_rate = gauge("cache_hit_rate", "The prefix cache hit rate.")
        self.token_usage = gauge("token_usage", "The token usage.")
        self.kv_available = gauge("kv_available_tokens", "Number of free token slots in the KV cache pool.")
        self.kv_used = gauge("kv_used_tokens", "Number of actively used token slots in the KV cache pool.")
        self.spec_length: Gauge | None = None
        self.spec_rate: Gauge | None = None
        if profile.num_speculative_tokens:
            self.spec_length = gauge(
                "spec_accept_length",
                "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
            )
            self.spec_rate = gauge(
                "spec_accept_rate", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch)."
            )
        self.prompt = Counter("sglang:prompt_tokens", "Number of prefill tokens processed.", streamed, registry=r)
        self.generation = Counter(
            "sglang:generation_tokens", "Number of generation tokens processed.", streamed, registry=r
        )
        self.requests = Counter("sglang:num_requests", "Number of requests processed.", streamed, registry=r)
        self.aborted = Counter("sglang:num_aborted_requests", "Number of requests aborted.", tok, registry=r)
        self.cached = Counter(
            "sglang:cached_tokens",
            "Number of cached prompt tokens by source (device/host/storage).",
            [*tok, "cache_source"],
            registry=r,
        )
        self.ttft = Histogram(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            streamed,
            buckets=SGLANG_TTFT_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            tok,
            buckets=SGLANG_ITL_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            streamed,
            buckets=SGLANG_E2E_BUCKETS,
            registry=r,
        )
        for counter in (self.prompt, self.generation, self.requests):
            counter.labels(**self._streamed)
        self.aborted.labels(**self._tokenizer)
        self._hits = _Recent()
        self._accepted = _Recent()  # accepted drafts over proposed drafts
        self._length = _Recent()  # tokens per forward over forwards
        self._generated_recent = _Recent()  # tokens over seconds, for gen_throughput

    # --- MetricsSink ----------------------------------------------------------------------------

    def add(self, counter: str, value: float, **labels: str) -> None:
        if value <= 0:
            return
        if counter == "vllm:prompt_tokens":
            self.prompt.labels(**self._streamed).inc(value)
        elif counter == "vllm:generation_tokens":
            self.generation.labels(**self._streamed).inc(value)
        elif counter == "vllm:prompt_tokens_cached_by_source":
            self.cached.labels(**self._tokenizer, cache_source=labels.get("source", "device")).inc(value)
        elif counter == "vllm:prefix_cache_queries":
            self._hits.add(0.0, value)
        elif counter == "vllm:prefix_cache_hits":
            self._hits.add(value, 0.0)
        elif counter == "vllm:request_success":
            self.requests.labels(**self._streamed).inc(value)
            if labels.get("finished_reason") == "abort":  # counted as sent, and again as it ends
                self.aborted.labels(**self._tokenizer).inc(value)
        elif counter == "vllm:spec_decode_num_draft_tokens":
            self._accepted.add(0.0, value)
        elif counter == "vllm:spec_decode_num_accepted_tokens":
            self._accepted.add(value, 0.0)
            self._length.add(value, 0.0)
        elif counter == "vllm:spec_decode_num_drafts":
            self._length.add(value, value)  # each forward: its bonus token, and one step

    def observe(self, histogram: str, value: float, count: int = 1) -> None:
        target = {
            "vllm:time_to_first_token_seconds": (self.ttft, self._streamed),
            "vllm:inter_token_latency_seconds": (self.itl, self._tokenizer),
            "vllm:e2e_request_latency_seconds": (self.e2e, self._streamed),
        }.get(histogram)
        if target is None:
            return  # SGLang's other histograms are not simulated
        child = target[0].labels(**target[1])
        for _ in range(count):
            child.observe(value)

    def set_gauge(self, gauge: str, value: float, **labels: str) -> None:
        s = self._scheduler
        capacity = self.profile.kv_capacity_tokens
        if gauge == "vllm:num_requests_running":
            self.running.labels(**s).set(value)
        elif gauge == "vllm:num_requests_waiting":
            self.queued.labels(**s).set(value)
        elif gauge == "vllm:kv_cache_usage_perc":
            used = round(value * capacity)
            self.token_usage.labels(**s).set(round(value, 2))  # SGLang rounds it to two places
            self.kv_used.labels(**s).set(used)
            self.kv_available.labels(**s).set(capacity - used)
            self._publish_recent()

    def _publish_recent(self) -> None:
        s = self._scheduler
        self.cache_hit_rate.labels(**s).set(round(self._hits.ratio(), 2))
        if self.spec_length is not None and self.spec_rate is not None and self._length.denominator > 0:
            self.spec_length.labels(**s).set(round(self._length.ratio(), 2))
            self.spec_rate.labels(**s).set(round(self._accepted.ratio(), 2))
        for recent in (self._hits, self._accepted, self._length):
            recent.decay()

    def count_http(self, handler: str, status: int, seconds: float) -> None:
        """SGLang exports no HTTP request metrics."""

    def render(self, names: Collection[str] | None = None) -> bytes:
        return generate_latest(self.registry.restricted_registry(names) if names else self.registry)


# --- TensorRT-LLM trtllm-serve --------------------------------------------------------------------

TRTLLM_LABELS = {"model_name": "undefined", "engine_type": "undefined"}  # as openai_server sets them
TRTLLM_LATENCY_BUCKETS: Buckets = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
)
TRTLLM_LATENCY_BUCKETS += (120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
TRTLLM_TTFT_BUCKETS: Buckets = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
)
TRTLLM_TTFT_BUCKETS += (10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TRTLLM_TPOT_BUCKETS: Buckets = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
TRTLLM_TPOT_BUCKETS += (20.0, 40.0, 80.0)
TRTLLM_PREFILL_BUCKETS: Buckets = (
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    20.0,
    40.0,
)
TRTLLM_PREFILL_BUCKETS += (80.0, 160.0, 640.0, 2560.0)
TRTLLM_TOKENS_PER_BLOCK = 32  # KvCacheConfig's default tokens_per_block


class TrtllmExposition:
    """One ``trtllm-serve``'s ``/prometheus/metrics`` (``return_perf_metrics: true``)."""

    def __init__(self, profile: ModelProfile) -> None:
        self.profile = profile
        self.registry = CollectorRegistry()
        r = self.registry
        keys = list(TRTLLM_LABELS)

        def histogram(name: str, help_text: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(f"trtllm_{name}", help_text, keys, buckets=buckets, registry=r)

        def counter(name: str, help_text: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(f"trtllm_{name}", help_text, [*keys, *extra], registry=r)

        def gauge(name: str, help_text: str) -> Gauge:
            return Gauge(f"trtllm_{name}", help_text, keys, registry=r)

        self.success = counter("request_success", "Count of successfully processed requests.", ("finished_reason",))
        self.e2e = histogram(
            "e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", TRTLLM_LATENCY_BUCKETS
        )
        self.ttft = histogram(
            "time_to_first_token_seconds", "Histogram of time to first token in seconds.", TRTLLM_TTFT_BUCKETS
        )
        self.tpot = histogram(
            "time_per_output_token_seconds", "Histogram of time per output token in seconds.", TRTLLM_TPOT_BUCKETS
        )
        self.queue = histogram(
            "request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            TRTLLM_LATENCY_BUCKETS,
        )
        self.prefill = histogram(
            "request_prefill_time_seconds",
            "Histogram of time spent in prefill phase for request.",
            TRTLLM_PREFILL_BUCKETS,
        )
        self.decode = histogram(
            "request_decode_time_seconds",
            "Histogram of time spent in decode phase for request.",
            TRTLLM_LATENCY_BUCKETS,
        )
        self.prompt = counter("prompt_tokens", "Number of prefill tokens processed.")
        self.generation = counter("generation_tokens", "Number of generation tokens processed.")
        self.cached = counter("prompt_cached_tokens", "Number of cached prompt tokens.")
        self.running = gauge("num_requests_running", "Number of requests currently running.")
        self.waiting = gauge("num_requests_waiting", "Number of requests waiting to be processed.")
        self.hit_rate = gauge("kv_cache_hit_rate", "KV cache hit rate.")
        self.utilization = gauge("kv_cache_utilization", "KV cache utilization (used blocks / max blocks).")
        self.max_blocks = gauge("kv_cache_max_blocks", "Maximum number of KV cache blocks.")
        self.free_blocks = gauge("kv_cache_free_blocks", "Number of free KV cache blocks.")
        self.used_blocks = gauge("kv_cache_used_blocks", "Number of used KV cache blocks.")
        self.tokens_per_block = gauge("kv_cache_tokens_per_block", "Number of tokens per KV cache block.")
        self.drafted: Counter | None = None
        self.accepted: Counter | None = None
        self.acceptance_length: Gauge | None = None
        if profile.num_speculative_tokens:
            self.drafted = counter(
                "spec_decode_drafted_tokens", "Number of draft tokens per position.", ("token_position",)
            )
            self.accepted = counter(
                "spec_decode_accepted_tokens", "Number of accepted draft tokens per position.", ("token_position",)
            )
            self.acceptance_length = gauge("spec_decode_acceptance_length", "Speculative decoding acceptance length.")
        self._blocks = max(1, profile.kv_capacity_tokens // TRTLLM_TOKENS_PER_BLOCK)
        self.max_blocks.labels(**TRTLLM_LABELS).set(self._blocks)
        self.tokens_per_block.labels(**TRTLLM_LABELS).set(TRTLLM_TOKENS_PER_BLOCK)
        for made in (self.running, self.waiting, self.hit_rate, self.utilization, self.used_blocks):
            made.labels(**TRTLLM_LABELS).set(0)
        self.free_blocks.labels(**TRTLLM_LABELS).set(self._blocks)
        self._hits = _Recent()
        self._length = _Recent()

    # --- MetricsSink ----------------------------------------------------------------------------

    def add(self, counter: str, value: float, **labels: str) -> None:
        if value <= 0:
            return
        mine = TRTLLM_LABELS
        if counter == "vllm:prompt_tokens":
            self.prompt.labels(**mine).inc(value)
        elif counter == "vllm:generation_tokens":
            self.generation.labels(**mine).inc(value)
        elif counter == "vllm:prompt_tokens_cached":
            self.cached.labels(**mine).inc(value)
        elif counter == "vllm:prefix_cache_queries":
            self._hits.add(0.0, value)
        elif counter == "vllm:prefix_cache_hits":
            self._hits.add(value, 0.0)
        elif counter == "vllm:request_success":
            self.success.labels(**mine, finished_reason=labels.get("finished_reason", "stop")).inc(value)
        elif counter == "vllm:spec_decode_num_drafts" and self.drafted is not None:
            for position in range(self.profile.num_speculative_tokens):  # every draft proposes each position
                self.drafted.labels(**mine, token_position=str(position)).inc(value)
            self._length.add(value, value)
        elif counter == "vllm:spec_decode_num_accepted_tokens_per_pos" and self.accepted is not None:
            self.accepted.labels(**mine, token_position=labels.get("position", "0")).inc(value)
            self._length.add(value, 0.0)

    def observe(self, histogram: str, value: float, count: int = 1) -> None:
        target = {
            "vllm:time_to_first_token_seconds": self.ttft,
            "vllm:request_time_per_output_token_seconds": self.tpot,
            "vllm:e2e_request_latency_seconds": self.e2e,
            "vllm:request_queue_time_seconds": self.queue,
            "vllm:request_prefill_time_seconds": self.prefill,
            "vllm:request_decode_time_seconds": self.decode,
        }.get(histogram)
        if target is None:
            return  # no inter-token histogram in trtllm-serve
        child = target.labels(**TRTLLM_LABELS)
        for _ in range(count):
            child.observe(value)

    def set_gauge(self, gauge: str, value: float, **labels: str) -> None:
        mine = TRTLLM_LABELS
        if gauge == "vllm:num_requests_running":
            self.running.labels(**mine).set(value)
        elif gauge == "vllm:num_requests_waiting":
            self.waiting.labels(**mine).set(value)
        elif gauge == "vllm:kv_cache_usage_perc":
            used = min(self._blocks, round(value * self._blocks))
            self.used_blocks.labels(**mine).set(used)
            self.free_blocks.labels(**mine).set(self._blocks - used)
            self.utilization.labels(**mine).set(used / self._blocks)
            self.hit_rate.labels(**mine).set(self._hits.ratio())
            if self.acceptance_length is not None and self._length.denominator > 0:
                self.acceptance_length.labels(**mine).set(self._length.ratio())
            self._hits.decay()
            self._length.decay()

    def count_http(self, handler: str, status: int, seconds: float) -> None:
        """trtllm-serve exports no HTTP request metrics."""

    def render(self, names: Collection[str] | None = None) -> bytes:
        return generate_latest(self.registry.restricted_registry(names) if names else self.registry)
