"""``sparktui bench`` against a real vLLM engine (CPU build, tiny model, speculative decoding with a draft
model and prefix caching on: tests/support/vllm_server.py).

Correct by construction, checked: a case's aggregate generation rate is the completion tokens the
server reported in each stream's ``usage`` over the case's span; the server's own
``vllm:generation_tokens_total`` grows by the same tokens over the same case (nothing else runs on the
session's server meanwhile), so the two rates agree within a few percent (the scrapes bracket the
requests by the few milliseconds a scrape takes). Small cases only: the whole run is some seconds.
"""

from __future__ import annotations

import asyncio

import pytest

from sparktui.headless.bench import BenchJob, run_job
from sparktui.model.specs import VllmSpec
from tests.support.vllm_server import NUM_SPECULATIVE_TOKENS, SERVED_NAME, VllmServer

pytestmark = pytest.mark.vllm

TOLERANCE = 0.05


async def test_aggregate_tok_s_is_the_growth_of_the_servers_generation_counter(real_vllm: VllmServer) -> None:
    spec = VllmSpec(name="tiny", url=real_vllm.url)
    job = BenchJob("local/tiny", spec, ("short", "concurrency", "prefix"), concurrency=(2,), requests=2)
    await asyncio.wait_for(run_job(job), 240.0)
    run = job.result(complete=True)
    assert run.complete and run.model == SERVED_NAME and run.max_model_len == 2048 and run.version
    assert job.tokens_per_word > 0.25  # the warmup's usage measured the tokenizer
    assert [c.name for c in run.cases] == ["short", "concurrent-2", "prefix-repeat"]
    for case in run.cases:
        stats, server = case.stats, case.server
        assert stats.failed == 0, [r.error for r in case.requests]
        assert stats.completion_tokens == case.max_tokens * stats.requests, case.name  # ignore_eos honoured
        assert server is not None and server.generation_tokens is not None
        assert server.generation_tokens == pytest.approx(stats.completion_tokens, rel=TOLERANCE), case.name
        assert stats.aggregate_tokens_per_s is not None and stats.span_s is not None
        assert server.generation_tokens / stats.span_s == pytest.approx(stats.aggregate_tokens_per_s, rel=TOLERANCE)
        assert server.generation_tokens_per_s == pytest.approx(stats.aggregate_tokens_per_s, rel=TOLERANCE)
        assert len(server.acceptance_by_position) == NUM_SPECULATIVE_TOKENS
        assert server.mean_acceptance_length is not None and server.mean_acceptance_length > 1.0
    prefix = run.cases[-1].server
    assert prefix is not None and prefix.prefix_cache_hit_rate is not None and prefix.prefix_cache_hit_rate > 0.5
