"""Replay: the demo's incident recorded live and replayed equal, the player's controls, damaged files,
and the replay dashboard with Pilot."""

from __future__ import annotations

import asyncio
import math
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sparktui.actions.registry import ACTIONS
from sparktui.config import load_catalogue, parse_config
from sparktui.demo.fleet import DemoFleet
from sparktui.demo.scenarios import SCENARIOS
from sparktui.diagnosis.engine import DiagnosisEngine, Finding, last_intervals, unread
from sparktui.diagnosis.verdict import judged
from sparktui.engines import readings
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import HostUpdate
from sparktui.model.specs import FleetSpec
from sparktui.model.status import State
from sparktui.monitor.core import Monitor
from sparktui.record.recorder import Recorder
from sparktui.record.replay import Feeder, ReplaySource, replay_into
from sparktui.record.store import RecordingReader
from sparktui.record.types import RecordingError
from sparktui.sources.http import make_client
from sparktui.sources.logs import LogStream
from sparktui.sources.poller import FleetPoller
from sparktui.sources.ssh import NodeSsh
from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.node_screen import NodeScreen
from sparktui.ui.replay import ReplayApp, ReplayBar
from tests.integration.test_demo_ssh import HostFeed
from tests.integration.test_record import T0, WALL0, write_fixture_recording
from tests.support.monitoring import monitor_for
from tests.support.wait import wait_until

WINDOW_S = 20.0

# --- the incident, recorded live and replayed -----------------------------------------------------


@dataclass
class Moment:
    """What the dashboard derived at one step: every node's view and findings."""

    now: float
    views: tuple[NodeView, ...]
    findings: dict[str, tuple[Finding, ...]] = field(default_factory=dict)


class RecordedHostFeed(HostFeed):
    """The demo tests' host collectors, with each update handed to the recorder as well."""

    recorder: Recorder | None = None

    def _on_update(self, update: HostUpdate) -> None:
        super()._on_update(update)
        if self.recorder is not None:
            self.recorder.host(update)


async def _record_the_incident(path: Path) -> tuple[list[Moment], frozenset[str], FleetSpec]:
    """The ``incident`` scenario in step mode through sparktui's collectors (as
    tests/integration/test_demo_incident.py runs it), into a FleetState and a DiagnosisEngine, with the recorder
    as a sink next to them; until the crash loop's findings are all seen."""
    fleet = DemoFleet(seed=21, scenario=SCENARIOS["incident"])
    await fleet.start()
    spec = parse_config(fleet.config_toml(), source="demo.toml")
    state = FleetState(spec, readings())
    diagnosis = DiagnosisEngine(load_catalogue())
    recorder = Recorder(path, spec, clock=lambda: fleet.now)
    feed = RecordedHostFeed(fleet, spec, ("spark1",), state)
    feed.recorder = recorder
    spark1 = next(n for n in spec.nodes if n.name == "spark1")
    ssh = NodeSsh(spark1)

    def on_batch(instance: str, lines: list[LogLine]) -> None:
        recorder.log_batch("spark1", instance, lines)

    log = LogStream(ssh, spark1.vllm[0], tail_lines=200, on_batch=on_batch)
    log_task = asyncio.create_task(log.run())
    moments: list[Moment] = []
    seen: set[str] = set()
    wanted = {"page-cache-blocks-start", "launch-readiness", "crash-loop", "shm-leftovers"}
    try:
        async with make_client() as client:
            await feed.start()
            poller = FleetPoller(spec, client, clock=lambda: fleet.now)
            while not wanted <= seen:
                assert fleet.elapsed < 300.0, seen
                await fleet.advance(2.0)
                await feed.settle()
                for observation in await poller.poll_all():
                    state.apply(observation)
                    recorder.observation(observation)
                    offset = observation.wall - observation.t  # the wall mapping, as Monitor.wall_at has it
                now = fleet.now
                moment = Moment(now, state.view(now, window_s=WINDOW_S))
                for view in moment.views:
                    buffers = {"qwen36": log.buffer} if view.name == "spark1" else {}
                    lines = {name: unread(b, diagnosis.cursor(view.name, name)) for name, b in buffers.items()}
                    intervals = last_intervals(state.nodes[view.name])
                    moment.findings[view.name] = diagnosis.evaluate(view, lines, now, intervals, now + offset)
                    recorder.findings(view.name, moment.findings[view.name], now)
                    seen |= {f.id for f in moment.findings[view.name]}
                # Each node's one verdict, as the core gives it (its status raised by its open findings).
                moment.views = tuple(judged(v, moment.findings[v.name]) for v in moment.views)
                recorder.tick(now)
                moments.append(moment)
    finally:
        log_task.cancel()
        await asyncio.gather(log_task, return_exceptions=True)
        await ssh.close()
        await feed.close()
        await fleet.stop()
        await recorder.aclose()
    assert recorder.problem is None and recorder.dropped == 0
    return moments, frozenset(seen), spec


