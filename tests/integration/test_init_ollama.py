"""``sparktui init`` finds an Ollama (``tests/support/ollama_server.py``: a real HTTP server answering
Ollama's documented JSON) by its ``/api/version`` and ``/api/tags``, writes it as an engine (``[[nodes.vllm]]``
with ``engine = "ollama"``, no longer a ``[[nodes.services]]``), asks it nothing that loads a model, and the
config it writes is read as Ollama by ``sparktui snapshot``. Over the real sshd (stub ``systemctl``), the
install's ``ollama.service`` is found with its port from ``OLLAMA_HOST`` in the unit's environment, and
written with it. What is asserted is read from the running server, not written down here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from sparktui.actions.plans import ActionPlan, plan_restart
from sparktui.cli import main
from sparktui.config import parse_config
from tests.integration.test_init import ssh_args, unit, unwrapped
from tests.integration.test_init_llamacpp import other_ports_unused, snapshot
from tests.support.actions import FAST
from tests.support.fixture_fleet import free_port
from tests.support.ollama_server import Model, OllamaServer
from tests.support.sshd import Sshd

LOADS_A_MODEL = ("POST", "/api/generate", "/api/chat", "/api/embed", "/api/show")


def probed_elsewhere() -> list[str]:
    """Every role but Ollama's on a port nothing listens on."""
    return ["--llamacpp-ports", str(free_port()), "--sglang-ports", str(free_port()), *other_ports_unused()]


def test_init_writes_an_ollama_on_its_port_as_an_ollama_engine_that_snapshot_reads(tmp_path: Path) -> None:
    out = tmp_path / "fleet.toml"
    models = [Model("gemma3", 3_338_801_804, expires_in_s=240.0), Model("qwen3:8b", 5_225_376_047)]
    with OllamaServer(models).serving() as server:
        base = f"http://127.0.0.1:{server.port}"
        version = httpx.get(f"{base}/api/version", timeout=10).json()["version"]
        names = [m["name"] for m in httpx.get(f"{base}/api/tags", timeout=10).json()["models"]]
        server.asked.clear()
        argv = ["init", "127.0.0.1", "--no-ssh", "--output", str(out), *probed_elsewhere()]
        assert main([*argv, "--ollama-ports", str(server.port)]) == 0  # after the free ones: the last wins
        asked_by_init = list(server.asked)
        text = out.read_text()
        (node,) = parse_config(text, source=str(out), env={}).nodes
        (instance,) = node.vllm
        assert (instance.name, instance.engine, instance.port) == ("ollama", "ollama", server.port)
        assert node.services == ()
        assert "[[nodes.services]]" not in text
        flat = unwrapped(text)
        assert f"Ollama {version} answered /api/version" in flat
        assert f"Models on its disk (/api/tags): {', '.join(names)}." in flat

        shown = snapshot(out, "--json")
        asked_by_snapshot = list(server.asked)
    # init asks nothing that loads a model; the dashboard's only request of that kind is its canary, which
    # names a model already loaded (keeping its expiry: engines/ollama/canary.py), never another.
    assert not any(path.startswith(LOADS_A_MODEL) for path in asked_by_init), asked_by_init
    canaries = [path for path in asked_by_snapshot if path.startswith(LOADS_A_MODEL)]
    assert set(canaries) <= {"POST /api/generate"}, asked_by_snapshot
    assert len(server.named_loaded) == len(canaries) and all(server.named_loaded), server.generated
    assert {"/api/version", "/api/tags"} <= set(asked_by_init)
    assert shown.returncode == 0, shown.stderr
    (found,) = json.loads(shown.stdout)["nodes"]
    (read,) = found["instances"]
    assert (read["name"], read["engine"], read["version"]) == (instance.name, "Ollama", version)
    assert read["status"]["state"] == "up"


def test_an_ollama_given_as_a_service_port_is_probed_there_and_written_as_an_engine(tmp_path: Path) -> None:
    """``--service-ports ollama=PORT`` (an Ollama was a side service) still probes the port; what answers
    is written as the engine."""
    out = tmp_path / "fleet.toml"
    with OllamaServer([Model("gemma3", 3_338_801_804)]).serving() as server:
        ports = [*probed_elsewhere(), "--ollama-ports", str(free_port()), "--service-ports", f"ollama={server.port}"]
        assert main(["init", "127.0.0.1", "--no-ssh", "-o", str(out), *ports]) == 0
    (node,) = parse_config(out.read_text(), env={}).nodes
    assert [(v.engine, v.port) for v in node.vllm] == [("ollama", server.port)]
    assert node.services == ()


# --- over SSH: the unit that runs it --------------------------------------------------------------------


def test_init_finds_the_ollama_unit_by_its_ollama_host_and_a_restart_goes_through_systemd(
    sshd_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The port Ollama answers on is not among those probed: init reads it from ``OLLAMA_HOST`` in the
    unit's environment (as ``systemctl edit ollama.service`` sets it), asks it, and finds Ollama."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # only the test's key is offered
    sshd: Sshd = sshd_factory("init-ollama-unit")
    out = tmp_path / "fleet.toml"
    with OllamaServer([Model("qwen3:8b", 5_225_376_047)]).serving() as server:
        host = f"127.0.0.1:{server.port}"
        properties = {**unit("Ollama Service", "/usr/local/bin/ollama serve"), "Environment": f"OLLAMA_HOST={host}"}
        sshd.set_unit("ollama.service", properties)
        probed = probed_elsewhere()  # Ollama's port too: init reads it from OLLAMA_HOST
        code = main(["init", "127.0.0.1", "-o", str(out), *ssh_args(sshd), *probed])
        version = httpx.get(f"http://{host}/api/version", timeout=10).json()["version"]
    assert code == 0, capsys.readouterr().err
    text = out.read_text()
    spec = parse_config(text, source=str(out), env={})
    (node,) = spec.nodes
    (instance,) = node.vllm
    assert (instance.engine, instance.port, instance.unit, instance.container) == (
        "ollama",
        server.port,
        "ollama.service",
        None,
    )
    flat = unwrapped(text)
    assert f"Ollama {version} answered /api/version" in flat
    assert f"on this port by `OLLAMA_HOST={host}` in the unit's Environment" in flat
    assert f"It listens on 127.0.0.1 only, by `OLLAMA_HOST={host}`" in flat  # sparktui must run on its node
    assert "1 Ollama unit and no Ollama containers" in flat
    plan = plan_restart(spec, node.name, instance.name, settings=FAST)
    assert isinstance(plan, ActionPlan) and plan.commands[0] == "sudo -n systemctl restart ollama.service"
