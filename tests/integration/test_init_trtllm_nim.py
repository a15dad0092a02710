"""``sparktui init`` finds a TensorRT-LLM ``trtllm-serve`` and a NIM for LLMs by what their ports answer
(``tests/support/engine_server.py`` at ``trtllm-serve``'s routes, ``tests/support/nim_server.py`` at
NIM's), writes them with ``engine = "trtllm"`` and ``engine = "nim"``, never asks a trtllm-serve's
``/metrics`` (reading it drains the stats its own Prometheus gauges are fed from), and tells a NIM from a
vLLM on the port both use by default. Over the real sshd (stub ``systemctl`` and ``docker``), the unit or
container that runs a trtllm-serve is found and written with it. What is asserted is read from the running
servers."""

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
from sparktui.model.specs import FleetSpec, ServerSpec
from tests.integration.test_init import ssh_args, unit, unwrapped
from tests.integration.test_init_llamacpp import other_ports_unused, snapshot
from tests.integration.test_nim import _server as nim_engine
from tests.integration.test_trtllm import VERSION
from tests.integration.test_trtllm import _server as trtllm_engine
from tests.support.actions import FAST
from tests.support.engine_server import EngineServer
from tests.support.fixture_fleet import free_port
from tests.support.nim_server import RELEASE
from tests.support.sshd import Sshd, published_container

VLLM_DATA = Path(__file__).resolve().parents[1] / "data" / "vllm-0.33" / "mtp2-steady"


def probed_elsewhere() -> list[str]:
    """llama-server's and SGLang's ports, and every role the test does not give, on free ports."""
    return ["--llamacpp-ports", str(free_port()), "--sglang-ports", str(free_port()), *other_ports_unused()]


def init(out: Path, *ports: str) -> None:
    """``sparktui init 127.0.0.1 --no-ssh`` with ``ports`` after the free ones (the last option wins)."""
    assert main(["init", "127.0.0.1", "--no-ssh", "--output", str(out), *probed_elsewhere(), *ports]) == 0


def asked_metrics(server: EngineServer) -> list[str]:
    return [path for path in server.asked if path == "/metrics" or path.startswith("/metrics?")]


def written(out: Path) -> tuple[str, FleetSpec, ServerSpec]:
    """The config init wrote, loaded, and its one node's one instance."""
    text = out.read_text()
    spec = parse_config(text, source=str(out), env={})
    (node,) = spec.nodes
    (instance,) = node.vllm
    return text, spec, instance


def first_restart_command(spec: FleetSpec, instance: str) -> str:
    """What a restart of the instance runs first: its unit's or its container's."""
    plan = plan_restart(spec, spec.nodes[0].name, instance, settings=FAST)
    assert isinstance(plan, ActionPlan)
    return plan.commands[0]


def model_tail(model: str) -> str | None:
    return config_name(model.rsplit("/", 1)[-1])


def test_init_writes_a_trtllm_serve_as_a_trtllm_instance_and_never_asks_its_metrics(tmp_path: Path) -> None:
    out = tmp_path / "fleet.toml"
    with trtllm_engine().serving() as server:
        init(out, "--trtllm-ports", str(server.port))
        asked_by_init = list(server.asked)
        text = out.read_text()
        (node,) = parse_config(text, source=str(out), env={}).nodes
        (instance,) = node.vllm
        assert (instance.engine, instance.port) == ("trtllm", server.port)
        assert instance.name == model_tail(server.model)
        assert f"TensorRT-LLM {VERSION} answered /prometheus/metrics; serves {server.model}" in unwrapped(text)
        assert "return_perf_metrics" not in text  # its /prometheus/metrics has trtllm_ names
        shown = snapshot(out, "--json")
    assert "/prometheus/metrics" in asked_by_init
    assert asked_metrics(server) == [], server.asked
    assert shown.returncode == 0, shown.stderr
    (found,) = json.loads(shown.stdout)["nodes"]
    (read,) = found["instances"]
    assert (read["name"], read["engine"], read["version"]) == (instance.name, "TensorRT-LLM", VERSION)


