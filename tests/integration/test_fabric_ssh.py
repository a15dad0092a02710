"""The fabric over a real OpenSSH server: the fabric command run by the node's shell on a constructed
``/sys/class/net`` (an mlx5_core interface beside another driver's), ``ethtool -S`` a stub printing the
mlx5 readings of tests/data/fabric, and a process whose command line reads as vLLM's mapping a file named
libnccl: the collector finds its PID in the sampler's process list, reads its mapping and has the file's
sha256 computed once, and the fleet model turns two readings into the link's rates. First, the command
alone, run by a local ``sh`` on the same constructed folder."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparktui.engines import readings
from sparktui.model.fabric import checksum_command, fabric_command, parse_fabric
from sparktui.model.fleet import FleetState
from sparktui.model.observations import HostUpdate
from sparktui.model.specs import FleetSpec
from sparktui.sources.host import HostCollector
from sparktui.sources.ssh import CommandResult, NodeSsh
from tests.support.fabric import ETHTOOL, NIC, fake_net, mapping
from tests.support.sshd import Sshd
from tests.support.wait import wait_until

ETHTOOL_READINGS = ETHTOOL


@pytest.fixture
def net_dir(tmp_path: Path) -> Path:
    return fake_net(tmp_path, {NIC: "mlx5_core", "eno1": "igb"})


@pytest.fixture
def libnccl(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A file named libnccl mapped by a process whose command line reads ``vllm serve``."""
    library = tmp_path / "nccl" / "libnccl.so.2"
    library.parent.mkdir()
    library.write_bytes(bytes(range(256)) * 64)
    with mapping(library, "vllm", "serve", "fake-model") as pid:
        yield library, pid


def test_the_command_reads_an_mlx5_interface_and_the_nccl_mapped(net_dir: Path, tmp_path: Path) -> None:
    """The script itself, run by sh on a constructed /sys/class/net, with a process that maps a file
    named libnccl (its maps line is the kernel's), without ethtool asked."""
    library = tmp_path / "lib dir" / "libnccl.so.2"
    library.parent.mkdir()
    library.write_bytes(b"\0" * 8192)
    with mapping(library) as pid:
        command = fabric_command([pid], ethtool=False, net_dir=str(net_dir))
        out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=10, check=True).stdout
    sample = parse_fabric(out)
    assert [(n.name, n.operstate, n.speed_mbps) for n in sample.nics] == [(NIC, "up", 200000.0)]
    (mapped,) = sample.nccl
    assert (mapped.pid, mapped.path, mapped.size) == (pid, str(library), 8192)
    assert sample.complete


async def test_the_fabric_over_ssh_gives_the_links_rates_and_the_nccl_checksum(
    fresh_sshd: Sshd, net_dir: Path, libnccl: tuple[Path, int]
) -> None:
    library, pid = libnccl
    fresh_sshd.set_ethtool(ETHTOOL_READINGS[0])
    fleet = FleetSpec(nodes=[fresh_sshd.node()], poll_interval_s=0.5)
    state = FleetState(fleet, readings())
    updates: list[HostUpdate] = []

    def seen(update: HostUpdate) -> None:
        updates.append(update)
        state.apply_host(update)

    def read(what: str) -> list[HostUpdate]:
        return [u for u in updates if u.fabric is not None and what in u.fabric]

    async with NodeSsh(fleet.nodes[0], use_agent=False) as ssh:
        sent: list[str] = []
        run = ssh.run

        async def recording(command: str, **kwargs: Any) -> CommandResult:
            sent.append(command)
            return await run(command, **kwargs)

        ssh.run = recording  # type: ignore[method-assign]
        collector = HostCollector(fleet.nodes[0], fleet, ssh=ssh, fabric_every_s=0.2, net_dir=str(net_dir))
        task = asyncio.create_task(collector.run(seen))
        try:
            await wait_until(
                lambda: read(f"/proc/{pid}/maps:"), what="the fabric with the NCCL mapping", timeout_s=30.0
            )
            fresh_sshd.set_ethtool(ETHTOOL_READINGS[1])
            # Two readings of the new counters, counted as fabric readings: host frames come between them,
            # more of them while a slow answer is read again (a run under load waited for frames, and the
            # last interval was still the one from the old counters to the new).
            new = next(line.strip() for line in ETHTOOL_READINGS[1].splitlines() if "rx_bytes_phy:" in line)
            assert new not in ETHTOOL_READINGS[0]
            await wait_until(
                lambda: len(read("sha256 ")) >= 2 and [new in (u.fabric or "") for u in read("")][-2:] == [True, True],
                what="two readings of the new counters",
            )
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    (view,) = state.view(updates[-1].t)
    fabric = view.fabric
    assert fabric is not None and [link.nic for link in fabric.links] == [NIC]  # not eno1 (igb)
    link = fabric.links[0]
    assert (link.state, link.speed_bps) == ("up", 200e9)
    # the last interval is of two equal readings (the stub prints the second from then on): 0 b/s
    assert link.rates is not None and link.rates.rx_bps == 0.0
    digest = hashlib.sha256(library.read_bytes()).hexdigest()
    assert [(lib.pid, lib.path, lib.sha256) for lib in fabric.nccl if lib.pid == pid] == [(pid, str(library), digest)]
    assert f"ethtool -S {NIC}" in fresh_sshd.calls()
    # The checksum is computed once: the cache answers every later reading.
    assert len(read(f"sha256 {digest}")) >= 2
    assert sum(checksum_command(str(library)) in command for command in sent) == 1


