"""A real Prometheus scraping SGLang, TensorRT-LLM and NIM (servers on 127.0.0.1 answering their routes
with expositions their own metrics code wrote, or written from it: ``tests/support/engine_server.py``):
sparktui's Prometheus source asks for each engine's own series (``Engine.series``), and the exposition
it rebuilds from Prometheus's answer reads as the same numbers as the engine's body read directly; and
``snapshot --compare`` shows each engine's numbers from its own PromQL (``Engine.numbers``) equal to
sparktui's direct ones, over an engine played at a steady pace from one exposition to the next."""

from __future__ import annotations

import asyncio
import contextlib
import json
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
from sparktui.sources.promql import compared_engines, engine_numbers, refresh_query
from tests.integration.test_real_llamacpp_prometheus import _next_scrape
from tests.support.compare_rows import agrees, compare_rows
from tests.support.engine_cli import run_sparktui
from tests.support.engine_server import EngineServer, one_node_config, steady
from tests.support.nim_server import nim_server
from tests.support.ollama_server import Model, OllamaServer
from tests.support.prometheus_server import PrometheusServer, require_prometheus

pytestmark = [pytest.mark.prometheus]
DATA = Path(__file__).resolve().parents[1] / "data"


def _sglang(bodies: list[str] | None = None, played: Callable[[], str] | None = None) -> EngineServer:
    body = (DATA / "sglang-0.5.23" / "single-t1.txt").read_text()
    health = {"/ready": b""}
    return EngineServer(
        bodies=bodies or [body],
        played=played,
        model="Qwen/Qwen3-8B",
        metrics_path="/metrics",
        health=health,
        pages={},
        filterable=True,
        owned_by="sglang",
    )


