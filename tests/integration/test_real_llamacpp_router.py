"""The facts of llama.cpp's real llama-server in router mode (``--models-dir``, no ``-m``) that reading a
router without waking any model relies on (``sparktui/engines/llamacpp/router.py``).

Each test starts a router of its own (``tests/support/llama_server.py``, ``running_llama_router``) at
``--models-max 1`` over a folder of three GGUFs: ``a`` and ``b``, links to the tiny model, and ``bad``,
4,096 zero bytes that no child can load. A router answers ``/health`` with no model loaded, so each
starts in a fraction of a second; loading the tiny model takes about 0.1 s. Statuses are read from the
router's ``/v1/models`` as served (``status.value``, ``status.args``); the pure reader is checked on
the same live bodies. Each test waits on conditions with a deadline and ends within ``TEST_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.engines.llamacpp.router import ModelState, is_router, read_router_models
from tests.support.llama_server import LlamaModels, LlamaServer, running_llama_router
from tests.support.wait import wait_until

pytestmark = pytest.mark.llamacpp
TEST_TIMEOUT_S = 60.0
LOAD_TIMEOUT_S = 20.0  # about 0.1 s on an idle machine
MODELS = ("a", "b", "bad")
N_PREDICT = 5
SLEEP_IDLE_S = 2  # the children's --sleep-idle-seconds, passed on by the router
READS = 5  # times each read is repeated to show it loads nothing


def models_dir(tmp_path: Path, models: LlamaModels) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"{name}.gguf").symlink_to(models.tiny)
    (folder / "bad.gguf").write_bytes(bytes(4096))
    return folder


@asynccontextmanager
async def router(
    tmp_path: Path, models: LlamaModels, *args: str
) -> AsyncIterator[tuple[LlamaServer, httpx.AsyncClient]]:
    folder = models_dir(tmp_path, models)
    async with (
        asyncio.timeout(TEST_TIMEOUT_S),
        running_llama_router(folder, tmp_path / "router.log", "--models-max", "1", *args) as server,
        # No kept-alive connection: the router closed one right after proxying a completion (seen in CI),
        # and a test's GET would fail on it before asking anything.
        httpx.AsyncClient(timeout=30.0, limits=httpx.Limits(max_keepalive_connections=0)) as client,
    ):
        yield server, client


async def get(client: httpx.AsyncClient, url: str, status: int = 200) -> httpx.Response:
    response = await client.get(url)
    assert response.status_code == status, f"{url}: {response.status_code} {response.text[:300]}"
    return response


async def statuses(client: httpx.AsyncClient, server: LlamaServer) -> dict[str, dict[str, Any]]:
    """Each model's ``status`` object in the router's ``/v1/models``."""
    found = (await get(client, f"{server.url}/v1/models")).json()
    return {card["id"]: card["status"] for card in found["data"]}


async def values(client: httpx.AsyncClient, server: LlamaServer) -> dict[str, str]:
    return {name: status["value"] for name, status in (await statuses(client, server)).items()}


def port_arg(status: dict[str, Any]) -> int:
    args = status["args"]
    return int(args[args.index("--port") + 1])


async def wait_for(client: httpx.AsyncClient, server: LlamaServer, model: str, value: str) -> dict[str, Any]:
    """Until ``model``'s status is ``value``; its status then."""
    seen: dict[str, str] = {}

    async def reached() -> bool:
        seen.update(await values(client, server))
        return seen[model] == value

    await wait_until(reached, LOAD_TIMEOUT_S, what=f"{model} {value}", detail=lambda: f"statuses {seen}")
    return (await statuses(client, server))[model]


async def complete(client: httpx.AsyncClient, server: LlamaServer, model: str) -> None:
    """A completion sent to the router for ``model`` (the router starts its child if it has none)."""
    body = {"model": model, "prompt": [1, 1000, 1001], "n_predict": N_PREDICT, "ignore_eos": True, "temperature": 0.0}
    response = await client.post(f"{server.url}/completion", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["tokens_predicted"] == N_PREDICT


def samples(text: str) -> dict[str, float]:
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}


