"""The mixed demo fleet (``sparktui demo --fleet mixed``): every engine a Spark runs, each simulated at the
level of what it exports, read through sparktui's real readings, and its engine-specific incident.

- Each demo engine's metrics page, parsed by that engine's own reading, carries the simulation's own
  tallies (the tokens it generated, the requests running, the KV it holds), and only what the engine
  exports (SGLang: no draft counters; TensorRT-LLM: no inter-token histogram).
- Stepped, polled over HTTP by ``FleetPoller``: each instance is read as its engine, at its Spark default
  port where the port was free.
- ``ollama-overdue``, stepped with the host over SSH, the journal and the diagnosis engine: the models
  Ollama keeps past their keep-alive hold the memory vLLM needs, and the finding says so (not the page
  cache), until Ollama lets them go and vLLM starts.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from sparktui.config import load_catalogue, parse_config
from sparktui.demo.engine_metrics import SglangExposition, TrtllmExposition
from sparktui.demo.fleet import MIXED_NODES, DemoFleet
from sparktui.demo.scenarios import OVERDUE_MODELS, SCENARIOS
from sparktui.demo.sim import PROFILES, Engine
from sparktui.diagnosis.engine import DiagnosisEngine, Finding, last_intervals, unread
from sparktui.engines import readings
from sparktui.engines.sglang import ENGINE as SGLANG
from sparktui.engines.trtllm import ENGINE as TRTLLM
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.promtext import parse
from sparktui.model.reading import Answers
from sparktui.model.specs import FleetSpec
from sparktui.model.status import State
from sparktui.sources.http import make_client
from sparktui.sources.logs import LogStream
from sparktui.sources.poller import FleetPoller
from sparktui.sources.ssh import NodeSsh
from tests.integration.test_demo_ssh import HostFeed

pytestmark = pytest.mark.integration

# The engine each instance of the mixed fleet is read as, and the port it asks for (its Spark default).
EXPECTED = {
    ("spark1", "qwen36"): ("vLLM", 8000),
    ("spark1", "ollama"): ("Ollama", 11434),
    ("spark2", "qwen3-30b"): ("SGLang", 30000),
    ("spark3", "llama31-fp4"): ("TensorRT-LLM", 8355),
    ("spark4", "llama31-nim"): ("NIM", 8000),
    ("spark4", "qwen3-8b"): ("llama.cpp", 8080),
}


class Tally:
    """Forwards the simulated engine's events to a page, counting the requests that finished on its own."""

    def __init__(self, page: SglangExposition | TrtllmExposition) -> None:
        self.page = page
        self.finished = 0.0

    def add(self, counter: str, value: float, **labels: str) -> None:
        if counter == "vllm:request_success":
            self.finished += value
        self.page.add(counter, value, **labels)

    def observe(self, histogram: str, value: float, count: int = 1) -> None:
        self.page.observe(histogram, value, count)

    def set_gauge(self, gauge: str, value: float, **labels: str) -> None:
        self.page.set_gauge(gauge, value, **labels)


def _run_engine(page: SglangExposition | TrtllmExposition, profile: str, seconds: float) -> tuple[Engine, Tally]:
    tally = Tally(page)
    engine = Engine(PROFILES[profile], tally, random.Random(5))
    for _ in range(int(seconds / 0.25)):
        engine.advance(0.25)
    return engine, tally


def _taken(address: str, port: int) -> bool:
    """Whether another program holds ``port`` on ``address`` (the demo then took any port)."""
    with socket.socket() as probe:
        try:
            probe.bind((address, port))
        except OSError:
            return True
    return False


def test_the_demo_sglang_page_read_by_sglangs_reading_carries_the_simulations_own_tallies() -> None:
    profile = PROFILES["qwen3-30b-sglang"]
    exposition = SglangExposition(profile)
    engine, tally = _run_engine(exposition, "qwen3-30b-sglang", 120.0)
    scrape = SGLANG.reading.normalise(parse(exposition.render().decode()), Answers())
    (model,) = scrape.models.values()
    assert model.model_name == profile.served_name
    assert model.counters["generation_tokens"] == engine.tokens_generated > 0
    assert model.running == len(engine.running) and model.waiting == len(engine.waiting)
    (usage,) = model.kv_usage_by_engine.values()
    assert usage == pytest.approx(engine.kv_used_tokens() / profile.kv_capacity_tokens, abs=0.005)  # 2 places
    # Speculative decoding as SGLang reports it: a mean length and a rate, no draft counters.
    assert set(model.reported) >= {"spec_accept_length", "spec_accept_rate"}
    assert 1.0 < model.reported["spec_accept_length"] < 1 + profile.num_speculative_tokens
    assert not any(key.startswith(("spec_", "drafts")) for key in model.counters)
    assert {"ttft", "itl", "e2e"} <= set(model.histograms)
    finished = sum(value for key, value in model.counters.items() if key.startswith("finished:"))
    assert finished == tally.finished > 0


