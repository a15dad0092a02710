"""The demo's ``soak`` scenario, stepped: the four faults come in turn on different nodes, each does to
the node what it says (real HTTP and SSH on 127.0.0.1), each clears by itself, and the round repeats
on other nodes. ``tests/integration/test_soak.py`` runs the dashboard against it for real."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest

from sparktui.demo.fleet import DemoFleet, DemoInstance, scaled_nodes
from sparktui.demo.scenarios import SOAK_FAULTS, SoakTimes, soak_scenario
from sparktui.model.promtext import ParseError, looks_truncated, parse

EVERY_S = 20.0  # first fault at 10 s; each lasts a third of the period
TIMES = SoakTimes(EVERY_S)
GENERATED = "vllm:generation_tokens_total"


class Soak:
    def __init__(self, fleet: DemoFleet, client: httpx.AsyncClient, lines: list[str]) -> None:
        self.fleet, self.client, self.lines = fleet, client, lines

    async def at(self, elapsed_s: float) -> None:
        """Step the simulation to ``elapsed_s`` seconds after the start."""
        await self.fleet.advance(max(0.0, elapsed_s - self.fleet.elapsed))

    def vllm(self, node: str) -> DemoInstance:
        return self.fleet.node(node).instances[0]

    async def get(self, node: str, path: str) -> httpx.Response:
        http = self.vllm(node).http
        assert http is not None
        return await self.client.get(f"{http.url}{path}")

    async def refused(self, node: str) -> bool:
        try:
            await self.get(node, "/health")
        except httpx.ConnectError:
            return True
        return False

    def ssh_listening(self, node: str) -> bool:
        ssh = self.fleet.node(node).ssh
        return ssh is not None and ssh.listening


@pytest.fixture
async def soak() -> AsyncIterator[Soak]:
    lines: list[str] = []
    fleet = DemoFleet(scaled_nodes(8), seed=21, scenario=soak_scenario(EVERY_S), on_event=lines.append)
    await fleet.start()
    try:
        async with httpx.AsyncClient(timeout=2.0) as client:
            yield Soak(fleet, client, lines)
    finally:
        await fleet.stop()


async def test_node_down_refuses_everything_then_boots_and_serves(soak: Soak) -> None:
    await soak.at(10.5)
    assert "fault node-down spark01: powered off" in soak.lines[-1]
    assert await soak.refused("spark01")
    assert not soak.ssh_listening("spark01")
    assert not await soak.refused("spark02")  # the others go on
    await soak.at(10 + TIMES.hold_s + 0.5)
    assert "recover node-down spark01: powered on" in soak.lines[-1]
    assert soak.ssh_listening("spark01")
    assert await soak.refused("spark01")  # vLLM is loading its model
    await soak.at(10 + TIMES.hold_s + TIMES.boot_load_s + 1)
    assert (await soak.get("spark01", "/health")).status_code == 200


async def test_ssh_drop_refuses_ssh_while_http_goes_on(soak: Soak) -> None:
    await soak.at(30.5)
    assert "fault ssh-drop spark02: sshd drops its sessions" in soak.lines[-1]
    assert not soak.ssh_listening("spark02")
    ssh = soak.fleet.node("spark02").ssh
    assert ssh is not None
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", ssh.port)
    assert (await soak.get("spark02", "/health")).status_code == 200
    await soak.at(30 + TIMES.hold_s + 0.5)
    assert "recover ssh-drop spark02" in soak.lines[-1]
    assert soak.ssh_listening("spark02")


@pytest.mark.slow
async def test_malformed_scrape_is_garbage_then_truncated_next_round_and_whole_between(soak: Soak) -> None:
    await soak.at(50.5)
    assert "fault malformed-scrape spark03/qwen36: /metrics serves a garbage body" in soak.lines[-1]
    garbage = await soak.get("spark03", "/metrics")
    assert garbage.status_code == 200 and (await soak.get("spark03", "/health")).status_code == 200
    with pytest.raises(ParseError):
        parse(garbage.text)
    await soak.at(50 + TIMES.hold_s + 0.5)
    assert "recover malformed-scrape spark03/qwen36" in soak.lines[-1]
    whole = (await soak.get("spark03", "/metrics")).text
    assert parse(whole).first_value(GENERATED) is not None
    # The next round, five nodes on: spark08, and a truncated body this time.
    await soak.at(TIMES.cycle_s + 50.5)
    assert "fault malformed-scrape spark08/gemma4: /metrics serves a truncated body" in soak.lines[-1]
    truncated = (await soak.get("spark08", "/metrics")).text
    assert looks_truncated(truncated)


async def test_counter_reset_restarts_the_instance_with_counters_from_zero(soak: Soak) -> None:
    await soak.at(69.5)
    before = parse((await soak.get("spark04", "/metrics")).text).first_value(GENERATED)
    assert before is not None and before > 0
    await soak.at(70.5)
    assert "fault counter-reset spark04/gemma4: vLLM restarts" in soak.lines[-1]
    assert await soak.refused("spark04")  # loading
    await soak.at(70 + TIMES.restart_load_s + 1)
    after = parse((await soak.get("spark04", "/metrics")).text).first_value(GENERATED)
    assert after is not None and after < before


async def test_every_round_hits_four_other_nodes_and_logs_each_event(soak: Soak) -> None:
    await soak.at(2 * TIMES.cycle_s)
    faults = [line.split()[3:5] for line in soak.lines if line.split()[2] == "fault"]
    assert [kind for kind, _ in faults] == list(SOAK_FAULTS) * 2
    nodes = [target.rstrip(":").split("/")[0] for _, target in faults]
    first, second = nodes[:4], nodes[4:]
    assert first == ["spark01", "spark02", "spark03", "spark04"]
    assert second == ["spark06", "spark07", "spark08", "spark01"]
    assert len(soak.lines) == 2 * 7  # four faults, three recoveries, twice
    assert list(soak.fleet.events_log) == soak.lines


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sparktui", "demo", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_fault_every_needs_the_soak_scenario_and_a_period_a_fault_can_clear_in() -> None:
    other = _demo("--scenario", "healthy", "--fault-every", "60", "--serve-only")
    assert other.returncode == 2
    assert "--fault-every applies to --scenario soak only" in other.stderr
    short = _demo("--scenario", "soak", "--fault-every", "5", "--serve-only")
    assert short.returncode == 2
    assert "--fault-every must be at least 20 seconds (got 5)" in short.stderr
