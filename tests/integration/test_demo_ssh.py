"""The demo fleet's SSH side, read by sparktui's own client code over 127.0.0.1.

The host sampler (``HostCollector`` over ``NodeSsh``), the log streams (``LogStream``) and the
recovery commands run exactly as against a real node; the demo's SSH server answers them from the
simulation. Step mode: frames follow the simulated clock, so the tests advance it.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import httpx
import pytest

from sparktui.actions.runner import MEMINFO_COMMAND
from sparktui.config import parse_config
from sparktui.demo.fleet import DemoFleet
from sparktui.demo.host import GIB, MEM_TOTAL_KB
from sparktui.demo.scenarios import SCENARIOS
from sparktui.demo.sshserver import parse_command
from sparktui.engines import readings
from sparktui.model.commands import DROP_CACHES
from sparktui.model.fabric import FABRIC_EVERY_S
from sparktui.model.fleet import FleetState
from sparktui.model.host import HostSample, ledger
from sparktui.model.memory import parse_meminfo
from sparktui.model.observations import HostUpdate
from sparktui.model.specs import FleetSpec, NodeSpec
from sparktui.model.status import State
from sparktui.sources.host import HostCollector
from sparktui.sources.http import make_client
from sparktui.sources.logs import LogStream
from sparktui.sources.poller import FleetPoller
from sparktui.sources.ssh import NodeSsh, SshProblemKind
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]
RECONNECT_S = 30.0  # the SSH backoff's longest wait (10 s) and a connection, on a busy machine


class HostFeed:
    """``HostCollector``s of some nodes, feeding a list of updates (and a FleetState if given)."""

    def __init__(
        self,
        fleet: DemoFleet,
        spec: FleetSpec,
        names: tuple[str, ...],
        state: FleetState | None,
        fabric_every_s: float = FABRIC_EVERY_S,
    ) -> None:
        self.fleet = fleet
        self.fabric_every_s = fabric_every_s
        self.spec = spec
        self.state = state
        self.updates: dict[str, list[HostUpdate]] = {name: [] for name in names}
        self.connected_samples = dict.fromkeys(names, 0)  # samples since the connection was last lost
        self.ssh = {name: NodeSsh(self.node_spec(name)) for name in names}
        self.tasks: list[asyncio.Task[None]] = []

    def node_spec(self, name: str) -> NodeSpec:
        return next(n for n in self.spec.nodes if n.name == name)

    async def start(self) -> None:
        """Start the collectors and wait for every node's first frame."""
        for name, ssh in self.ssh.items():
            collector = HostCollector(
                self.node_spec(name),
                self.spec,
                ssh=ssh,
                clock=lambda: self.fleet.now,
                fabric_every_s=self.fabric_every_s,
            )
            self.tasks.append(asyncio.create_task(collector.run(self._on_update)))
        await wait_until(lambda: all(self.samples(name) for name in self.updates))

    def _on_update(self, update: HostUpdate) -> None:
        self.updates[update.node].append(update)
        if update.connection_lost:
            self.connected_samples[update.node] = 0
        elif update.sample is not None:
            self.connected_samples[update.node] += 1
        if self.state is not None:
            self.state.apply_host(update)

    def samples(self, name: str) -> list[HostSample]:
        return [u.sample for u in self.updates[name] if u.sample is not None]

    async def settle(self) -> None:
        """Wait until every frame the demo sent has arrived. A node that went down and came back is
        waited for until the collector has reconnected (its backoff runs on real time, the simulation
        does not wait for it) and has every frame since, over the new connection."""

        def arrived() -> bool:
            for name in self.updates:
                server = self.fleet.node(name).ssh
                if (
                    server is not None
                    and server.listening
                    and self.connected_samples[name] < max(1, server.frames_emitted)
                ):
                    return False
            return True

        await wait_until(arrived, RECONNECT_S, what="every frame the demo sent arrived")

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for ssh in self.ssh.values():
            await ssh.close()


@pytest.fixture
async def fleet() -> AsyncIterator[DemoFleet]:
    demo = DemoFleet(seed=5)
    await demo.start()
    try:
        yield demo
    finally:
        await demo.stop()


