"""The kiosk for a long run, compressed: weeks on a wall become hundreds of polls on a clock the test
moves by hand. A source of real fixture observations feeds the app through its ``FleetSource`` protocol;
the test checks that what the app keeps stays within its bounds, that the pages rotate fleet → each node
→ fleet, and that the banner names a node when its data stops and clears when it comes back."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from textual.widgets import Static

from sparktui.config import load_catalogue, parse_config
from sparktui.diagnosis.alerts import AlertEngine, alert_rules
from sparktui.diagnosis.engine import DiagnosisEngine
from sparktui.model.history import INSTANCE_METRICS, NODE_METRICS, History
from sparktui.model.host import FrameSplitter, HostSample, parse_frame
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.model.specs import FleetSpec
from sparktui.sources.live import FleetSink
from sparktui.ui.app import SparkApp, make_app
from sparktui.ui.kiosk_screen import BannerRow, KioskScreen
from tests.conftest import DATA
from tests.support.fixture_fleet import gb10_nvidia_exporter_page, scenario_scrapes
from tests.support.wait import wait_until

NODES = ("spark1", "spark2", "spark3")
INSTANCES = {"spark1": "qwen235", "spark2": "gemma4", "spark3": "qwen235"}
SERVING = ("spark1", "spark2")  # spark3 is spark1's tensor-parallel worker: no HTTP of its own
CONFIG = """
poll_interval_s = 1.0
timeout_s = 2.0

[kiosk]
rotate_s = {rotate_s}
shift_every_s = 10

[[nodes]]
name = "spark1"
host = "192.168.1.11"
[[nodes.vllm]]
name = "qwen235"
port = 8000
unit = "vllm-qwen235.service"
role = "head"
job = "qwen235-tp2"
[nodes.gpu_exporter]
port = 9835

[[nodes]]
name = "spark2"
host = "192.168.1.12"
[[nodes.vllm]]
name = "gemma4"
port = 8001
container = "vllm_gemma4"
[nodes.gpu_exporter]
port = 9835

