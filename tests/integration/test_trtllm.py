"""A TensorRT-LLM instance end to end: ``sparktui snapshot`` and ``check`` against a real HTTP server on
127.0.0.1 at ``trtllm-serve``'s routes (``tensorrt_llm/serve/openai_server.py``) whose
``/prometheus/metrics`` are the expositions of ``tests/data/trtllm/``. The numbers are checked against
the scenario they were written from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_cli import run_sparktui, snapshot_instance
from tests.support.engine_server import EngineServer, one_node_config

DATA = Path(__file__).resolve().parents[1] / "data" / "trtllm"
SCENARIOS: dict[str, Any] = json.loads((DATA / "scenarios.json").read_text())
VERSION = "1.2.0rc2"


def _server(scenario: str = "spec") -> EngineServer:
    phases = SCENARIOS[scenario]["phases"]
    return EngineServer(
        bodies=[(DATA / f"{scenario}-{p['name']}.txt").read_text() for p in phases],
        model=SCENARIOS[scenario]["model"],
        metrics_path="/prometheus/metrics",
        health={"/health": b""},
        pages={"/version": {"version": VERSION}, "/metrics": []},
        filterable=True,
        owned_by="tensorrt_llm",
    )


def _config(tmp_path: Path, server: EngineServer) -> Path:
    config_file = tmp_path / "trtllm.toml"
    config_file.write_text(one_node_config(server.port, "trtllm"))
    return config_file


def test_a_trtllm_instance_shows_the_scenarios_numbers(tmp_path: Path) -> None:
    with _server().serving() as server:
        instance = snapshot_instance(_config(tmp_path, server))
    (_t0, t1) = SCENARIOS["spec"]["phases"]
    stats = t1["iteration"]
    assert (instance["engine"], instance["engine_kind"], instance["version"]) == ("TensorRT-LLM", "trtllm", VERSION)
    assert instance["status"]["state"] == "up", instance["status"]
    assert instance["model_name"] == SCENARIOS["spec"]["model"]  # from /v1/models: the labels say "undefined"
    assert (instance["running"], instance["waiting"]) == (stats["numActiveRequests"], stats["numQueuedRequests"])
    kv = stats["kvCacheStats"]
    assert instance["kv_usage"] == kv["usedNumBlocks"] / kv["maxNumBlocks"]
    rates = instance["rates"]
    assert rates["generation_tokens_per_s"] * rates["seconds"] == pytest.approx(
        sum(r["generated"] for r in t1["requests"])
    )
    spec = rates["spec_decode"]
    drafts = sum(r["drafted_per_position"][0] for r in t1["requests"])
    assert spec["per_position"][0] == pytest.approx(sum(r["accepted_per_position"][0] for r in t1["requests"]) / drafts)


def test_trtllm_is_never_asked_its_json_metrics_which_would_drain_the_iteration_stats(tmp_path: Path) -> None:
    with _server().serving() as server:
        config_file = _config(tmp_path, server)
        check = run_sparktui(config_file, "check", "--no-canary")
        snapshot_instance(config_file)
    assert check.returncode == 0, check.stdout + check.stderr
    assert {"/health", "/version"} <= set(server.asked)
    assert not any(path == "/metrics" or path.startswith("/metrics?") for path in server.asked)
    metrics = [path for path in server.asked if path.startswith("/prometheus/metrics")]
    assert metrics and all("name%5B%5D=trtllm_" in path for path in metrics)


def test_an_unavailable_trtllm_is_down(tmp_path: Path) -> None:
    with _server().serving() as server:
        server.ready = False
        instance = snapshot_instance(_config(tmp_path, server))
    assert instance["status"]["state"] == "down", instance["status"]
