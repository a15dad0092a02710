"""What the dashboard keeps is bounded by what it shows (both found by ``benchmarks/soak.py``):

- the node screens it keeps composed for a quick return: one it stops keeping is removed, not left
  mounted with its widgets running (an operator visiting nodes in turn added about 40 running tasks
  per node screen, for ever);
- the counter history behind the rates: every rate on screen is over the app's window, so it keeps a
  couple of windows, not the model's default 15 minutes (~11 MB per vLLM instance at 1 s polls).
"""

from __future__ import annotations

import asyncio
import gc
from typing import ClassVar

import pytest

from sparktui.model.fleet import COUNTER_WINDOWS_KEPT
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation
from sparktui.ui.app import SparkApp, make_app
from sparktui.ui.node_screen import NodeScreen
from tests.support.fixture_fleet import scenario_scrapes
from tests.support.ui_data import Clock, feed, fleet_spec


class TwoKeptApp(SparkApp):
    NODE_SCREENS_KEPT: ClassVar[int] = 2  # fewer than the fleet's four nodes, so visits evict


def _node_screens_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, NodeScreen))


@pytest.mark.slow
async def test_node_screens_no_longer_kept_are_removed() -> None:
    clock = Clock()
    app = TwoKeptApp(fleet_spec(), collect=False, clock=clock)
    feed(app, clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        counts = []
        for _ in range(3):
            for number in (1, 2, 3, 4):
                await pilot.press(str(number))
                await pilot.pause()
                await pilot.press("right")  # the next node, on the same place in the stack
                await pilot.pause()
                await pilot.press("escape")
                await pilot.pause()
            counts.append((_node_screens_alive(), len(asyncio.all_tasks())))
        assert counts[0][0] <= TwoKeptApp.NODE_SCREENS_KEPT
        assert counts[-1] == counts[0]  # twelve visits later: no more screens, no more tasks


@pytest.mark.parametrize("consumer", ["dashboard", "watch"])
def test_counter_history_spans_a_couple_of_windows_not_fifteen_minutes(consumer: str) -> None:
    from sparktui.headless.watch import Watcher

    clock = Clock()
    app = (
        make_app(fleet_spec(), collect=False, clock=clock, window_s=30.0)
        if consumer == "dashboard"
        else Watcher(fleet_spec(), clock=clock, window_s=30.0)
    )
    scrapes = scenario_scrapes("mtp2-steady")
    ok = FetchKind.OK
    for poll in range(300):  # ten minutes at a 2 s interval
        t = clock.t = 2.0 * poll
        metrics = HttpResult(url="u", kind=ok, status=200, body=scrapes[poll % len(scrapes)].encode())
        vllm = ServerObservation("gptoss", HttpResult(url="u", kind=ok, status=200), metrics)
        app.monitor.state.apply(NodeObservation(node="spark1", t=t, wall=1e9 + t, vllm=(vllm,)))
    tracker = app.monitor.state.nodes["spark1"].instances["gptoss"].tracker
    everything_kept = tracker.rates(window_s=None)  # the rates over all the history it holds
    window_s = app.monitor.window_s
    assert everything_kept is not None and window_s is not None
    assert everything_kept.seconds <= COUNTER_WINDOWS_KEPT * window_s
    assert tracker.rates(window_s=window_s) is not None  # the window on screen is still whole