async def test_a_router_says_so_and_reading_it_loads_nothing(tmp_path: Path, llama_models: LlamaModels) -> None:
    """``/props`` is the router's; every model is unloaded until asked for, its args with ``--port 0``;
    ``/health``, ``/props`` and ``/v1/models`` load nothing however often they are asked; ``/metrics``
    and ``/slots`` want a model; ``?model=X&autoload=false`` on an unloaded X is refused, loading nothing."""
    async with router(tmp_path, llama_models) as (server, client):
        props = await get(client, f"{server.url}/props")
        assert is_router(props.content)
        found = props.json()
        assert (found["role"], found["max_instances"], found["models_autoload"]) == ("router", 1, True)
        first = await statuses(client, server)
        assert {name: status["value"] for name, status in first.items()} == dict.fromkeys(MODELS, "unloaded")
        assert {port_arg(status) for status in first.values()} == {0}
        for _ in range(READS):
            assert (await get(client, f"{server.url}/health")).json() == {"status": "ok"}
            await get(client, f"{server.url}/props")
            assert await values(client, server) == dict.fromkeys(MODELS, "unloaded")
        for path in ("/metrics", "/slots"):
            refused = await get(client, f"{server.url}{path}", 400)
            assert refused.json()["error"]["message"] == "model name is missing from the request"
        for path in ("/metrics", "/props", "/slots"):
            refused = await get(client, f"{server.url}{path}?model=a&autoload=false", 400)
            assert refused.json()["error"]["message"] == "model is not loaded"
        assert await statuses(client, server) == first
        assert "spawning server instance" not in server.log_text()


async def test_a_loaded_models_child_answers_on_its_own_port_and_reading_it_changes_no_status(
    tmp_path: Path, llama_models: LlamaModels
) -> None:
    """A request for a model loads it: its child listens on 127.0.0.1 at the ``--port`` of its args.
    The child is a single server: its ``/health``, ``/metrics`` and ``/props`` (no ``role``) answer there,
    and through the router with ``?model=a&autoload=false``; no model's status moves."""
    async with router(tmp_path, llama_models) as (server, client):
        await complete(client, server, "a")
        loaded = await statuses(client, server)
        assert {name: status["value"] for name, status in loaded.items()} == {
            "a": "loaded",
            "b": "unloaded",
            "bad": "unloaded",
        }
        args = loaded["a"]["args"]
        assert args[args.index("--host") + 1] == "127.0.0.1"  # the router's host only
        port = port_arg(loaded["a"])
        assert port != server.port
        body = (await get(client, f"{server.url}/v1/models")).content
        (child,) = read_router_models(body).children
        assert (child.id, child.state, child.port) == ("a", ModelState.LOADED, port)
        url = f"http://127.0.0.1:{port}"
        for _ in range(READS):
            assert (await get(client, f"{url}/health")).json() == {"status": "ok"}
            counters = samples((await get(client, f"{url}/metrics")).text)
            assert counters["llamacpp:tokens_predicted_total"] == N_PREDICT
            answer = await get(client, f"{url}/props")
            props = answer.json()
            assert "role" not in props and not is_router(answer.content)
            assert (props["model_alias"], props["total_slots"], props["is_sleeping"]) == ("a", 2, False)
            proxied = (await get(client, f"{server.url}/props?model=a&autoload=false")).json()
            assert (proxied["model_alias"], proxied["is_sleeping"]) == ("a", False)
            via_router = samples((await get(client, f"{server.url}/metrics?model=a&autoload=false")).text)
            assert via_router["llamacpp:tokens_predicted_total"] == N_PREDICT
        assert await statuses(client, server) == loaded


async def test_a_model_is_loading_until_its_child_is_ready_and_an_unloaded_one_keeps_its_last_port(
    tmp_path: Path, llama_models: LlamaModels
) -> None:
    """``POST /models/load`` answers at once, the model ``loading`` with its child's port already in its
    args; then ``loaded``. Loading another at ``--models-max 1`` unloads the first, whose args still name
    its old child's port (the reader gives none for an unloaded model). ``POST /models/unload`` unloads."""
    async with router(tmp_path, llama_models) as (server, client):
        started = await client.post(f"{server.url}/models/load", json={"model": "a"})
        assert started.json() == {"success": True}
        loading = await statuses(client, server)
        assert loading["a"]["value"] == "loading"
        port = port_arg(loading["a"])
        assert port > 0
        assert port_arg(await wait_for(client, server, "a", "loaded")) == port
        await client.post(f"{server.url}/models/load", json={"model": "b"})
        await wait_for(client, server, "b", "loaded")
        after = await statuses(client, server)
        assert after["a"]["value"] == "unloaded" and port_arg(after["a"]) == port
        read = {
            model.id: model
            for model in read_router_models((await get(client, f"{server.url}/v1/models")).content).models
        }
        assert (read["a"].state, read["a"].port) == (ModelState.UNLOADED, None)
        assert read["b"].state is ModelState.LOADED and read["b"].port == port_arg(after["b"])
        unloaded = await client.post(f"{server.url}/models/unload", json={"model": "b"})
        assert unloaded.json() == {"success": True}
        await wait_for(client, server, "b", "unloaded")