[[nodes]]
name = "spark3"
host = "192.168.1.13"
[[nodes.vllm]]
name = "qwen235"
role = "worker"
job = "qwen235-tp2"
"""

# How long the compressed run is: polls of one second each. The soak variant runs 25 times as long. Every
# bound below is reached well before halfway, so that the second half shows the stores staying at it.
TICKS = 800
SOAK_TICKS = int(os.environ.get("SPARKTUI_SOAK_TICKS", "20000"))
HISTORY_POINTS = 300  # the history's bound in the compressed run (the app's default is 600)
LOG_LINES_PER_POLL = 30  # past the buffer's 10 000-line bound at poll 334
ROTATE_EVERY = 3  # polls per kiosk page in the compressed run
SIGNATURE_EVERY = 12  # polls between two EADDRINUSE lines on spark1: a finding that opens and clears
FINDINGS_KEPT = 25  # the engine's cleared-findings bound: reached at poll 300
EADDRINUSE = (
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
    "port: 29501, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use"
)


class Clock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _ok(url: str, body: str = "") -> HttpResult:
    return HttpResult(url=url, kind=FetchKind.OK, status=200, body=body.encode(), elapsed_s=0.01)


def _frames() -> list[HostSample]:
    splitter = FrameSplitter()
    frames: list[HostSample] = []
    for line in (DATA / "host" / "frames-serving.txt").read_text().splitlines():
        frame = splitter.feed(line)
        if frame is not None:
            frames.append(parse_frame(frame))
    return frames


@dataclass
class Outage:
    """What a node answers now: ``silent`` (the collector hears nothing: stale) or ``refused``
    (every request refused: down)."""

    silent: set[str]
    refused: set[str]


class FixtureSource:
    """A ``FleetSource`` on real fixture scrapes (vLLM 0.33 sequences, the GB10 exporter page, host frames
    of a serving node), one poll per ``tick()``: the test owns the clock and the pace."""

    drives_ticks = False  # the app's render tick evaluates, as it does live

    def __init__(self, clock: Clock, fleet: FleetSpec, spark2: str = "mtp3-poor-pos2", signatures: bool = True) -> None:
        """``spark2``: the fixture sequence spark2 serves (mtp3-poor-pos2 raises a speculative-decoding
        finding, and its alert, the whole time). ``signatures``: spark1 logs an EADDRINUSE line every
        ``SIGNATURE_EVERY`` polls."""
        self.signatures = signatures
        self.clock = clock
        self.fleet = fleet
        self.outage = Outage(set(), set())
        self.polls = 0
        self._scrapes = {"spark1": scenario_scrapes("mtp2-steady"), "spark2": scenario_scrapes(spark2)}
        self._gpu = gb10_nvidia_exporter_page()
        self._frames = _frames()
        self._queue: asyncio.Queue[float] = asyncio.Queue()

    async def run(self, sink: FleetSink) -> None:
        while True:
            t = await self._queue.get()
            try:
                self._poll(sink, t)
            finally:
                self._queue.task_done()

    async def tick(self) -> None:
        """One poll interval passes; the source reports what it saw in it."""
        self.clock.t += self.fleet.poll_interval_s
        await self._queue.put(self.clock.t)
        await self._queue.join()

    def _poll(self, sink: FleetSink, t: float) -> None:
        self.polls += 1
        for node in NODES:
            if node in self.outage.silent:
                continue
            instance = INSTANCES[node]
            if node in self.outage.refused:
                refused = HttpResult(url="u", kind=FetchKind.REFUSED, error="connection refused")
                vllm = ServerObservation(instance, refused, refused)
                sink.observation(NodeObservation(node=node, t=t, wall=1e9 + t, vllm=(vllm,)))
                continue
            scrapes = self._scrapes.get(node)
            if scrapes is None:  # spark3: the tensor-parallel worker, no HTTP of its own
                sink.observation(
                    NodeObservation(node=node, t=t, wall=1e9 + t, vllm=(ServerObservation(instance, None, None),))
                )
                continue
            metrics = scrapes[self.polls % len(scrapes)]
            version = _ok("u", '{"version": "0.33.0"}')
            vllm = ServerObservation(instance, _ok("u"), _ok("u", metrics), version)
            sink.observation(
                NodeObservation(node=node, t=t, wall=1e9 + t, vllm=(vllm,), gpu_exporter=_ok("g", self._gpu))
            )
            if node == "spark1":
                sink.host(HostUpdate(node, t, sample=self._frames[self.polls % len(self._frames)]))
            sink.log_batch(node, instance, self._log_lines(node, t))

    def _log_lines(self, node: str, t: float) -> Sequence[LogLine]:
        lines = [
            LogLine(
                seq=0,
                timestamp=None,
                text=f"INFO [loggers.py:123] Engine 000: Avg prompt throughput: {n * 10.5:.1f} tokens/s, "
                f"Avg generation throughput: {40 + n:.1f} tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
                f"GPU KV cache usage: 2.{n}%, t={t:09.0f}",
            )
            for n in range(LOG_LINES_PER_POLL)
        ]
        if node == "spark1" and self.signatures and self.polls % SIGNATURE_EVERY == 0:
            lines.append(LogLine(seq=0, timestamp=None, text=EADDRINUSE))
        return lines


def _fleet(rotate_s: float) -> FleetSpec:
    return parse_config(CONFIG.replace("{rotate_s}", str(rotate_s)), source="endurance.toml")


def _kiosk_app(
    rotate_s: float = 3600, spark2: str = "mtp3-poor-pos2", signatures: bool = True
) -> tuple[SparkApp, FixtureSource]:
    """The kiosk on the fixture source. Its own rotation timer runs on real seconds, not on the test's
    clock: the long runs keep it out of the way (an hour) and turn the pages themselves."""
    fleet = _fleet(rotate_s)
    clock = Clock()
    source = FixtureSource(clock, fleet, spark2=spark2, signatures=signatures)
    app = make_app(fleet, kiosk=True, clock=clock, source=source)
    # The real engines with tighter bounds, so that the compressed run reaches them: an EADDRINUSE finding
    # clears after 5 s of the node serving, 25 cleared findings are kept per node and 25 resolved alerts
    # (the default rules raise an alert for each such finding).
    catalogue = load_catalogue().with_overrides({"worker-port-in-use.healthy_s": 5.0})
    app.monitor.diagnosis = DiagnosisEngine(catalogue, history_limit=FINDINGS_KEPT)
    app.monitor.alerts = AlertEngine(alert_rules(fleet), fleet, history_limit=FINDINGS_KEPT)
    app.monitor.history = History(max_points=HISTORY_POINTS)
    return app, source


def _kiosk(app: SparkApp) -> KioskScreen:
    screen = app.screen
    assert isinstance(screen, KioskScreen), type(screen).__name__
    return screen


def _banner(app: SparkApp) -> tuple[bool, str]:
    banner = _kiosk(app).query_one("#kiosk-banner")
    rows = [r for r in banner.query(BannerRow) if r.has_class("shown")]
    return banner.has_class("shown"), "\n".join(str(r.content) for r in rows)


def _sizes(app: SparkApp) -> dict[str, int]:
    """Every bounded store of the app, by name: history series, log buffers, findings."""
    sizes: dict[str, int] = {}
    for node in NODES:
        for metric in NODE_METRICS:
            sizes[f"history {node} {metric}"] = len(app.history.series(node, metric))
        for metric in INSTANCE_METRICS:
            sizes[f"history {node}/{INSTANCES[node]} {metric}"] = len(app.history.series(node, INSTANCES[node], metric))
        for instance, buffer in app.log_buffers(node).items():
            sizes[f"log {node}/{instance} lines"] = len(buffer)
            sizes[f"log {node}/{instance} bytes"] = buffer.bytes
        sizes[f"findings history {node}"] = len(app.diagnosis.history(node))
        sizes[f"findings active {node}"] = len(app.diagnosis.active(node))
    sizes["alerts resolved"] = len(app.alerts.history())
    sizes["alerts firing"] = len(app.alerts.active())
    sizes["widgets on the kiosk"] = len(list(_kiosk(app).walk_children()))
    return sizes


async def _long_run(ticks: int) -> None:
    app, source = _kiosk_app()
    rotate_every = ROTATE_EVERY
    pages = ["fleet", *NODES]
    async with app.run_test(size=(160, 48)) as pilot:
        screen = _kiosk(app)
        shown: list[str] = []
        halfway: dict[str, int] = {}
        for tick in range(1, ticks + 1):
            await source.tick()
            app.refresh_views()  # the render tick, on the test's clock
            if tick % rotate_every == 0:
                screen.rotate()
                page = pages[screen.page]
                shown.append(page)
                title = str(screen.query_one("#kiosk-title", Static).content)
                assert title.endswith(f"│ {page}"), (tick, title)
                on_fleet = page == "fleet"
                assert screen.query_one("#kiosk-fleet").has_class("hidden") is not on_fleet
                assert screen.query_one("#kiosk-node").has_class("shown") is not on_fleet
                if not on_fleet:
                    assert str(screen.query_one("#node-title", Static).content).startswith(page)
            if tick % 200 == 0:
                await pilot.pause()  # let the screen draw now and then, as it does between polls
            if tick == ticks // 2:
                halfway = _sizes(app)
        await pilot.pause()
        end = _sizes(app)
        assert app.screen is screen and app.kiosk and app.is_running

        # Rotation: fleet → each node → fleet, all along the run.
        rotations = ticks // rotate_every
        assert shown == [pages[(n + 1) % len(pages)] for n in range(rotations)]

        # Memory: every store full at its bound by halfway, the same size at the end.
        assert end == halfway, {k: (halfway.get(k), v) for k, v in end.items() if halfway.get(k) != v}
        history_points = app.history.max_points
        assert ticks // 2 > history_points  # the run is long enough to fill the histories
        assert ticks // 2 > 10_000 / LOG_LINES_PER_POLL and ticks // 2 > FINDINGS_KEPT * SIGNATURE_EVERY
        for node in NODES:
            assert all(end[f"history {node} {m}"] <= history_points for m in NODE_METRICS)
        assert app.log_buffers("spark3") == {}  # the worker serves no HTTP and streams no log here
        for node in SERVING:
            assert len(app.history.series(node, "generation_tps")) == history_points
            buffer = app.log_buffers(node)[INSTANCES[node]]
            assert len(buffer) == buffer.max_lines and buffer.dropped > 0
            assert buffer.bytes <= buffer.max_bytes
            assert buffer.next_seq == source.polls * LOG_LINES_PER_POLL + (
                source.polls // SIGNATURE_EVERY if node == "spark1" else 0
            )
        cleared = app.diagnosis.history("spark1")
        assert len(cleared) == FINDINGS_KEPT  # ticks / SIGNATURE_EVERY findings opened and cleared
        assert {f.id for f in cleared} == {"worker-port-in-use"}
        assert len(app.diagnosis.active("spark1")) <= 1
        assert len(app.alerts.history()) == FINDINGS_KEPT  # an alert for each of those findings, resolved
        assert list(app.poll_errors) == []


@pytest.mark.slow
async def test_the_kiosk_stays_bounded_and_rotates_over_hundreds_of_polls() -> None:
    await _long_run(TICKS)


@pytest.mark.soak
async def test_kiosk_soak() -> None:
    await _long_run(SOAK_TICKS)


async def test_the_banner_names_a_node_whose_data_stops_and_clears_when_it_returns() -> None:
    # Both nodes healthy: no finding, so no alert line in the banner; the outages below are shorter than
    # the default alert rules' for_s, so the banner is the status line alone.
    app, source = _kiosk_app(spark2="mtp2-steady", signatures=False)
    fleet = app.fleet
    stale_after = max(fleet.stale_after * fleet.poll_interval_s, fleet.timeout_s * 2)
    async with app.run_test(size=(160, 48)) as pilot:

        async def polls(n: int) -> None:
            for _ in range(n):
                await source.tick()
                app.refresh_views()
            await pilot.pause()

        await polls(10)
        assert _banner(app) == (False, "")

        # One node's data stops (its poll never finishes): stale once past the threshold, alone.
        source.outage.silent = {"spark2"}
        await polls(int(stale_after))
        assert not _banner(app)[0]  # not yet: a late poll is not a stale node
        await polls(2)
        shown, text = _banner(app)
        assert shown and "spark2 STALE" in text and "spark1" not in text and "spark3" not in text
        source.outage.silent = set()
        await polls(1)
        assert _banner(app) == (False, "")

        # The source stops altogether (the collector is stuck): every node stale.
        source.outage.silent = set(NODES)
        await polls(int(stale_after) + 2)
        shown, text = _banner(app)
        assert shown and all(f"{node} STALE" in text for node in NODES)
        assert "no poll finished" in text
        source.outage.silent = set()
        await polls(1)
        assert _banner(app) == (False, "")

        # A node is gone but its collector is not: its vLLM refuses, it is down (not stale).
        source.outage.refused = {"spark2"}
        await polls(1)
        shown, text = _banner(app)
        assert shown and "spark2 DOWN" in text and "refused" in text and "STALE" not in text
        source.outage.refused = set()
        await polls(1)
        assert _banner(app) == (False, "")
        assert _kiosk(app).page == 0 and app.kiosk and app.is_running


async def test_the_rotation_timer_runs_on_its_own() -> None:
    """The long run turns the pages by hand; here the kiosk's own timer does it, at ``rotate_s``."""
    app, source = _kiosk_app(rotate_s=3)
    async with app.run_test(size=(160, 48)):
        await source.tick()
        await source.tick()
        screen = _kiosk(app)
        assert screen.page == 0  # not at once: still the fleet page after mount and two polls
        # Then the page turns with nothing from the test but waiting: the kiosk's own timer. (How long
        # it took is not asserted: under load the setup above can eat most of rotate_s.)
        await wait_until(lambda: screen.page == 1, app.fleet.kiosk.rotate_s + 10.0, what="the kiosk's page turned")
        assert str(screen.query_one("#node-title", Static).content).startswith("spark1")


async def test_a_render_tick_while_the_app_shuts_down_draws_nothing() -> None:
    """Shutting down, Textual removes the screens' widgets before it stops the app's timers: a render
    tick (or the kiosk's rotation) that fires in between must leave the screen alone, not raise
    ``NoMatches`` (seen in CI, under load)."""
    app, source = _kiosk_app(rotate_s=3)
    ticked: list[bool] = []
    async with app.run_test(size=(160, 48)):
        await source.tick()
        screen = _kiosk(app)
        close_all = app._close_all

        async def widgets_gone_then_a_tick() -> None:
            await screen.remove_children()
            app.refresh_views()
            screen.rotate()
            ticked.append(True)
            await close_all()

        app._close_all = widgets_gone_then_a_tick  # type: ignore[method-assign]
    assert ticked == [True]
