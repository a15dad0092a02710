"""A real Prometheus scraping a real llama-server: sparktui's Prometheus source shows the llama.cpp
instance (``engine = "llamacpp"``) with the counters of the requests that drove it, the same as direct
mode's.

The requests are token-id arrays with ``ignore_eos`` and ``n_predict`` (``test_real_llamacpp.py``), so
every count is known before they are sent. The refresh query asks for llama.cpp's own series
(``Engine.series``); the exposition rebuilt from Prometheus's answer goes through the same llama.cpp
reading as direct mode's ``/metrics``, without ``/props`` and ``/slots`` (Prometheus has neither).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.engines.llamacpp.scrape import ENDED
from sparktui.headless.snapshot import collect
from sparktui.model.fleet import FleetState
from sparktui.model.scrape import EngineScrape
from sparktui.model.status import State
from sparktui.sources.http import make_client
from sparktui.sources.prometheus import PrometheusSource
from sparktui.sources.promql import refresh_query
from tests.integration.test_real_llamacpp import complete, prompt
from tests.support.llama_server import LlamaModels, running_llama_server
from tests.support.prometheus_server import PrometheusServer, require_prometheus

pytestmark = [pytest.mark.llamacpp, pytest.mark.prometheus]
# (prompt length, n_predict): distinct first token ids, so no prompt is served from another's cache.
REQUESTS = ((12, 4), (24, 8), (40, 16))
PROMPT_TOKENS = sum(length for length, _ in REQUESTS)  # 76
GENERATED = sum(n for _, n in REQUESTS)  # 28
COUNTERS = ("generation_tokens", ENDED, "prompt_tokens", "prompt_by_source:local_compute")


def node_toml(port: int) -> str:
    return (
        '[[nodes]]\nname = "box"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
        f'[[nodes.vllm]]\nname = "llama"\nengine = "llamacpp"\nport = {port}\ncanary = false\n'
    )


def counters_of(latest: EngineScrape | None) -> dict[str, float]:
    assert latest is not None
    (model,) = latest.models.values()
    return {key: model.counters[key] for key in COUNTERS if key in model.counters}


async def test_the_prometheus_source_shows_a_llamacpp_instance_with_its_requests_counts(
    llama_models: LlamaModels, tmp_path: Path
) -> None:
    require_prometheus()
    async with running_llama_server(llama_models.tiny, tmp_path / "llama-server.log") as llama:
        async with PrometheusServer([f"{llama.url}/metrics"]) as server:
            fleet = parse_config(
                f'{node_toml(llama.port)}[prometheus]\nurl = "{server.url}"\n', source="llama-prom.toml", env={}
            )
            assert fleet.prometheus is not None
            source = PrometheusSource(fleet, logs=False)
            (target,) = [t for t in source.targets if t.kind == "vllm"]
            assert target.engine == "llamacpp"
            assert "llamacpp:tokens_predicted_total" in refresh_query(source.targets)
            state = FleetState(fleet, readings())
            async with make_client([server.url]) as client:
                await _next_scrape(server, time.time())
                for observation in await source.refresh(client):
                    state.apply(observation)
                instance = state.nodes["box"].instances["llama"]
                assert counters_of(instance.tracker.latest) == {
                    "generation_tokens": 0,
                    ENDED: 0,
                    "prompt_tokens": 0,
                    "prompt_by_source:local_compute": 0,
                }
                async with httpx.AsyncClient(timeout=60.0) as http:
                    for index, (length, n_predict) in enumerate(REQUESTS):
                        await complete(http, llama, prompt(length, 1000 + 100 * index), n_predict)
                await _next_scrape(server, time.time())
                for observation in await source.refresh(client):
                    state.apply(observation)
            through_prometheus = counters_of(instance.tracker.latest)
            (view,) = state.view(time.monotonic(), window_s=None)
            (shown,) = view.instances
        direct_monitor, _now = await collect(parse_config(node_toml(llama.port), source="llama.toml"), 1, 0.1)
    # The requests' counts, through Prometheus as directly. Computed + cached prompt tokens are the
    # prompts' lengths; a slot that served an earlier prompt keeps its BOS cached (75 of 76 computed).
    computed = through_prometheus.pop("prompt_by_source:local_compute")
    assert through_prometheus == {"generation_tokens": GENERATED, ENDED: GENERATED, "prompt_tokens": PROMPT_TOKENS}
    assert PROMPT_TOKENS - len(REQUESTS) <= computed <= PROMPT_TOKENS
    through_prometheus["prompt_by_source:local_compute"] = computed
    direct = counters_of(direct_monitor.state.nodes["box"].instances["llama"].tracker.latest)
    assert direct == through_prometheus
    # Shown as a llama.cpp instance that is up; what Prometheus cannot say (/props, /slots) is unknown.
    assert shown.engine == "llama.cpp"
    assert shown.status.state is State.UP, shown.status
    assert (shown.running, shown.waiting) == (0, 0)
    assert shown.sleep is None


async def _next_scrape(server: PrometheusServer, after_wall: float) -> None:
    """Until Prometheus has scraped the server again after ``after_wall``."""

    async def newest() -> float:
        result = await server.query("timestamp(up)")
        return max((float(str(r["value"][1])) for r in result), default=0.0)  # type: ignore[index]

    deadline = time.monotonic() + 15.0
    while await newest() <= after_wall:
        assert time.monotonic() < deadline, "Prometheus stopped scraping the server"
        await asyncio.sleep(0.1)
