"""An Ollama instance end to end: ``sparktui snapshot --json`` and ``check`` against a real HTTP server on
127.0.0.1 answering Ollama's documented JSON (``tests/support/ollama_server.py``): its models, those it
holds and how, a model held past its keep-alive flagged, "–" for every rate with the reason, and nothing
asked that loads a model (no POST at all, canary on: none is sent to an Ollama)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.support.engine_cli import run_sparktui, snapshot_instance
from tests.support.engine_server import one_node_config
from tests.support.ollama_server import VERSION, Model, OllamaServer

GIB = 2**30
# What /api/ps and /api/generate would load a model by: nothing sparktui asks.
LOADS = ("/api/generate", "/api/chat", "/api/embed", "/api/show", "/v1/completions", "/v1/chat/completions")


def _models(*, overdue: bool = False) -> list[Model]:
    return [
        Model("gemma3:latest", size=6 * GIB, size_vram=5 * GIB, context_length=4096, expires_in_s=240.0),
        Model("qwen3:8b", size=5 * GIB, expires_in_s=-600.0 if overdue else None),
        Model("llama3.2:1b", size=1 * GIB),
    ]


def _config(tmp_path: Path, port: int) -> Path:
    config_file = tmp_path / "ollama.toml"
    config_file.write_text(one_node_config(port, "ollama"))  # the fleet's canary on, as by default
    return config_file


def _instance(tmp_path: Path, server: OllamaServer) -> dict[str, Any]:
    return snapshot_instance(_config(tmp_path, server.port))


def _sparktui(tmp_path: Path, server: OllamaServer, *args: str) -> subprocess.CompletedProcess[str]:
    return run_sparktui(_config(tmp_path, server.port), *args)


def test_an_ollama_shows_its_models_and_what_each_holds(tmp_path: Path) -> None:
    with OllamaServer(_models()).serving() as server:
        instance = _instance(tmp_path, server)
        text = _sparktui(tmp_path, server, "snapshot", "--interval", "0.5")
    assert (instance["engine"], instance["engine_kind"], instance["version"]) == ("Ollama", "ollama", VERSION)
    assert instance["status"]["state"] == "up", instance["status"]
    models = {m["id"]: m for m in instance["models"]}
    assert [m["load"] for m in instance["models"]] == ["loaded", "unloaded", "unloaded"]
    gemma = models["gemma3:latest"]
    assert (gemma["size_bytes"], gemma["gpu_bytes"], gemma["context_tokens"]) == (6 * GIB, 5 * GIB, 4096)
    assert gemma["overdue_s"] is None and gemma["expires_at"].endswith("-07:00")
    assert models["qwen3:8b"]["size_bytes"] is None  # unloaded: /api/ps says nothing of it
    # no counters: "–" with the reason, never a zero
    assert (instance["running"], instance["waiting"]) == (None, None)
    assert instance["lacks"]["requests"] == "Ollama exports no request or token counters"
    rates = instance["rates"]
    assert rates is None or rates["generation_tokens_per_s"] is None
    assert "1 of 3 loaded (gemma3:latest)" in instance["status"]["reasons"][0]
    assert text.returncode == 0, text.stdout + text.stderr
    assert "gemma3:latest loaded (6.0 GiB, 83% in GPU memory, context 4096)" in text.stdout
    assert "generation –   prompt –   finished –   (Ollama exports no request or token counters)" in text.stdout


def test_a_model_held_past_its_keep_alive_is_overdue(tmp_path: Path) -> None:
    with OllamaServer(_models(overdue=True)).serving() as server:
        instance = _instance(tmp_path, server)
        check = _sparktui(tmp_path, server, "check")
    models = {m["id"]: m for m in instance["models"]}
    assert models["qwen3:8b"]["load"] == "loaded"
    assert models["qwen3:8b"]["overdue_s"] >= 600 - 5
    assert models["gemma3:latest"]["overdue_s"] is None
    assert instance["status"]["state"] == "degraded", instance["status"]
    (reason,) = instance["status"]["reasons"]
    assert "qwen3:8b still loaded holding 5.0 GiB, 10m" in reason and "past its keep-alive" in reason
    assert check.returncode == 1, check.stdout + check.stderr


def test_polling_an_ollama_loads_nothing(tmp_path: Path) -> None:
    with OllamaServer(_models()).serving() as server:
        check = _sparktui(tmp_path, server, "check")
        _instance(tmp_path, server)
        asked = list(server.asked)
        loaded = [m.name for m in server.models if m.expires_in_s is not None]
    assert check.returncode == 0, check.stdout + check.stderr
    assert {"/", "/api/ps", "/api/version"} <= set(asked)
    assert not any(path.startswith("POST") for path in asked), asked
    assert not any(path.startswith(LOADS) for path in asked), asked
    assert loaded == ["gemma3:latest"]


def test_an_ollama_with_nothing_loaded(tmp_path: Path) -> None:
    models = [Model("qwen3:8b", size=5 * GIB)]
    with OllamaServer(models).serving() as server:
        instance = _instance(tmp_path, server)
        text = _sparktui(tmp_path, server, "snapshot", "--interval", "0.5")
    assert instance["status"]["state"] == "up", instance["status"]
    assert [(m["id"], m["load"]) for m in instance["models"]] == [("qwen3:8b", "unloaded")]
    assert "no model loaded: its numbers are its loaded models'" in text.stdout


def test_an_ollama_whose_ps_is_not_json_says_so(tmp_path: Path) -> None:
    with OllamaServer(_models()).serving() as server:
        server.ps_body = b"\xff\xfe not json"
        instance = _instance(tmp_path, server)
    assert instance["status"]["state"] == "degraded", instance["status"]
    assert "/api/ps: not Ollama's list of running models" in instance["status"]["reasons"][0]
