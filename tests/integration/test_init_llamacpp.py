"""``sparktui init`` finds a real llama-server (``tests/support/llama_server.py``) by what its ``/props``
answers, writes it with ``engine = "llamacpp"``, and the config it writes loads and is read as llama.cpp
by ``sparktui snapshot``. Over the real sshd (stub ``systemctl`` and ``docker``), the unit or container
whose command line runs it is found and written with it, and a restart planned from that config goes
through systemd. What is asserted is read from the running server, not written down here."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from sparktui.actions.audit import AuditLog
from sparktui.actions.plans import ActionPlan, plan_restart
from sparktui.actions.runner import ActionRunner
from sparktui.cli import main
from sparktui.config import parse_config
from sparktui.discovery.names import ROUTER_NAME, config_name, model_file_stem
from tests.integration.test_init import ssh_args, unit, unwrapped
from tests.support.actions import FAST
from tests.support.fixture_fleet import free_port
from tests.support.llama_server import LlamaModels, LlamaServer, running_llama_router
from tests.support.sshd import Sshd, published_container

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
        "--trtllm-ports",
        str(free_port()),
        "--nim-ports",
        str(free_port()),
        "--ollama-ports",
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


# --- over SSH: the unit or container that runs it -----------------------------------------------------


@pytest.fixture
def no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the test's key is offered, whatever agent the machine running the tests has."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def command_line(server: LlamaServer) -> list[str]:
    """The argv the real server was started with: ``.../bin/llama-server --host 127.0.0.1 --port N -m ...``."""
    return [str(word) for word in server.process.args]  # type: ignore[union-attr]


def without_options(words: list[str], *options: str) -> list[str]:
    """``words`` less each of ``options`` and the value after it."""
    kept: list[str] = []
    words_left = iter(words)
    for word in words_left:
        if word in options:
            next(words_left, None)
        else:
            kept.append(word)
    return kept


@pytest.mark.usefixtures("no_agent")
async def test_init_finds_the_unit_that_runs_a_real_llama_server_and_a_restart_goes_through_systemd(
    real_llama_server: LlamaServer, sshd_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The port llama-server answers on is not among those probed: init reads it from the unit's ExecStart
    (the command line the server was really started with), asks it, and finds llama-server's /props."""
    server: Sshd = sshd_factory("init-llama-unit")
    argv = command_line(real_llama_server)
    server.set_unit("llama-tiny.service", unit("llama.cpp tiny", " ".join(argv)))
    server.set_unit("ollama.service", unit("Ollama", "/usr/local/bin/ollama serve"))
    out = tmp_path / "fleet.toml"
    probed = ["--llamacpp-ports", str(free_port()), *other_ports_unused()]

    code = await asyncio.to_thread(main, ["init", "127.0.0.1", "-o", str(out), *ssh_args(server), *probed])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    text = out.read_text()
    spec = parse_config(text, source=str(out), env={})
    (node,) = spec.nodes
    instance, ollama = node.vllm  # the Ollama's unit is Ollama's, not a llama-server's
    assert (ollama.engine, ollama.unit, ollama.port) == ("ollama", "ollama.service", 11434)
    async with httpx.AsyncClient(timeout=10) as client:
        props = (await client.get(f"{real_llama_server.url}/props")).json()
    assert (instance.engine, instance.port, instance.unit, instance.container) == (
        "llamacpp",
        real_llama_server.port,
        "llama-tiny.service",
        None,
    )
    assert instance.name == config_name(model_file_stem(props["model_path"]))
    flat = unwrapped(text)
    assert f"llama-server {props['build_info']} answered /props" in text
    assert f"on this port by `--port {real_llama_server.port}` in the unit's ExecStart" in flat
    assert f"model: {argv[argv.index('-m') + 1]} (-m)" in flat
    assert "ollama" not in text.split("[[nodes.vllm]]")[1]
    assert "no vLLM units and no vLLM containers, 1 llama-server unit" in flat

    plan = plan_restart(spec, node.name, instance.name, settings=FAST)
    assert isinstance(plan, ActionPlan), plan
    assert plan.commands[0] == "sudo -n systemctl restart llama-tiny.service"
    runner = ActionRunner(spec, audit=AuditLog(tmp_path / "audit.log", user="tester"))
    try:
        async with asyncio.timeout(TEST_TIMEOUT_S):
            result = await runner.run(plan)
    finally:
        await runner.close()
    assert result.ok, result.lines()
    assert "systemctl restart llama-tiny.service" in server.calls()
    assert result.warmup is not None and result.warmup.model is not None  # the real server served it


@pytest.mark.usefixtures("no_agent")
def test_init_finds_the_official_image_container_that_publishes_a_real_llama_server(
    real_llama_server: LlamaServer, sshd_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A container of ghcr.io/ggml-org/llama.cpp:server-cuda as ``docker inspect`` shows it: entrypoint
    ``/app/llama-server``, no ``--port`` (its default, 8080, in the container), published on the port the
    real server answers on."""
    server: Sshd = sshd_factory("init-llama-container")
    argv = command_line(real_llama_server)
    args = without_options(argv[1:], "--host", "--port")
    image = "ghcr.io/ggml-org/llama.cpp:server-cuda"
    data = published_container(
        "llama-tiny",
        image,
        ["/app/llama-server", *args],
        container_port=8080,
        host_port=real_llama_server.port,
        entrypoint=["/app/llama-server"],
    )
    server.set_container("llama-tiny", data)
    out = tmp_path / "fleet.toml"
    probed = ["--llamacpp-ports", str(real_llama_server.port), *other_ports_unused()]

    code = main(["init", "127.0.0.1", "-o", str(out), *ssh_args(server), *probed])

    assert code == 0, capsys.readouterr().err
    text = out.read_text()
    spec = parse_config(text, source=str(out), env={})
    (node,) = spec.nodes
    (instance,) = node.vllm
    assert (instance.engine, instance.port, instance.container, instance.unit) == (
        "llamacpp",
        real_llama_server.port,
        "llama-tiny",
        None,
    )
    port = real_llama_server.port
    assert f"port mapping `{port}->8080` (llama-server's default port 8080 in the container)" in unwrapped(text)
    plan = plan_restart(spec, node.name, instance.name, settings=FAST)
    assert isinstance(plan, ActionPlan) and plan.commands[0] == "docker restart llama-tiny"
