"""``sparktui init`` finds an SGLang (``tests/support/sglang_server.py``: a real HTTP server at SGLang
0.5.23's routes) by what it answers, writes it with ``engine = "sglang"``, never asks its ``/health``
(which runs a generation), and the config it writes loads and is read as SGLang by ``sparktui snapshot``.
Over the real sshd (stub ``systemctl`` and ``docker``), the unit or container whose command line runs it
is found and written with it. What is asserted is read from the running server, not written down here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from sparktui.actions.plans import ActionPlan, plan_restart
from sparktui.cli import main
from sparktui.config import parse_config
from sparktui.discovery.names import config_name
from tests.integration.test_init import ssh_args, unit, unwrapped
from tests.integration.test_init_llamacpp import other_ports_unused, snapshot
from tests.support.actions import FAST
from tests.support.fixture_fleet import free_port
from tests.support.sglang_server import SglangServer
from tests.support.sshd import Sshd, published_container


def probed_elsewhere() -> list[str]:
    """Every role but SGLang's on a port nothing listens on (llama-server's too)."""
    return ["--llamacpp-ports", str(free_port()), *other_ports_unused()]


def model_tail(model: str) -> str | None:
    return config_name(model.rsplit("/", 1)[-1])


def test_init_writes_an_sglang_on_its_port_as_an_sglang_instance_that_snapshot_reads(tmp_path: Path) -> None:
    out = tmp_path / "fleet.toml"
    with SglangServer("tp2").serving() as server:
        info = httpx.get(f"http://127.0.0.1:{server.port}/server_info", timeout=10).json()
        argv = ["init", "127.0.0.1", "--no-ssh", "--output", str(out), "--sglang-ports", str(server.port)]
        assert main([*argv, *probed_elsewhere()]) == 0
        asked_by_init = list(server.asked)
        text = out.read_text()
        (node,) = parse_config(text, source=str(out), env={}).nodes
        (instance,) = node.vllm
        assert (instance.engine, instance.port) == ("sglang", server.port)
        assert instance.name == model_tail(info["model_path"])
        assert f"SGLang {info['version']} answered /server_info; serves {info['served_model_name']}" in text
        assert f"It runs tensor parallel {info['tp_size']} (/server_info)." in unwrapped(text)
        assert "--enable-metrics" not in text  # its /metrics answered

        shown = snapshot(out, "--json")
    assert not any(path.startswith("/health") for path in asked_by_init), asked_by_init
    assert shown.returncode == 0, shown.stderr
    (found,) = json.loads(shown.stdout)["nodes"]
    (read,) = found["instances"]
    assert (read["name"], read["engine"], read["version"]) == (instance.name, "SGLang", info["version"])
    assert read["status"]["state"] == "up"


def test_an_sglang_without_enable_metrics_on_an_extra_port_is_written_with_a_comment(tmp_path: Path) -> None:
    """``--ports`` names no engine: ``/server_info`` says it is an SGLang, not the Ollama its
    ``/api/tags`` looks like nor an unknown OpenAI-compatible server."""
    out = tmp_path / "fleet.toml"
    with SglangServer("single", enable_metrics=False, served_model_name="qwen-chat").serving() as server:
        assert httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=10).status_code == 404
        ports = ["--sglang-ports", str(free_port()), "--ports", str(server.port), *probed_elsewhere()]
        assert main(["init", "127.0.0.1", "--no-ssh", "-o", str(out), *ports]) == 0
    text = out.read_text()
    (node,) = parse_config(text, source=str(out), env={}).nodes
    assert [(v.name, v.engine, v.port) for v in node.vllm] == [("qwen-chat", "sglang", server.port)]
    assert "start SGLang with --enable-metrics for numbers" in unwrapped(text)
    assert "[[nodes.services]]" not in text


# --- over SSH: the unit or container that runs it -----------------------------------------------------


def test_init_finds_the_unit_that_runs_an_sglang_and_a_restart_goes_through_systemd(
    sshd_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The port SGLang answers on is not among those probed: init reads it from the unit's ExecStart,
    asks it, and finds SGLang's /server_info."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # only the test's key is offered
    sshd: Sshd = sshd_factory("init-sglang-unit")
    out = tmp_path / "fleet.toml"
    with SglangServer("single").serving() as server:
        model = server.model_path
        line = (
            f"/opt/sglang/.venv/bin/python3 -m sglang.launch_server --model-path {model} --host 0.0.0.0 "
            f"--port {server.port} --enable-metrics"
        )
        sshd.set_unit("sglang-qwen.service", unit("SGLang Qwen", line))
        sshd.set_unit("ollama.service", unit("Ollama", "/usr/local/bin/ollama serve"))
        probed = ["--sglang-ports", str(free_port()), *probed_elsewhere()]
        code = main(["init", "127.0.0.1", "-o", str(out), *ssh_args(sshd), *probed])
        assert not any(path.startswith("/health") for path in server.asked), server.asked
    assert code == 0, capsys.readouterr().err
    text = out.read_text()
    spec = parse_config(text, source=str(out), env={})
    (node,) = spec.nodes
    instance, ollama = node.vllm  # the Ollama's unit is Ollama's, not an SGLang's
    assert (ollama.engine, ollama.unit, ollama.port) == ("ollama", "ollama.service", 11434)
    assert (instance.name, instance.engine, instance.port, instance.unit, instance.container) == (
        model_tail(model),
        "sglang",
        server.port,
        "sglang-qwen.service",
        None,
    )
    flat = unwrapped(text)
    assert f"on this port by `--port {server.port}` in the unit's ExecStart" in flat
    assert f"model: {model} (--model-path)" in flat
    assert "ollama" not in text.split("[[nodes.vllm]]")[1]
    assert "no vLLM units and no vLLM containers, 1 SGLang unit and no SGLang containers" in flat
    plan = plan_restart(spec, node.name, instance.name, settings=FAST)
    assert isinstance(plan, ActionPlan) and plan.commands[0] == "sudo -n systemctl restart sglang-qwen.service"


def test_init_finds_the_official_image_container_that_publishes_an_sglang(
    sshd_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A container of lmsysorg/sglang as ``docker inspect`` shows it: no entrypoint, its command
    ``python3 -m sglang.launch_server`` with no ``--port`` (SGLang's default, 30000, in the container),
    published on the port the server answers on."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    sshd: Sshd = sshd_factory("init-sglang-container")
    out = tmp_path / "fleet.toml"
    with SglangServer("dp2").serving() as server:
        argv = ["python3", "-m", "sglang.launch_server", "--model-path", server.model_path, "--host", "0.0.0.0"]
        data = published_container(
            "sglang-qwen", "lmsysorg/sglang:latest", [*argv, "--dp", "2"], container_port=30000, host_port=server.port
        )
        sshd.set_container("sglang-qwen", data)
        probed = ["--sglang-ports", str(server.port), *probed_elsewhere()]
        code = main(["init", "127.0.0.1", "-o", str(out), *ssh_args(sshd), *probed])
    assert code == 0, capsys.readouterr().err
    text = out.read_text()
    spec = parse_config(text, source=str(out), env={})
    (node,) = spec.nodes
    (instance,) = node.vllm
    assert (instance.engine, instance.port, instance.container, instance.unit) == (
        "sglang",
        server.port,
        "sglang-qwen",
        None,
    )
    flat = unwrapped(text)
    assert f"port mapping `{server.port}->30000` (SGLang's default port 30000 in the container)" in flat
    assert "It runs data parallel 2 (/server_info)." in flat
    plan = plan_restart(spec, node.name, instance.name, settings=FAST)
    assert isinstance(plan, ActionPlan) and plan.commands[0] == "docker restart sglang-qwen"
