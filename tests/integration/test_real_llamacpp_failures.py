"""llama.cpp's own failure rules (sparktui/engines/llamacpp/failures.toml) against the lines the real
llama-server prints (``tests/support/llama_server.py``: the CPU build of the sdist sparktui runs).

Each test provokes a failure (a model file that is missing or not GGUF, a port already taken, the KV
cache under a memory limit, a prompt longer than the context, an input longer than the batch, a slot
whose context fills) and asserts that a line of the server's real output matches the rule's regex, by
the rule's id, so a change of wording in a new llama.cpp build fails here. The one rule line a CPU build
cannot print (CUDA's ``cudaMalloc failed``) is matched against the source's format string in
tests/unit/test_engine_failures.py.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from sparktui.config import load_catalogue
from tests.support.llama_server import LlamaModels, LlamaServer, require_llama_server, running_llama_server
from tests.support.vllm_server import free_port

pytestmark = pytest.mark.llamacpp
CATALOGUE = load_catalogue()
EXIT_TIMEOUT_S = 60.0  # a server that fails at start exits within a second
REQUEST_TIMEOUT_S = 60.0
# Under this address-space limit the tiny model loads, and a KV cache of -c 8,000,000 tokens (about
# 4 GB) cannot be allocated. One HTTP thread and one malloc arena keep the rest of the process small.
MEMORY_LIMIT_KIB = 1_500_000
HUGE_CONTEXT = "8000000"


def matching(rule_id: str, text: str) -> list[str]:
    """The lines of ``text`` that one of the rule's patterns matches."""
    rule = CATALOGUE.rule(rule_id)
    assert rule.log is not None and rule.engine == "llamacpp"
    return [line for line in text.splitlines() if any(p.search(line) for p in rule.log.patterns)]


def failed_start(log: Path, *args: str, model: Path, limit_kib: int | None = None) -> str:
    """Start llama-server to fail (``args`` after the model and a free port), wait for it to exit, and
    answer its output; it must have exited with an error."""
    binary, _ = require_llama_server()
    command = [str(binary), "-m", str(model), "--host", "127.0.0.1", "-t", "1", "-tb", "1", *args]
    if "--port" not in args:
        command += ["--port", str(free_port())]
    if limit_kib is not None:
        command = ["bash", "-c", f'ulimit -v {limit_kib} && exec "$@"', "llama-server", *command]
    env = {**os.environ, "LD_LIBRARY_PATH": str(binary.parent), "MALLOC_ARENA_MAX": "1"}
    with log.open("wb") as out:
        done = subprocess.run(
            command,
            check=False,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            timeout=EXIT_TIMEOUT_S,
        )
    text = log.read_text(encoding="utf-8", errors="replace")
    assert done.returncode != 0, f"llama-server did not fail:\n{text[-3000:]}"
    return text


def test_a_missing_model_file(tmp_path: Path) -> None:
    text = failed_start(tmp_path / "log", model=tmp_path / "gone.gguf")
    (line,) = matching("llamacpp-model-file-missing", text)[:1]
    assert "(No such file or directory)" in line
    assert matching("llamacpp-model-load-failed", text)
    # llama-server's own start line and its error lines mark the attempt for the crash-loop finding.
    marks = CATALOGUE.marks("llamacpp")
    assert [line for line in text.splitlines() if marks.attempt_start.search(line)]
    errors = [line for line in text.splitlines() if marks.error.search(line)]
    assert any("exiting due to model loading error" in line for line in errors)


def test_a_model_file_that_is_not_gguf(tmp_path: Path) -> None:
    model = tmp_path / "model.safetensors"
    model.write_text('{"__metadata__": {}}')
    text = failed_start(tmp_path / "log", model=model)
    assert matching("llamacpp-model-not-gguf", text)
    assert matching("llamacpp-model-load-failed", text)


def test_a_port_already_taken(tmp_path: Path, llama_models: LlamaModels) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        text = failed_start(tmp_path / "log", "--port", str(port), model=llama_models.tiny)
    (line,) = matching("llamacpp-port-in-use", text)
    rule = CATALOGUE.rule("llamacpp-port-in-use")
    assert rule.log is not None
    found = rule.log.any[0].search(line)
    assert rule.title_for(found) == f"llama-server could not bind its port {port}"


def test_a_kv_cache_that_does_not_fit_in_memory(tmp_path: Path, llama_models: LlamaModels) -> None:
    text = failed_start(
        tmp_path / "log",
        "-np",
        "1",
        "-c",
        HUGE_CONTEXT,
        "--threads-http",
        "1",
        model=llama_models.tiny,
        limit_kib=MEMORY_LIMIT_KIB,
    )
    lines = matching("llamacpp-out-of-memory", text)
    assert any("failed to allocate" in line for line in lines), text[-3000:]


async def post(server: LlamaServer, path: str, body: dict[str, object]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S) as client:
        return await client.post(f"{server.url}{path}", json=body)


async def wait_for_line(server: LlamaServer, rule_id: str) -> list[str]:
    """The server's lines the rule matches, once there is one (the log is written as it goes)."""
    for _ in range(200):
        found = matching(rule_id, server.log_text())
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"no line for {rule_id}:\n{server.log_text()[-3000:]}")


async def test_a_prompt_longer_than_the_slots_context(tmp_path: Path, llama_models: LlamaModels) -> None:
    async with running_llama_server(llama_models.tiny, tmp_path / "log", "-np", "1", "-c", "256") as server:
        refused = await post(server, "/completion", {"prompt": list(range(100, 700)), "n_predict": 4})
        assert refused.status_code == 400, refused.text
        (line,) = await wait_for_line(server, "llamacpp-context-exceeded")
        rule = CATALOGUE.rule("llamacpp-context-exceeded")
        assert rule.log is not None
        assert (
            rule.title_for(rule.log.any[0].search(line))
            == "Requests longer than a slot's context (256 tokens) are refused"
        )
        # A request that fits, asked for more tokens than its slot has left: its answer is cut off.
        body = {"prompt": [1, 100], "n_predict": 400, "ignore_eos": True}
        assert (await post(server, "/completion", body)).status_code == 200
        assert any("truncated = 1" in line for line in await wait_for_line(server, "llamacpp-context-full"))


async def test_a_context_shift(tmp_path: Path, llama_models: LlamaModels) -> None:
    args = ("-np", "1", "-c", "256", "--context-shift")
    async with running_llama_server(llama_models.tiny, tmp_path / "log", *args) as server:
        body = {"prompt": [1, 100], "n_predict": 400, "ignore_eos": True}
        assert (await post(server, "/completion", body)).status_code == 200
        lines = await wait_for_line(server, "llamacpp-context-full")
        assert any("slot context shift" in line for line in lines)


async def test_an_input_longer_than_the_physical_batch(tmp_path: Path, llama_models: LlamaModels) -> None:
    args = ("-np", "1", "-c", "256", "--embeddings", "--pooling", "mean")
    async with running_llama_server(llama_models.tiny, tmp_path / "log", *args) as server:
        refused = await post(server, "/v1/embeddings", {"input": "hello world " * 200})
        assert refused.status_code >= 400, refused.text
        (line,) = await wait_for_line(server, "llamacpp-batch-too-small")
        assert "current batch size: 256" in line
