#!/usr/bin/env python3
"""Real SGLang ``/metrics`` expositions, made by SGLang 0.5.23's own metrics code, for the scenarios of
``scenarios.json``.

SGLang cannot serve on a CPU-only machine (its kernels are CUDA-only; its server imports torch and
triton), but its metrics are one module, ``sglang/srt/observability/metrics_collector.py``. This loads
that module from the installed wheel, stands in for the few torch-bound modules it imports only for
enums and config, and drives its two collectors through their own methods, in prometheus_client's
multiprocess mode, as SGLang serves ``/metrics`` (``add_prometheus_middleware``, ``srt/utils/common.py``).
The way in follows the team's ``reference/testing/real-engines/sglang_metrics_exposition.py``.

    python3 -m venv sv && sv/bin/pip install --no-deps sglang==0.5.23
    sv/bin/pip install prometheus_client msgspec numpy
    sv/bin/python tests/data/sglang-0.5.23/make_expositions.py           # every scenario, into this folder

Each scenario is a process of its own (the multiprocess registry is process-wide): its phases' requests
are observed by the tokenizer collector, its schedulers (one per rank, labelled as SGLang labels them)
log their stats, and after each phase the exposition is written to ``SCENARIO-PHASE.txt``.
"""

from __future__ import annotations

import contextlib
import enum
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent


class _Config(SimpleNamespace):
    """SGLang's config namespaces: an attribute it does not set here is None."""

    def __getattr__(self, name: str) -> None:
        return None