def test_a_trtllm_serve_without_perf_metrics_on_an_extra_port_is_written_with_how_to_enable_them(
    tmp_path: Path,
) -> None:
    """No ``/prometheus/metrics`` (no ``return_perf_metrics``): ``owned_by "tensorrt_llm"`` says what it
    is, not the vLLM its ``/version`` looks like."""
    out = tmp_path / "fleet.toml"
    server = trtllm_engine()
    server_without = EngineServer(
        bodies=server.bodies,
        model=server.model,
        metrics_path="/not-served",
        health={"/health": b""},
        pages={"/version": {"version": VERSION}, "/metrics": []},
        filterable=True,
        owned_by="tensorrt_llm",
    )
    with server_without.serving() as plain:
        assert httpx.get(f"http://127.0.0.1:{plain.port}/prometheus/metrics", timeout=10).status_code == 404
        init(out, "--trtllm-ports", str(free_port()), "--ports", str(plain.port))
    text = out.read_text()
    (node,) = parse_config(text, source=str(out), env={}).nodes
    assert [(v.engine, v.port, v.name) for v in node.vllm] == [("trtllm", plain.port, model_tail(plain.model))]
    assert "start trtllm-serve with return_perf_metrics: true" in unwrapped(text)
    assert asked_metrics(plain) == [], plain.asked


def test_init_writes_a_nim_as_a_nim_instance_and_a_loading_one_too(tmp_path: Path) -> None:
    out = tmp_path / "fleet.toml"
    with nim_engine().serving() as ready, nim_engine().serving() as loading:
        loading.ready = False
        init(out, "--nim-ports", f"{ready.port},{loading.port}")
    text = out.read_text()
    (node,) = parse_config(text, source=str(out), env={}).nodes
    name = model_tail(ready.model)
    assert [(v.engine, v.port) for v in node.vllm] == [("nim", ready.port), ("nim", loading.port)]
    assert [v.name for v in node.vllm] == [name, f"{name}-{loading.port}"]
    assert f"NIM {RELEASE} answered /v1/version; serves {ready.model}" in unwrapped(text)
    assert unwrapped(text).count("its model was still loading") == 1


def test_a_vllm_on_nims_port_is_a_vllm_and_a_nim_on_vllms_port_is_a_nim(tmp_path: Path) -> None:
    """8000 is both engines' default: ``/v1/version`` (NIM's) or ``/version`` (vLLM's) decides, whatever
    the port was probed for."""
    out = tmp_path / "fleet.toml"
    bodies = [(VLLM_DATA / "scrape-000.prom").read_text()]
    vllm = EngineServer(
        bodies=bodies,
        model="Qwen/Qwen3-8B",
        metrics_path="/metrics",
        health={"/health": b""},
        pages={"/version": {"version": "0.33.0"}},
        filterable=True,
        owned_by="vllm",
    )
    with vllm.serving() as as_vllm, nim_engine().serving() as nim:
        init(out, "--nim-ports", str(as_vllm.port), "--vllm-ports", str(nim.port))
    text = out.read_text()
    (node,) = parse_config(text, source=str(out), env={}).nodes
    assert sorted((v.engine, v.port) for v in node.vllm) == sorted([("vllm", as_vllm.port), ("nim", nim.port)])


# --- over SSH: the unit or container that runs a trtllm-serve -----------------------------------------


