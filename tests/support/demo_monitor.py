"""A demo scenario run through the monitor core as the dashboard runs it, stepped on the demo's clock.

Every source is the real one: ``FleetPoller`` over HTTP, ``HostCollector`` and ``LogStream`` (each
instance's log and the kernel log) over SSH into the demo's OpenSSH-speaking nodes; the core is fed
and ticked once a step, as the dashboard ticks it once a poll. ``step`` returns when the step's host
frames have arrived, so a tick judges what the simulation did up to its clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from sparktui.config import parse_config
from sparktui.demo.fleet import FLEETS, DemoFleet
from sparktui.demo.scenarios import SCENARIOS
from sparktui.model.logbuffer import LogLine
from sparktui.model.specs import FleetSpec
from sparktui.monitor.core import Monitor
from sparktui.sources.http import make_poll_client
from sparktui.sources.logs import LogStream, followed_logs
from sparktui.sources.poller import FleetPoller, fleet_origins
from sparktui.sources.ssh import NodeSsh
from tests.integration.test_demo_ssh import HostFeed
from tests.support.monitoring import monitor_for


class DemoRun:
    """A scenario's fleet, its sources and the monitor core they feed (``demo_run``)."""

    def __init__(
        self, fleet: DemoFleet, spec: FleetSpec, monitor: Monitor, poller: FleetPoller, feed: HostFeed
    ) -> None:
        self.fleet, self.spec, self.monitor, self.poller, self.feed = fleet, spec, monitor, poller, feed
        self.started_epoch = fleet.clock.epoch  # the scenario's start, on the demo's clock

    async def step(self, dt: float = 2.0) -> None:
        """Advance the simulation ``dt`` seconds, take its host frames, poll every node, tick the core."""
        await self.fleet.advance(dt)
        await self.feed.settle()
        for observation in await self.poller.poll_all():
            self.monitor.observation(observation)
        await asyncio.sleep(0)  # the log batches of this moment, already read, are handed over
        self.monitor.tick(self.fleet.now, self.fleet.clock.epoch)

    async def run_until(self, elapsed_s: float, each: Callable[[DemoRun], None] | None = None) -> None:
        """Step to ``elapsed_s`` of scenario time, calling ``each(self)`` after every tick."""
        while self.fleet.elapsed < elapsed_s:
            await self.step()
            if each is not None:
                each(self)


@asynccontextmanager
async def demo_run(scenario: str, seed: int = 21) -> AsyncIterator[DemoRun]:
    chosen = SCENARIOS[scenario]
    fleet = DemoFleet(FLEETS[chosen.fleet], seed=seed, scenario=chosen)
    await fleet.start()
    spec = parse_config(fleet.config_toml(), source="demo.toml")
    monitor = monitor_for(spec)
    names = tuple(n.name for n in spec.nodes if n.ssh.enabled and not n.local)
    feed = HostFeed(fleet, spec, names, monitor.state)
    ssh = {n.name: NodeSsh(n) for n in spec.nodes if n.name in names}

    def to_core(node: str) -> Callable[[str, list[LogLine]], None]:
        return lambda instance, lines: monitor.log_batch(node, instance, lines)

    logs = [
        asyncio.create_task(LogStream(ssh[n.name], server, on_batch=to_core(n.name)).run())
        for n in spec.nodes
        if n.name in ssh
        for server in followed_logs(n)
    ]
    try:
        async with make_poll_client(fleet_origins(spec), ca_file=spec.ca_file) as client:
            await feed.start()
            poller = FleetPoller(spec, client, clock=lambda: fleet.now, wall_clock=lambda: fleet.clock.epoch)
            yield DemoRun(fleet, spec, monitor, poller, feed)
    finally:
        for task in logs:
            task.cancel()
        for task in logs:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for connection in ssh.values():
            await connection.close()
        await feed.close()
        await fleet.stop()
