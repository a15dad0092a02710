"""The facts of llama.cpp's real llama-server that sparktui's llama.cpp support relies on
(``tests/support/llama_server.py``: the server built from the sdist, a tiny GGUF with the real vocabulary).

These test the engine, not sparktui: ``/metrics`` is read with prometheus_client's own parser. Prompts
are token-id arrays (no BOS is added: the prompt is exactly the array) and every request sends
``ignore_eos`` with ``n_predict``, so each count is known before the request is sent. The session's
server is shared, so counters are compared as differences; each test waits on conditions with a
deadline and ends within ``TEST_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.llama_server import LlamaModels, LlamaServer, running_llama_server
from tests.support.wait import wait_until

pytestmark = pytest.mark.llamacpp
TEST_TIMEOUT_S = 60.0
SLOTS = 2  # DEFAULT_ARGS: -np 2 -c 4096
SLOT_CTX = 4096 // SLOTS
N_VOCAB = 32_000
BOS = 1


def prompt(length: int, first: int) -> list[int]:
    """``length`` token ids: BOS and then ordinary tokens from ``first`` on (not BOS, EOS or unknown)."""
    return [BOS, *range(first, first + length - 1)]


async def metrics(client: httpx.AsyncClient, server: LlamaServer) -> dict[str, float]:
    """One scrape of ``/metrics``: every sample by name (llama-server's samples carry no labels but the
    per-position speculative ones, absent here). A scrape resets the two throughput gauges."""
    response = await client.get(f"{server.url}/metrics")
    assert response.status_code == 200, response.text
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if not sample.labels
    }
    assert samples, f"no samples in /metrics:\n{response.text[:500]}"
    return samples


async def complete(client: httpx.AsyncClient, server: LlamaServer, tokens: Sequence[int], n_predict: int) -> Any:
    body = {"prompt": list(tokens), "n_predict": n_predict, "ignore_eos": True, "temperature": 0.0}
    response = await client.post(f"{server.url}/completion", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["tokens_evaluated"] == len(tokens)
    assert result["tokens_predicted"] == n_predict
    return result


async def get_json(client: httpx.AsyncClient, server: LlamaServer, path: str) -> Any:
    response = await client.get(f"{server.url}{path}")
    assert response.status_code == 200, f"{path}: {response.status_code} {response.text}"
    return response.json()


def delta(after: dict[str, float], before: dict[str, float], name: str) -> float:
    return after[f"llamacpp:{name}"] - before[f"llamacpp:{name}"]


async def test_prompt_and_generated_token_counters_add_up_to_the_requests(real_llama_server: LlamaServer) -> None:
    """computed + cached prompt tokens = the sum of the prompt lengths; predicted = the sum of n_predict.
    The same prompt twice is served from the slot's KV but for its last token, which is computed again."""
    server = real_llama_server
    repeated = prompt(40, 2000)
    requests = [(prompt(7, 1000), 5), (repeated, 9), (repeated, 16), (prompt(50, 3000), 3)]
    async with asyncio.timeout(TEST_TIMEOUT_S), httpx.AsyncClient(timeout=30.0) as client:
        before = await metrics(client, server)
        results = [await complete(client, server, tokens, n) for tokens, n in requests]
        after = await metrics(client, server)

    assert results[2]["id_slot"] == results[1]["id_slot"], "the repeated prompt went to the other slot"
    assert results[2]["timings"]["cache_n"] == len(repeated) - 1
    assert results[2]["timings"]["prompt_n"] == 1
    computed, cached = delta(after, before, "prompt_tokens_total"), delta(after, before, "prompt_tokens_cached_total")
    assert computed + cached == sum(len(tokens) for tokens, _ in requests)
    assert cached == sum(result["timings"]["cache_n"] for result in results)
    assert computed == sum(result["timings"]["prompt_n"] for result in results)
    assert cached >= len(repeated) - 1
    assert delta(after, before, "tokens_predicted_total") == sum(n for _, n in requests)