@pytest.mark.slow
async def test_the_incident_replays_with_the_numbers_and_findings_computed_live(tmp_path: Path) -> None:
    path = tmp_path / "incident.db"
    live, seen, spec = await _record_the_incident(path)
    replayed: list[Moment] = []

    def on_tick(sink: Monitor, now: float) -> None:
        replayed.append(Moment(now, sink.views, dict(sink.findings)))

    source = ReplaySource(path, speed=math.inf, stop_at_end=True)
    assert source.fleet == spec
    await source.run(monitor_for(source.fleet, on_tick, window_s=WINDOW_S))
    assert source.problem is None
    assert len(replayed) == len(live) > 40
    for before, after in zip(live, replayed, strict=True):
        assert after.now == before.now
        assert after.views == before.views
        assert after.findings == before.findings
    # The numbers are there to compare: the crash loop, the memory, the generation before it.
    spark1 = [next(v for v in m.views if v.name == "spark1") for m in replayed]
    assert any(v.instances[0].status.state is State.DOWN for v in spark1)
    assert any((v.instances[0].rates and v.instances[0].rates.generation_tokens_per_s) for v in spark1)
    # The roofline too: the recording holds the raw /metrics bodies, its counters with them (issue 20).
    assert any((v.instances[0].roofline and v.instances[0].roofline.memory_share) for v in spark1)
    assert all(v.host_memory is not None for v in spark1)
    # The recorder noted each finding as it opened (and cleared).
    recorded = {r.payload.id for r in RecordingReader(path).recorded_findings() if isinstance(r.payload, Finding)}
    assert recorded == seen


# --- the player ---------------------------------------------------------------------------------------


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    return write_fixture_recording(tmp_path / "fleet.db", 60)


def _straight(path: Path, until: float) -> Monitor:
    """The model fed every record up to ``until``, in one go: what a seek must rebuild."""
    reader = RecordingReader(path)
    sink = monitor_for(reader.fleet)
    feeder = Feeder(sink, reader.gap_s)
    for record in reader.records():
        if record.t > until:
            break
        feeder.feed(record)
    return sink