def _spec(fleet: DemoFleet) -> FleetSpec:
    return parse_config(fleet.config_toml(), source="demo.toml")


def test_the_commands_sparktui_sends_are_recognised() -> None:
    from sparktui.model.commands import ProcessIdentity, drop_caches_commands, kill_workers_command, restart_command
    from sparktui.model.specs import ServerSpec
    from sparktui.sources.logs import log_command
    from sparktui.sources.sampler import ServiceProbe, sampler_command

    sampler = parse_command(sampler_command(0.5, [ServiceProbe("qwen36", "systemd", "vllm-qwen36.service")], count=3))
    assert type(sampler).__name__ == "SamplerCommand"
    assert (sampler.interval_s, sampler.count, sampler.probes) == (  # type: ignore[union-attr]
        0.5,
        3,
        (("qwen36", "systemd", "vllm-qwen36.service"),),
    )
    unit = ServerSpec(name="q", url="http://127.0.0.1:1", unit="vllm-q.service")
    box = ServerSpec(name="g", url="http://127.0.0.1:1", container="vllm-g")
    for vllm in (unit, box):
        found = log_command(vllm)
        assert found is not None
        assert type(parse_command(found[0])).__name__ == "LogCommand"
        assert type(parse_command(restart_command(vllm))).__name__ == "ServiceCommand"
    drop, remove = drop_caches_commands(["psm_1a2b3c4d", "sem.mp-abc"])
    assert type(parse_command(drop)).__name__ == "DropCachesCommand"
    assert type(parse_command(remove)).__name__ == "RemoveCommand"
    assert type(parse_command(kill_workers_command([ProcessIdentity(4242, 1, "VLLM::Worker_TP0")]))).__name__ == (
        "CheckedKillCommand"
    )
    assert type(parse_command("sudo -n kill -9 -- 4242")).__name__ == "KillCommand"
    assert parse_command("cat /etc/shadow").word == "cat"  # type: ignore[union-attr]


async def test_sampler_frames_parse_with_the_simulations_memory_and_unit_state(fleet: DemoFleet) -> None:
    spec = _spec(fleet)
    feed = HostFeed(fleet, spec, ("spark1", "spark2", "spark3", "spark4"), FleetState(spec, readings()))
    await feed.start()
    try:
        for _ in range(11):  # 11 frames: the every-10th sections (processes, services) twice
            await fleet.advance(1.0)
            await feed.settle()
    finally:
        await feed.close()
    for name, updates in feed.updates.items():
        assert [u.problem for u in updates if u.problem] == [], name
        samples = feed.samples(name)
        assert len(samples) >= 11
        assert [s.seq for s in samples] == list(range(1, len(samples) + 1))
        for sample in samples:
            assert sample.problems == ()
            assert sample.memory.mem_total == MEM_TOTAL_KB * 1024
            total = sum(size for _, size in ledger(sample).segments())
            assert total == pytest.approx(MEM_TOTAL_KB * 1024, rel=1e-6)
        host = fleet.node(name).host
        last = samples[-1]
        assert last.memory.mem_available == pytest.approx(host.available(), abs=0.05 * GIB)
        assert last.uptime_s == pytest.approx(host.uptime_s(), abs=1.5)
    assert feed.state is not None
    spark1 = {v.name: v for v in feed.state.view(fleet.now, window_s=None)}["spark1"]
    service = spark1.instances[0].service
    assert service is not None
    assert (service.manager, service.name, service.state, service.sub_state, service.restarts) == (
        "systemd",
        "vllm-qwen36.service",
        "active",
        "running",
        0,
    )
    assert service.exec_exists is True
    processes = spark1.host_state.processes if spark1.host_state is not None else None
    assert processes is not None and sorted(p.kind for p in processes) == ["engine_core", "serve"]
    sim = fleet.node("spark1").instances[0].service
    assert {p.pid for p in processes} == {sim.main_pid, sim.core_pid}
    assert spark1.shm_leftovers == ()  # vLLM runs: its segments are in use
    spark4 = {v.name: v for v in feed.state.view(fleet.now, window_s=None)}["spark4"]
    assert spark4.host_state is not None and spark4.host_state.processes is not None
    assert "VLLM::Worker_TP1" in {p.args for p in spark4.host_state.processes}
    docker = spark4.instances[0].service
    assert docker is not None and (docker.manager, docker.state, docker.restarts) == ("docker", "running", 0)