def test_init_finds_the_unit_that_runs_a_trtllm_serve_on_a_port_not_probed_and_never_asks_its_metrics(
    sshd_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The port trtllm-serve answers on is not among those probed: init reads it from the unit's
    ExecStart, asks it in its second round, and finds trtllm-serve's /prometheus/metrics."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # only the test's key is offered
    sshd: Sshd = sshd_factory("init-trtllm-unit")
    out = tmp_path / "fleet.toml"
    with trtllm_engine().serving() as server:
        line = (
            f"/usr/local/bin/trtllm-serve {server.model} --backend pytorch --host 0.0.0.0 --port {server.port} "
            "--extra_llm_api_options /etc/trtllm/extra.yml"
        )
        sshd.set_unit("trtllm-llama.service", unit("TensorRT-LLM", line))
        code = main(["init", "127.0.0.1", "-o", str(out), *ssh_args(sshd), *probed_elsewhere()])
        assert asked_metrics(server) == [], server.asked
        assert "/prometheus/metrics" in server.asked
    assert code == 0, capsys.readouterr().err
    text, spec, instance = written(out)
    assert (instance.name, instance.engine, instance.port, instance.unit) == (
        model_tail(server.model),
        "trtllm",
        server.port,
        "trtllm-llama.service",
    )
    flat = unwrapped(text)
    assert f"on this port by `--port {server.port}` in the unit's ExecStart" in flat
    assert "--extra_llm_api_options /etc/trtllm/extra.yml" in flat
    assert "1 TensorRT-LLM unit and no TensorRT-LLM containers" in flat
    assert first_restart_command(spec, instance.name) == "sudo -n systemctl restart trtllm-llama.service"


def test_init_finds_the_release_image_container_that_publishes_a_trtllm_serve(
    sshd_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Spark playbook's way: NVIDIA's release image running ``bash -c "... trtllm-serve ..."``, its
    port 8355 published on the port the server answers on."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    sshd: Sshd = sshd_factory("init-trtllm-container")
    out = tmp_path / "fleet.toml"
    with trtllm_engine().serving() as server:
        command = f"hf download {server.model} && trtllm-serve {server.model} --host 0.0.0.0 --port 8355"
        data = published_container(
            "trtllm-llama",
            "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc2",
            ["bash", "-c", command],
            container_port=8355,
            host_port=server.port,
        )
        sshd.set_container("trtllm-llama", data)
        code = main(["init", "127.0.0.1", "-o", str(out), *ssh_args(sshd), *probed_elsewhere()])
        assert asked_metrics(server) == [], server.asked
    assert code == 0, capsys.readouterr().err
    text, spec, instance = written(out)
    assert (instance.engine, instance.port, instance.container, instance.unit) == (
        "trtllm",
        server.port,
        "trtllm-llama",
        None,
    )
    assert f"port mapping `{server.port}->8355` (`--port 8355` in the container)" in unwrapped(text)
    assert first_restart_command(spec, instance.name) == "docker restart trtllm-llama"


def test_init_finds_the_nim_container_that_publishes_a_nim_on_a_port_not_probed(
    sshd_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NIM container as ``docker inspect`` shows it: an ``nvcr.io/nim/`` image whose entrypoint starts
    the server on ``NIM_SERVER_PORT``, published on the port the NIM answers on (asked in the second round)."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    sshd: Sshd = sshd_factory("init-nim-container")
    out = tmp_path / "fleet.toml"
    with nim_engine().serving() as server:
        data = published_container(
            "llama8b",
            "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4",
            ["/opt/nvidia/nvidia_entrypoint.sh", "/opt/nim/start_server.sh"],
            container_port=9000,
            host_port=server.port,
            entrypoint=["/opt/nvidia/nvidia_entrypoint.sh"],
        )
        data["Config"]["Env"] = ["NIM_SERVER_PORT=9000", "NGC_API_KEY=not-read"]
        sshd.set_container("llama8b", data)
        code = main(["init", "127.0.0.1", "-o", str(out), *ssh_args(sshd), *probed_elsewhere()])
    assert code == 0, capsys.readouterr().err
    text, spec, instance = written(out)
    assert (instance.name, instance.engine, instance.port, instance.container) == (
        model_tail(server.model),
        "nim",
        server.port,
        "llama8b",
    )
    flat = unwrapped(text)
    assert f"port mapping `{server.port}->9000` (`NIM_SERVER_PORT=9000` in the container)" in flat
    assert "not-read" not in text
    assert first_restart_command(spec, instance.name) == "docker restart llama8b"