async def test_the_player_steps_seeks_and_plays(recording: Path) -> None:
    source = ReplaySource(recording, playing=False)
    sink = monitor_for(source.fleet)
    task = asyncio.create_task(source.run(sink))
    try:
        await wait_until(lambda: source.delivered > 0)
        assert source.clock() == T0 and sink.views  # the first tick is shown
        assert source.wall() == WALL0
        source.step()
        await wait_until(lambda: source.clock() == T0 + 1)
        source.step()
        source.step()
        await wait_until(lambda: source.clock() == T0 + 3)
        assert not source.playing
        source.seek_by(20.0)
        await wait_until(lambda: source.clock() == T0 + 23)
        assert sink.resets == 0  # forwards, within reach: no rebuild
        source.seek(T0 + 7.5)
        await wait_until(lambda: source.clock() == T0 + 7.5 and not source.rebuilding)
        assert sink.resets == 1
        assert sink.views == _straight(recording, T0 + 7.5).views  # rebuilt from the start, exactly
        source.speed = 20.0
        source.resume()
        await wait_until(lambda: source.clock() >= T0 + 20)
        await wait_until(lambda: source.ended)
        assert source.clock() == T0 + 59 and not source.playing
        assert source.faster() == 30.0 and source.slower() == 10.0
        source.resume()  # at the end: from the start again
        await wait_until(lambda: source.playing and source.clock() < T0 + 30)
        assert sink.resets == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_replay_can_start_at_a_time(recording: Path) -> None:
    source = ReplaySource(recording, speed=math.inf, start=WALL0 + 40, playing=False)
    sink = monitor_for(source.fleet)
    task = asyncio.create_task(source.run(sink))
    try:
        await wait_until(lambda: source.clock() == T0 + 40)
        assert sink.views == _straight(recording, T0 + 40).views
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_silence_between_black_box_incidents_is_skipped(tmp_path: Path) -> None:
    path = write_fixture_recording(tmp_path / "a.db", 20)
    # A second stretch an hour later in the same file, as a black box writes them.
    write_fixture_recording(tmp_path / "b.db", 20, start=T0 + 3600)
    with sqlite3.connect(path) as conn:
        conn.execute("ATTACH DATABASE ? AS b", (str(tmp_path / "b.db"),))
        conn.execute("INSERT INTO epochs(session, first_id, t, wall) SELECT 1, first_id + 10000, t, wall FROM b.epochs")
        epoch = conn.execute("SELECT max(id) FROM epochs").fetchone()[0]
        columns = "id + 10000, ?, t, kind, node, data"
        conn.execute(f"INSERT INTO records(id, epoch, t, kind, node, data) SELECT {columns} FROM b.records", (epoch,))
    source = ReplaySource(path, speed=20.0)
    sink = monitor_for(source.fleet)
    task = asyncio.create_task(source.run(sink))
    try:
        await wait_until(lambda: source.ended)  # 40 s of records take 2 s at 20x; the hour between, none
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert sink.resets == 1
    assert source.clock() == T0 + 3600 + 19


def test_a_replay_speed_must_be_positive(recording: Path) -> None:
    with pytest.raises(ValueError, match="positive"):
        ReplaySource(recording, speed=0)


# --- damage -------------------------------------------------------------------------------------------


def _replay_all(path: Path) -> tuple[Monitor, str | None]:
    reader = RecordingReader(path)
    sink = monitor_for(reader.fleet)
    replay_into(reader, sink)
    return sink, reader.problem


def _ticks(path: Path) -> int:
    ticks = 0

    def count(_sink: Monitor, _now: float) -> None:
        nonlocal ticks
        ticks += 1

    reader = RecordingReader(path)
    replay_into(reader, monitor_for(reader.fleet, count))
    return ticks


