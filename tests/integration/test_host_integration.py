"""Host state end to end: the sampler over a real OpenSSH server (stub service managers), merged
into the fleet model next to the HTTP polls, and shown by ``sparktui snapshot``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.config import parse_config
from sparktui.headless.snapshot import collect, render_snapshot
from sparktui.model.fleet import NodeView
from sparktui.model.specs import FleetSpec
from sparktui.model.status import State
from tests.support.fixture_fleet import FixtureNode, free_port, start_node
from tests.support.sshd import Sshd

UNIT = "vllm-itest.service"


def _meminfo_total_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal")


@pytest.fixture
def node() -> Iterator[FixtureNode]:
    started = start_node("spark1", "mtp2-steady", "gb10", advance_every_s=None)
    yield started
    for server in started.servers():
        server.stop()


def _config(
    node: FixtureNode,
    sshd: Sshd,
    *,
    vllm_url: str | None = None,
    known_hosts: Path | None = None,
    unit: str = UNIT,
) -> str:
    return f"""
poll_interval_s = 0.5
timeout_s = 1.0

[[nodes]]
name = "spark1"
host = "{sshd.host}"

[nodes.ssh]
user = "{sshd.user}"
port = {sshd.port}
key_file = "{sshd.client_key}"
known_hosts = "{known_hosts or sshd.known_hosts}"
connect_timeout_s = 3.0

[[nodes.vllm]]
name = "qwen36"
url = "{vllm_url or node.vllm.url}"
unit = "{unit}"
gpu_memory_utilization = 0.55

[nodes.gpu_exporter]
url = "{node.gpu.url}/metrics"
"""


async def _view(config: str) -> NodeView:
    fleet: FleetSpec = parse_config(config, source="itest.toml")
    monitor, _now = await collect(fleet, polls=2, interval_s=0.3)
    (view,) = monitor.views
    return view


async def test_host_state_streams_over_ssh_next_to_the_http_numbers(node: FixtureNode, sshd: Sshd) -> None:
    sshd.set_unit(
        UNIT,
        {
            "LoadState": "loaded",
            "ActiveState": "active",
            "SubState": "running",
            "ExecMainStatus": "0",
            "NRestarts": "0",
            "ExecStart": "{ path=/bin/sh ; argv[]=/bin/sh }",
        },
    )
    view = await _view(_config(node, sshd))
    assert view.host_problem is None
    assert view.host_state is not None
    # The sampler read this machine's real /proc over SSH.
    assert view.host_memory is not None and view.host_memory.mem_total == _meminfo_total_bytes()
    assert view.ledger is not None and sum(size for _, size in view.ledger.segments()) == pytest.approx(
        _meminfo_total_bytes()
    )
    service = view.instances[0].service
    assert service is not None and (service.state, service.sub_state) == ("active", "running")
    assert view.status.state is State.UP, view.status
    text = render_snapshot([view])
    assert f"systemd {UNIT}: active (running)" in text
    assert "unified memory: vLLM" in text


async def test_refused_port_while_the_unit_starts_is_loading_with_its_age(node: FixtureNode, sshd: Sshd) -> None:
    unit = "vllm-loading.service"
    started = time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() - 95))
    sshd.set_unit(
        unit,
        {
            "LoadState": "loaded",
            "ActiveState": "activating",
            "SubState": "start",
            "ExecMainStatus": "0",
            "NRestarts": "0",
            "ExecMainStartTimestamp": started,
            "ExecStart": "{ path=/bin/sh ; argv[]=/bin/sh }",
        },
    )
    view = await _view(_config(node, sshd, vllm_url=f"http://127.0.0.1:{free_port()}", unit=unit))
    instance = view.instances[0]
    assert instance.status.state is State.LOADING, instance.status
    (reason,) = instance.status.reasons
    assert reason.startswith("qwen36: loading for 1m3") and f"{unit} is activating" in reason


async def test_missing_program_in_a_restart_loop_is_down_with_the_cause(node: FixtureNode, sshd: Sshd) -> None:
    unit = "vllm-gone.service"
    sshd.set_unit(
        unit,
        {
            "LoadState": "loaded",
            "ActiveState": "activating",
            "SubState": "auto-restart",
            "ExecMainStatus": "127",
            "NRestarts": "14",
            "ExecStart": "{ path=/opt/vllm/serve.sh ; argv[]=/opt/vllm/serve.sh ; }",
        },
    )
    view = await _view(_config(node, sshd, vllm_url=f"http://127.0.0.1:{free_port()}", unit=unit))
    assert view.status.state is State.DOWN
    assert view.instances[0].status.reasons == (
        f"qwen36: {unit} cannot start: status=127, the program it runs was not found; "
        "/opt/vllm/serve.sh does not exist (14 restarts)",
    )


async def test_unknown_host_key_is_refused_named_and_the_http_side_still_works(
    node: FixtureNode, sshd: Sshd, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    view = await _view(_config(node, sshd, known_hosts=empty))
    assert view.host_state is None
    assert view.host_problem is not None and "ssh-keyscan" in view.host_problem
    assert view.instances[0].status.state is State.UP  # vLLM still polled over HTTP
    assert view.status.state is State.DEGRADED
    assert view.host_problem in view.status.reasons


async def test_local_node_reads_this_machine_without_ssh(node: FixtureNode) -> None:
    config = f"""
[[nodes]]
name = "here"
host = "127.0.0.1"
local = true
[[nodes.vllm]]
name = "qwen36"
url = "{node.vllm.url}"
"""
    view = await _view(config)
    assert view.host_memory is not None and view.host_memory.mem_total == _meminfo_total_bytes()
    assert view.host_problem is None


def test_snapshot_command_shows_host_state_over_ssh(node: FixtureNode, sshd: Sshd, tmp_path: Path) -> None:
    sshd.set_unit(
        UNIT,
        {
            "LoadState": "loaded",
            "ActiveState": "active",
            "SubState": "running",
            "ExecMainStatus": "0",
            "NRestarts": "2",
            "ExecStart": "{ path=/bin/sh ; argv[]=/bin/sh }",
        },
    )
    config = tmp_path / "config.toml"
    config.write_text(_config(node, sshd))
    result = subprocess.run(
        [sys.executable, "-m", "sparktui", "snapshot", "--interval", "0.3"],
        env=dict(os.environ, SPARKTUI_CONFIG=str(config)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"systemd {UNIT}: active (running), 2 restarts" in result.stdout
    assert "host: load " in result.stdout
    has_psi = Path("/proc/pressure/memory").exists()
    assert ("memory pressure (PSI): some" in result.stdout) == has_psi
