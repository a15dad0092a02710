"""A real Prometheus scraping a real llama-server: sparktui's Prometheus source shows the llama.cpp
instance (``engine = "llamacpp"``) with the counters of the requests that drove it, the same as direct
mode's.

The requests are token-id arrays with ``ignore_eos`` and ``n_predict`` (``test_real_llamacpp.py``), so
every count is known before they are sent. The refresh query asks for llama.cpp's own series
(``Engine.series``); the exposition rebuilt from Prometheus's answer goes through the same llama.cpp
reading as direct mode's ``/metrics``, without ``/props`` and ``/slots`` (Prometheus has neither).

``snapshot --compare``'s comparison (``headless.compare.compare``, run in the test's process so that
the requests go inside its window) over a plain and a speculating server shows each number of
llama.cpp's PromQL (``engines/llamacpp/promql.py``) equal to sparktui's direct one, and the requests'
own token counts over the window.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import httpx
import pytest

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.engines.llamacpp.scrape import ACCEPTED_PER_POSITION, ENDED
from sparktui.headless.compare import compare
from sparktui.headless.snapshot import collect
from sparktui.model.fleet import FleetState
from sparktui.model.scrape import EngineScrape
from sparktui.model.status import State
from sparktui.sources.http import make_client
from sparktui.sources.prometheus import PrometheusSource
from sparktui.sources.promql import engine_numbers, refresh_query
from tests.integration.test_real_llamacpp import complete, metrics, prompt
from tests.integration.test_real_llamacpp_spec import DRAFT_MAX, server_counters
from tests.support.compare_rows import agrees, compare_rows
from tests.support.llama_server import LlamaModels, LlamaServer, running_llama_server
from tests.support.prometheus_server import PrometheusServer, require_prometheus
from tests.support.wait import wait_until

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


# snapshot --compare: the requests sent inside the window, every counter flat at both of its ends. Over
# such a burst Prometheus's rate() extrapolates the increase from its first and last scrape in the
# window to the window's ends: at most two scrape intervals of ten seconds, 2 %, within the 3 % the
# comparison allows a rate.
COMPARE_REQUESTS = ((12, 32), (24, 40), (40, 48))
COMPARE_WINDOW_S = 10.0
SCRAPE_S = 0.1
SPECULATIVE = {"acceptance_rate", "mean_acceptance_length", "per_position"}
WINDOW = re.compile(r"over the same ([0-9.]+) s window")


@pytest.mark.parametrize("speculating", [False, True], ids=["plain", "speculating"])
async def test_compare_shows_prometheus_equal_to_the_direct_numbers_of_a_llama_server(
    speculating: bool, llama_models: LlamaModels, tmp_path: Path
) -> None:
    """Every number llama.cpp's PromQL gives equals sparktui's direct one (a rate to 3 %); the
    speculative ones only where the server drafts, on both sides; the generated and prompt tokens over
    the window are the requests'."""
    require_prometheus()
    draft = ("-md", str(llama_models.draft), "--spec-type", "draft-simple", "--spec-draft-n-max", str(DRAFT_MAX))
    async with (
        running_llama_server(llama_models.tiny, tmp_path / "llama.log", *(draft if speculating else ())) as llama,
        PrometheusServer([f"{llama.url}/metrics"], interval_s=SCRAPE_S) as prometheus,
    ):
        async with httpx.AsyncClient(timeout=60.0) as http:
            await wait_until(lambda: _warm(http, llama, speculating), 120.0, what="every compared counter above 0")
        config = f'poll_interval_s = 0.5\n{node_toml(llama.port)}[prometheus]\nurl = "{prometheus.url}"\n'
        walls: list[float] = []  # compare's wall clock: when its window began, then when it ended

        def wall() -> float:
            walls.append(time.time())
            return walls[-1]

        comparing = asyncio.create_task(
            compare(parse_config(config, source="llama-compare.toml", env={}), window_s=COMPARE_WINDOW_S, wall=wall)
        )
        await wait_until(lambda: bool(walls), 60.0, what="the first direct poll of the window")
        await _next_scrape(prometheus, walls[0])  # Prometheus's first sample of the window: before any request
        async with httpx.AsyncClient(timeout=60.0) as http:
            for index, (length, n_predict) in enumerate(COMPARE_REQUESTS):
                await complete(http, llama, prompt(length, 1000 + 100 * index), n_predict)
        await _next_scrape(prometheus, time.time())
        scraped = time.time()
        text = await comparing
    assert scraped < walls[1], f"the requests and a scrape after them took longer than the window:\n{text}"
    rows = compare_rows(text)
    numbers = {n.label: n for n in engine_numbers("llamacpp")}
    per_position = numbers["acceptance at position"]
    for label, (direct, through_prometheus, difference) in rows.items():
        number = numbers.get(label) or per_position
        assert "–" not in (direct, through_prometheus), (label, text)
        assert agrees(number, direct, through_prometheus, difference), (label, text)
    absent = set() if speculating else SPECULATIVE
    expected = {n.label for n in numbers.values() if n.key not in absent and n.key != "per_position"}
    assert expected <= set(rows), (expected - set(rows), text)
    assert not {numbers[label].key for label in rows if label in numbers} & absent
    assert any(label.startswith("acceptance at position") for label in rows) is speculating
    # The requests' own counts over the window: n_predict tokens each, and every prompt token (computed
    # or cached); nothing running at the end.
    found = WINDOW.search(text)
    assert found is not None, text
    window_s = float(found.group(1))
    for label, tokens in (
        ("generation", sum(n for _, n in COMPARE_REQUESTS)),
        ("prompt", sum(length for length, _ in COMPARE_REQUESTS)),
    ):
        rate = float(rows[label][0].split()[0])
        assert rate * window_s == pytest.approx(tokens, rel=0.01), (label, rows[label], window_s)
    assert rows["running"][:2] == ("0", "0")


async def _warm(http: httpx.AsyncClient, llama: LlamaServer, speculating: bool) -> bool:
    """One request before the window; whether every counter compared is now above 0, as on a server
    that has served for a while. Prometheus's ``rate()`` counts a series from its first sample, and
    extrapolates a counter at 0 there to no earlier than that sample: a draft position's series
    (llama-server serves it from its first accepted token on) appearing in the window, or a counter
    leaving 0 in it, would read less than sparktui's deltas, which count from 0."""
    await complete(http, llama, prompt(16, 20000), COMPARE_REQUESTS[-1][1])  # the same prompt: cached from the 2nd on
    drafts = await server_counters(http, llama)
    cached = (await metrics(http, llama))["llamacpp:prompt_tokens_cached_total"]
    return cached > 0 and (not speculating or f"{ACCEPTED_PER_POSITION}{{{DRAFT_MAX - 1}}}" in drafts)


async def _next_scrape(server: PrometheusServer, after_wall: float) -> None:
    """Until Prometheus has scraped the server again after ``after_wall``."""

    async def newest() -> float:
        result = await server.query("timestamp(up)")
        return max((float(str(r["value"][1])) for r in result), default=0.0)  # type: ignore[index]

    deadline = time.monotonic() + 15.0
    while await newest() <= after_wall:
        assert time.monotonic() < deadline, "Prometheus stopped scraping the server"
        await asyncio.sleep(0.1)