def _trtllm(bodies: list[str] | None = None, played: Callable[[], str] | None = None) -> EngineServer:
    body = (DATA / "trtllm" / "spec-t1.txt").read_text()
    return EngineServer(
        bodies=bodies or [body],
        played=played,
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


# --- snapshot --compare -----------------------------------------------------------------------------------

STEP_S = 1.0  # the pace each engine is played at: from one fixture exposition to the next in this time
WINDOW_S = 3.0  # snapshot --compare's window: three of Prometheus's scrapes


def _steady(make: Callable[..., EngineServer], first: Path, second: Path, seconds: float = STEP_S) -> EngineServer:
    """``make``'s engine going from ``first`` to ``second`` in ``seconds`` and on at that pace."""
    before, after = first.read_text(), second.read_text()
    return make([after], played=steady(before, after, seconds))


def _sglang_steady() -> EngineServer:
    single = DATA / "sglang-0.5.23"
    return _steady(_sglang, single / "single-t0.txt", single / "single-t1.txt")


def _trtllm_steady() -> EngineServer:
    return _steady(_trtllm, DATA / "trtllm" / "spec-t0.txt", DATA / "trtllm" / "spec-t1.txt")


def _nim_steady() -> EngineServer:
    scenario = DATA / "vllm-0.33" / "mtp2-steady"
    times = {s["file"]: s["t"] for s in json.loads((scenario / "expected.json").read_text())["scrapes"]}
    seconds = times["scrape-029.prom"] - times["scrape-028.prom"]
    return _steady(
        lambda bodies, played: nim_server(bodies, "m", played=played),
        scenario / "scrape-028.prom",
        scenario / "scrape-029.prom",
        seconds,
    )


def _percent(value: float) -> str:
    return f"{value * 100:.2f} %"


def _sglang_known() -> dict[str, str]:
    (rank,) = json.loads((DATA / "sglang-0.5.23" / "scenarios.json").read_text())["single"]["phases"][1]["ranks"]
    return {"KV cache usage": _percent(rank["token_usage"]), "prefix cache hit": _percent(rank["cache_hit_rate"])}


def _trtllm_known() -> dict[str, str]:
    """Position 0's acceptance over the window: the t1 phase's accepted over drafted tokens there."""
    (_, t1) = json.loads((DATA / "trtllm" / "scenarios.json").read_text())["spec"]["phases"]
    accepted = sum(r["accepted_per_position"][0] for r in t1["requests"])
    drafted = sum(r["drafted_per_position"][0] for r in t1["requests"])
    return {
        "acceptance at position 0": _percent(accepted / drafted),
        "running": str(t1["iteration"]["numActiveRequests"]),
    }


def _nim_known() -> dict[str, str]:
    interval = json.loads((DATA / "vllm-0.33" / "mtp2-steady" / "expected.json").read_text())["intervals"][-1]
    assert interval["to"] == "scrape-029.prom"
    return {
        "prefix cache hit": _percent(interval["total"]["prefix_cache_hit_rate"]),
        "draft acceptance": _percent(interval["total"]["spec_decode_acceptance_rate"]),
    }


@pytest.mark.parametrize(
    ("engine", "make", "known", "absent"),
    [
        ("sglang", _sglang_steady, _sglang_known, {"spec_accept_length", "spec_accept_rate"}),
        ("trtllm", _trtllm_steady, _trtllm_known, {"spec_accept_length"}),
        ("nim", _nim_steady, _nim_known, set()),
    ],
)
def test_compare_shows_prometheus_equal_to_the_direct_numbers_of_each_engine(
    engine: str,
    make: Callable[[], EngineServer],
    known: Callable[[], dict[str, str]],
    absent: set[str],
    tmp_path: Path,
) -> None:
    """Every number the engine exports, from its PromQL, equals sparktui's direct number; what the
    engine does not serve here (SGLang's speculative gauges at 0, TensorRT-LLM's acceptance length gauge
    beside its per-position counters) is on neither side; some numbers are the scenario's own."""
    require_prometheus()
    with make().serving() as server:
        url = f"http://127.0.0.1:{server.port}{registry()[engine].polling.metrics_path}"
        result = asyncio.run(_compare(server.port, url, engine, tmp_path))
    assert result.returncode == 0, result.stderr
    rows = compare_rows(result.stdout)
    numbers = {n.label: n for n in engine_numbers(engine)}
    per_position = next((n for n in numbers.values() if n.key == "per_position"), None)
    for label, (direct, prometheus, difference) in rows.items():
        number = numbers.get(label) or per_position
        assert number is not None, label
        assert "–" not in (direct, prometheus), (label, direct, prometheus)
        assert agrees(number, direct, prometheus, difference), (label, direct, prometheus, difference)
    expected = {n.label for n in numbers.values() if n.key not in absent and n.key != "per_position"}
    assert expected <= set(rows), expected - set(rows)
    assert not {numbers[label].key for label in rows if label in numbers} & absent
    for label, value in known().items():
        assert rows[label][1] == value, (label, rows[label], value)


SGLANG_LAYOUTS = ("tp2", "dp2", "spec")  # two ranks of one engine, two engines, one that speculates


def _sglang_gauges(layout: str) -> dict[str, str]:
    """What the compare shows of a layout's scheduler gauges, from its scenario's ranks: each engine
    (``dp_rank``) once, as its lowest rank logs it, then running summed over engines, the KV usage the
    busiest's, the hit rate and the speculative gauges averaged."""
    (phase,) = json.loads((DATA / "sglang-0.5.23" / "scenarios.json").read_text())[layout]["phases"]
    engines: dict[int, dict[str, float]] = {}
    for rank in sorted(phase["ranks"], key=lambda r: (r["tp_rank"], r["pp_rank"])):
        engines.setdefault(rank.get("dp_rank", 0), rank)
    each = list(engines.values())
    shown = {
        "running": f"{sum(e['running'] for e in each):g}",
        "KV cache usage": _percent(max(e["token_usage"] for e in each)),
        "prefix cache hit": _percent(sum(e["cache_hit_rate"] for e in each) / len(each)),
    }
    if any(e.get("spec_accept_length") for e in each):
        shown["acceptance length (reported)"] = f"{sum(e['spec_accept_length'] for e in each) / len(each):.4g}"
        shown["acceptance rate (reported)"] = _percent(sum(e["spec_accept_rate"] for e in each) / len(each))
    return shown


def test_compare_takes_sglangs_gauges_once_per_engine_never_summed_over_ranks(tmp_path: Path) -> None:
    """Two tensor-parallel ranks of one engine count its requests once; two data-parallel engines add
    up; a speculating server's gauges are compared as SGLang reports them. Prometheus's side is the
    direct one and what the scenario's ranks say."""
    require_prometheus()
    servers = {
        layout: _sglang([(DATA / "sglang-0.5.23" / f"{layout}-t0.txt").read_text()]) for layout in SGLANG_LAYOUTS
    }
    with contextlib.ExitStack() as stack:
        for server in servers.values():
            stack.enter_context(server.serving())
        ports = {layout: server.port for layout, server in servers.items()}
        result = asyncio.run(_compare_many("sglang", ports, tmp_path))
    assert result.returncode == 0, result.stderr
    numbers = {n.label: n for n in engine_numbers("sglang")}
    for layout in SGLANG_LAYOUTS:
        rows = compare_rows(result.stdout, layout)
        for label, (direct, prometheus, difference) in rows.items():
            assert agrees(numbers[label], direct, prometheus, difference), (layout, label, rows[label])
        for label, value in _sglang_gauges(layout).items():
            assert rows[label][:2] == (value, value), (layout, label, rows[label], value)


def test_compare_names_an_engine_whose_numbers_have_no_promql(tmp_path: Path) -> None:
    """Ollama serves no Prometheus text (Prometheus, which must scrape something, scrapes an SGLang
    here): its instance says which engines are compared instead."""
    require_prometheus()
    with OllamaServer([Model("gemma3:latest", size=2**30)]).serving() as ollama, _sglang().serving() as sglang:
        url = f"http://127.0.0.1:{sglang.port}{registry()['sglang'].polling.metrics_path}"
        result = asyncio.run(_compare(ollama.port, url, "ollama", tmp_path))
    assert result.returncode == 0, result.stderr
    assert "spark1/ollama" in result.stdout
    *others, last = compared_engines()
    assert f"no PromQL for Ollama's numbers: only {', '.join(others)} or {last}'s are compared" in result.stdout
    assert {"vLLM", "SGLang", "TensorRT-LLM", "NIM", "llama.cpp"} <= set(compared_engines())


async def _compare(port: int, url: str, engine: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    async with PrometheusServer([url]) as prometheus:
        config_file = tmp_path / "compare.toml"
        config_file.write_text(one_node_config(port, engine) + f'[prometheus]\nurl = "{prometheus.url}"\n')
        await _next_scrape(prometheus, time.time())
        return await asyncio.to_thread(run_sparktui, config_file, "snapshot", "--compare", "--window", f"{WINDOW_S:g}")


async def _compare_many(engine: str, ports: dict[str, int], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``snapshot --compare`` over one node running an ``engine`` instance per name on its port."""
    urls = [f"http://127.0.0.1:{port}{registry()[engine].polling.metrics_path}" for port in ports.values()]
    async with PrometheusServer(urls) as prometheus:
        (first, port), *others = ports.items()
        config = one_node_config(port, engine, first) + "".join(
            f'[[nodes.vllm]]\nname = "{name}"\nengine = "{engine}"\nport = {port}\n' for name, port in others
        )
        config_file = tmp_path / "compare.toml"
        config_file.write_text(config + f'[prometheus]\nurl = "{prometheus.url}"\n')
        await _next_scrape(prometheus, time.time())
        return await asyncio.to_thread(run_sparktui, config_file, "snapshot", "--compare", "--window", f"{WINDOW_S:g}")
