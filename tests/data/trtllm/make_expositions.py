#!/usr/bin/env python3
"""TensorRT-LLM ``trtllm-serve`` ``/prometheus/metrics`` expositions for the scenarios of ``scenarios.json``.

TensorRT-LLM needs a CUDA GPU to import, so its collector cannot run here. This writes what its
collector writes, made from its source: ``tensorrt_llm/metrics/collector.py`` (``MetricsCollector``,
NVIDIA/TensorRT-LLM at commit 050f80def8df236e326949c8bd9dee10fd896a83) and
``tensorrt_llm/serve/openai_server.py`` (commit 00057725d9a6591f033e44f31c219e2426827bb7):

- the names, types, label names and histogram buckets of the metrics sparktui reads, and a few it does
  not; the labels ``openai_server`` gives the collector: ``model_name="undefined"``,
  ``engine_type="undefined"``;
- what ``log_request_metrics_dict`` does once per finished request (``request_success_total`` by
  ``finished_reason``, the latency histograms, the prompt, generation and cached-token counters, the
  per-position ``spec_decode_drafted_tokens_total`` / ``spec_decode_accepted_tokens_total`` by
  ``token_position`` up to the last position drafted) and what ``log_iteration_stats`` does with one
  iteration's stats (running and waiting, the KV blocks and their utilisation ``used / max``, the hit
  rate, the speculative totals and the acceptance length gauge);
- served as ``openai_server.mount_metrics`` serves them: prometheus_client's multiprocess registry,
  so there are no ``_created`` series and every gauge carries the ``pid`` of the process that set it
  (``multiprocess_mode`` "all", the collector sets none).

    .venv/bin/python tests/data/trtllm/make_expositions.py      # every scenario, into this folder
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LABELS = {"model_name": "undefined", "engine_type": "undefined"}  # as openai_server._init_llm sets them
PREFIX = "trtllm_"
LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0]
LATENCY_BUCKETS += [480.0, 960.0, 1920.0, 7680.0]
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0]
TTFT_BUCKETS += [40.0, 80.0, 160.0, 640.0, 2560.0]
TPOT_BUCKETS = [
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
    20.0,
    40.0,
    80.0,
]
PREFILL_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0]
PREFILL_BUCKETS += [640.0, 2560.0]


class Collector:
    """The metrics of ``MetricsCollector`` that these scenarios move, as it defines them."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        keys = list(LABELS)

        def histogram(name: str, buckets: list[float]) -> Any:
            return Histogram(PREFIX + name, name, labelnames=keys, buckets=buckets)

        self.success = Counter(PREFIX + "request_success_total", "ok", labelnames=[*keys, "finished_reason"])
        self.e2e = histogram("e2e_request_latency_seconds", LATENCY_BUCKETS)
        self.ttft = histogram("time_to_first_token_seconds", TTFT_BUCKETS)
        self.tpot = histogram("time_per_output_token_seconds", TPOT_BUCKETS)
        self.queue = histogram("request_queue_time_seconds", LATENCY_BUCKETS)
        self.prefill = histogram("request_prefill_time_seconds", PREFILL_BUCKETS)
        self.decode = histogram("request_decode_time_seconds", LATENCY_BUCKETS)
        self.prompt = Counter(PREFIX + "prompt_tokens_total", "prompt", labelnames=keys)
        self.generation = Counter(PREFIX + "generation_tokens_total", "generation", labelnames=keys)
        self.cached = Counter(PREFIX + "prompt_cached_tokens_total", "cached", labelnames=keys)
        self.drafted = Counter(PREFIX + "spec_decode_drafted_tokens_total", "d", labelnames=[*keys, "token_position"])
        self.accepted = Counter(PREFIX + "spec_decode_accepted_tokens_total", "a", labelnames=[*keys, "token_position"])
        self.running = Gauge(PREFIX + "num_requests_running", "running", labelnames=keys)
        self.waiting = Gauge(PREFIX + "num_requests_waiting", "waiting", labelnames=keys)
        self.completed = Counter(PREFIX + "num_requests_completed_total", "completed", labelnames=keys)
        self.max_active = Gauge(PREFIX + "max_num_active_requests", "max active", labelnames=keys)
        self.hit_rate = Gauge(PREFIX + "kv_cache_hit_rate", "hit rate", labelnames=keys)
        self.utilization = Gauge(PREFIX + "kv_cache_utilization", "utilization", labelnames=keys)
        self.max_blocks = Gauge(PREFIX + "kv_cache_max_blocks", "max blocks", labelnames=keys)
        self.free_blocks = Gauge(PREFIX + "kv_cache_free_blocks", "free blocks", labelnames=keys)
        self.used_blocks = Gauge(PREFIX + "kv_cache_used_blocks", "used blocks", labelnames=keys)
        self.tokens_per_block = Gauge(PREFIX + "kv_cache_tokens_per_block", "tokens per block", labelnames=keys)
        self.draft_tokens = Counter(PREFIX + "spec_decode_num_draft_tokens_total", "draft", labelnames=keys)
        self.accepted_tokens = Counter(PREFIX + "spec_decode_num_accepted_tokens_total", "acc", labelnames=keys)
        self.acceptance_length = Gauge(PREFIX + "spec_decode_acceptance_length", "length", labelnames=keys)

    def finished(self, r: dict[str, Any]) -> None:
        """``log_request_metrics_dict`` for one finished request."""
        self.success.labels(**LABELS, finished_reason=r["finished_reason"]).inc(1)
        for histogram, key in (
            (self.e2e, "e2e_s"),
            (self.ttft, "ttft_s"),
            (self.tpot, "tpot_s"),
            (self.queue, "queue_s"),
            (self.prefill, "prefill_s"),
            (self.decode, "decode_s"),
        ):
            histogram.labels(**LABELS).observe(r[key])
        self.prompt.labels(**LABELS).inc(r["prompt"])
        self.generation.labels(**LABELS).inc(r["generated"])
        if r["cached"] > 0:
            self.cached.labels(**LABELS).inc(r["cached"])
        drafted, accepted = r.get("drafted_per_position"), r.get("accepted_per_position")
        if drafted is not None and accepted is not None:
            last = max((i for i, d in enumerate(drafted) if d > 0), default=-1)
            for position in range(last + 1):
                if drafted[position] > 0:
                    self.drafted.labels(**LABELS, token_position=position).inc(drafted[position])
                if accepted[position] > 0:
                    self.accepted.labels(**LABELS, token_position=position).inc(accepted[position])

    def iteration(self, stats: dict[str, Any]) -> None:
        """``log_iteration_stats`` for one iteration's stats (``BaseLLM.get_stats()``'s shape)."""
        self.running.labels(**LABELS).set(stats["numActiveRequests"])
        self.waiting.labels(**LABELS).set(stats["numQueuedRequests"])
        if stats["numCompletedRequests"] > 0:
            self.completed.labels(**LABELS).inc(stats["numCompletedRequests"])
        self.max_active.labels(**LABELS).set(stats["maxNumActiveRequests"])
        kv = stats["kvCacheStats"]
        self.hit_rate.labels(**LABELS).set(kv["cacheHitRate"])
        self.utilization.labels(**LABELS).set(kv["usedNumBlocks"] / kv["maxNumBlocks"])
        self.max_blocks.labels(**LABELS).set(kv["maxNumBlocks"])
        self.free_blocks.labels(**LABELS).set(kv["freeNumBlocks"])
        self.used_blocks.labels(**LABELS).set(kv["usedNumBlocks"])
        self.tokens_per_block.labels(**LABELS).set(kv["tokensPerBlock"])
        spec = stats.get("specDecodingStats")
        if spec:
            if spec["numDraftTokens"] > 0:
                self.draft_tokens.labels(**LABELS).inc(spec["numDraftTokens"])
            if spec["numAcceptedTokens"] > 0:
                self.accepted_tokens.labels(**LABELS).inc(spec["numAcceptedTokens"])
            self.acceptance_length.labels(**LABELS).set(spec["acceptanceLength"])


def _run(name: str, scenario: dict[str, Any]) -> None:
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess

    collector = Collector()
    for phase in scenario["phases"]:
        for request in phase["requests"]:
            collector.finished(request)
        collector.iteration(phase["iteration"])
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        (HERE / f"{name}-{phase['name']}.txt").write_bytes(generate_latest(registry))


def main(argv: list[str]) -> int:
    scenarios = json.loads((HERE / "scenarios.json").read_text())
    if len(argv) == 2:  # one scenario: its own multiprocess folder, set before prometheus_client loads
        _run(argv[1], scenarios[argv[1]])
        return 0
    for name in (key for key in scenarios if not key.startswith("_")):
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(prefix=f"trtllm-{name}-")}
        subprocess.run([sys.executable, __file__, name], env=env, check=True)
        print("wrote", name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