async def test_the_rates_move_between_two_readings_over_ssh(fresh_sshd: Sshd, net_dir: Path) -> None:
    fleet = FleetSpec(nodes=[fresh_sshd.node()], poll_interval_s=0.5)
    state = FleetState(fleet, readings())
    fresh_sshd.set_ethtool(ETHTOOL_READINGS[0])
    async with NodeSsh(fleet.nodes[0], use_agent=False) as ssh:
        collector = HostCollector(fleet.nodes[0], fleet, ssh=ssh, fabric_every_s=0.2, net_dir=str(net_dir))
        updates: list[HostUpdate] = []

        def seen(update: HostUpdate) -> None:
            if update.fabric is not None:
                updates.append(update)
                state.apply_host(update)
                fresh_sshd.set_ethtool(ETHTOOL_READINGS[1])  # the next reading is the one 10 s on, on the node

        task = asyncio.create_task(collector.run(seen))
        try:
            await wait_until(lambda: len(updates) >= 2, what="two fabric readings", timeout_s=30.0)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    link = state.nodes[fleet.nodes[0].name].fabric_view(updates[1].t)
    assert link is not None and link.links[0].rates is not None
    # rx_bytes_phy rose by 16,250,006,120 between the two readings, over the time between them
    seconds = updates[1].t - updates[0].t
    assert link.links[0].rates.rx_bps == pytest.approx(16_250_006_120 * 8 / seconds)


def test_the_checksum_command_quotes_the_path() -> None:
    assert checksum_command("/opt/my env/libnccl.so.2") == "sha256sum -- '/opt/my env/libnccl.so.2'"


async def test_the_interfaces_the_config_names_are_read_whatever_their_driver(fresh_sshd: Sshd, net_dir: Path) -> None:
    node = fresh_sshd.node().model_copy(update={"rdma_interfaces": ("eno1",)})
    fleet = FleetSpec(nodes=[node], poll_interval_s=0.5)
    state = FleetState(fleet, readings())
    fresh_sshd.set_ethtool(ETHTOOL_READINGS[0])
    async with NodeSsh(node, use_agent=False) as ssh:
        collector = HostCollector(node, fleet, ssh=ssh, fabric_every_s=0.2, net_dir=str(net_dir))
        task = asyncio.create_task(collector.run(state.apply_host))
        try:
            await wait_until(lambda: state.nodes[node.name].fabric is not None, what="a fabric reading")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    sample = state.nodes[node.name].fabric
    assert sample is not None and [nic.name for nic in sample.nics] == ["eno1"]  # its driver is igb
    assert f"ethtool -S {NIC}" not in fresh_sshd.calls() and "ethtool -S eno1" in fresh_sshd.calls()
