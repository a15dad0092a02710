"""An Ollama instance end to end: ``sparktui snapshot --json`` and ``check`` against a real HTTP server on
127.0.0.1 answering Ollama's documented JSON (``tests/support/ollama_server.py``): its models, those it
holds and how, a model held past its keep-alive flagged, "–" for every rate with the reason, nothing
asked that loads a model, and the canary: only to a model it holds, asking to keep it as long as it had
left, its TTFT and decode rate Ollama's own (the answer's load and prompt evaluation, nanoseconds)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.support.engine_cli import run_sparktui, snapshot_instance
from tests.support.engine_server import one_node_config
from tests.support.ollama_server import FOREVER_S, GENERATED, VERSION, Model, OllamaServer

GIB = 2**30
# What would load a model: nothing sparktui asks but the canary's /api/generate, to a loaded model.
LOADS = ("/api/chat", "/api/embed", "/api/show", "/v1/completions", "/v1/chat/completions")
MS = 1_000_000  # nanoseconds
# A scenario's answer (docs.ollama.com/api/generate's fields): its durations, so its times are known.
ANSWER = {
    **GENERATED,
    "total_duration": 400 * MS,
    "load_duration": 20 * MS,
    "prompt_eval_count": 5,
    "prompt_eval_duration": 130 * MS,
    "eval_count": 8,
    "eval_duration": 250 * MS,
}


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


def test_polling_an_ollama_loads_nothing_and_its_canary_keeps_the_expiry(tmp_path: Path) -> None:
    with OllamaServer(_models(overdue=True)).serving() as server:
        check = _sparktui(tmp_path, server, "check")
        _instance(tmp_path, server)
        asked = list(server.asked)
        loaded = [m.name for m in server.models if m.expires_in_s is not None]
        generated, named_loaded = list(server.generated), list(server.named_loaded)
    assert check.returncode == 1, check.stdout + check.stderr  # qwen3:8b is overdue
    assert {"/", "/api/ps", "/api/version"} <= set(asked)
    assert not any(path.startswith(LOADS) for path in asked), asked
    assert {path for path in asked if path.startswith("POST")} == {"POST /api/generate"}, asked
    # Each canary named the one model loaded and not overdue, asking for what it had left of its 240 s.
    assert generated and all(named_loaded), (generated, named_loaded)
    assert {payload["model"] for payload in generated} == {"gemma3:latest"}
    keep_alives = [payload["keep_alive"] for payload in generated]
    assert all(isinstance(k, int) and 240 - 10 <= k <= 240 for k in keep_alives), keep_alives
    assert loaded == ["gemma3:latest", "qwen3:8b"]


def test_the_canary_shows_ollamas_own_ttft_and_decode_rate(tmp_path: Path) -> None:
    with OllamaServer(_models()).serving() as server:
        server.answer = ANSWER
        instance = _instance(tmp_path, server)
        text = _sparktui(tmp_path, server, "snapshot", "--interval", "0.5")
    last = instance["canary"]["last"]
    assert last["problem"] is None and last["engine_timed"] is True
    assert last["ttft_s"] == (ANSWER["load_duration"] + ANSWER["prompt_eval_duration"]) / 1e9  # type: ignore[operator]
    assert last["decode_tokens_per_s"] == ANSWER["eval_count"] / (ANSWER["eval_duration"] / 1e9)  # type: ignore[operator]
    assert "last answered: TTFT 150 ms, decode 32.0 tok/s (the engine's own timing)" in text.stdout, text.stdout


def test_a_model_held_for_ever_is_asked_to_stay_for_ever(tmp_path: Path) -> None:
    models = [Model("gemma3:latest", size=6 * GIB, expires_in_s=FOREVER_S), Model("qwen3:8b", size=5 * GIB)]
    with OllamaServer(models).serving() as server:
        _instance(tmp_path, server)
        generated = list(server.generated)
    assert [(payload["model"], payload["keep_alive"]) for payload in generated] == [("gemma3:latest", -1)]


def test_an_ollama_with_nothing_loaded(tmp_path: Path) -> None:
    models = [Model("qwen3:8b", size=5 * GIB)]
    with OllamaServer(models).serving() as server:
        instance = _instance(tmp_path, server)
        text = _sparktui(tmp_path, server, "snapshot", "--interval", "0.5")
        asked = list(server.asked)
    assert not any(path.startswith("POST") for path in asked), asked  # no canary: it would load the model
    assert instance["status"]["state"] == "up", instance["status"]
    assert [(m["id"], m["load"]) for m in instance["models"]] == [("qwen3:8b", "unloaded")]
    assert "no model loaded: its numbers are its loaded models'" in text.stdout


def test_an_ollama_whose_ps_is_not_json_says_so(tmp_path: Path) -> None:
    with OllamaServer(_models()).serving() as server:
        server.ps_body = b"\xff\xfe not json"
        instance = _instance(tmp_path, server)
    assert instance["status"]["state"] == "degraded", instance["status"]
    assert "/api/ps: not Ollama's list of running models" in instance["status"]["reasons"][0]
