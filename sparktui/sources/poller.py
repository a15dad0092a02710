"""Polling the fleet: one loop per node at a fixed rate that never drifts and never overlaps.

A slow or dead node only delays its own loop; each poll is bounded by the fetch deadlines.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from sparktui.model.observations import NodeObservation
from sparktui.model.specs import FleetSpec
from sparktui.monitor.schedule import next_due
from sparktui.sources.canary import CanaryPlanner, CanarySender
from sparktui.sources.collector import Clock, NodeCollector
from sparktui.sources.http import FetchClient, origin_of


def fleet_origins(fleet: FleetSpec) -> list[str]:
    """Every origin the fleet's endpoints live on (one connection pool each in ``make_poll_client``)."""
    urls: list[str] = []
    for node in fleet.nodes:
        urls.extend(v.base_url for v in node.vllm if v.base_url)
        urls.extend(e.url for e in (node.gpu_exporter, node.node_exporter) if e is not None)
        urls.extend(s.url for s in node.services)
    return sorted({origin_of(url) for url in urls})


POLL_GROUP = 8  # nodes polled together; the groups are spread over the interval

Sleep = Callable[[float], Awaitable[object]]


class FleetPoller:
    def __init__(
        self,
        fleet: FleetSpec,
        client: FetchClient,
        clock: Clock = time.monotonic,
        canaries: CanarySender | None = None,
        *,
        schedule_clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        wall_clock: Clock = time.time,
    ) -> None:
        """``clock`` stamps observations (monotonic seconds); the demo's step mode passes its own.
        ``canaries``: sends the canaries a planner orders (``run``'s ``planner``) and hands their
        results to the next polls. ``schedule_clock`` and ``sleep`` time ``run``'s loops; they stay
        apart from ``clock`` because a stepped demo stamps simulated time while the polls go out in
        real time (a test passes virtual ones to check the schedule without waiting). ``wall_clock``: the
        unix time each observation carries (what a server's own times, as Ollama's expiries, are judged
        against); a stepped demo passes its simulated one."""
        self.fleet = fleet
        self.client = client
        self.canaries = canaries
        self.schedule_clock = schedule_clock
        self.sleep = sleep
        self.collectors = [NodeCollector(node, fleet, clock, canaries, wall_clock) for node in fleet.nodes]

    async def poll_all(self) -> list[NodeObservation]:
        """One poll of every node, concurrently (for the headless commands)."""
        return list(await asyncio.gather(*(c.poll(self.client) for c in self.collectors)))

    def send_canaries(self, planner: CanaryPlanner, observation: NodeObservation) -> None:
        """Ask ``planner`` which of the node's canaries are due now that it saw ``observation``, and send them."""
        if self.canaries is not None:
            self.canaries.send(observation.node, planner.canaries_due(observation.node, observation.t))

    async def run(
        self,
        on_observation: Callable[[NodeObservation], None],
        on_error: Callable[[str, Exception], None] | None = None,
        planner: CanaryPlanner | None = None,
        preread: Callable[[NodeObservation], None] | None = None,
    ) -> None:
        """Poll every node forever, each in its own loop; cancel to stop.

        ``on_error`` hears of an exception from a poll or from ``on_observation`` (a bug); the loop
        goes on. ``planner`` (with ``canaries``) is asked after each observation which canaries to send.
        ``preread`` is given each observation first, in a worker thread: it parses what the
        observation carries (``Monitor.preread``), so a large or hostile body never holds the event
        loop, and the other nodes' polls and the screen go on while it is read.
        """
        async with asyncio.TaskGroup() as group:
            count = len(self.collectors)
            groups = -(-count // POLL_GROUP)
            for index, collector in enumerate(self.collectors):
                # Every node's first poll goes out at once (the screen fills at start). After it the
                # nodes poll in groups of POLL_GROUP spread over the interval: a group's answers come
                # back together and are drawn in one frame (a frame per node costs more than the
                # polls), while a large fleet's parsing does not all land at once.
                offset = self.fleet.poll_interval_s * (index // POLL_GROUP) / groups
                group.create_task(
                    self._loop(collector, on_observation, on_error, offset, planner=planner, preread=preread)
                )

    async def _loop(
        self,
        collector: NodeCollector,
        on_observation: Callable[[NodeObservation], None],
        on_error: Callable[[str, Exception], None] | None,
        offset_s: float = 0.0,
        *,
        planner: CanaryPlanner | None = None,
        preread: Callable[[NodeObservation], None] | None = None,
    ) -> None:
        interval = self.fleet.poll_interval_s
        next_at = self.schedule_clock() + offset_s - interval  # the first poll now, then at offset + k × interval
        while True:
            try:
                observation = await collector.poll(self.client)
                if preread is not None:
                    await asyncio.to_thread(preread, observation)
                on_observation(observation)
                if planner is not None:
                    self.send_canaries(planner, observation)
            except Exception as exc:  # a bug must not stop this node's polling, nor the others'
                if on_error is not None:
                    on_error(collector.node.name, exc)
            now = self.schedule_clock()
            next_at = next_due(next_at, now, interval)  # a poll that overran skips the slots it missed
            await self.sleep(next_at - now)