def test_the_demo_trtllm_page_read_by_trtllms_reading_carries_the_simulations_own_tallies() -> None:
    profile = PROFILES["llama31-8b-fp4"]
    exposition = TrtllmExposition(profile)
    engine, tally = _run_engine(exposition, "llama31-8b-fp4", 120.0)
    scrape = TRTLLM.reading.normalise(parse(exposition.render().decode()), Answers(model_name=profile.served_name))
    (model,) = scrape.models.values()
    assert model.model_name == profile.served_name  # its labels say "undefined": /v1/models names it
    assert model.counters["generation_tokens"] == engine.tokens_generated > 0
    assert model.running == len(engine.running) and model.waiting == len(engine.waiting)
    finished = sum(value for key, value in model.counters.items() if key.startswith("finished:"))
    assert finished == tally.finished > 0
    assert "itl" not in model.histograms and {"ttft", "tpot", "e2e", "queue"} <= set(model.histograms)


@dataclass
class Mixed:
    fleet: DemoFleet
    spec: FleetSpec
    state: FleetState
    poller: FleetPoller

    async def step(self, dt: float = 2.0) -> dict[str, NodeView]:
        await self.fleet.advance(dt)
        for observation in await self.poller.poll_all():
            self.state.apply(observation)
        return {v.name: v for v in self.state.view(self.fleet.now, window_s=20.0)}


@pytest.fixture
async def mixed() -> AsyncIterator[Mixed]:
    fleet = DemoFleet(MIXED_NODES, seed=11)
    await fleet.start()
    try:
        spec = parse_config(fleet.config_toml(), source="demo.toml")
        async with make_client() as client:
            poller = FleetPoller(spec, client, clock=lambda: fleet.now)
            yield Mixed(fleet, spec, FleetState(spec, readings()), poller)
    finally:
        await fleet.stop()


@pytest.mark.slow
async def test_every_engine_of_the_mixed_fleet_is_read_as_itself_with_dashes_for_what_it_lacks(mixed: Mixed) -> None:
    for _ in range(6):
        views = await mixed.step()
    seen = {(node.name, inst.name): inst for node in views.values() for inst in node.instances}
    assert set(seen) == set(EXPECTED)
    for key, (label, port) in EXPECTED.items():
        inst = seen[key]
        assert inst.engine == label, key
        assert inst.status.state is State.UP, (key, inst.status)
        node = next(n for n in mixed.fleet.nodes if n.name == key[0])
        served = [i.http for i in node.instances if i.spec.name == key[1] and i.http is not None]
        served += [s.http for s in node.llamacpp if s.spec.name == key[1]]
        served += [node.ollama.http] if node.ollama is not None and node.ollama.spec.name == key[1] else []
        (http,) = served
        # Its Spark default port, where it could be had here (another program may hold it: then any).
        assert inst.url == http.url
        assert http.port == port or _taken(node.address, port), (key, http.url)
    # Each with the numbers it has: the engines that count tokens generated some...
    for key in (k for k, (label, _) in EXPECTED.items() if label not in ("Ollama", "llama.cpp")):
        rates = seen[key].rates
        assert rates is not None and rates.generation_tokens_per_s, key
    # ...and Ollama, which counts none, has none: unknown, never 0; what it holds instead.
    ollama = seen[("spark1", "ollama")]
    assert ollama.running is None and ollama.kv_usage is None
    assert ollama.rates is None or ollama.rates.generation_tokens_per_s is None
    assert [m.id for m in ollama.models if m.load.value == "loaded"] == ["qwen3:8b"]
    assert "requests" in ollama.lacks
    # TensorRT-LLM's model is named by its /v1/models (its labels say "undefined").
    assert seen[("spark3", "llama31-fp4")].model_name == "nvidia/Llama-3.1-8B-Instruct-FP4"


