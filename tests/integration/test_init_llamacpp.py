"""``sparktui init`` finds a real llama-server (``tests/support/llama_server.py``) by what its ``/props``
answers, writes it with ``engine = "llamacpp"``, and the config it writes loads and is read as llama.cpp
by ``sparktui snapshot``. What is asserted is read from the running server, not written down here."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sparktui.cli import main
from sparktui.config import parse_config
from sparktui.discovery.names import ROUTER_NAME, config_name, model_file_stem
from tests.support.fixture_fleet import free_port
from tests.support.llama_server import LlamaModels, LlamaServer, running_llama_router

pytestmark = pytest.mark.llamacpp

TEST_TIMEOUT_S = 120.0


def other_ports_unused() -> list[str]:
    """Every other role on a port nothing listens on (connection refused: fast)."""
    return [
        "--vllm-ports",
        str(free_port()),
        "--service-ports",
        f"asr={free_port()}",
        "--exporter-ports",
        str(free_port()),
    ]


def snapshot(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SPARKTUI_CONFIG=str(config))
    return subprocess.run(
        [sys.executable, "-m", "sparktui", "snapshot", "--interval", "0.5", *args],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_init_writes_a_llama_server_on_its_port_as_a_llamacpp_instance_that_snapshot_reads(
    real_llama_server: LlamaServer, tmp_path: Path
) -> None:
    props = httpx.get(f"{real_llama_server.url}/props", timeout=10).json()
    out = tmp_path / "fleet.toml"
    ports = ["--llamacpp-ports", str(real_llama_server.port), *other_ports_unused()]
    assert main(["init", "127.0.0.1", "--no-ssh", "--output", str(out), *ports]) == 0
    text = out.read_text()
    assert f"llama-server {props['build_info']} answered /props" in text
    (node,) = parse_config(text, source=str(out), env={}).nodes
    (instance,) = node.vllm
    assert instance.engine == "llamacpp"
    assert instance.port == real_llama_server.port
    assert instance.name == config_name(model_file_stem(props["model_path"]))
    assert f"{props['total_slots']} slots" in text  # read from /props, as the server was started

    shown = snapshot(out, "--json")
    assert shown.returncode == 0, shown.stderr
    (found,) = json.loads(shown.stdout)["nodes"]
    (read,) = found["instances"]
    assert (read["name"], read["engine"], read["version"]) == (instance.name, "llama.cpp", props["build_info"])
    assert read["status"]["state"] == "up"
    plain = snapshot(out)
    assert plain.returncode == 0, plain.stderr
    assert "llama.cpp" in plain.stdout and instance.name in plain.stdout


def test_a_llama_server_on_an_extra_port_is_found_by_what_it_answers(
    real_llama_server: LlamaServer, tmp_path: Path
) -> None:
    """``--ports`` names no engine: ``/props`` says it is a llama-server, not a vLLM."""
    ports = ["--llamacpp-ports", str(free_port()), "--ports", str(real_llama_server.port), *other_ports_unused()]
    out = tmp_path / "fleet.toml"
    assert main(["init", "127.0.0.1", "--no-ssh", "--output", str(out), *ports]) == 0
    (node,) = parse_config(out.read_text(), source=str(out), env={}).nodes
    assert [(v.engine, v.port) for v in node.vllm] == [("llamacpp", real_llama_server.port)]


async def test_a_router_is_written_as_the_router(llama_models: LlamaModels, tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"{name}.gguf").symlink_to(llama_models.tiny)
    out = tmp_path / "fleet.toml"
    async with asyncio.timeout(TEST_TIMEOUT_S), running_llama_router(folder, tmp_path / "router.log") as server:
        async with httpx.AsyncClient(timeout=10) as client:
            assert (await client.get(f"{server.url}/props")).json()["role"] == "router"
            listed = (await client.get(f"{server.url}/v1/models")).json()["data"]
        argv = ["init", "127.0.0.1", "--no-ssh", "-o", str(out), "--llamacpp-ports", str(server.port)]
        assert await asyncio.to_thread(main, [*argv, *other_ports_unused()]) == 0
    text = out.read_text()
    (node,) = parse_config(text, source=str(out), env={}).nodes
    (instance,) = node.vllm
    assert (instance.name, instance.engine, instance.port) == (ROUTER_NAME, "llamacpp", server.port)
    assert f"a router serving {len(listed)} models" in text
