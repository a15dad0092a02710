"""The demo's ``fabric`` scenario (issue 21), stepped, through sparktui's real code paths: the fabric
command sent over the demo's SSH server by ``HostCollector`` (the demo answers the ConnectX-7's /sys
files, its ``ethtool -S`` counters, the NCCL each vLLM process maps and its ``sha256sum``), HTTP polled
by ``FleetPoller`` on the simulation's clock, the diagnosis engine judging both ranks of qwen235-tp2.
Each finding opens, then clears; the drift view flags the rank with the other NCCL while it lasts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from sparktui.config import load_catalogue, parse_config
from sparktui.demo.fabric import PIP_NCCL, SYSTEM_NCCL
from sparktui.demo.fleet import DemoFleet
from sparktui.demo.scenarios import FABRIC_TIMES, SCENARIOS
from sparktui.demo.sshserver import ChecksumCommand, FabricCommand, parse_command
from sparktui.diagnosis.engine import DiagnosisEngine, last_intervals
from sparktui.engines import READINGS
from sparktui.model.drift import drift_report
from sparktui.model.fabric import checksum_command, fabric_command, parse_fabric
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.observations import HostUpdate
from sparktui.sources.http import make_client
from sparktui.sources.poller import FleetPoller
from sparktui.sources.ssh import CommandResult, under_remote_timeout
from tests.integration.test_demo_ssh import HostFeed
from tests.support.wait import wait_until

RANKS = ("spark3", "spark4")
RULES = ("link-degraded", "rank-spinning", "nccl-mismatch")
SHORT_CLEAR = {f"{rule}.clear_after_s": 10.0 for rule in RULES}


@dataclass
class FabricWatch:
    fleet: DemoFleet
    state: FleetState
    poller: FleetPoller
    feed: HostFeed
    diagnosis: DiagnosisEngine
    dt: float = 5.0
    opened: dict[tuple[str, str], float] = field(default_factory=dict)  # (node, rule) -> elapsed
    cleared: dict[tuple[str, str], float] = field(default_factory=dict)
    views: dict[str, NodeView] = field(default_factory=dict)
    evidence: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    nccl_differs: list[float] = field(default_factory=list)  # elapsed times the drift view flagged spark4

    def read_at(self, name: str) -> float:
        return max((u.t for u in self.feed.updates[name] if u.fabric is not None), default=-1.0)

    async def step(self) -> None:
        await self.fleet.advance(self.dt)
        # the fabric of this moment, read over SSH (every 0.1 s of wall time here)
        await wait_until(lambda: all(self.read_at(n) >= self.fleet.now for n in RANKS), what="the fabric read")
        for observation in await self.poller.poll_all():
            self.state.apply(observation)
        self.views = {v.name: v for v in self.state.view(self.fleet.now, window_s=20.0)}
        for name in RANKS:
            before = {f.id for f in self.diagnosis.active(name)}
            intervals = last_intervals(self.state.nodes[name])
            found = self.diagnosis.evaluate(self.views[name], {}, self.fleet.now, intervals)
            now = {f.id for f in found if f.id in RULES}
            for finding in found:
                self.evidence[(name, finding.id)] = finding.evidence
            for rule_id in now - before:
                self.opened.setdefault((name, rule_id), self.fleet.elapsed)
            for rule_id in (before & set(RULES)) - now:
                self.cleared.setdefault((name, rule_id), self.fleet.elapsed)
        if drift_report(self.state).differs("spark4", "qwen235", "nccl"):
            self.nccl_differs.append(self.fleet.elapsed)

    async def until(self, elapsed_s: float) -> None:
        while self.fleet.elapsed < elapsed_s:
            await self.step()


@pytest.fixture
async def watch() -> AsyncIterator[FabricWatch]:
    fleet = DemoFleet(seed=21, scenario=SCENARIOS["fabric"])
    await fleet.start()
    spec = parse_config(fleet.config_toml(), source="demo.toml")
    state = FleetState(spec, readings=READINGS)
    feed = HostFeed(fleet, spec, RANKS, state, fabric_every_s=0.1)
    try:
        async with make_client() as client:
            await feed.start()
            poller = FleetPoller(spec, client, clock=lambda: fleet.now)
            yield FabricWatch(fleet, state, poller, feed, DiagnosisEngine(load_catalogue(), SHORT_CLEAR))
    finally:
        await feed.close()
        await fleet.stop()


def test_the_demo_recognises_the_fabric_command() -> None:
    assert parse_command(fabric_command([4127, 4188])) == FabricCommand((4127, 4188), True)
    assert parse_command(fabric_command((), ethtool=False, interfaces=["enp1s0f0np0"])) == FabricCommand((), False)
    assert parse_command(checksum_command(PIP_NCCL.path)) == ChecksumCommand(PIP_NCCL.path)
    # As the host collector sends them: under the node's `timeout`.
    assert parse_command(under_remote_timeout(fabric_command([4127]), 8)) == FabricCommand((4127,), True)
    assert parse_command(under_remote_timeout(checksum_command(PIP_NCCL.path), 55)) == ChecksumCommand(PIP_NCCL.path)


@pytest.mark.slow
async def test_the_fabric_scenario_opens_and_clears_its_findings(watch: FabricWatch) -> None:
    (link_on, link_off), (spin_on, spin_off), (nccl_off,) = FABRIC_TIMES
    await watch.until(link_on + 20.0)
    link = watch.views["spark4"].fabric
    assert link is not None and link.link is not None
    assert (link.link.nic, link.link.state, link.link.speed_bps) == ("enp1s0f0np0", "up", 200e9)
    assert {lib.sha256 for lib in link.nccl} == {SYSTEM_NCCL.sha256}  # sha256sum over the demo's SSH
    (job,) = watch.views["spark3"].jobs
    assert [r.node for r in job.ranks] == ["spark3", "spark4"] and job.ranks[1].nccl == (SYSTEM_NCCL.sha256,)
    assert "the ranks of job qwen235-tp2 run different NCCL libraries" in watch.evidence[("spark4", "nccl-mismatch")][1]
    assert watch.nccl_differs and watch.nccl_differs[0] <= 2 * watch.dt
    await watch.until(nccl_off + 20.0)
    for node in RANKS:
        assert link_on < watch.opened[(node, "link-degraded")] <= link_on + 4 * watch.dt, node
        assert link_off + 10.0 <= watch.cleared[(node, "link-degraded")] <= link_off + 10.0 + 3 * watch.dt, node
    # the spinning rank is the worker: the head's GPU works (its engine is stalled with requests in it)
    assert spin_on < watch.opened[("spark4", "rank-spinning")] <= spin_on + 4 * watch.dt
    assert spin_off < watch.cleared[("spark4", "rank-spinning")] <= spin_off + 10.0 + 3 * watch.dt
    assert ("spark3", "rank-spinning") not in watch.opened
    assert watch.opened[("spark4", "nccl-mismatch")] <= 2 * watch.dt
    assert nccl_off < watch.cleared[("spark4", "nccl-mismatch")] <= nccl_off + 10.0 + 3 * watch.dt
    assert max(watch.nccl_differs) < nccl_off + watch.dt
    spark4 = watch.views["spark4"].fabric
    assert spark4 is not None and {lib.sha256 for lib in spark4.nccl} == {PIP_NCCL.sha256}


async def test_a_node_without_an_mlx5_nic_is_asked_once() -> None:
    """spark1 is no rank of a job: the demo answers it has no mlx5 interface, and the collector (asking
    every 0.05 s here) does not ask again while five frames arrive."""
    fleet = DemoFleet(seed=21)
    await fleet.start()
    spec = parse_config(fleet.config_toml(), source="demo.toml")
    feed = HostFeed(fleet, spec, ("spark1",), None, fabric_every_s=0.05)
    try:
        await feed.start()
        for _ in range(5):
            await fleet.advance(1.0)
            await feed.settle()
        server = fleet.node("spark1").ssh
        assert server is not None
        asked = [c for c in server.commands if isinstance(parse_command(c), FabricCommand)]
        assert len(asked) == 1 and not any(u.fabric for u in feed.updates["spark1"])
    finally:
        await feed.close()
        await fleet.stop()


async def test_a_fabric_answer_across_a_step_of_the_clock_is_read_again() -> None:
    """A reading is stamped when its answer arrives. Here the clock steps 5 s while the first answer is on
    its way (the stepped test above met this under load: the link finding opened two steps late). Kept,
    that reading would carry the counters of before the step under the time after it, and the interval
    after it would show no traffic. It is read again at once, and the reading kept holds the node's
    counters at its stamp."""
    fleet = DemoFleet(seed=21, scenario=SCENARIOS["fabric"])
    await fleet.start()
    spec = parse_config(fleet.config_toml(), source="demo.toml")
    feed = HostFeed(fleet, spec, ("spark4",), None, fabric_every_s=0.05)
    ssh = feed.ssh["spark4"]
    answer = ssh.run
    stepped_to: list[float] = []

    async def step_while_answering(command: str, **kwargs: Any) -> CommandResult:
        result = await answer(command, **kwargs)
        if not stepped_to and isinstance(parse_command(command), FabricCommand):
            await fleet.advance(5.0)  # the job generates tokens meanwhile: the NIC's counters move
            stepped_to.append(fleet.now)
        return result

    ssh.run = step_while_answering  # type: ignore[method-assign]
    try:
        await feed.start()

        def readings() -> list[HostUpdate]:
            return [u for u in feed.updates["spark4"] if u.fabric is not None]

        await wait_until(lambda: bool(readings()), what="a fabric reading")
        first = readings()[0]
        nic = fleet.node("spark4").nic
        assert first.fabric is not None and nic is not None
        (read,) = parse_fabric(first.fabric).nics
        assert stepped_to and first.t == stepped_to[0]
        assert read.counters["rx_bytes_phy"] == int(nic.counters["rx_bytes_phy"]) > 0
    finally:
        await feed.close()
        await fleet.stop()