async def test_log_streams_yield_the_simulated_lines_with_timestamps(fleet: DemoFleet) -> None:
    spec = _spec(fleet)
    streams = []
    tasks = []
    sshes = []
    for name in ("spark1", "spark2"):
        node = next(n for n in spec.nodes if n.name == name)
        ssh = NodeSsh(node)
        sshes.append(ssh)
        stream = LogStream(ssh, node.vllm[0], tail_lines=50)
        streams.append(stream)
        tasks.append(asyncio.create_task(stream.run()))
    try:
        await wait_until(lambda: all(len(s.buffer) >= 50 for s in streams))
        before = [s.buffer.next_seq for s in streams]
        await fleet.advance(21.0)  # two log-stats intervals
        await wait_until(
            lambda: all(
                any("Engine 000:" in line.text for line in s.buffer.since(b))
                for s, b in zip(streams, before, strict=True)
            )
        )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for ssh in sshes:
            await ssh.close()
    epoch = fleet.clock.epoch
    for stream, mfu_flag in zip(streams, (True, False), strict=True):  # spark2 runs without --enable-mfu-metrics
        lines = list(stream.buffer)
        assert all(line.timestamp is not None for line in lines), [x.text for x in lines if x.timestamp is None]
        assert all(line.timestamp.timestamp() <= epoch + 1 for line in lines if line.timestamp is not None)
        mfu = [
            line.text
            for line in lines
            if re.search(r"Engine 000: MFU: [\d.]+ TF/s/device [\d.]+ GB/s/device", line.text)
        ]
        assert bool(mfu) is mfu_flag, mfu
        stats = [line.text for line in lines if "Engine 000: Avg" in line.text]
        assert stats, [line.text for line in lines]
        match = re.search(
            r"Engine 000: Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: ([\d.]+) tokens/s, "
            r"Running: \d+ reqs, Waiting: \d+ reqs, GPU KV cache usage: [\d.]+%, Prefix cache hit rate: [\d.]+%",
            stats[-1],
        )
        assert match is not None, stats[-1]
        assert float(match.group(1)) > 0
        spec_lines = [line.text for line in lines if "SpecDecoding metrics:" in line.text]
        assert spec_lines
        numbers = re.search(
            r"Mean acceptance length: ([\d.]+), .* Accepted: (\d+) tokens, Drafted: (\d+) tokens, "
            r"Per-position acceptance rate: ([\d., ]+), Avg Draft acceptance rate: ([\d.]+)%",
            spec_lines[-1],
        )
        assert numbers is not None, spec_lines[-1]
        per_pos = [float(x) for x in numbers.group(4).split(", ")]
        assert float(numbers.group(1)) == pytest.approx(1 + sum(per_pos), abs=0.02)
        assert float(numbers.group(5)) == pytest.approx(100 * int(numbers.group(2)) / int(numbers.group(3)), abs=0.1)
    assert any('"POST /v1/chat/completions HTTP/1.1" 200 OK' in line.text for line in streams[0].buffer)


