"""The demo fleet's simulation: a vLLM engine per instance driven by a seeded workload.

The engine is simulated at the level vLLM's metrics see it: requests arrive (Poisson, with a slow
swell in the rate), wait for a slot and KV blocks, prefill (cached prefix tokens skipped), then decode
in engine steps whose length grows with the batch; with speculative decoding each step drafts ``k``
tokens per request and accepts a prefix of them (position i accepted with probability
``conditional[i]`` when i−1 was). KV usage follows the tokens held by running requests; when it would
overflow, the newest request is preempted. Every event goes to a ``MetricsSink`` (the exposition).

Everything is deterministic for a seed and driven by ``advance(dt)``: the demo runs it from the wall
clock, tests step it.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What one served model looks like on a DGX Spark (numbers from the operators' write-ups)."""

    served_name: str
    num_speculative_tokens: int
    conditional_acceptance: tuple[float, ...]
    step_s: float  # engine step at batch 1
    step_per_request_s: float  # extra step time per running request (batching cost)
    prefill_tokens_per_s: float
    max_num_seqs: int
    kv_capacity_tokens: int
    block_size: int
    max_model_len: int
    gpu_memory_utilization: float
    weights_gib: float
    requests_per_s: float  # mean arrival rate of the healthy workload
    prompt_median: float
    output_median: float
    max_tokens: int = 4096
    prefix_reuse_share: float = 0.7  # requests that share a prefix with an earlier one
    load_s: float = 60.0  # start to serving: imports, weights, profiling, CUDA graphs
    cold_jit_s: float = 30.0  # the first requests after a start wait for Inductor/FlashInfer JIT
    # What vLLM's MFU estimate (--enable-mfu-metrics) counts per GPU: the weights one engine step reads
    # (a MoE's active experts over the batch, attention, embeddings), the KV bytes per token of
    # context, and the active parameters (2 FLOPs each per token). A GB10 decoding a ~35B MoE at ~50
    # tok/s reads about 100-200 GB/s of its 273.
    step_read_gb: float = 0.0
    kv_kib_per_token: float = 0.0
    active_params_b: float = 0.0


PROFILES: dict[str, ModelProfile] = {
    "qwen36": ModelProfile(
        served_name="RedHatAI/Qwen3.6-35B-A3B-NVFP4",
        num_speculative_tokens=2,
        conditional_acceptance=(0.89, 0.63),
        step_s=0.040,
        step_per_request_s=0.0006,
        prefill_tokens_per_s=4000.0,
        max_num_seqs=128,
        kv_capacity_tokens=1_638_400,
        block_size=16,
        max_model_len=131072,
        gpu_memory_utilization=0.55,
        weights_gib=23.5,
        requests_per_s=0.6,
        prompt_median=2500.0,
        output_median=350.0,
        load_s=48.0,
        step_read_gb=4.8,
        kv_kib_per_token=20.0,
        active_params_b=3.0,
    ),
    "gemma4": ModelProfile(
        served_name="google/gemma-4-26B-A4B-it",
        num_speculative_tokens=4,
        conditional_acceptance=(0.92, 0.84, 0.76, 0.66),
        step_s=0.032,
        step_per_request_s=0.0008,
        prefill_tokens_per_s=3500.0,
        max_num_seqs=24,
        kv_capacity_tokens=1_200_000,
        block_size=16,
        max_model_len=65536,
        gpu_memory_utilization=0.80,
        weights_gib=26.0,
        requests_per_s=0.5,
        prompt_median=1800.0,
        output_median=400.0,
        load_s=55.0,
        step_read_gb=3.6,
        kv_kib_per_token=40.0,
        active_params_b=3.8,
    ),
    "qwen235": ModelProfile(
        served_name="Qwen/Qwen3-235B-A22B-GPTQ-Int4",
        num_speculative_tokens=0,
        conditional_acceptance=(),
        step_s=0.058,
        step_per_request_s=0.004,
        prefill_tokens_per_s=1500.0,
        max_num_seqs=8,
        kv_capacity_tokens=420_000,
        block_size=16,
        max_model_len=32768,
        gpu_memory_utilization=0.87,
        weights_gib=57.6,
        requests_per_s=0.08,
        prompt_median=1500.0,
        output_median=256.0,
        load_s=150.0,
        cold_jit_s=45.0,
        # per GPU: tensor parallel over two Sparks halves what each reads and computes
        step_read_gb=6.5,
        kv_kib_per_token=24.0,
        active_params_b=11.0,
    ),
}
# The mixed demo fleet's other engines (``fleet.MIXED_NODES``): the models NVIDIA's Spark playbooks serve
# with them, run at the pace of the profiles above.
PROFILES["qwen3-30b-sglang"] = replace(
    PROFILES["qwen36"],
    served_name="Qwen/Qwen3-30B-A3B-FP8",
    num_speculative_tokens=3,  # EAGLE: SGLang reports only its acceptance length and rate
    conditional_acceptance=(0.84, 0.66, 0.48),
    gpu_memory_utilization=0.80,  # --mem-fraction-static
    weights_gib=29.0,
)
PROFILES["llama31-8b-fp4"] = replace(
    PROFILES["gemma4"],
    served_name="nvidia/Llama-3.1-8B-Instruct-FP4",
    num_speculative_tokens=0,
    conditional_acceptance=(),
    step_s=0.014,
    max_num_seqs=64,
    gpu_memory_utilization=0.85,  # trtllm-serve's KV cache share of what the weights leave
    weights_gib=5.6,
    load_s=40.0,
)
PROFILES["llama31-8b-nim"] = replace(
    PROFILES["gemma4"],
    served_name="meta/llama-3.1-8b-instruct",
    num_speculative_tokens=0,
    conditional_acceptance=(),
    step_s=0.022,
    max_num_seqs=64,
    gpu_memory_utilization=0.5,
    weights_gib=15.0,
    load_s=70.0,
)