@pytest.mark.slow  # 2,000 tokens: 2.5-6 s on 2 busy cores
async def test_generated_tokens_are_counted_when_a_request_ends_while_decode_calls_count_as_it_runs(
    real_llama_server: LlamaServer,
) -> None:
    """While a long request runs, ``n_decode_total`` rises and ``tokens_predicted_total`` stays put; at its
    end the whole ``n_predict`` is added at once. One request alone: one decode for its prompt, then one
    per generated token after the first."""
    server = real_llama_server
    tokens, n_predict = prompt(8, 5000), SLOT_CTX - 48
    async with asyncio.timeout(TEST_TIMEOUT_S), httpx.AsyncClient(timeout=30.0) as client:
        before = await metrics(client, server)
        request = asyncio.create_task(complete(client, server, tokens, n_predict))

        async def processing() -> bool:
            slots = await get_json(client, server, "/slots")
            return any(slot["is_processing"] for slot in slots)

        await wait_until(processing, 20.0, what="a slot processing the long request")
        during = await metrics(client, server)
        while_running: list[dict[str, float]] = []

        async def decodes_counted_while_running() -> bool:
            sample = await metrics(client, server)
            if await processing() and not request.done():  # read after the scrape: it ran through it
                while_running.append(sample)
            return any(delta(s, during, "n_decode_total") > 0 for s in while_running)

        await wait_until(decodes_counted_while_running, 20.0, what="n_decode_total rising during the request")
        result = await request
        after = await metrics(client, server)

    assert result["tokens_predicted"] == n_predict
    for sample in while_running:
        assert delta(sample, before, "tokens_predicted_total") == 0
    assert delta(after, before, "tokens_predicted_total") == n_predict
    assert delta(after, before, "n_decode_total") == n_predict  # 1 prompt decode + (n_predict - 1)
    assert delta(after, before, "prompt_tokens_total") + delta(after, before, "prompt_tokens_cached_total") == len(
        tokens
    )


async def test_slots_props_and_models_describe_the_server(real_llama_server: LlamaServer) -> None:
    server = real_llama_server
    async with asyncio.timeout(TEST_TIMEOUT_S), httpx.AsyncClient(timeout=30.0) as client:
        health = await get_json(client, server, "/health")
        props = await get_json(client, server, "/props")
        slots = await get_json(client, server, "/slots")
        models = await get_json(client, server, "/v1/models")

    assert health == {"status": "ok"}
    assert props["total_slots"] == SLOTS
    assert props["default_generation_settings"]["n_ctx"] == SLOT_CTX
    assert props["is_sleeping"] is False
    assert props["endpoint_slots"] is True
    assert props["endpoint_metrics"] is True
    assert props["build_info"] == "b0-unknown"  # the sdist carries no git commit
    assert props["model_path"].endswith("tiny.gguf")

    assert sorted(slot["id"] for slot in slots) == list(range(SLOTS))
    for slot in slots:
        assert slot["n_ctx"] == SLOT_CTX
        assert slot["is_processing"] is False
        assert slot["speculative"] is False

    [model] = models["data"]
    assert model["owned_by"] == "llamacpp"
    assert model["meta"]["n_vocab"] == N_VOCAB
    assert model["meta"]["n_ctx_train"] == 2048  # tests/support/tiny_gguf.py's context length
    assert models["models"][0]["details"]["format"] == "gguf"


async def test_every_scrape_resets_the_throughput_gauges(real_llama_server: LlamaServer) -> None:
    """``prompt_tokens_seconds`` and ``predicted_tokens_seconds`` average over the window since the
    previous scrape, whoever made it: a second scrape right after a first reads 0."""
    server = real_llama_server
    async with asyncio.timeout(TEST_TIMEOUT_S), httpx.AsyncClient(timeout=30.0) as client:
        await metrics(client, server)
        await complete(client, server, prompt(64, 7000), 32)
        first = await metrics(client, server)
        second = await metrics(client, server)

    assert first["llamacpp:prompt_tokens_seconds"] > 0
    assert first["llamacpp:predicted_tokens_seconds"] > 0
    assert second["llamacpp:prompt_tokens_seconds"] == 0
    assert second["llamacpp:predicted_tokens_seconds"] == 0
    # The counters are not windows: the second scrape still has them.
    assert second["llamacpp:tokens_predicted_total"] == first["llamacpp:tokens_predicted_total"] > 0


WAKE_LINE = "exiting sleeping state"


async def test_an_idle_server_sleeps_and_only_slots_wakes_it(llama_models: LlamaModels, tmp_path: Path) -> None:
    """With ``--sleep-idle-seconds 1`` the model is freed after a second idle. ``/health``, ``/props``,
    ``/metrics`` and ``/v1/models`` answer without waking it; ``GET /slots`` wakes it."""
    log = tmp_path / "llama-server.log"
    async with (
        asyncio.timeout(TEST_TIMEOUT_S),
        running_llama_server(llama_models.tiny, log, "--sleep-idle-seconds", "1") as server,
        httpx.AsyncClient(timeout=30.0) as client,
    ):
        await complete(client, server, prompt(16, 9000), 4)

        async def sleeping() -> bool:
            return bool((await get_json(client, server, "/props"))["is_sleeping"])

        await wait_until(sleeping, 20.0, what="the server going to sleep", detail=lambda: server.log_text()[-2000:])
        assert await get_json(client, server, "/health") == {"status": "ok"}
        asleep = await metrics(client, server)
        assert asleep["llamacpp:tokens_predicted_total"] == 4  # the counters from before it slept
        assert (await get_json(client, server, "/v1/models"))["data"]
        assert await sleeping()
        assert WAKE_LINE not in server.log_text()

        await get_json(client, server, "/slots")
        await wait_until(lambda: WAKE_LINE in server.log_text(), 10.0, what=f"{WAKE_LINE!r} in the log")
