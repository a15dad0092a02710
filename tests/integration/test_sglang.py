"""An SGLang instance end to end: ``sparktui snapshot`` and ``check`` against a real HTTP server on
127.0.0.1 that answers SGLang's routes with expositions SGLang's own metrics code wrote
(``tests/support/sglang_server.py``). The numbers are checked against the scenario those expositions
come from (``tests/data/sglang-0.5.23/scenarios.json``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sparktui.model.units import fmt_pct
from tests.support.engine_cli import run_sparktui, snapshot_instance
from tests.support.sglang_server import DATA, VERSION, SglangServer, config

SCENARIOS: dict[str, Any] = json.loads((DATA / "scenarios.json").read_text())


def _sparktui(config_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_sparktui(config_file, *args)


def _snapshot(server: SglangServer, tmp_path: Path) -> dict[str, Any]:
    config_file = tmp_path / "sglang.toml"
    config_file.write_text(config(server.port))
    return snapshot_instance(config_file)


def test_an_sglang_instance_shows_the_scenarios_numbers_in_snapshot_json(tmp_path: Path) -> None:
    with SglangServer("single").serving() as server:
        instance = _snapshot(server, tmp_path)
    (_t0, t1) = SCENARIOS["single"]["phases"]
    (rank,) = t1["ranks"]
    assert (instance["engine"], instance["engine_kind"], instance["version"]) == ("SGLang", "sglang", VERSION)
    assert instance["status"]["state"] == "up", instance["status"]
    assert instance["model_name"] == SCENARIOS["single"]["model_name"]
    assert (instance["running"], instance["waiting"], instance["kv_usage"]) == (
        rank["running"],
        rank["queued"],
        rank["token_usage"],
    )
    pool = rank["kv_used_tokens"] + rank["kv_available_tokens"] + rank["kv_evictable_tokens"]
    assert instance["kv_capacity_tokens"] == pool
    rates = instance["rates"]
    seconds = rates["seconds"]
    assert rates["generation_tokens_per_s"] == pytest.approx(sum(r["generated"] for r in t1["requests"]) / seconds)
    assert rates["prompt_tokens_per_s"] == pytest.approx(sum(r["prompt"] for r in t1["requests"]) / seconds)
    assert rates["requests_finished_per_s"] == pytest.approx(len(t1["requests"]) / seconds)
    assert rates["latency"]["ttft"]["count"] == len(t1["requests"])
    assert instance["lacks"]["mfu"].startswith("SGLang exports no")


def test_polling_asks_ready_never_the_health_that_runs_a_generation(tmp_path: Path) -> None:
    with SglangServer("single").serving() as server:
        config_file = tmp_path / "sglang.toml"
        config_file.write_text(config(server.port))
        check = _sparktui(config_file, "check", "--no-canary")
        _snapshot(server, tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "/ready" in server.asked and "/server_info" in server.asked
    assert not any(path.startswith(("/health", "/version", "/slots", "/props")) for path in server.asked)
    metrics = [path for path in server.asked if path.startswith("/metrics")]
    assert metrics and all("name%5B%5D=sglang%3A" in path for path in metrics)  # only the series it reads


def test_a_server_still_starting_is_loading_not_down(tmp_path: Path) -> None:
    with SglangServer("single").serving() as server:
        server.ready = False
        instance = _snapshot(server, tmp_path)
    assert instance["status"]["state"] == "loading", instance["status"]


def test_speculative_decoding_is_shown_as_sglang_reports_it(tmp_path: Path) -> None:
    (rank,) = SCENARIOS["spec"]["phases"][0]["ranks"]
    with SglangServer("spec").serving() as server:
        instance = _snapshot(server, tmp_path)
        config_file = tmp_path / "sglang.toml"
        text = _sparktui(config_file, "snapshot", "--interval", "0.5")
    assert instance["reported"] == {
        "spec_accept_length": rank["spec_accept_length"],
        "spec_accept_rate": rank["spec_accept_rate"],
    }
    assert instance["rates"]["spec_decode"] is None  # no counts to window
    assert text.returncode == 0, text.stderr
    shown = f"acceptance {fmt_pct(rank['spec_accept_rate'])}   mean length {rank['spec_accept_length']:.2f}"
    assert f"spec decode (as SGLang reports it): {shown}   per draft position: –" in text.stdout, text.stdout