class MetricsSink(Protocol):
    """Where the engine reports what happened (the exposition implements it)."""

    def add(self, counter: str, value: float, **labels: str) -> None: ...
    def observe(self, histogram: str, value: float, count: int = 1) -> None: ...
    def set_gauge(self, gauge: str, value: float, **labels: str) -> None: ...


class EngineState(StrEnum):
    UP = "up"
    LOADING = "loading"  # process starting: the port refuses connections
    DEAD = "dead"  # engine core died: /health 503, /metrics frozen
    WEDGED = "wedged"  # engine core stopped: /health 200, every gauge frozen, new requests in none of them
    STOPPED = "stopped"  # no process: connection refused


@dataclass(slots=True)
class Request:
    request_id: int
    arrival: float
    prompt_tokens: int
    cached_tokens: int
    max_tokens: int
    target_tokens: int
    scheduled: float | None = None
    first_token: float | None = None
    prefill_left: float = 0.0  # prompt tokens still to compute
    stall_s: float = 0.0  # time before its prefill can start (cold JIT)
    generated: int = 0
    preemptions: int = 0
    on_token: Callable[[int], None] | None = None  # streaming clients
    on_finish: Callable[[str], None] | None = None


CHUNK_TOKENS = 8192  # max_num_batched_tokens on the Sparks in the write-ups


