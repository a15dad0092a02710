"""A NIM instance end to end: ``sparktui snapshot`` and ``check`` against a real HTTP server on 127.0.0.1
at NIM's routes (``tests/support/nim_server.py``) whose ``/v1/metrics`` are real vLLM 0.33 scrapes, as
NIM 2.x passes them through, or under NIM 1.x's names. The numbers are checked against the answers of
the scrapes' ``expected.json``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_cli import run_sparktui, snapshot_instance
from tests.support.engine_server import EngineServer, one_node_config
from tests.support.nim_server import RELEASE, as_nim_1x, nim_server

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm-0.33" / "mtp2-steady"
EXPECTED: dict[str, Any] = json.loads((DATA / "expected.json").read_text())


def _server(nim_1x: bool = False) -> EngineServer:
    bodies = [(DATA / name).read_text() for name in ("scrape-000.prom", "scrape-029.prom")]
    return nim_server([as_nim_1x(b) for b in bodies] if nim_1x else bodies, EXPECTED["model_name"])


def _config(port: int) -> str:
    return one_node_config(port, "nim") + "canary = false\n"


def _sparktui(tmp_path: Path, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    config_file = tmp_path / "nim.toml"
    config_file.write_text(_config(port))
    return run_sparktui(config_file, *args)


def _instance(tmp_path: Path, server: EngineServer) -> dict[str, Any]:
    config_file = tmp_path / "nim.toml"
    config_file.write_text(_config(server.port))
    return snapshot_instance(config_file)


@pytest.mark.parametrize("nim_1x", [False, True], ids=["2.x", "1.x"])
def test_a_nim_instance_shows_its_vllms_numbers(tmp_path: Path, nim_1x: bool) -> None:
    with _server(nim_1x).serving() as server:
        instance = _instance(tmp_path, server)
    last = EXPECTED["last_scrape"]
    window = EXPECTED["window_first_to_last"]["total"]
    assert (instance["engine"], instance["engine_kind"], instance["version"]) == ("NIM", "nim", RELEASE)
    assert instance["status"]["state"] == "up", instance["status"]
    assert (instance["running"], instance["waiting"]) == (
        last["num_requests_running_sum"],
        last["num_requests_waiting_sum"],
    )
    assert instance["kv_usage"] == pytest.approx(last["kv_cache_usage_perc_max_over_engines"])
    rates = instance["rates"]
    # the two scrapes are the fixture's first and last, 29 s of tokens apart, read rates["seconds"] apart
    generated = window["generation_tokens_per_s"] * window["seconds"]
    assert rates["generation_tokens_per_s"] * rates["seconds"] == pytest.approx(generated, rel=1e-5)


def test_nim_is_asked_at_its_own_routes_only(tmp_path: Path) -> None:
    with _server().serving() as server:
        check = _sparktui(tmp_path, server.port, "check", "--no-canary")
        _instance(tmp_path, server)
    assert check.returncode == 0, check.stdout + check.stderr
    assert {"/v1/health/ready", "/v1/metrics", "/v1/version"} <= set(server.asked)
    assert not any(path.startswith(("/health", "/metrics", "/version")) for path in server.asked)


def test_a_nim_live_but_not_ready_is_loading(tmp_path: Path) -> None:
    with _server().serving() as server:
        server.ready = False
        instance = _instance(tmp_path, server)
    assert instance["status"]["state"] == "loading", instance["status"]
