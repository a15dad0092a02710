"""Live collection of a whole fleet, for every consumer alike (the dashboard, ``watch``, recording):
the HTTP poll loops, one host sampler, one log stream per vLLM instance and one of the kernel, over
each node's single SSH connection. What arrives goes to the monitor core (``run(core)``), the one door
every consumer reads from; the core is asked which canaries are due; ``run()`` goes on until cancelled.

A recording's replay source has the same ``run(core)`` shape, so the dashboard and the watcher run
on live or recorded data through the same code.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from sparktui.model.logbuffer import LogBuffer, LogLine
from sparktui.model.observations import HostUpdate, NodeObservation
from sparktui.model.specs import FleetSpec
from sparktui.sources.canary import CanarySender
from sparktui.sources.host import HostCollector, wants_host_state
from sparktui.sources.http import make_poll_client
from sparktui.sources.logs import BATCH_MAX_LINES, LogStream, followed_logs
from sparktui.sources.poller import FleetPoller, fleet_origins
from sparktui.sources.ssh import NodeSsh

if TYPE_CHECKING:
    from sparktui.monitor.core import Monitor


class FleetSink(Protocol):
    """What a source delivers to: the monitor core (``Monitor``), or, for a test of a source alone, any
    object with these methods. Each is called on the event loop and must not block."""

    def observation(self, observation: NodeObservation) -> None: ...
    def host(self, update: HostUpdate) -> None: ...
    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None: ...
    def error(self, node: str, exc: Exception) -> None: ...


class FleetSource(Protocol):
    # True when the source carries the clock: a recording ticks the core at its own ticks, and no
    # consumer ticks it on a timer of its own. False for live sources.
    drives_ticks: bool

    async def run(self, core: Monitor) -> None: ...


class LiveFleet:
    """Everything sparktui collects from a fleet, live."""

    drives_ticks = False

    def __init__(
        self,
        fleet: FleetSpec,
        *,
        clock: Callable[[], float] = time.monotonic,
        logs: bool = True,
    ) -> None:
        """``logs``: follow each instance's log over SSH (its lines go to ``FleetSink.log_batch``)."""
        self.fleet = fleet
        self.clock = clock
        self.logs = logs
        self.ssh: dict[str, NodeSsh] = {}

    def node_ssh(self, name: str) -> NodeSsh:
        found = self.ssh.get(name)
        if found is None:
            node = self.fleet.node(name)
            if node is None:
                raise KeyError(name)
            found = self.ssh[name] = NodeSsh(node)
        return found

    async def run(self, core: Monitor) -> None:
        """Collect into ``core`` until cancelled."""
        await self.deliver(core, core)

    async def deliver(self, sink: FleetSink, planner: Monitor | None = None) -> None:
        """Collect into ``sink`` until cancelled; ``planner`` (the core) plans the canaries and reads
        each observation ahead in a worker thread. ``run`` passes the core as both; a test of the
        collection alone passes a sink of its own and no planner."""
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._http(sink, planner))
                for node in self.fleet.nodes:
                    if wants_host_state(node):
                        ssh = None if node.local else self.node_ssh(node.name)
                        collector = HostCollector(node, self.fleet, ssh=ssh, clock=self.clock)
                        group.create_task(self._guarded(node.name, collector.run(sink.host), sink))
                    if self.logs and not node.local and node.ssh.enabled:
                        for stream in self._log_streams(node.name, sink):
                            group.create_task(self._guarded(node.name, stream.run(), sink))
        finally:
            for ssh in self.ssh.values():
                await ssh.close()

    async def _http(self, sink: FleetSink, planner: Monitor | None) -> None:
        canaries = CanarySender(self.fleet) if planner is not None else None
        preread = planner.preread if planner is not None else None
        try:
            async with make_poll_client(fleet_origins(self.fleet), ca_file=self.fleet.ca_file) as client:
                poller = FleetPoller(self.fleet, client, clock=self.clock, canaries=canaries)
                await poller.run(sink.observation, sink.error, planner, preread)
        finally:
            if canaries is not None:
                await canaries.aclose()

    @staticmethod
    async def _guarded(node: str, work: object, sink: FleetSink) -> None:
        """A collector that fails by a bug is reported; the others go on."""
        assert asyncio.iscoroutine(work)
        try:
            await work
        except Exception as exc:
            sink.error(node, exc)

    def _log_streams(self, node_name: str, sink: FleetSink) -> list[LogStream]:
        node = self.fleet.node(node_name)
        assert node is not None

        def forward(instance: str, lines: list[LogLine], node: str = node_name) -> None:
            sink.log_batch(node, instance, lines)

        # The stream numbers its lines in a buffer of one batch; the consumer keeps the log.
        return [
            LogStream(self.node_ssh(node_name), vllm, LogBuffer(max_lines=BATCH_MAX_LINES), on_batch=forward)
            for vllm in followed_logs(node)
        ]