def _lognormal(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    return int(min(high, max(low, rng.lognormvariate(math.log(median), sigma))))


def _binomial(rng: random.Random, n: int, p: float) -> int:
    """Binomial draw: exact for small n, normal approximation for large n (Python 3.11 has no
    ``binomialvariate``)."""
    if n <= 0 or p <= 0:
        return 0
    if p >= 1:
        return n
    if n < 25:
        return sum(1 for _ in range(n) if rng.random() < p)
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    return max(0, min(n, round(rng.gauss(mean, sd))))


@dataclass
class Engine:
    """One vLLM engine (engine index 0) serving one model."""

    profile: ModelProfile
    sink: MetricsSink
    rng: random.Random
    now: float = 0.0
    state: EngineState = EngineState.UP
    load_factor: float = 1.0  # multiplies the arrival rate (scenarios)
    prompt_factor: float = 1.0  # multiplies prompt lengths (scenarios)
    output_factor: float = 1.0  # multiplies output lengths (scenarios)
    cached_share: tuple[float, float] = (0.5, 0.95)  # prefix share reused by a repeat request
    acceptance_factor: tuple[float, ...] | None = None  # overrides conditional acceptance (scenarios)
    clock_factor: float = 1.0  # the GPU's clock over its normal one: a throttled GPU steps slower (scenarios)
    tokens_computed: float = 0.0  # prompt and generated tokens computed so far (a job's link traffic)
    waiting: deque[Request] = field(default_factory=deque)
    running: list[Request] = field(default_factory=list)
    # Accepted by the API server while the engine core is stopped: the core publishes the gauges, so a
    # request sent to a wedged engine is in neither running nor waiting (seen on the real engine).
    hidden: deque[Request] = field(default_factory=deque)
    next_id: int = 0
    arrival_debt: float = 0.0
    next_gap: float = 1.0
    recent_prefixes: int = 0
    ready_at: float = 0.0  # when a LOADING engine starts serving
    first_request_penalty_s: float = 0.0  # cold JIT: the first request after a start waits this long
    tokens_generated: int = 0
    mfu_metrics: bool = True  # started with --enable-mfu-metrics: the estimated counters count

    # --- the workload ---------------------------------------------------------------------------

    def arrival_rate(self) -> float:
        base = self.profile.requests_per_s * self.load_factor
        swell = 1.0 + 0.35 * math.sin(self.now / 90.0) + 0.15 * math.sin(self.now / 17.0)
        return max(0.0, base * swell)

    def new_request(self, max_tokens: int | None = None, prompt_tokens: int | None = None) -> Request:
        p = self.profile
        median = p.prompt_median * self.prompt_factor
        prompt = prompt_tokens or _lognormal(self.rng, median, 0.8, 16, p.max_model_len // 2)
        cached = 0
        if self.recent_prefixes and self.rng.random() < p.prefix_reuse_share:
            share = self.rng.uniform(*self.cached_share)
            cached = int(prompt * share) // p.block_size * p.block_size
        self.recent_prefixes += 1
        limit = max_tokens or int(p.max_tokens * self.output_factor)
        output = p.output_median * self.output_factor
        target = min(limit, _lognormal(self.rng, output, 0.7, 1, p.max_model_len - prompt))
        self.next_id += 1
        return Request(self.next_id, self.now, prompt, cached, limit, max(1, target))

    def submit(self, request: Request) -> None:
        if self.state is EngineState.WEDGED:
            self.hidden.append(request)
        else:
            self.waiting.append(request)

    def resume(self) -> None:
        """A wedged engine core runs again (SIGCONT): what was sent meanwhile reaches the scheduler."""
        if self.state is EngineState.WEDGED:
            self.state = EngineState.UP
            self.waiting.extend(self.hidden)
            self.hidden.clear()

    # --- the engine -----------------------------------------------------------------------------

    def kv_used_tokens(self) -> int:
        """Tokens whose KV blocks running requests hold: cached prefix, what prefill computed so far,
        and the generated tokens."""
        return sum(int(r.prompt_tokens - r.prefill_left) + r.generated for r in self.running)

    def step_time(self) -> float:
        return (self.profile.step_s + self.profile.step_per_request_s * len(self.running)) / self.clock_factor

    def advance(self, dt: float) -> None:
        """Move the engine ``dt`` seconds forward."""
        end = self.now + dt
        if self.state is EngineState.LOADING and end >= self.ready_at:
            self.state = EngineState.UP
        if self.state is EngineState.UP:
            self._arrivals(dt)
            self._schedule()
            self._run(dt)
        elif self.state is EngineState.WEDGED:
            self._arrivals(dt)
            self.now = end
            return  # the core publishes the gauges: stopped, they keep their last values
        self.now = end
        self._publish_gauges()

    def _arrivals(self, dt: float) -> None:
        """A Poisson process with a time-varying rate: exponential gaps in units of expected arrivals."""
        self.arrival_debt += self.arrival_rate() * dt
        while self.arrival_debt >= self.next_gap:
            self.arrival_debt -= self.next_gap
            self.next_gap = self.rng.expovariate(1.0)
            self.submit(self.new_request())

    def _schedule(self) -> None:
        p = self.profile
        # Like vLLM's V1 scheduler, admit a request when its cached blocks and its first prefill chunk
        # fit: the rest is allocated as prefill proceeds, so the pool can overcommit and preempt.
        while self.waiting and len(self.running) < p.max_num_seqs:
            request = self.waiting[0]
            computed = request.prompt_tokens - request.cached_tokens
            first_chunk = min(computed, CHUNK_TOKENS)
            if self.kv_used_tokens() + request.cached_tokens + first_chunk > p.kv_capacity_tokens:
                break
            self.waiting.popleft()
            if request.scheduled is None:
                request.scheduled = self.now
            # A preempted request recomputes everything it held (prompt and generated tokens).
            request.prefill_left = float(computed + (request.generated if request.preemptions else 0))
            request.stall_s = self.first_request_penalty_s  # the first request pays for the JIT
            self.first_request_penalty_s = 0.0
            self.running.append(request)

    def _conditional(self) -> tuple[float, ...]:
        return self.acceptance_factor or self.profile.conditional_acceptance

    def _run(self, dt: float) -> None:
        step = self.step_time()
        finished: list[tuple[Request, str]] = []
        # Chunked prefill: every engine step carries the decode tokens of the running requests plus a
        # chunk of prompt; the engine's prefill throughput is shared, oldest request first, and a
        # step with a prefill chunk in it takes longer.
        prefill_budget = self.profile.prefill_tokens_per_s * dt
        prefill_used_s = 0.0
        prefill_taken = 0.0
        decoded = 0
        for request in list(self.running):
            if request.prefill_left <= 0:
                continue
            if request.stall_s > 0:
                request.stall_s = max(0.0, request.stall_s - dt)
                continue
            take = min(request.prefill_left, prefill_budget)
            prefill_taken += take
            request.prefill_left -= take
            prefill_budget -= take
            prefill_used_s += take / self.profile.prefill_tokens_per_s
            if request.prefill_left <= 0 and request.first_token is None:
                self._first_token(request, self.now + min(dt, prefill_used_s))
        if prefill_used_s > 0:
            step *= 1.0 + 0.6 * min(1.0, prefill_used_s / dt)
        for request in list(self.running):
            if request.first_token is None or request.prefill_left > 0:
                continue
            steps = int(dt / step + self.rng.random())
            if steps <= 0:
                continue
            emitted = self._decode(request, steps, step)
            decoded += emitted
            if request.on_token is not None and emitted:
                request.on_token(emitted)
            if request.generated >= request.target_tokens:
                reason = "length" if request.generated >= request.max_tokens else "stop"
                finished.append((request, reason))
        context = sum(r.prompt_tokens + r.generated for r in self.running)
        self.tokens_computed += decoded + prefill_taken
        for request, reason in finished:
            self._finish(request, reason)
        self._preempt_if_full()
        if (decoded or prefill_taken) and self.mfu_metrics:
            self._estimate(dt / step, context, decoded + prefill_taken)
        if self.running or prefill_taken:
            # Each engine step carries one decode token per running request and its share of the
            # prompt chunk computed this tick (vLLM counts computed prompt + generated tokens).
            steps = int(dt / step) or 1
            self.sink.observe("vllm:iteration_tokens_total", len(self.running) + prefill_taken / steps, count=steps)

    def _estimate(self, steps: float, context: int, tokens: float) -> None:
        """vLLM's per-GPU estimate of ``steps`` engine steps over ``context`` tokens of KV that
        computed ``tokens`` (``vllm/v1/metrics/perf.py``, simplified): each step reads the weights and
        every running request's KV; each token computed writes its KV."""
        p = self.profile
        kv_bytes = p.kv_kib_per_token * 1024
        self.sink.add("vllm:estimated_flops_per_gpu", 2 * p.active_params_b * 1e9 * tokens)
        self.sink.add("vllm:estimated_read_bytes_per_gpu", steps * (p.step_read_gb * 1e9 + context * kv_bytes))
        self.sink.add("vllm:estimated_write_bytes_per_gpu", tokens * kv_bytes)

    def _first_token(self, request: Request, at: float) -> None:
        request.first_token = at
        computed = request.prompt_tokens - request.cached_tokens
        self.sink.add("vllm:prompt_tokens", request.prompt_tokens)
        self.sink.add("vllm:prompt_tokens_by_source", computed, source="local_compute")
        self.sink.add("vllm:prompt_tokens_by_source", request.cached_tokens, source="local_cache_hit")
        self.sink.add("vllm:prompt_tokens_cached", request.cached_tokens)
        self.sink.add("vllm:prompt_tokens_cached_by_source", request.cached_tokens, source="device")
        self.sink.add("vllm:prefix_cache_queries", request.prompt_tokens)
        self.sink.add("vllm:prefix_cache_hits", request.cached_tokens)
        self.sink.observe("vllm:time_to_first_token_seconds", at - request.arrival)
        request.generated = 1
        self.tokens_generated += 1
        self.sink.add("vllm:generation_tokens", 1)
        if request.on_token is not None:
            request.on_token(1)

    def _decode(self, request: Request, steps: int, step: float) -> int:
        """Run ``steps`` engine steps for one request; return the tokens it emitted."""
        k = self.profile.num_speculative_tokens
        left = request.target_tokens - request.generated
        if left <= 0:
            return 0
        if k == 0:
            emitted = min(steps, left)
            outputs = emitted
        else:
            drafts = steps
            accepted_by_pos: list[int] = []
            reached = drafts
            for conditional in self._conditional():
                reached = _binomial(self.rng, reached, conditional)
                accepted_by_pos.append(reached)
            accepted = sum(accepted_by_pos)
            emitted = min(drafts + accepted, left)
            # Scale the draft counters down when the request ends inside this tick.
            scale = emitted / (drafts + accepted) if drafts + accepted else 0.0
            drafts = max(1, round(drafts * scale))
            accepted_by_pos = [round(a * scale) for a in accepted_by_pos]
            accepted = sum(accepted_by_pos)
            emitted = min(drafts + accepted, left)  # rounding must not pass max_tokens: vLLM never does
            self.sink.add("vllm:spec_decode_num_drafts", drafts)
            self.sink.add("vllm:spec_decode_num_draft_tokens", drafts * k)
            self.sink.add("vllm:spec_decode_num_accepted_tokens", accepted)
            for position, count in enumerate(accepted_by_pos):
                self.sink.add("vllm:spec_decode_num_accepted_tokens_per_pos", count, position=str(position))
            outputs = drafts
        jitter = self.rng.uniform(0.85, 1.25)
        self.sink.observe("vllm:inter_token_latency_seconds", step * jitter, count=outputs)
        request.generated += emitted
        self.tokens_generated += emitted
        self.sink.add("vllm:generation_tokens", emitted)
        return emitted

    def _finish(self, request: Request, reason: str) -> None:
        self.running.remove(request)
        end = self.now
        first = request.first_token or end
        scheduled = request.scheduled or request.arrival
        sink = self.sink
        sink.add("vllm:request_success", 1, finished_reason=reason)
        sink.observe("vllm:e2e_request_latency_seconds", max(end - request.arrival, first - request.arrival))
        sink.observe("vllm:request_queue_time_seconds", scheduled - request.arrival)
        sink.observe("vllm:request_prefill_time_seconds", first - scheduled)
        sink.observe("vllm:request_decode_time_seconds", max(0.0, end - first))
        sink.observe("vllm:request_inference_time_seconds", max(0.0, end - scheduled))
        sink.observe("vllm:request_prompt_tokens", request.prompt_tokens)
        sink.observe("vllm:request_generation_tokens", request.generated)
        sink.observe("vllm:request_max_num_generation_tokens", request.generated)
        sink.observe("vllm:request_params_max_tokens", request.max_tokens)
        sink.observe("vllm:request_params_n", 1)
        sink.observe("vllm:request_prefill_kv_computed_tokens", request.prompt_tokens - request.cached_tokens)
        sink.observe("vllm:request_num_preemptions", request.preemptions)
        tpot = max(0.0, end - first) / (request.generated - 1) if request.generated > 1 else 0.0
        sink.observe("vllm:request_time_per_output_token_seconds", tpot)
        sink.add(
            "vllm:tool_call_parser_invocations",
            1,
            mode="streaming",
            outcome="no_tool_call",
            request_type="chat_completions",
        )
        if request.on_finish is not None:
            request.on_finish(reason)

    def _preempt_if_full(self) -> None:
        capacity = self.profile.kv_capacity_tokens
        while self.running and self.kv_used_tokens() > capacity:
            victim = self.running.pop()
            victim.preemptions += 1  # its KV is recomputed when it is scheduled again
            self.waiting.appendleft(victim)
            self.sink.add("vllm:num_preemptions", 1)

    def _publish_gauges(self) -> None:
        capacity = self.profile.kv_capacity_tokens
        usage = min(1.0, self.kv_used_tokens() / capacity) if capacity else 0.0
        self.sink.set_gauge("vllm:num_requests_running", len(self.running))
        self.sink.set_gauge("vllm:num_requests_waiting", len(self.waiting))
        self.sink.set_gauge("vllm:num_requests_waiting_by_reason", len(self.waiting), reason="capacity")
        self.sink.set_gauge("vllm:kv_cache_usage_perc", usage)

    def _abort_all(self) -> None:
        """The process is gone: every request is lost (a waiting HTTP client gets an abort)."""
        lost = [*self.waiting, *self.running, *self.hidden]
        self.waiting.clear()
        self.running.clear()
        self.hidden.clear()
        for request in lost:
            if request.on_finish is not None:
                request.on_finish("abort")

    def restart(self, load_s: float, cold_jit_s: float = 0.0) -> None:
        """A process restart: every request is lost; the port refuses until the model has loaded."""
        self._abort_all()
        self.state = EngineState.LOADING
        self.ready_at = self.now + load_s
        self.first_request_penalty_s = cold_jit_s

    def stop(self) -> None:
        """The process exited (stopped, crashed, killed): connection refused from now on."""
        self._abort_all()
        self.state = EngineState.STOPPED
        self._publish_gauges()
