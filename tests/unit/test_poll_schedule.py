"""The poller's schedule on virtual time: when each node's polls go out, checked without waiting.

``FleetPoller`` takes its schedule's clock and sleep as arguments; here both are a ``VirtualTime`` that
jumps straight to the next wake-up once every loop is asleep, and each poll is a stand-in collector
that takes as long (in virtual seconds) as the test says. No HTTP goes out and no real time passes,
so the schedule is exact: a loaded machine cannot shift it.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
from collections.abc import Callable

import httpx
import pytest

from sparktui.config import parse_config
from sparktui.model.observations import NodeObservation
from sparktui.model.specs import FleetSpec
from sparktui.sources import poller
from sparktui.sources.collector import NodeCollector
from sparktui.sources.http import FetchClient
from sparktui.sources.poller import FleetPoller

START = 1000.0
SETTLE_STEPS = 20  # event-loop turns for every woken loop to run to its next sleep (no I/O in between)


class VirtualTime:
    """A monotonic clock and an ``asyncio.sleep`` stand-in: time moves only when ``run_until`` moves it."""

    def __init__(self, start: float = START) -> None:
        self.now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + max(delay, 0.0), next(self._order), woken))
        await woken

    async def run_until(self, end: float) -> None:
        """Let every task run until all sleep, wake the earliest sleepers, repeat until ``end``."""
        while True:
            for _ in range(SETTLE_STEPS):
                await asyncio.sleep(0)
            if not self._sleepers or self._sleepers[0][0] > end:
                self.now = end
                return
            at = self._sleepers[0][0]
            self.now = at
            while self._sleepers and self._sleepers[0][0] == at:
                heapq.heappop(self._sleepers)[2].set_result(None)


class TimedCollector(NodeCollector):
    """A node whose poll takes ``duration(k)`` virtual seconds for its k-th poll; logs start and end."""

    def __init__(
        self,
        node: NodeCollector,
        time: VirtualTime,
        duration: Callable[[int], float],
        log: list[tuple[str, float, float]],
    ) -> None:
        super().__init__(node.node, node.fleet)
        self.time = time
        self.duration = duration
        self.log = log
        self.count = 0

    async def poll(self, client: FetchClient) -> NodeObservation:
        start = self.time.now
        await self.time.sleep(self.duration(self.count))
        self.count += 1
        self.log.append((self.node.name, start, self.time.now))
        return NodeObservation(node=self.node.name, t=self.time.now, wall=0.0)


def _fleet(nodes: int, interval_s: float) -> FleetSpec:
    text = f"poll_interval_s = {interval_s}\n" + "".join(
        f'[[nodes]]\nname = "n{i:02d}"\nhost = "127.0.0.1"\n[[nodes.vllm]]\nport = {9000 + i}\n' for i in range(nodes)
    )
    return parse_config(text, source="test.toml", env={})


async def _schedule(
    nodes: int, interval_s: float, until_s: float, duration: Callable[[str, int], float] = lambda _n, _k: 0.1
) -> list[tuple[str, float, float]]:
    """(node, start, end) of every poll that ended within ``until_s`` virtual seconds, relative to the start."""
    time = VirtualTime()
    log: list[tuple[str, float, float]] = []
    async with httpx.AsyncClient() as client:
        fleet_poller = FleetPoller(_fleet(nodes, interval_s), client, schedule_clock=time.monotonic, sleep=time.sleep)
        fleet_poller.collectors = [
            TimedCollector(c, time, functools.partial(duration, c.node.name), log) for c in fleet_poller.collectors
        ]
        task = asyncio.create_task(fleet_poller.run(lambda _obs: None))
        await time.run_until(START + until_s)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    return [(name, start - START, end - START) for name, start, end in log]


def _starts(log: list[tuple[str, float, float]], node: str) -> list[float]:
    return [round(start, 9) for name, start, _ in log if name == node]


async def test_polls_go_out_at_a_fixed_rate_that_does_not_drift() -> None:
    """Each poll takes 0.3 s; the next still starts a whole interval after the previous one started."""
    log = await _schedule(1, 1.0, 10.0, lambda _n, _k: 0.3)
    assert _starts(log, "n00") == [float(k) for k in range(10)]


async def test_a_poll_that_overruns_skips_the_missed_ticks_and_never_overlaps() -> None:
    """The second poll takes 2.5 s (1 → 3.5): the ticks at 2 and 3 are skipped, not bunched, and the
    next poll starts on the grid at 4, after the slow one ended."""
    log = await _schedule(1, 1.0, 7.0, lambda _n, k: 2.5 if k == 1 else 0.1)
    assert _starts(log, "n00") == [0.0, 1.0, 4.0, 5.0, 6.0]
    for (_, _, ended), (_, started, _) in itertools.pairwise(log):
        assert started >= ended  # one node's polls never overlap


async def test_first_polls_go_out_together_then_the_groups_are_spread_over_the_interval() -> None:
    """Ten nodes, groups of eight: every first poll at 0, then the first group on the whole seconds and
    the second group half an interval later."""
    assert poller.POLL_GROUP == 8
    log = await _schedule(10, 1.0, 3.0)
    for i in range(8):
        assert _starts(log, f"n{i:02d}") == [0.0, 1.0, 2.0], i
    for i in (8, 9):
        assert _starts(log, f"n{i:02d}") == [0.0, 0.5, 1.5, 2.5], i


async def test_a_slow_node_does_not_move_the_others_schedule() -> None:
    """One node's polls take 1.7 s at a 1 s interval; its neighbour in the same group keeps the grid."""
    log = await _schedule(2, 1.0, 6.0, lambda name, _k: 1.7 if name == "n00" else 0.1)
    assert _starts(log, "n01") == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert _starts(log, "n00") == [0.0, 2.0, 4.0]