def _stub(name: str, **attrs: object) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def _load_collectors(model_name: str) -> types.ModuleType:
    """``metrics_collector`` from the wheel, with the modules it needs only for types stood in for."""
    found = importlib.util.find_spec("sglang")
    assert found is not None and found.submodule_search_locations, "pip install --no-deps sglang==0.5.23"
    package = found.submodule_search_locations[0]
    srt = f"{package}/srt"

    class DisaggregationMode(enum.Enum):
        NULL = "null"
        PREFILL = "prefill"
        DECODE = "decode"

        @staticmethod
        def to_engine_type(mode: str) -> str:
            return {"prefill": "prefill", "decode": "decode"}.get(mode, "unified")

    forward_mode = enum.IntEnum(  # type: ignore[misc]
        "ForwardMode", "EXTEND DECODE MIXED IDLE TARGET_VERIFY DRAFT_EXTEND_V2 PREBUILT SPLIT_PREFILL DLLM_EXTEND"
    )
    serving = _Config(served_model_name=model_name, enable_streaming_session=False)
    observability = _Config(enable_metrics=True, stat_loggers=None, extra_metric_labels=None)
    context = _Config(is_config_namespace_published=lambda _ns: False)
    for name, path in (("sglang", package), ("sglang.srt", srt), ("sglang.srt.observability", f"{srt}/observability")):
        _stub(name).__path__ = [path]  # bare packages: their torch-importing __init__ files are skipped
    _stub("sglang.srt.disaggregation.utils", DisaggregationMode=DisaggregationMode)
    _stub("sglang.srt.model_executor.forward_batch_info", ForwardMode=forward_mode)
    _stub("sglang.srt.server_args", ServerArgs=_Config)
    _stub(
        "sglang.srt.runtime_context",
        exports_expert_balancedness_to_prometheus=lambda *_a, **_k: False,
        get_context=lambda: context,
        get_disagg=lambda: _Config(disaggregation_mode="null"),
        get_observability=lambda: observability,
        get_parallel=lambda: _Config(tp_rank=0, pp_rank=0, moe_ep_rank=0),
        get_schedule=lambda: _Config(enable_priority_scheduling=False, prefill_delayer_max_delay_passes=30),
        get_serving=lambda: serving,
    )
    utils = _stub(
        "sglang.srt.utils",
        get_bool_env_var=lambda name, default="false": os.getenv(name, default).lower() in ("1", "true"),
    )
    utils.__path__ = [f"{srt}/utils"]
    _stub(
        "sglang.srt.utils.nvtx_utils",
        NVTX_SCHEDULER_ENABLED=False,
        profile_range=lambda *_a, **_k: contextlib.nullcontext(),
        scheduler_nvtx_method=lambda *_a, **_k: lambda f: f,
    )
    spec = importlib.util.spec_from_file_location(
        "sglang.srt.observability.metrics_collector", f"{srt}/observability/metrics_collector.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _log_rank(scenario: dict[str, Any], rank: dict[str, Any]) -> None:
    """One scheduler rank's stats, logged by its own ``SchedulerMetricsCollector`` in a process of its own
    (as each rank of a real server is), labelled as the collector's callers label it."""
    collectors = _load_collectors(scenario["model_name"])
    labels = {
        "model_name": scenario["model_name"],
        "engine_type": "unified",
        "tp_rank": rank["tp_rank"],
        "pp_rank": rank["pp_rank"],
        "moe_ep_rank": rank.get("moe_ep_rank", 0),
    }
    if "dp_rank" in rank:
        labels["dp_rank"] = rank["dp_rank"]
    scheduler = collectors.SchedulerMetricsCollector(labels=labels, server_args=_Config())
    stats = collectors.SchedulerStats()
    stats.num_running_reqs = collectors.QueueCount(total=rank["running"])
    stats.num_queue_reqs = collectors.QueueCount(total=rank["queued"])
    for field in (
        "token_usage",
        "cache_hit_rate",
        "kv_used_tokens",
        "kv_available_tokens",
        "kv_evictable_tokens",
        "gen_throughput",
    ):
        setattr(stats, field, rank[field])
    stats.full_token_usage = rank["token_usage"]
    stats.num_used_tokens = rank["kv_used_tokens"]
    stats.spec_accept_length = rank.get("spec_accept_length", 0.0)
    stats.spec_accept_rate = rank.get("spec_accept_rate", 0.0)
    scheduler.log_stats(stats)


def _run(name: str, scenario: dict[str, Any]) -> None:
    """One scenario: this process is its tokenizer; each rank of each phase logs from a process of its
    own. After each phase, the exposition as ``/metrics`` serves it."""
    collectors = _load_collectors(scenario["model_name"])
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess

    labels = collectors.tokenizer_metric_labels()
    tokenizer = collectors.TokenizerMetricsCollector(server_args=_Config(), labels=labels)
    for p, phase in enumerate(scenario["phases"]):
        for request in phase["requests"]:
            if request.get("aborted"):  # the abort is counted as it is sent; the request still finishes
                tokenizer.observe_one_aborted_request(labels)
            stream = request["streaming"]
            tokenizer.observe_time_to_first_token(labels, request["ttft_s"], stream=stream)
            tokenizer.observe_inter_token_latency(
                labels, request["e2e_s"] - request["ttft_s"], request["generated"] - 1
            )
            tokenizer.observe_one_finished_request(
                labels,
                request["prompt"],
                request["generated"],
                request["cached"],
                request["e2e_s"],
                has_grammar=False,
                cached_tokens_details=request.get("cached_by_source"),
                is_streaming=stream,
            )
        for r in range(len(phase["ranks"])):
            subprocess.run([sys.executable, __file__, "--rank", name, str(p), str(r)], check=True)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        (HERE / f"{name}-{phase['name']}.txt").write_bytes(generate_latest(registry))


def main(argv: list[str]) -> int:
    scenarios = json.loads((HERE / "scenarios.json").read_text())
    if len(argv) == 5 and argv[1] == "--rank":  # one rank of one phase
        scenario = scenarios[argv[2]]
        _log_rank(scenario, scenario["phases"][int(argv[3])]["ranks"][int(argv[4])])
        return 0
    if len(argv) == 2:  # one scenario: its own multiprocess folder, set before prometheus_client loads
        _run(argv[1], scenarios[argv[1]])
        return 0
    for name in (key for key in scenarios if not key.startswith("_")):
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(prefix=f"sglang-{name}-")}
        subprocess.run([sys.executable, __file__, name], env=env, check=True)
        print("wrote", name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
