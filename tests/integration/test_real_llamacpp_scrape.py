"""sparktui's reading of llama.cpp's real llama-server (``sparktui.engines.llamacpp.scrape``) against
the requests that drove it: the counts each request implies (token-id prompts with ``ignore_eos`` and
``n_predict``, so they are exact) and the server's own per-request ``timings``. The engine's facts
themselves are ``test_real_llamacpp.py``'s."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from sparktui.engines.llamacpp.scrape import ENDED, normalise, read_props, read_slots
from sparktui.model.counters import CounterHistory, flatten
from sparktui.model.derive import derive_rates
from sparktui.model.promtext import parse
from sparktui.model.scrape import ModelScrape, Sleep
from tests.integration.test_real_llamacpp import TEST_TIMEOUT_S, complete, prompt
from tests.support.llama_server import LlamaServer
from tests.support.wait import wait_until

pytestmark = pytest.mark.llamacpp
MODEL = "tiny"


async def read(client: httpx.AsyncClient, server: LlamaServer) -> ModelScrape:
    """One poll as sparktui reads it: ``/metrics``, then ``/slots`` and ``/props``."""
    expo = parse((await client.get(f"{server.url}/metrics")).text)
    found_slots = read_slots((await client.get(f"{server.url}/slots")).content)
    props = read_props((await client.get(f"{server.url}/props")).content)
    (model,) = normalise(expo, MODEL, slots=found_slots, props=props).models.values()
    return model


async def test_the_window_counts_the_prompt_and_generated_tokens_of_the_requests_in_it(
    real_llama_server: LlamaServer,
) -> None:
    server = real_llama_server
    requests = [(prompt(12, 4000), 30), (prompt(20, 5000), 45), (prompt(12, 4000), 7)]  # the last one is cached
    history = CounterHistory()
    async with asyncio.timeout(TEST_TIMEOUT_S), httpx.AsyncClient(timeout=30.0) as client:
        history.add(0.0, flatten(await read(client, server)))
        timings = [(await complete(client, server, tokens, n))["timings"] for tokens, n in requests]
        latest = await read(client, server)
    history.add(10.0, flatten(latest))
    deltas = history.window()
    assert deltas is not None
    rates = derive_rates(deltas, latest)
    assert rates is not None and rates.seconds == 10.0
    assert rates.generation_tokens_per_s is not None and rates.prompt_tokens_per_s is not None
    assert rates.generation_tokens_per_s * 10.0 == pytest.approx(30 + 45 + 7)
    assert rates.prompt_tokens_per_s * 10.0 == pytest.approx(12 + 20 + 12)
    computed = sum(t["prompt_n"] for t in timings)
    cached = sum(t["cache_n"] for t in timings)
    assert deltas.get("prompt_by_source:local_compute") == pytest.approx(computed)
    assert deltas.get("prompt_tokens_cached") == pytest.approx(cached) and cached >= 11  # the repeat
    assert (latest.running, latest.waiting) == (0, 0)
    assert latest.sleep is Sleep.AWAKE


async def test_a_running_request_is_the_context_in_use_and_its_tokens_count_when_it_ends(
    real_llama_server: LlamaServer,
) -> None:
    server = real_llama_server
    capacity = 2 * 2048  # DEFAULT_ARGS: -np 2 -c 4096
    async with asyncio.timeout(TEST_TIMEOUT_S), httpx.AsyncClient(timeout=30.0) as client:
        before = await read(client, server)
        running = asyncio.create_task(complete(client, server, prompt(10, 6000), 1500))
        seen: list[ModelScrape] = []

        async def busy() -> bool:
            seen.append(await read(client, server))
            return seen[-1].running == 1

        await wait_until(busy, TEST_TIMEOUT_S, what="the request running", interval_s=0.01)
        during = seen[-1]
        await running
        after = await read(client, server)
    # While it runs, its sequence (10 prompt tokens, then what it generated) is the context in use.
    in_use = during.kv_usage_by_engine["0"] * capacity
    assert 10 <= round(in_use) <= 10 + 1500
    # llama-server counts its tokens when it ends; its slot says how many so far, and sparktui counts them.
    assert during.counters[ENDED] == before.counters[ENDED]
    live = during.counters["generation_tokens"] - before.counters["generation_tokens"]
    assert live == round(in_use) - 10 or live == round(in_use) - 10 + 1  # its sequence: 10 prompt tokens, then these
    assert after.kv_usage_by_engine == {"0": 0.0} and after.running == 0
    assert after.counters["generation_tokens"] - before.counters["generation_tokens"] == 1500