async def test_recovery_commands_act_on_the_simulation_and_unknown_ones_exit_127(fleet: DemoFleet) -> None:
    from sparktui.model.commands import ProcessIdentity, kill_workers_command

    spec = _spec(fleet)
    node = next(n for n in spec.nodes if n.name == "spark2")
    instance = fleet.node("spark2").instances[0]
    assert instance.http is not None
    async with NodeSsh(node) as ssh:
        unknown = await ssh.run("uptime", timeout_s=5)
        assert (unknown.exit_status, unknown.stdout, unknown.stderr) == (127, "", "sh: 1: uptime: not found\n")
        assert (await ssh.run("rm -rf /", timeout_s=5)).exit_status == 127

        stopped = await ssh.run("docker stop vllm-gemma4", timeout_s=5)
        assert (stopped.exit_status, stopped.stdout) == (0, "vllm-gemma4\n")
        assert instance.service.docker_properties()[0] == "Status=exited"
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"{instance.http.url}/health")
        restarted = await ssh.run("docker restart vllm-gemma4", timeout_s=5)
        assert (restarted.exit_status, restarted.stdout) == (0, "vllm-gemma4\n")
        assert instance.service.docker_properties()[0] == "Status=running"
        missing = await ssh.run("docker restart nope", timeout_s=5)
        assert (missing.exit_status, missing.stderr) == (1, "Error response from daemon: No such container: nope\n")

        host = fleet.node("spark2").host
        cached = host.file_cache()
        dropped = await ssh.run("sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'", timeout_s=5)
        assert (dropped.exit_status, dropped.stdout, dropped.stderr) == (0, "", "")
        assert host.file_cache() < cached and host.file_cache() < 0.1 * GIB

        killed = await ssh.run("sudo -n kill -9 -- 999999", timeout_s=5)
        assert (killed.exit_status, killed.stderr) == (1, "kill: (999999): No such process\n")

        # kill-workers' command: a process whose start time or command line is not the plan's is left.
        sim = fleet.node("spark2")
        core = next(p for p in sim.vllm_processes() if p.pid != instance.service.main_pid)
        ticks = sim.host.start_ticks(core)
        same = ProcessIdentity(core.pid, ticks, core.args)
        checked = await ssh.run(
            kill_workers_command([ProcessIdentity(core.pid, ticks + 1, core.args), ProcessIdentity(999999, 1, "x")]),
            timeout_s=5,
        )
        assert (checked.exit_status, checked.stderr) == (0, "")
        assert checked.stdout == (
            f"PID {core.pid} exited or was replaced since the dialog opened; not killed\n"
            "PID 999999 exited or was replaced since the dialog opened; not killed\n"
        )
        assert core.pid in {p.pid for p in sim.vllm_processes()}
        checked = await ssh.run(kill_workers_command([same]), timeout_s=5)
        assert (checked.exit_status, checked.stdout) == (0, f"PID {core.pid} killed\n")
        assert core.pid not in {p.pid for p in sim.vllm_processes()}
    assert fleet.node("spark2").ssh is not None
    assert fleet.node("spark2").ssh.commands[:2] == ["uptime", "rm -rf /"]  # type: ignore[union-attr]


async def test_only_the_demo_key_is_accepted_and_the_host_key_is_checked(fleet: DemoFleet, tmp_path: Path) -> None:
    spec = _spec(fleet)
    node = next(n for n in spec.nodes if n.name == "spark1")
    other = tmp_path / "other_key"
    other.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    stranger = node.model_copy(update={"ssh": node.ssh.model_copy(update={"key_file": other})})
    async with NodeSsh(stranger, use_agent=False) as ssh:
        result = await ssh.run("uptime", timeout_s=5)
    assert result.problem is not None and result.problem.kind is SshProblemKind.AUTH_REJECTED
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    unknown = node.model_copy(update={"ssh": node.ssh.model_copy(update={"known_hosts": empty})})
    async with NodeSsh(unknown, use_agent=False) as ssh:
        result = await ssh.run("uptime", timeout_s=5)
    assert result.problem is not None and result.problem.kind is SshProblemKind.HOST_KEY_UNKNOWN


