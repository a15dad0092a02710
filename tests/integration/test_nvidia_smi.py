"""The GPU of a node without an exporter, read by ``nvidia-smi -q`` over a real OpenSSH server whose
nvidia-smi is a stub printing a real H100's output (tests/data/exporters/nvidia-smi-h100/), into the
fleet model as the dashboard's GPU reading with its throttle reasons; a node without nvidia-smi is
asked once; one whose nvidia-smi hangs has it stopped on the node, never two at once."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator

# No type stubs for psutil in the test extras; the ignore stays harmless if types-psutil appears.
import psutil  # type: ignore[import-untyped, unused-ignore]

from sparktui.engines import readings
from sparktui.model.exporters import NVIDIA_SMI_Q_COMMAND, ExporterKind
from sparktui.model.fleet import FleetState
from sparktui.model.observations import HostUpdate
from sparktui.model.specs import FleetSpec
from sparktui.record.codec import host_update_from_json, host_update_to_json
from sparktui.sources.host import HostCollector
from sparktui.sources.ssh import NodeSsh
from tests.conftest import DATA
from tests.support.sshd import Sshd
from tests.support.wait import wait_until

LOADED = (DATA / "exporters" / "nvidia-smi-h100" / "loaded-q-perf.txt").read_text()


@contextlib.asynccontextmanager
async def collecting(sshd: Sshd) -> AsyncIterator[tuple[FleetState, list[HostUpdate]]]:
    fleet = FleetSpec(nodes=[sshd.node()], poll_interval_s=0.5)
    state = FleetState(fleet, readings())
    updates: list[HostUpdate] = []

    def seen(update: HostUpdate) -> None:
        updates.append(update)
        state.apply_host(update)

    async with NodeSsh(fleet.nodes[0], use_agent=False) as ssh:
        collector = HostCollector(fleet.nodes[0], fleet, ssh=ssh, nvidia_smi_every_s=0.2)
        task = asyncio.create_task(collector.run(seen))
        try:
            yield state, updates
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_nvidia_smi_gives_the_gpu_reading_where_there_is_no_exporter(fresh_sshd: Sshd) -> None:
    fresh_sshd.set_nvidia_smi(LOADED)
    async with collecting(fresh_sshd) as (state, updates):
        await wait_until(lambda: sum(bool(u.nvidia_smi) for u in updates) >= 2, what="two nvidia-smi readings")
        (view,) = state.view(updates[-1].t + 0.1)
    gpu = view.gpu
    assert gpu is not None and gpu.kind is ExporterKind.NVIDIA_SMI
    # loaded-q-perf.txt: "SW Power Cap: Active", "SM: 1350 MHz", "Average Power Draw: 694.37 W", "54 C"
    assert (gpu.throttle, gpu.sm_clock_hz, gpu.power_w, gpu.temperature_c) == (("sw_power_cap",), 1350e6, 694.37, 54)
    assert f"nvidia-smi {NVIDIA_SMI_Q_COMMAND.removeprefix('nvidia-smi ')}" in fresh_sshd.calls()


async def test_a_node_without_nvidia_smi_is_asked_once(fresh_sshd: Sshd) -> None:
    async with collecting(fresh_sshd) as (state, updates):
        # Four frames at 0.5 s: nvidia-smi would have been asked ten times at its 0.2 s here.
        await wait_until(lambda: sum(u.sample is not None for u in updates) >= 4, what="four host frames")
        (view,) = state.view(updates[-1].t)
    assert [c for c in fresh_sshd.calls() if c.startswith("nvidia-smi")] == [NVIDIA_SMI_Q_COMMAND]
    assert view.gpu is None and not any(u.nvidia_smi for u in updates)


def stub_processes(sshd: Sshd) -> list[psutil.Process]:
    """The nvidia-smi stubs running on the "node" (``sh .../bin/nvidia-smi -q ...``)."""
    stub = str(sshd.stub_dir / "nvidia-smi")
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if stub in (proc.info["cmdline"] or [])[:2]:
            found.append(proc)
    return found


async def test_a_hung_nvidia_smi_is_stopped_on_the_node_and_never_runs_twice_at_once(fresh_sshd: Sshd) -> None:
    fresh_sshd.set_nvidia_smi(LOADED)
    fresh_sshd.hang_nvidia_smi()
    alive: list[int] = []  # stub processes seen at once, at each look

    def runs() -> int:
        return sum(call.startswith("nvidia-smi") for call in fresh_sshd.calls())

    def three_runs() -> bool:
        alive.append(len(stub_processes(fresh_sshd)))
        return runs() >= 3

    # Its bound on the node: its interval (0.2 s) less the 2 s grace of the kill, but at least 1 s.
    reason = "nvidia-smi: gave no answer within 1 s (stopped on the node)"
    try:
        async with collecting(fresh_sshd) as (state, _updates):
            # At 0.2 s a reading, each run may take its 1 s: three runs are three times that, and more.
            await wait_until(three_runs, timeout_s=20.0, what="three nvidia-smi runs", interval_s=0.05)
        assert max(alive) == 1, alive
        # The node's GPU reason, which its status shows once it has been polled (no HTTP poll here).
        assert state.nodes["spark1"].gpu_error == reason
        # The last one, given up on when the collector stopped, is stopped on the node all the same.
        await wait_until(lambda: not stub_processes(fresh_sshd), what="no nvidia-smi left on the node")
    finally:
        for proc in stub_processes(fresh_sshd):  # the test's own stubs, by PID (before the fix: all of them)
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)


def test_a_recording_keeps_the_nvidia_smi_text_of_an_update() -> None:
    update = HostUpdate("spark1", 12.5, nvidia_smi=LOADED)
    assert host_update_from_json("spark1", 12.5, host_update_to_json(update)) == update
    assert "nvidia_smi" not in host_update_to_json(HostUpdate("spark1", 1.0, problem="ssh: refused"))
