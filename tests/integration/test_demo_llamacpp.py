"""The demo fleet's llama.cpp instance (spark1's fallback beside its vLLM), end to end: served over real
HTTP, polled and read by sparktui as ``engine = "llamacpp"``, and shown by ``sparktui snapshot``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sparktui.config import parse_config
from sparktui.demo.fleet import DemoFleet
from sparktui.engines import readings
from sparktui.engines.llamacpp.scrape import ENDED
from sparktui.model.fleet import FleetState
from sparktui.model.status import State
from sparktui.sources.http import make_client
from sparktui.sources.poller import FleetPoller

ROOT = Path(__file__).resolve().parents[2]


async def test_the_demo_serves_spark1s_llama_server_and_sparktui_counts_its_tokens() -> None:
    fleet = DemoFleet(seed=21)
    await fleet.start()
    llama = fleet.node("spark1").llamacpp[0].engine
    spec = parse_config(fleet.config_toml(), source="demo.toml")
    state = FleetState(spec, readings())
    try:
        async with make_client() as client:
            poller = FleetPoller(spec, client, clock=lambda: fleet.now)
            ended_at_start = llama.tally.requests_ended
            while llama.tally.requests_ended < ended_at_start + 2:  # two more requests ended, polled each second
                await fleet.advance(1.0)
                for observation in await poller.poll_all():
                    state.apply(observation)
                assert fleet.elapsed < 600.0
            latest = state.nodes["spark1"].instances["qwen3-8b"].tracker.latest
            assert latest is not None
            (model,) = latest.models.values()
            assert model.counters[ENDED] == llama.tally.generated_ended > 0
            assert model.counters["generation_tokens"] == llama.generated_so_far()
            assert model.counters["prompt_tokens"] == llama.tally.prompt_tokens
            (spark1,) = [v for v in state.view(fleet.now, window_s=60.0) if v.name == "spark1"]
    finally:
        await fleet.stop()
    qwen36, fallback = spark1.instances
    assert (qwen36.name, qwen36.engine) == ("qwen36", "vLLM")
    assert (fallback.name, fallback.engine, fallback.version) == ("qwen3-8b", "llama.cpp", "b11434-unknown")
    assert fallback.served_models == ("qwen3-8b",)
    assert fallback.status.state is State.UP and spark1.status.state is State.UP
    assert fallback.kv_capacity_tokens == 32768
    assert fallback.rates is not None and fallback.rates.generation_tokens_per_s
    assert 5.0 < fallback.rates.generation_tokens_per_s < 40.0  # a trickle at ~38 tok/s while busy


def test_sparktui_snapshot_of_the_demo_shows_spark1s_llamacpp_instance() -> None:
    command = [sys.executable, "-m", "sparktui", "demo", "--", sys.executable, "-m", "sparktui", "snapshot", "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ran = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    printed = ran.stdout
    assert "llama.cpp qwen3-8b" in printed  # the demo's list of endpoints
    snapshot = json.loads(printed[printed.index("\n{") :])
    (spark1,) = [n for n in snapshot["nodes"] if n["name"] == "spark1"]
    assert spark1["status"]["state"] == "up"
    fallback = next(i for i in spark1["instances"] if i["name"] == "qwen3-8b")
    assert (fallback["engine"], fallback["version"], fallback["served_models"]) == (
        "llama.cpp",
        "b11434-unknown",
        ["qwen3-8b"],
    )
    assert fallback["status"]["state"] == "up" and fallback["kv_capacity_tokens"] == 32768
    assert fallback["lacks"]["latency"].startswith("llama.cpp exports no latency")