@pytest.mark.slow
async def test_ssh_drop_shows_on_the_node_while_http_keeps_updating_and_recovers() -> None:
    demo = DemoFleet(seed=21, scenario=SCENARIOS["ssh-drop"])
    await demo.start()
    spec = _spec(demo)
    state = FleetState(spec, readings())
    feed = HostFeed(demo, spec, ("spark1", "spark2"), state)
    try:
        async with make_client() as client:
            poller = FleetPoller(spec, client, clock=lambda: demo.now)

            async def step(dt: float = 2.0) -> dict[str, object]:
                await demo.advance(dt)
                for obs in await poller.poll_all():
                    state.apply(obs)
                return {v.name: v for v in state.view(demo.now, window_s=20.0)}

            await feed.start()
            while demo.elapsed < 12.0:
                await step()
                await feed.settle()
            views = {v.name: v for v in state.view(demo.now, window_s=20.0)}
            assert views["spark2"].host_problem is None and views["spark2"].host_state is not None
            assert views["spark2"].status.state is State.UP

            while demo.elapsed < 16.0:
                await step()
            await wait_until(lambda: state.nodes["spark2"].host_problem is not None)
            polls_before = state.nodes["spark2"].last_t
            tokens_before = state.nodes["spark2"].instances["gemma4"].tracker.latest
            while demo.elapsed < 30.0:
                await step()
            await wait_until(lambda: "refused" in (state.nodes["spark2"].host_problem or ""))
            views = {v.name: v for v in state.view(demo.now, window_s=20.0)}
            spark2 = views["spark2"]
            assert spark2.host_problem is not None and spark2.host_problem.startswith("ssh: spark2 (127.0.0.1:")
            assert spark2.status.state is State.DEGRADED
            assert spark2.host_problem in spark2.status.reasons
            assert spark2.instances[0].status.state is State.UP  # HTTP unaffected
            assert state.nodes["spark2"].last_t is not None and polls_before is not None
            assert state.nodes["spark2"].last_t > polls_before
            assert state.nodes["spark2"].instances["gemma4"].tracker.latest is not tokens_before
            rates = spark2.instances[0].rates
            assert rates is not None and rates.generation_tokens_per_s
            assert views["spark1"].host_problem is None  # the other nodes' SSH is fine

            while demo.elapsed < 47.0:
                await step()
            await wait_until(lambda: state.nodes["spark2"].host_problem is None, timeout_s=15.0)
            seen = len(feed.samples("spark2"))
            await step()
            await wait_until(lambda: len(feed.samples("spark2")) > seen)
            views = {v.name: v for v in state.view(demo.now, window_s=20.0)}
            assert views["spark2"].status.state is State.UP, views["spark2"].status
    finally:
        await feed.close()
        await demo.stop()


@pytest.mark.slow
def test_demo_command_prints_ssh_endpoints_and_snapshot_shows_host_memory(tmp_path: Path) -> None:
    config = tmp_path / "demo.toml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparktui",
            "demo",
            "--write-config",
            str(config),
            "--",
            sys.executable,
            "-m",
            "sparktui",
            "snapshot",
            "--interval",
            "0.5",
        ],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    out = result.stdout
    assert result.returncode in (0, 1), result.stderr
    ssh_lines = [line for line in out.splitlines() if re.match(r"  spark\d +SSH +ssh -p \d+ -i ", line)]
    assert len(ssh_lines) == 4 and all(line.endswith(" spark@127.0.0.1") for line in ssh_lines), out
    key_file = re.search(r"-i (\S+)", ssh_lines[0])
    assert key_file is not None
    for name in ("spark1", "spark2", "spark3", "spark4"):
        block = out.split(f"\n{name}  (127.0.0.1)", 1)[1].split("\n\n", 1)[0]
        assert "  memory: 121.7 GiB total" in block, block
        assert "  unified memory: vLLM" in block
        assert "  host: load " in block
    assert "systemd vllm-qwen36.service: active (running)" in out
    assert "docker vllm-gemma4: running" in out
    assert "memory pressure (PSI): some" in out
    assert "[nodes.ssh]" in config.read_text()
    # Everything stopped on exit: the demo's temporary directory (keys, known_hosts) is gone.
    assert not Path(key_file.group(1)).exists()


async def test_meminfo_over_ssh_shows_the_page_cache_dropped(fleet: DemoFleet) -> None:
    """The drop-caches action reads MemAvailable before and after with ``cat /proc/meminfo``."""
    node = next(n for n in _spec(fleet).nodes if n.name == "spark1")
    async with NodeSsh(node) as ssh:
        before = parse_meminfo((await ssh.run(MEMINFO_COMMAND, timeout_s=5)).stdout)
        dropped = await ssh.run(DROP_CACHES, timeout_s=5)
        assert dropped.exit_status == 0
        after = parse_meminfo((await ssh.run(MEMINFO_COMMAND, timeout_s=5)).stdout)
    assert before.mem_available is not None and after.mem_available is not None
    assert before.cached is not None and after.cached is not None
    assert after.cached < before.cached and after.mem_available > before.mem_available