def test_a_truncated_file_replays_up_to_the_damage(recording: Path) -> None:
    full = _ticks(recording)
    data = recording.read_bytes()
    recording.write_bytes(data[: len(data) * 6 // 10])
    ticks = _ticks(recording)
    _, problem = _replay_all(recording)
    assert problem is not None and "\n" not in problem
    assert problem.startswith("fleet.db is damaged after ")
    assert "records read" in problem and problem.endswith("replayed up to there")
    assert 0 < ticks < full


def test_a_corrupt_blob_stops_the_replay_there(recording: Path) -> None:
    with sqlite3.connect(recording) as conn:
        (middle,) = conn.execute("SELECT id FROM records WHERE kind = 1 ORDER BY id LIMIT 1 OFFSET 100").fetchone()
        conn.execute("UPDATE records SET data = x'02deadbeef' WHERE id = ?", (middle,))
    sink, problem = _replay_all(recording)
    assert problem is not None and f"record {middle} cannot be decoded" in problem
    assert sink.views  # what came before was replayed


def test_corrupt_pages_stop_the_replay_with_a_message(recording: Path) -> None:
    data = bytearray(recording.read_bytes())
    page = 4096
    for at in range(len(data) // 2, len(data) // 2 + 4 * page, page):
        data[at : at + 64] = b"\xff" * 64  # page headers and cell pointers of four pages
    recording.write_bytes(bytes(data))
    full = 60
    ticks = _ticks(recording)
    _, problem = _replay_all(recording)
    assert problem is not None and "damaged" in problem
    assert ticks < full


def test_an_empty_or_headerless_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(RecordingError, match="not a sparktui recording"):
        ReplaySource(empty)


# --- the replay dashboard -----------------------------------------------------------------------------


def _bar(app: ReplayApp) -> str:
    return str(app.screen.query_one(ReplayBar).content)


@pytest.mark.slow
async def test_the_replay_dashboard_shows_the_recording_and_its_time_cursor(recording: Path) -> None:
    source = ReplaySource(recording, playing=False)
    app = ReplayApp(source)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(lambda: app.ticks > 0)
        app.refresh_views()
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        table = app.screen.query_one("#fleet")
        rows = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]  # type: ignore[attr-defined]
        assert rows == ["spark1", "spark2", "spark3", "└ spark4"]
        assert "⏸ paused" in _bar(app) and "00:00 / 00:59" in _bar(app)
        first = _bar(app)

        await pilot.press("full_stop")
        await wait_until(lambda: source.clock() == T0 + 1)
        await pilot.pause()
        assert _bar(app) != first and "00:01 / 00:59" in _bar(app)

        await pilot.press("right_square_bracket")
        await wait_until(lambda: source.clock() == T0 + 11)
        await pilot.press("right_curly_bracket")
        await wait_until(lambda: source.clock() == T0 + 59)  # clamped to the end
        await pilot.press("left_square_bracket")
        await wait_until(lambda: source.clock() == T0 + 49 and not source.rebuilding)
        await pilot.pause()
        assert "00:49 / 00:59" in _bar(app)
        view = next(v for v in app.views if v.name == "spark1")
        assert view.polled_wall == WALL0 + 49  # the views are the recording's at the cursor

        await pilot.press("plus", "plus")
        assert source.speed == 5.0
        await pilot.press("minus")
        assert source.speed == 2.0
        await pilot.press("space")
        assert source.playing and "▶ playing" in _bar(app)
        await wait_until(lambda: source.ended)
        app.refresh_views()
        await pilot.pause()
        assert "■ end" in _bar(app)


async def test_the_time_cursor_follows_onto_the_node_screen_and_actions_are_refused(recording: Path) -> None:
    source = ReplaySource(recording, playing=False, start=WALL0 + 30)
    app = ReplayApp(source)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(lambda: app.ticks > 0)
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "spark1"
        assert "00:30 / 00:59" in _bar(app)
        await pilot.press("left_curly_bracket")  # back to the start: the model is rebuilt
        await wait_until(lambda: source.clock() == T0 and not source.rebuilding)
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "spark1"
        assert "00:00 / 00:59" in _bar(app)
        assert app.read_only
        for action in ACTIONS:
            assert app.check_action("act", (action.id.value,)) is False


async def test_a_damaged_recording_is_told_in_the_dashboard(recording: Path) -> None:
    with sqlite3.connect(recording) as conn:
        conn.execute("UPDATE records SET data = x'02deadbeef' WHERE id = 200")
    source = ReplaySource(recording, speed=math.inf)
    app = ReplayApp(source)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(lambda: source.ended)
        app.refresh_views()
        await pilot.pause()
        assert "⚠ damaged" in _bar(app)
        assert any("cannot be decoded" in str(n.message) for n in app._notifications)
