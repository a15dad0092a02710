"""Host state of one node: the sampler streamed over SSH, or read locally, as ``HostUpdate``s.

Over SSH one long-lived command (``sampler.sampler_command``) prints a frame per interval; this module
cuts the stream into frames and parses them (pure code in ``model.host``), and reports connection
problems as they happen. ``NodeSsh.stream`` reconnects by itself, so ``run()`` goes on until cancelled.
For a ``local`` node the same samples come from ``LocalSampler`` in a worker thread.

A node with no GPU exporter configured has its GPU read by ``nvidia-smi -q`` over the same connection
every ``NVIDIA_SMI_EVERY_S`` (clocks, power, temperature, utilisation and the clock-event reasons; the
fleet state parses the text); a node without nvidia-smi (exit status 127) is not asked again.

Every periodic command runs under the node's ``timeout`` (``NodeSsh.run_bounded``), bounded by its
interval less the kill's grace (``bound_s``): one that hangs (nvidia-smi with a GPU off the bus) is
stopped on the node before the next is due, and the next starts only once this one has ended. A hang
is the node's GPU reason, one line: "nvidia-smi: gave no answer within 8 s (stopped on the node)".

Every ``FABRIC_EVERY_S`` the fabric command (``model.fabric.fabric_command``) reads the node's RDMA NICs
(link state, speed, ``ethtool -S`` counters) and the NCCL library each vLLM process of the last host
frame has mapped; a library's sha256 is computed once per path, size and mtime and remembered here.
The mlx5 interfaces the first answer found are named in the later commands (not looked for again); a
node with no mlx5 NIC is not asked again; one without ethtool is asked for ``/sys`` only. An answer
that took over a quarter of the interval (``FABRIC_MAX_SPREAD``) is read again at once, since its
counters' moment is not known closely enough for rates; the second answer is kept however long it took.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

from sparktui.model.exporters import NVIDIA_SMI_Q_COMMAND
from sparktui.model.fabric import (
    FABRIC_EVERY_S,
    NET_DIR,
    NcclLibrary,
    checksum_command,
    fabric_command,
    parse_fabric,
)
from sparktui.model.host import FrameSplitter, parse_frame
from sparktui.model.observations import HostUpdate
from sparktui.model.safe_text import safe_text
from sparktui.model.specs import FleetSpec, NodeSpec
from sparktui.sources.sampler import LocalSampler, sampler_command, service_probes
from sparktui.sources.ssh import ANSWER_MARGIN_S, REMOTE_KILL_AFTER_S, REMOTE_TIMED_OUT, NodeSsh, SshProblemKind

Clock = Callable[[], float]
FRAME_LINE_LIMIT = 64 * 1024  # characters of one line of a host sample (a frame is bounded as a whole too)
NVIDIA_SMI_EVERY_S = 10.0  # nvidia-smi -q costs the node tens of ms of CPU: not every poll
NVIDIA_SMI_MIN_BOUND_S = 1.0  # seconds it may run on the node at the least, however short its interval
NVIDIA_SMI_MAX_OUTPUT = 64 * 1024  # characters kept of its answer (a -q of one GPU's five sections is ~4 KiB)
NOT_FOUND = 127
FABRIC_MIN_BOUND_S = 5.0  # a shell, an ethtool and a grep per NIC, a grep over the vLLM processes' maps
FABRIC_MAX_OUTPUT = 64 * 1024  # characters kept of its answer (8 NICs of 64 lines and 32 libraries: ~40 KiB)
# A fabric answer that came more than this share of the reading interval after its command was sent is
# read again, once: when its counters were read is not known closely enough to make rates from them.
FABRIC_MAX_SPREAD = 0.25
CHECKSUM_BOUND_S = 55.0  # sha256 of a ~300 MB libnccl: about a second, once per file
MAX_CHECKSUMS = 64  # NCCL files remembered per node
VLLM_KINDS = frozenset({"serve", "worker", "engine_core"})


def bound_s(every_s: float, at_least_s: float) -> float:
    """How long a command run every ``every_s`` may run on the node: stopped (and killed, if it must be)
    before the next is due, but never given less than ``at_least_s``."""
    return max(at_least_s, every_s - REMOTE_KILL_AFTER_S)


def wants_host_state(node: NodeSpec) -> bool:
    """Whether host state is read for this node: locally, or over SSH unless disabled."""
    return node.local or node.ssh.enabled


class HostCollector:
    """Streams one node's host state; ``run(on_update)`` until cancelled. Never raises."""

    def __init__(
        self,
        node: NodeSpec,
        fleet: FleetSpec,
        ssh: NodeSsh | None = None,
        clock: Clock = time.monotonic,
        *,
        nvidia_smi_every_s: float = NVIDIA_SMI_EVERY_S,
        fabric_every_s: float = FABRIC_EVERY_S,
        net_dir: str = NET_DIR,
    ) -> None:
        self.node = node
        self.nvidia_smi_every_s = nvidia_smi_every_s
        self.fabric_every_s = fabric_every_s
        self.net_dir = net_dir
        self._vllm_pids: tuple[int, ...] = ()  # of the last host frame that listed processes
        self._checksums: dict[tuple[str, int | None, int | None], str | None] = {}
        self.interval_s = fleet.poll_interval_s
        self.clock = clock
        self.ssh = ssh if ssh is not None or node.local else NodeSsh(node)
        self._owns_ssh = ssh is None

    async def run(self, on_update: Callable[[HostUpdate], None]) -> None:
        try:
            if self.node.local:
                await self._run_local(on_update)
            else:
                await self._run_ssh(on_update)
        finally:
            if self._owns_ssh and self.ssh is not None:
                await self.ssh.close()

    async def _run_ssh(self, on_update: Callable[[HostUpdate], None]) -> None:
        async with asyncio.TaskGroup() as group:
            if self.node.gpu_exporter is None:
                group.create_task(self._run_nvidia_smi(on_update))
            group.create_task(self._run_fabric(on_update))
            await self._run_sampler(on_update)

    async def _run_fabric(self, on_update: Callable[[HostUpdate], None]) -> None:
        """The RDMA NICs and the NCCL libraries, every ``fabric_every_s``."""
        assert self.ssh is not None
        ethtool = True
        # The config's, or the mlx5 ones once the first answer found them: not looked for again.
        interfaces: tuple[str, ...] = self.node.rdma_interfaces
        next_at = time.monotonic()
        again = False  # the last reading's moment was unknown: this one is read at once, and kept whatever
        while True:
            command = fabric_command(self._vllm_pids, ethtool=ethtool, net_dir=self.net_dir, interfaces=interfaces)
            sent_at = self.clock()
            result = await self.ssh.run_bounded(
                command, bound_s=bound_s(self.fabric_every_s, FABRIC_MIN_BOUND_S), max_output=FABRIC_MAX_OUTPUT
            )
            read_at = self.clock()  # the counters' moment, not after a checksum's second
            if result.exit_status == NOT_FOUND:
                return  # no sh, or a node that answers only commands it knows
            sample = parse_fabric(result.stdout) if result.problem is None else None
            if sample is not None and sample.complete and not sample.nics:
                return  # no RDMA NIC: no multi-node job over this node's fabric, however slow the answer
            if sample is not None and not again and read_at - sent_at > self.fabric_every_s * FABRIC_MAX_SPREAD:
                # The node read its counters somewhere between the two: stamped with either, the rates
                # of the intervals on each side would be off by the spread. Read again at once.
                again = True
                continue
            again = False
            if sample is not None:
                ethtool = ethtool and not sample.no_ethtool
                interfaces = tuple(nic.name for nic in sample.nics)
                text = result.stdout + await self._checksum_lines(sample.nccl)
                on_update(HostUpdate(self.node.name, read_at, fabric=text))
            next_at += self.fabric_every_s
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def _checksum_lines(self, libraries: Iterable[NcclLibrary]) -> str:
        """``sha256`` lines for the answer, each library's computed once per path, size and mtime."""
        assert self.ssh is not None
        lines = []
        for library in libraries:
            key = library.key
            if key not in self._checksums:
                if len(self._checksums) >= MAX_CHECKSUMS:
                    self._checksums.clear()  # files that come and go (new venvs, upgrades): forget the old
                result = await self.ssh.run_bounded(checksum_command(library.path), bound_s=CHECKSUM_BOUND_S)
                word = result.stdout.split(" ", 1)[0] if result.ok else ""
                self._checksums[key] = word if len(word) == 64 else None
            digest = self._checksums[key]
            if digest is not None:
                size = "-" if library.size is None else str(library.size)
                mtime = "-" if library.mtime is None else str(library.mtime)
                lines.append(f"sha256 {digest} {size} {mtime} {library.path}\n")
        return "".join(dict.fromkeys(lines))

    async def _run_nvidia_smi(self, on_update: Callable[[HostUpdate], None]) -> None:
        """The GPU of a node without an exporter, from ``nvidia-smi -q``, every ``nvidia_smi_every_s``."""
        assert self.ssh is not None
        bound = bound_s(self.nvidia_smi_every_s, NVIDIA_SMI_MIN_BOUND_S)
        next_at = time.monotonic()
        while True:
            result = await self.ssh.run_bounded(NVIDIA_SMI_Q_COMMAND, bound_s=bound, max_output=NVIDIA_SMI_MAX_OUTPUT)
            if result.exit_status == NOT_FOUND:
                return  # no nvidia-smi on this node: no GPU to read
            if result.exit_status in REMOTE_TIMED_OUT:
                on_update(self._nvidia_smi_hung(f"gave no answer within {bound:g} s (stopped on the node)"))
            elif result.problem is not None and result.problem.kind is SshProblemKind.TIMEOUT:
                # Not even the kill ended it (a process in the driver's uninterruptible sleep), or the
                # answer got lost on the way: either way no reading, and the reason says so.
                waited = bound + REMOTE_KILL_AFTER_S + ANSWER_MARGIN_S
                on_update(
                    self._nvidia_smi_hung(f"gave no answer within {waited:g} s, not even once stopped on the node")
                )
            elif result.problem is None:
                # Its own complaint ("couldn't communicate with the NVIDIA driver") says why there is no reading.
                text = result.stdout if result.ok else f"{result.stdout}\n{result.stderr}"
                on_update(HostUpdate(self.node.name, self.clock(), nvidia_smi=text))
            next_at += self.nvidia_smi_every_s
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    def _nvidia_smi_hung(self, reason: str) -> HostUpdate:
        # As the text of its reading: the fleet state shows it as the GPU's reason ("nvidia-smi: ..."), a
        # recording keeps it, and the last good reading ages as stale meanwhile.
        return HostUpdate(self.node.name, self.clock(), nvidia_smi=reason)

    async def _run_sampler(self, on_update: Callable[[HostUpdate], None]) -> None:
        assert self.ssh is not None
        command = sampler_command(self.interval_s, service_probes(self.node))
        splitter = FrameSplitter()
        # A frame is due every interval: silence for three of them (at least 5 s) is a stall.
        read_timeout = max(5.0, 3 * self.interval_s)
        name = self.node.name
        async for event in self.ssh.stream(command, read_timeout_s=read_timeout):
            if event.line is not None:
                # Unit and container states, command lines, paths: the node's words, made safe here.
                frame = splitter.feed(safe_text(event.line, FRAME_LINE_LIMIT))
                if frame is None:
                    if splitter.last_problem:
                        on_update(HostUpdate(name, self.clock(), problem=f"host sampler: {splitter.last_problem}"))
                        splitter.last_problem = None
                    continue
                try:
                    sample = parse_frame(frame)
                except ValueError as exc:
                    on_update(HostUpdate(name, self.clock(), problem=f"host sampler: {exc}"))
                    continue
                if sample.processes is not None:
                    self._vllm_pids = tuple(p.pid for p in sample.processes if p.kind in VLLM_KINDS)
                on_update(HostUpdate(name, self.clock(), sample=sample))
            elif event.problem is not None:
                splitter = FrameSplitter()  # a new sampler starts after the reconnect
                on_update(HostUpdate(name, self.clock(), problem=f"ssh: {event.problem.message}", connection_lost=True))

    async def _run_local(self, on_update: Callable[[HostUpdate], None]) -> None:
        sampler = LocalSampler()
        probes = service_probes(self.node)
        next_at = time.monotonic()
        while True:
            sample = await asyncio.to_thread(sampler.sample, probes)
            on_update(HostUpdate(self.node.name, self.clock(), sample=sample))
            next_at += self.interval_s
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
