"""A real Prometheus scraping SGLang, TensorRT-LLM and NIM (servers on 127.0.0.1 answering their routes
with expositions their own metrics code wrote, or written from it: ``tests/support/engine_server.py``):
sparktui's Prometheus source asks for each engine's own series (``Engine.series``), and the exposition
it rebuilds from Prometheus's answer reads as the same numbers as the engine's body read directly."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sparktui.config import parse_config
from sparktui.engines import readings, registry
from sparktui.model.fleet import FleetState
from sparktui.model.promtext import parse
from sparktui.model.reading import Answers
from sparktui.model.scrape import ModelScrape
from sparktui.sources.http import make_client
from sparktui.sources.prometheus import PrometheusSource
from sparktui.sources.promql import refresh_query
from tests.integration.test_real_llamacpp_prometheus import _next_scrape
from tests.support.engine_cli import run_sparktui
from tests.support.engine_server import EngineServer, one_node_config
from tests.support.nim_server import nim_server
from tests.support.prometheus_server import PrometheusServer, require_prometheus

pytestmark = [pytest.mark.prometheus]
DATA = Path(__file__).resolve().parents[1] / "data"


def _sglang() -> EngineServer:
    body = (DATA / "sglang-0.5.23" / "single-t1.txt").read_text()
    health = {"/ready": b""}
    return EngineServer(
        bodies=[body],
        model="Qwen/Qwen3-8B",
        metrics_path="/metrics",
        health=health,
        pages={},
        filterable=True,
        owned_by="sglang",
    )


def _trtllm() -> EngineServer:
    body = (DATA / "trtllm" / "spec-t1.txt").read_text()
    return EngineServer(
        bodies=[body],
        model="m",
        metrics_path="/prometheus/metrics",
        health={"/health": b""},
        pages={},
        filterable=True,
        owned_by="tensorrt_llm",
    )


def _nim() -> EngineServer:
    return nim_server([(DATA / "vllm-0.33" / "mtp2-steady" / "scrape-029.prom").read_text()], "m")


def _numbers(model: ModelScrape) -> dict[str, object]:
    return {
        "counters": dict(model.counters),
        "running": model.running,
        "waiting": model.waiting,
        "kv": dict(model.kv_usage_by_engine),
        "histograms": {key: (h.count, h.sum, h.cumulative) for key, h in model.histograms.items()},
    }


@pytest.mark.parametrize(("engine", "make"), [("sglang", _sglang), ("trtllm", _trtllm), ("nim", _nim)])
async def test_the_prometheus_source_reads_each_engine_as_its_own_body_reads(
    engine: str, make: Callable[[], EngineServer]
) -> None:
    require_prometheus()
    polling = registry()[engine].polling
    with make().serving() as server:
        url = f"http://127.0.0.1:{server.port}{polling.metrics_path}"
        async with PrometheusServer([url]) as prometheus:
            config = one_node_config(server.port, engine, "instance") + f'[prometheus]\nurl = "{prometheus.url}"\n'
            fleet = parse_config(config, source=f"{engine}-prom.toml", env={})
            source = PrometheusSource(fleet, logs=False)
            (target,) = [t for t in source.targets if t.kind == "vllm"]
            assert target.engine == engine
            assert all(name in refresh_query(source.targets) for name in registry()[engine].series[:3])
            state = FleetState(fleet, readings())
            async with make_client([prometheus.url]) as client:
                await _next_scrape(prometheus, time.time())
                for observation in await source.refresh(client):
                    state.apply(observation)
            latest = state.nodes["spark1"].instances["instance"].tracker.latest
        body = server.bodies[0]
    assert latest is not None
    (through_prometheus,) = latest.models.values()
    (direct,) = registry()[engine].reading.normalise(parse(body), Answers()).models.values()
    assert _numbers(through_prometheus) == _numbers(direct)
    assert through_prometheus.counters  # not two empty readings


def test_compare_names_an_engine_whose_numbers_have_no_promql(tmp_path: Path) -> None:
    require_prometheus()
    with _sglang().serving() as server:
        url = f"http://127.0.0.1:{server.port}/metrics"
        with_prometheus = asyncio.run(_compare(server.port, url, tmp_path))
    assert with_prometheus.returncode == 0, with_prometheus.stderr
    assert "spark1/sglang" in with_prometheus.stdout
    assert "no PromQL for SGLang's numbers: only vLLM's are compared" in with_prometheus.stdout


async def _compare(port: int, url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    async with PrometheusServer([url]) as prometheus:
        config_file = tmp_path / "compare.toml"
        config_file.write_text(one_node_config(port, "sglang") + f'[prometheus]\nurl = "{prometheus.url}"\n')
        await _next_scrape(prometheus, time.time())
        return await asyncio.to_thread(run_sparktui, config_file, "snapshot", "--compare", "--interval", "0.5")
