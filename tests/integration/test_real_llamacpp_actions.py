"""The warmup action on a real llama-server: the same plan as vLLM's (streamed chat completions on
the instance's OpenAI route, the model named by its ``/v1/models``), its target named as llama.cpp, every
request served by the server (its own log counts them), audited like any action."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from sparktui.actions.audit import AuditLog
from sparktui.actions.plans import ActionPlan, plan_warmup
from sparktui.actions.runner import ActionRunner
from sparktui.model.specs import FleetSpec, NodeSpec, ServerSpec, SshSpec
from tests.support.actions import FAST
from tests.support.llama_server import LlamaModels, running_llama_server

pytestmark = pytest.mark.llamacpp
REQUESTS = 2
ENDED = "stop processing"  # llama-server's log line as a request's slot is released


async def test_warmup_sends_its_completions_to_llama_server_and_each_is_served(
    llama_models: LlamaModels, tmp_path: Path
) -> None:
    async with running_llama_server(llama_models.tiny, tmp_path / "llama.log") as server:
        spec = ServerSpec(name="fallback", engine="llamacpp", url=server.url)
        fleet = FleetSpec(nodes=(NodeSpec(name="box", host="127.0.0.1", ssh=SshSpec(enabled=False), vllm=(spec,)),))
        settings = replace(FAST, warmup_ttft_target_s=0.000001, warmup_max_requests=REQUESTS)  # never reached
        plan = plan_warmup(fleet, "box", settings=settings)
        assert isinstance(plan, ActionPlan), plan
        assert plan.targets[0].what == f"llama.cpp fallback at {server.url}"
        before = server.log_text().count(ENDED)
        runner = ActionRunner(fleet, audit=AuditLog(tmp_path / "audit.log", user="tester"))
        try:
            async with asyncio.timeout(120):
                result = await runner.run(plan)
        finally:
            await runner.close()
        assert result.ok, result.lines()
        warmup = result.warmup
        assert warmup is not None and warmup.model is not None and warmup.model.endswith("tiny.gguf")
        assert len(warmup.ttfts_s) == REQUESTS and all(t > 0 for t in warmup.ttfts_s)
        assert server.log_text().count(ENDED) == before + REQUESTS  # the server served each one
        records = AuditLog(tmp_path / "audit.log").records()
        assert records[0]["event"] == "started" and {r["action"] for r in records} == {"warmup"}