# --- ollama-overdue: the engine-specific incident ------------------------------------------------------


@dataclass
class Overdue:
    mixed: Mixed
    feed: HostFeed
    log: LogStream
    diagnosis: DiagnosisEngine
    seen: frozenset[str] = frozenset()
    findings: tuple[Finding, ...] = ()

    async def step(self, dt: float = 2.0) -> NodeView:
        views = await self.mixed.step(dt)
        await self.feed.settle()
        view = {v.name: v for v in self.mixed.state.view(self.mixed.fleet.now, window_s=20.0)}["spark1"]
        del views
        lines = unread(self.log.buffer, self.diagnosis.cursor("spark1", "qwen36"))
        intervals = last_intervals(self.mixed.state.nodes["spark1"])
        self.findings = self.diagnosis.evaluate(view, {"qwen36": lines}, self.mixed.fleet.now, intervals)
        self.seen = self.seen | {f.id for f in self.findings}
        return view


@pytest.fixture
async def overdue() -> AsyncIterator[Overdue]:
    fleet = DemoFleet(MIXED_NODES, seed=11, scenario=SCENARIOS["ollama-overdue"])
    await fleet.start()
    spec = parse_config(fleet.config_toml(), source="demo.toml")
    state = FleetState(spec, readings())
    feed = HostFeed(fleet, spec, ("spark1",), state)
    spark1 = next(n for n in spec.nodes if n.name == "spark1")
    ssh = NodeSsh(spark1)
    log = LogStream(ssh, spark1.vllm[0], tail_lines=200)
    log_task = asyncio.create_task(log.run())
    try:
        async with make_client() as client:
            await feed.start()
            poller = FleetPoller(spec, client, clock=lambda: fleet.now, wall_clock=lambda: fleet.clock.epoch)
            yield Overdue(Mixed(fleet, spec, state, poller), feed, log, DiagnosisEngine(load_catalogue()))
    finally:
        log_task.cancel()
        await asyncio.gather(log_task, return_exceptions=True)
        await ssh.close()
        await feed.close()
        await fleet.stop()


@pytest.mark.slow
async def test_ollamas_overdue_models_are_named_as_what_keeps_vllm_from_starting(overdue: Overdue) -> None:
    fleet = overdue.mixed.fleet
    while fleet.elapsed < 114.0:
        view = await overdue.step()
    # Past their keep-alive (30 s after 20 s) and the minute's grace: Ollama says it still holds them.
    ollama = next(i for i in view.instances if i.name == "ollama")
    held = {m.id: m for m in ollama.models if m.load.value == "loaded"}
    assert set(OVERDUE_MODELS) <= set(held)
    assert all(held[name].overdue_s is not None for name in OVERDUE_MODELS)
    assert view.ledger is not None and view.ledger.models_held is not None
    assert view.ledger.models_held >= sum(held[n].size_bytes or 0 for n in OVERDUE_MODELS)

    # Started at 110 s, vLLM fails its memory check again and again: the finding names the models.
    finding: Finding | None = None
    while finding is None:
        view = await overdue.step()
        finding = next((f for f in overdue.findings if f.id == "held-models-block-start"), None)
        assert fleet.elapsed < 240.0, sorted(overdue.seen)
    evidence = "\n".join(finding.evidence)
    assert "qwen36 would not start now" in evidence
    assert all(f"Ollama ollama: {name} loaded" in evidence for name in OVERDUE_MODELS)
    assert "overdue:" in evidence
    # Not the page cache's finding, whose fix (drop it) would not help: suppressed while this one is open.
    active = {f.id for f in overdue.findings}
    assert "page-cache-blocks-start" not in active and "launch-readiness" not in active

    # Ollama restarted at 240 s lets them go; the next attempt starts and vLLM serves again.
    while view.instances[0].status.state is not State.UP:
        view = await overdue.step()
        assert fleet.elapsed < 420.0, view.instances[0].status
    for _ in range(8):  # a few polls for the finding's clear_after_s
        await overdue.step()
    assert "held-models-block-start" not in {f.id for f in overdue.findings}