async def test_asking_the_router_for_a_models_metrics_or_props_loads_it_and_evicts_the_other(
    tmp_path: Path, llama_models: LlamaModels
) -> None:
    """Why sparktui never sends ``?model=X`` without ``autoload=false``: at ``--models-max 1`` a read of
    b's ``/metrics`` through the router loads b and unloads a, and a read of a's ``/props`` does the
    reverse."""
    async with router(tmp_path, llama_models) as (server, client):
        await complete(client, server, "a")
        await get(client, f"{server.url}/metrics?model=b")
        assert await values(client, server) == {"a": "unloaded", "b": "loaded", "bad": "unloaded"}
        await get(client, f"{server.url}/props?model=a")
        assert await values(client, server) == {"a": "loaded", "b": "unloaded", "bad": "unloaded"}


async def test_a_model_whose_child_fails_to_start_is_unloaded_and_marked_failed(
    tmp_path: Path, llama_models: LlamaModels
) -> None:
    """A child that exits while loading leaves its model ``unloaded`` with ``failed`` and the exit code:
    no ``failed`` status value."""
    async with router(tmp_path, llama_models) as (server, client):
        await client.post(f"{server.url}/models/load", json={"model": "bad"})
        seen: dict[str, Any] = {}

        async def ended() -> bool:
            seen.update((await statuses(client, server))["bad"])
            return bool(seen["value"] != "loading")

        await wait_until(ended, LOAD_TIMEOUT_S, what="bad's child ended", detail=lambda: f"status {seen}")
        assert (seen["value"], seen.get("failed"), seen.get("exit_code")) == ("unloaded", True, 1)
        read = {
            model.id: model
            for model in read_router_models((await get(client, f"{server.url}/v1/models")).content).models
        }
        assert (read["bad"].state, read["bad"].exit_code, read["bad"].port) == (ModelState.FAILED, 1, None)


async def test_the_routers_sleep_option_reaches_its_children_and_reading_a_sleeping_child_leaves_it_asleep(
    tmp_path: Path, llama_models: LlamaModels
) -> None:
    """``--sleep-idle-seconds`` given to the router is in each child's args; an idle child sleeps and the
    router says ``sleeping`` (port unchanged). The child's ``/health``, ``/metrics``, ``/props``
    (``is_sleeping``), the same through the router with ``autoload=false``, and the router's
    ``/v1/models`` leave it asleep; the child's ``/slots`` wakes it (``loaded`` again)."""
    async with router(tmp_path, llama_models, "--sleep-idle-seconds", str(SLEEP_IDLE_S)) as (server, client):
        first = await statuses(client, server)
        args = first["a"]["args"]
        assert args[args.index("--sleep-idle-seconds") + 1] == str(SLEEP_IDLE_S)
        await complete(client, server, "a")
        port = port_arg((await statuses(client, server))["a"])
        asleep = await wait_for(client, server, "a", "sleeping")
        assert port_arg(asleep) == port
        url = f"http://127.0.0.1:{port}"
        for _ in range(READS):
            await get(client, f"{url}/health")
            await get(client, f"{url}/metrics")
            assert (await get(client, f"{url}/props")).json()["is_sleeping"] is True
            await get(client, f"{server.url}/metrics?model=a&autoload=false")
            assert (await get(client, f"{server.url}/props?model=a&autoload=false")).json()["is_sleeping"] is True
            assert (await values(client, server))["a"] == "sleeping"
            await asyncio.sleep(SLEEP_IDLE_S / READS)
        (child,) = read_router_models((await get(client, f"{server.url}/v1/models")).content).children
        assert (child.state, child.port) == (ModelState.SLEEPING, port)
        await get(client, f"{url}/slots")
        await wait_for(client, server, "a", "loaded")
