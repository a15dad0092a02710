"""Live collection of a whole fleet, for every consumer alike (the dashboard, ``watch``, recording):
the HTTP poll loops, one host sampler, one log stream per vLLM instance and one of the kernel, over
each node's single SSH connection. What arrives goes to a ``FleetSink``; ``run()`` goes on until cancelled.

A recording's replay source has the same ``run(sink)`` shape, so the dashboard and the watcher run
on live or recorded data through the same code.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from sparktui.model.logbuffer import LogBuffer, LogLine
from sparktui.model.observations import HostUpdate, NodeObservation
from sparktui.model.specs import FleetSpec
from sparktui.sources.canary import CanaryPlanner, CanarySender
from sparktui.sources.host import HostCollector, wants_host_state
from sparktui.sources.http import make_poll_client
from sparktui.sources.logs import BATCH_MAX_LINES, LogStream, followed_logs
from sparktui.sources.poller import FleetPoller, fleet_origins
from sparktui.sources.ssh import NodeSsh


class FleetSink(Protocol):
    """Where collected data goes. Each method is called on the event loop and must not block."""

    def observation(self, observation: NodeObservation) -> None: ...
    def host(self, update: HostUpdate) -> None: ...
    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None: ...
    def error(self, node: str, exc: Exception) -> None: ...


@runtime_checkable
class Prereader(Protocol):
    """A sink that reads an observation's bodies ahead, in a worker thread (``Monitor.preread``)."""

    def preread(self, observation: NodeObservation) -> None: ...


class FleetSource(Protocol):
    # True when the source carries the clock: a recording's ticks call the consumer's ``tick(now)``,
    # and the consumer evaluates then, not on a timer of its own. False for live sources.
    drives_ticks: bool

    async def run(self, sink: FleetSink) -> None: ...


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

    async def run(self, sink: FleetSink) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._http(sink))
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

    async def _http(self, sink: FleetSink) -> None:
        # A sink that plans canaries (the monitor core behind the dashboard or ``watch``) gets them sent.
        planner = sink if isinstance(sink, CanaryPlanner) else None
        canaries = CanarySender(self.fleet) if planner is not None else None
        preread = sink.preread if isinstance(sink, Prereader) else None
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
