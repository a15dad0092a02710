"""One monitor core: the dashboard, ``sparktui watch``, a headless replay (what ``export`` runs) and
the black box, fed the same recording, see the same findings and alerts at the same ticks."""

from __future__ import annotations

import io
import math
import pkgutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import sparktui.monitor
from sparktui.diagnosis.alerts import AlertEvent
from sparktui.diagnosis.engine import ACTION_SETTLE_S, Finding
from sparktui.headless.watch import Watcher
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import NodeObservation
from sparktui.monitor.core import Monitor, collect_error_text
from sparktui.record.blackbox import BlackBox
from sparktui.record.replay import ReplaySource, replay_into
from sparktui.record.store import RecordingReader
from sparktui.ui.replay import ReplayApp
from tests.integration.test_replay import _record_the_incident
from tests.support.monitoring import monitor_for
from tests.support.ui_data import NOW, fed_app, fleet_spec
from tests.support.wait import wait_until


@dataclass
class Trace:
    """A ``MonitorObserver`` that keeps what the core derived at each tick."""

    ticks: list[float] = field(default_factory=list)
    seen: list[tuple[float, str, tuple[Finding, ...]]] = field(default_factory=list)  # (tick, node, active)
    fired: list[tuple[float, str, str | None]] = field(default_factory=list)  # (tick, reason, node)
    problem: str | None = None  # it never stops

    def tick(self, now: float) -> None:
        self.ticks.append(now)

    def findings(self, node: str, active: Sequence[Finding], now: float | None = None) -> None:
        assert now is not None
        self.seen.append((now, node, tuple(active)))

    def alert(self, reason: str, node: str | None = None) -> None:
        self.fired.append((self.ticks[-1], reason, node))


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's incident, recorded live through sparktui's collectors (with the recorder's ticks)."""
    import asyncio

    path = tmp_path_factory.mktemp("incident") / "incident.db"
    asyncio.run(_record_the_incident(path))
    return path


def _headless(path: Path) -> Trace:
    trace = Trace()
    reader = RecordingReader(path)
    monitor = monitor_for(reader.fleet)
    monitor.observers.append(trace)
    replay_into(reader, monitor)
    reader.close()
    return trace


async def _watch(path: Path, black_box: BlackBox) -> Trace:
    trace = Trace()
    source = ReplaySource(path, speed=math.inf, stop_at_end=True)
    out = io.StringIO()
    watcher = Watcher(source.fleet, out=out, source=source, taps=(black_box,), observers=(trace, black_box))
    assert await watcher.run(drain_s=0.1) == 0, out.getvalue()
    assert "event=source-ended" in out.getvalue()
    return trace


async def _dashboard(path: Path) -> Trace:
    trace = Trace()
    source = ReplaySource(path, speed=math.inf)
    app = ReplayApp(source)
    app.monitor.observers.append(trace)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(lambda: source.ended, timeout_s=120.0)
        await pilot.pause()
    return trace


@pytest.mark.slow
async def test_dashboard_watch_replay_and_black_box_see_the_same_findings_and_alerts(
    incident: Path, tmp_path: Path
) -> None:
    headless = _headless(incident)
    box = BlackBox(tmp_path / "box.db", RecordingReader(incident).fleet, minutes=5)
    watched = await _watch(incident, box)
    box.close()
    shown = await _dashboard(incident)

    opened = {f.id for _, _, active in headless.seen for f in active}
    assert {"page-cache-blocks-start", "crash-loop"} <= opened  # the incident's findings were derived
    assert headless.fired, "the incident fires alerts"
    for other in (watched, shown):
        assert other.ticks == headless.ticks
        assert other.seen == headless.seen
        assert other.fired == headless.fired
    # The black box heard every alert the core fired (besides the findings that opened), in order.
    alerts = [reason for _, reason, _ in headless.fired]
    assert [reason for _, reason in box.incidents if reason in alerts] == alerts
    assert box.problem is None


@dataclass
class Heard:
    """A ``MonitorSubscriber`` that keeps what the core published, in order."""

    events: list[tuple[str, object]] = field(default_factory=list)

    def arrived(self, node: str) -> None:
        self.events.append(("arrived", node))

    def failed(self, node: str, line: str) -> None:
        self.events.append(("failed", f"{node}: {line}"))

    def ticked(self, now: float, events: tuple[AlertEvent, ...]) -> None:
        self.events.append(("ticked", now))

    def restarted(self) -> None:
        self.events.append(("restarted", None))


def test_a_consumer_subscribes_to_the_core_and_hears_what_it_was_fed_and_derived() -> None:
    monitor = monitor_for(fleet_spec())
    heard = Heard()
    monitor.subscribe(heard)
    monitor.observation(NodeObservation(node="spark3", t=NOW, wall=1e9 + NOW))
    monitor.error("spark2", KeyError("x"))
    monitor.tick(NOW + 1.0)
    monitor.reset()
    assert heard.events == [
        ("arrived", "spark3"),
        ("failed", "spark2: internal error while collecting: KeyError: 'x'"),
        ("ticked", NOW + 1.0),
        ("restarted", None),
    ]
    assert monitor.views == () and monitor.subscribers == [heard]  # a reset keeps who listens


async def test_a_recording_ticks_the_core_and_every_subscriber_hears_each_tick(incident: Path) -> None:
    reader = RecordingReader(incident)
    monitor = monitor_for(reader.fleet)
    heard, trace = Heard(), Trace()
    monitor.subscribe(heard)
    monitor.observers.append(trace)
    replay_into(reader, monitor)
    reader.close()
    ticks = [t for kind, t in heard.events if kind == "ticked"]
    assert ticks and ticks == trace.ticks  # the recording drove them; no consumer forwarded them
    arrivals = {node for kind, node in heard.events if kind == "arrived"}
    assert arrivals == {node.name for node in reader.fleet.nodes}


def test_log_gap_markers_stay_markers_in_the_core() -> None:
    monitor = monitor_for(fleet_spec())
    monitor.log_batch("spark1", "gptoss", [LogLine(0, None, "a"), LogLine(1, None, "-- reconnected --", gap=True)])
    lines = list(monitor.node_logs("spark1")["gptoss"])
    assert [(line.text, line.gap) for line in lines] == [("a", False), ("-- reconnected --", True)]


def test_log_lines_of_a_node_outside_the_fleet_keep_no_buffer() -> None:
    monitor = monitor_for(fleet_spec())
    for n in range(1_000):
        monitor.log_batch(f"made-up-{n}", "gptoss", [LogLine(0, None, "a")])
    monitor.log_batch("spark1", "gptoss", [LogLine(0, None, "b")])
    assert set(monitor.log_buffers) == {"spark1"}


def test_a_reset_forgets_what_was_collected_and_derived() -> None:
    monitor: Monitor = monitor_for(fleet_spec())
    monitor.log_batch("spark1", "gptoss", [LogLine(0, None, "a")])
    monitor.tick(10.0)
    assert monitor.views and monitor.log_buffers
    monitor.reset()
    assert monitor.views == () and monitor.log_buffers == {} and monitor.findings == {} and monitor.resets == 1


def test_collect_errors_are_one_line_and_bounded() -> None:
    monitor = monitor_for(fleet_spec())
    for i in range(150):
        monitor.error("spark1", KeyError(i))
    assert len(monitor.errors) == 100 and monitor.errors[-1] == "spark1: internal error while collecting: KeyError: 149"

    class PrometheusError(Exception):  # a source's own one-line reason, live or replayed under its name
        pass

    assert collect_error_text(PrometheusError("Prometheus at http://p:9090 did not answer")) == (
        "Prometheus at http://p:9090 did not answer"
    )


def test_the_core_and_the_diagnosis_import_no_io_library_or_ui_at_runtime() -> None:
    code = (
        "import sys, pkgutil, importlib\n"
        "for package in ('sparktui.diagnosis', 'sparktui.monitor'):\n"
        "    module = importlib.import_module(package)\n"
        "    for info in pkgutil.iter_modules(module.__path__):\n"
        "        importlib.import_module(package + '.' + info.name)\n"
        "bad = {'httpx', 'asyncssh', 'textual', 'rich', 'psutil', 'asyncio', 'sqlite3'} & "
        "{n.split('.')[0] for n in sys.modules}\n"
        "print(','.join(sorted(bad)) or 'clean', len([n for n in sys.modules if n.startswith('sparktui.monitor')]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = 1 + len(list(pkgutil.iter_modules(sparktui.monitor.__path__)))  # the package and each module
    assert result.stdout.split() == ["clean", str(modules)]


def test_a_tick_at_an_unmoved_clock_replaces_its_history_point_instead_of_adding_one() -> None:
    """Redraws while the clock stands (a paused replay, a frozen test clock, a forced refresh) are one
    moment: trends must not depend on how often the screen was drawn."""
    app = fed_app()  # fifteen ticks, two seconds apart, then the clock stops at NOW
    monitor = app.monitor
    before = monitor.history.points("spark1", "gpu_temp")
    assert len(before) == 15
    for _ in range(3):
        monitor.tick(NOW)
    after = monitor.history.points("spark1", "gpu_temp")
    assert len(after) == 16 and after[-1].t == NOW  # one point for the moment NOW, not three
    monitor.tick(NOW + 2.0)
    assert len(monitor.history.points("spark1", "gpu_temp")) == 17


def test_an_action_holds_the_wedge_detectors_of_what_it_touches_until_it_has_settled() -> None:
    """The dashboard tells the core when a recovery action starts and ends: the named instance is held
    (the whole node where no instance has that name), nothing else, until ACTION_SETTLE_S after."""
    monitor = monitor_for(fleet_spec())
    held = monitor.diagnosis.held
    monitor.action_started(("spark1", "spark2"), "gptoss")
    assert held("spark1", "gptoss", 0.0)
    assert held("spark2", "gemma4", 0.0)  # spark2 runs no "gptoss": the whole node
    assert not held("spark3", "qwen235", 0.0)
    monitor.action_ended(("spark1", "spark2"), "gptoss", 100.0)
    assert held("spark1", "gptoss", 100.0 + ACTION_SETTLE_S - 1.0)
    assert not held("spark1", "gptoss", 100.0 + ACTION_SETTLE_S)
    assert not held("spark2", "gemma4", 100.0 + ACTION_SETTLE_S)
