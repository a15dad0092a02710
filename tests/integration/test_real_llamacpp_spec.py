"""Speculative decoding on a real llama-server with a draft model (``-md draft.gguf --spec-type
draft-simple --spec-draft-n-max 4``): sparktui's acceptance overall, its mean length and each draft
position's yield are the server's own counters' ratios, read independently from the same server's
``/metrics`` (``prometheus_client``'s parser), and the server's own relation holds on what sparktui
read (the accepted tokens are the per-position counts' sum)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.config import parse_config
from sparktui.headless.watch import Watcher
from sparktui.model.derive import SpecDecodeStats
from sparktui.model.specs import FleetSpec
from tests.integration.test_real_llamacpp import TEST_TIMEOUT_S, complete, prompt
from tests.support.llama_server import LlamaModels, LlamaServer, running_llama_server
from tests.support.wait import wait_until

pytestmark = pytest.mark.llamacpp
DRAFT_MAX = 4
REQUESTS = 3
N_PREDICT = 96


def fleet_of(server: LlamaServer) -> FleetSpec:
    return parse_config(
        "poll_interval_s = 0.3\n"
        '[[nodes]]\nname = "box"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
        f'[[nodes.vllm]]\nname = "llama"\nengine = "llamacpp"\nport = {server.port}\ncanary = false\n',
        source="spec.toml",
    )


async def server_counters(client: httpx.AsyncClient, server: LlamaServer) -> dict[str, float]:
    """The speculative counters as the server serves them: ``name`` or ``name{position}``."""
    text = (await client.get(f"{server.url}/metrics")).text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if "spec_decode" in sample.name:
                position = sample.labels.get("position")
                found[sample.name if position is None else f"{sample.name}{{{position}}}"] = sample.value
    return found


async def test_acceptance_overall_and_per_position_are_the_servers_own_counters(
    llama_models: LlamaModels, tmp_path: Path
) -> None:
    args = ("-md", str(llama_models.draft), "--spec-type", "draft-simple", "--spec-draft-n-max", str(DRAFT_MAX))
    async with (
        running_llama_server(llama_models.tiny, tmp_path / "llama.log", *args) as server,
        httpx.AsyncClient(timeout=60.0) as client,
    ):
        watcher = Watcher(fleet_of(server), out=io.StringIO())
        stop = asyncio.Event()
        watching = asyncio.create_task(watcher.run(stop=stop, drain_s=0.1))
        try:
            await wait_until(lambda: watcher.monitor.ticks >= 2, TEST_TIMEOUT_S, what="two ticks before any request")
            for n in range(REQUESTS):
                await complete(client, server, prompt(12, 3000 + 50 * n), N_PREDICT)
            served = await server_counters(client, server)
            accepted = served["llamacpp:spec_decode_num_accepted_tokens_total"]
            drafts = served["llamacpp:spec_decode_num_drafts_total"]
            draft_tokens = served["llamacpp:spec_decode_num_draft_tokens_total"]
            per_position = [
                served[f"llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{{i}}}"] for i in range(DRAFT_MAX)
            ]
            assert drafts > 0 and 0 < accepted < draft_tokens, served  # a draft that agrees part of the time
            assert sum(per_position) == accepted  # the server's own relation

            def spec() -> SpecDecodeStats | None:
                views = watcher.monitor.views
                rates = views[0].instances[0].rates if views and views[0].instances else None
                return rates.spec_decode if rates is not None else None

            def read_all() -> bool:
                found = spec()
                return found is not None and found.drafts == drafts

            # The window began before the first request (the counters were 0), so it holds them all.
            await wait_until(read_all, TEST_TIMEOUT_S, what="every draft in the window", detail=lambda: f"{spec()}")
            found = spec()
            assert found is not None
            assert found.num_speculative_tokens == DRAFT_MAX
            assert found.acceptance_rate == pytest.approx(accepted / draft_tokens)
            assert found.mean_acceptance_length == pytest.approx(1 + accepted / drafts)
            assert list(found.per_position) == pytest.approx([count / drafts for count in per_position])
        finally:
            stop.set()
            await watching
