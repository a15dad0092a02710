"""Recording files: the codecs (host samples, findings, line deltas, observations), the recorder, its
retention, sessions, the black box, exports and the command-line glue."""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import sqlite3
import stat
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from sparktui.cli import export as export_cli
from sparktui.cli import options
from sparktui.cli import replay as replay_cli
from sparktui.config import catalogue_for, parse_config
from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import Finding
from sparktui.model.history import NODE_METRICS
from sparktui.model.host import FrameSplitter, HostProcess, HostSample, ServiceState, ShmEntry, merge, parse_frame
from sparktui.model.logbuffer import LogLine
from sparktui.model.memory import HostMemory, MemoryPressure
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.model.specs import REDACTED_URL, FleetSpec
from sparktui.monitor.core import Monitor
from sparktui.record.blackbox import BlackBox
from sparktui.record.codec import (
    Decoder,
    Encoder,
    finding_from_json,
    finding_to_json,
    host_sample_from_json,
    host_sample_to_json,
    log_line_from_json,
    log_line_to_json,
)
from sparktui.record.delta import decode_lines, encode_lines, line_index
from sparktui.record.export import METRICS, export
from sparktui.record.recorder import Recorder
from sparktui.record.replay import replay_into
from sparktui.record.store import RecordingReader
from sparktui.record.types import Kind, LogBatch, RecordingError
from tests.conftest import DATA
from tests.support.fixture_fleet import gb10_nvidia_exporter_page, scenario_scrapes
from tests.support.monitoring import monitor_for
from tests.support.ui_data import CONFIG as UI_CONFIG
from tests.support.ui_data import fleet_spec

T0 = 1000.0  # the monotonic clock of the recording runs
WALL0 = 1_780_000_000.0


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def host_frames(name: str = "frames-serving.txt") -> list[HostSample]:
    splitter = FrameSplitter()
    frames = []
    for line in (DATA / "host" / name).read_text().splitlines():
        frame = splitter.feed(line)
        if frame is not None:
            frames.append(parse_frame(frame))
    return frames


def _ok(url: str, body: str = "", elapsed: float = 0.012) -> HttpResult:
    return HttpResult(url=url, kind=FetchKind.OK, status=200, body=body.encode(), elapsed_s=elapsed)


STEADY = scenario_scrapes("mtp2-steady")
POOR = scenario_scrapes("mtp3-poor-pos2")
GPU = gb10_nvidia_exporter_page()
FRAMES = host_frames()
REFUSED = HttpResult(url="http://192.168.1.13:8000/health", kind=FetchKind.REFUSED, error="connection refused")


def fixture_poll(t: float, wall: float, second: int) -> list[NodeObservation]:
    """One poll of tests/ui_data's fleet: spark1 and spark2 serving, spark3 refusing, spark4 a worker."""
    version = _ok("http://192.168.1.11:8001/version", '{"version": "0.33.0"}') if second % 10 == 0 else None
    return [
        NodeObservation(
            node="spark1",
            t=t,
            wall=wall,
            vllm=(
                ServerObservation(
                    "gptoss",
                    _ok("http://192.168.1.11:8001/health"),
                    _ok("http://192.168.1.11:8001/metrics", STEADY[second % len(STEADY)]),
                    version,
                ),
            ),
            gpu_exporter=_ok("http://192.168.1.11:9835/metrics", GPU),
            services=(("parakeet-asr", _ok("http://192.168.1.11:8765/health", elapsed=0.003 * (second % 7))),),
        ),
        NodeObservation(
            node="spark2",
            t=t,
            wall=wall,
            vllm=(
                ServerObservation(
                    "gemma4",
                    _ok("http://192.168.1.12:8001/health"),
                    _ok("http://192.168.1.12:8001/metrics", POOR[second % len(POOR)]),
                ),
            ),
            gpu_exporter=_ok("http://192.168.1.12:9835/metrics", GPU),
        ),
        NodeObservation(node="spark3", t=t, wall=wall, vllm=(ServerObservation("qwen235", REFUSED, REFUSED),)),
        NodeObservation(node="spark4", t=t, wall=wall, vllm=(ServerObservation("qwen235", None, None),)),
    ]


def log_lines(second: int) -> tuple[LogLine, ...]:
    stamp = datetime(2026, 5, 30, 10, 0, tzinfo=UTC) + timedelta(seconds=second)
    return (
        LogLine(2 * second, stamp, f'INFO:     10.0.0.5:{51000 + second} - "POST /v1/chat/completions HTTP/1.1" 200'),
        LogLine(2 * second + 1, stamp, f"INFO [loggers.py:248] Engine 000: Avg generation throughput: {second}.0"),
    )


def record_fixture(
    recorder: Recorder,
    clock: ManualClock,
    seconds: int,
    *,
    start: float = T0,
    wall0: float = WALL0,
    ticks: bool = True,
    wall: ManualClock | None = None,
) -> list[tuple[Kind, object]]:
    """``seconds`` polls of the fixture fleet at 1 s into ``recorder``; returns what was sent, in order."""
    sent: list[tuple[Kind, object]] = []
    for second in range(seconds):
        t = clock.t = start + second
        if wall is not None:
            wall.t = wall0 + second
        update = HostUpdate("spark1", t, sample=FRAMES[second % len(FRAMES)])
        recorder.host(update)
        sent.append((Kind.HOST, update))
        for obs in fixture_poll(t, wall0 + second, second):
            recorder.observation(obs)
            sent.append((Kind.OBSERVATION, obs))
        if second % 3 == 0:
            batch = LogBatch("spark1", "gptoss", log_lines(second))
            recorder.log_batch("spark1", "gptoss", batch.lines)
            sent.append((Kind.LOG, batch))
        if ticks:
            recorder.tick(t)
            sent.append((Kind.TICK, t))
    return sent


def write_fixture_recording(path: Path, seconds: int = 30, *, ticks: bool = True, start: float = T0) -> Path:
    clock = ManualClock(start)
    recorder = Recorder(path, fleet_spec(), clock=clock, wall=lambda: WALL0 + clock.t - start)
    record_fixture(recorder, clock, seconds, start=start, ticks=ticks)
    recorder.close()
    assert recorder.problem is None
    return path


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    return write_fixture_recording(tmp_path / "fleet.db")


# --- codecs -------------------------------------------------------------------------------------------


def _full_sample() -> HostSample:
    return HostSample(
        remote_epoch=1780000123.45,
        memory=HostMemory(1.3e11, 2.5e10, 1.0e9, 2.0e6, 9.9e10, 3.0e9, 12.0, 0.0, 5.5e8, available_estimated=True),
        pressure=MemoryPressure(1.5, 0.25, 0.0, 0.0, 123.456, 7.0),
        pressure_problem=None,
        shm=(ShmEntry("psm_1a2b", 1 << 30, "psm", 4096), ShmEntry("weird name", 12, "other")),
        processes=(
            HostProcess(4242, 1, 5 << 30, 1780000000.5, "serve", "vllm serve Qwen/Qwen3 --port 8000", 1 << 30),
            HostProcess(4300, 4242, 60 << 30, None, "worker", "VLLM::Worker_TP0"),
        ),
        load=(1.5, 0.75, 0.5),
        uptime_s=86400.25,
        services={
            "qwen36": ServiceState(
                "qwen36", "systemd", "vllm-qwen36.service", "activating", "auto-restart", 1, 4, 1779999999.0,
                "/opt/vllm/serve.sh", False, "ExecStart path /opt/vllm/serve.sh does not exist on the node",
            )
        },
        problems=("pressure: unavailable", "qwen36 (systemd vllm-qwen36.service): gone"),
        seq=77,
        refreshed={"meminfo": 1780000123.45, "shm": 1780000120.0},
        section_problems={"pressure": "PSI not in this kernel"},
    )  # fmt: skip


def test_host_samples_survive_json_equal() -> None:
    samples = [_full_sample(), *FRAMES, *host_frames("frame-incident.txt"), *host_frames("frame-stale-workers.txt")]
    merged: HostSample | None = None
    for frame in FRAMES:
        merged = merge(merged, frame)
        samples.append(merged)
    for sample in samples:
        text = json.dumps(host_sample_to_json(sample))
        assert host_sample_from_json(json.loads(text)) == sample


def test_host_sample_json_ignores_keys_a_newer_writer_adds() -> None:
    data = host_sample_to_json(_full_sample())
    data["memory"]["hugepages"] = 4
    data["processes"][0]["cgroup"] = "/system.slice"
    assert host_sample_from_json(data) == _full_sample()


def test_findings_and_log_lines_survive_json_equal() -> None:
    lines = (
        LogLine(3, datetime(2026, 5, 30, 10, 0, 1, 250000, tzinfo=UTC), "ValueError: Free memory on device"),
        LogLine(4, datetime(2026, 5, 30, 12, 0, tzinfo=timezone(timedelta(hours=2))), "second"),
        LogLine(5, None, "— connection lost, reconnected —", gap=True),
    )
    finding = Finding(
        id="page-cache-blocks-start",
        node="spark1",
        instance="qwen36",
        severity=Severity.CRIT,
        title="Page cache blocks the start",
        evidence=("MemAvailable 5.2 GiB at 10:00:01", "line 2"),
        explanation="why",
        fix="sudo sysctl vm.drop_caches=3",
        action="drop-caches",
        opened_at=1012.5,
        last_seen=1030.0,
        cleared_at=1100.0,
        lines=lines,
    )
    assert finding_from_json(json.loads(json.dumps(finding_to_json(finding)))) == finding
    for line in lines:
        assert log_line_from_json(json.loads(json.dumps(log_line_to_json(line)))) == line


def _mutate(lines: list[bytes], rng: random.Random) -> list[bytes]:
    out = list(lines)
    for _ in range(rng.randint(0, 30)):
        i = rng.randrange(len(out)) if out else 0
        what = rng.random()
        if what < 0.5 and out:
            head, sep, _ = out[i].rpartition(b" ")
            out[i] = (head + b" " if sep else b"") + str(rng.random() * 1000).encode()
        elif what < 0.7:
            out.insert(i, b'vllm:new_series{engine="%d"} %d' % (rng.randint(0, 3), rng.randint(0, 99)))
        elif what < 0.85 and out:
            del out[i]
        elif what < 0.93:
            out.insert(i, bytes(rng.randrange(256) for _ in range(rng.randint(0, 20))).replace(b"\n", b""))
        elif out:
            j = rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
    return out


def test_line_deltas_rebuild_every_body_exactly() -> None:
    rng = random.Random(9)
    bodies = [s.encode() for s in STEADY[:5]] + [b"", b"\n", b"no-space-line", b'{"data": []}', GPU.encode()]
    for previous in bodies:
        before = previous.split(b"\n")
        index = line_index(before)
        for _ in range(40):
            after = _mutate(before, rng) or [b""]
            delta = encode_lines(before, index, after)
            assert decode_lines(before, delta) == after
        for other in bodies:
            after = other.split(b"\n")
            assert decode_lines(before, encode_lines(before, index, after)) == after


def test_a_scrape_is_stored_as_the_values_that_changed() -> None:
    before, after = STEADY[10].encode(), STEADY[11].encode()
    lines = before.split(b"\n")
    delta = encode_lines(lines, line_index(lines), after.split(b"\n"))
    assert len(delta) < len(after) / 10


def _encoded_round_trip(items: list[tuple[Kind, float, str, object]], keyframe_s: float) -> None:
    encoder, decoder = Encoder(keyframe_s=keyframe_s), Decoder()
    epoch = None
    for kind, t, node, payload in items:
        record = encoder.encode(kind, t, node, payload)  # type: ignore[arg-type]
        if record.epoch != epoch:
            epoch = record.epoch
            decoder.new_epoch()
        assert decoder.decode(kind, t, node, record.data) == payload


def test_observations_host_updates_and_logs_round_trip_through_the_codec() -> None:
    items: list[tuple[Kind, float, str, object]] = []
    for second in range(40):
        t = T0 + second
        items += [(Kind.OBSERVATION, t, obs.node, obs) for obs in fixture_poll(t, WALL0 + second, second)]
        items.append((Kind.HOST, t, "spark1", HostUpdate("spark1", t, sample=FRAMES[second % len(FRAMES)])))
        items.append(
            (Kind.HOST, t, "spark2", HostUpdate("spark2", t, problem="ssh: connection refused", connection_lost=True))
        )
        items.append((Kind.LOG, t, "spark1", LogBatch("spark1", "gptoss", log_lines(second))))
        items.append((Kind.LOG, t, "spark1", LogBatch("spark1", "other", log_lines(second + 100))))
    for keyframe_s in (1e9, 7.0, 0.5):
        _encoded_round_trip(items, keyframe_s)


def _round_trip_with_part(
    put: Callable[[ServerObservation, HttpResult | None], ServerObservation], results: Sequence[HttpResult | None]
) -> None:
    """Polls whose instances carry ``results[i]`` (``put`` puts it in its place) at second i, encoded and
    decoded equal."""
    items: list[tuple[Kind, float, str, object]] = []
    for second, result in enumerate(results):
        for obs in fixture_poll(T0 + second, WALL0 + second, second):
            vllm = tuple(put(v, result) for v in obs.vllm)
            items.append((Kind.OBSERVATION, T0 + second, obs.node, replace(obs, vllm=vllm)))
    for keyframe_s in (1e9, 0.5):
        _encoded_round_trip(items, keyframe_s)


def test_a_canary_result_is_recorded_with_its_observation_and_replays() -> None:
    """A canary's answer (or its timeout) rides in its instance's observation: a replay sees it too."""
    answered = HttpResult(
        url="http://10.0.0.1:8000/v1/completions",
        kind=FetchKind.OK,
        status=200,
        body=b'{"choices": [{"text": "!"}]}',
        elapsed_s=0.042,
        content_type="application/json",
    )
    unanswered = HttpResult(
        url="http://10.0.0.1:8000/v1/completions", kind=FetchKind.TIMEOUT, error="no answer within 10 s", elapsed_s=10.0
    )
    _round_trip_with_part(lambda v, r: replace(v, canary=r), (None, answered, None, unanswered))


def test_a_llama_servers_slots_are_recorded_with_their_observation_and_replay() -> None:
    """llama-server's /slots, read while a request runs, rides in its instance's observation, and is
    absent (not empty) from the polls that did not read it."""
    body = (Path(__file__).resolve().parents[1] / "data" / "llamacpp-11434" / "running-slots.json").read_bytes()
    slots = HttpResult(url="http://10.0.0.1:8080/slots", kind=FetchKind.OK, status=200, body=body)
    _round_trip_with_part(lambda v, r: replace(v, detail=r), (None, slots, slots, None))


def test_a_routers_models_metrics_are_recorded_with_their_observation_and_replay() -> None:
    """A llama.cpp router's per-model /metrics ride in its instance's observation, each under its model's
    name (a 400 for a model gone since kept as the 400 it was); absent (None) from polls that read none,
    empty from a poll with nothing loaded."""
    data = Path(__file__).resolve().parents[1] / "data" / "llamacpp-11434"
    base = "http://10.0.0.1:8080/metrics?model="
    a = HttpResult(
        url=f"{base}a&autoload=false", kind=FetchKind.OK, status=200, body=(data / "idle-metrics.txt").read_bytes()
    )
    b = HttpResult(
        url=f"{base}b&autoload=false", kind=FetchKind.OK, status=400, body=b'{"error": "model is not loaded"}'
    )
    polls: tuple[tuple[tuple[str, HttpResult], ...] | None, ...] = (None, (("a", a),), (("a", a), ("org/b", b)), ())
    items: list[tuple[Kind, float, str, object]] = []
    for second, per_model in enumerate(polls):
        for obs in fixture_poll(T0 + second, WALL0 + second, second):
            vllm = tuple(replace(v, model_metrics=per_model, metrics=None) for v in obs.vllm)
            items.append((Kind.OBSERVATION, T0 + second, obs.node, replace(obs, vllm=vllm)))
    for keyframe_s in (1e9, 0.5):
        _encoded_round_trip(items, keyframe_s)


def test_a_redirects_location_is_recorded_so_a_replay_gives_the_same_reason() -> None:
    redirected = HttpResult(
        url="http://10.0.0.1:8000/health", kind=FetchKind.OK, status=302, location="https://sso.example/login"
    )
    items: list[tuple[Kind, float, str, object]] = []
    for second in range(3):
        for obs in fixture_poll(T0 + second, WALL0 + second, second):
            vllm = tuple(replace(v, health=redirected) for v in obs.vllm)
            items.append((Kind.OBSERVATION, T0 + second, obs.node, replace(obs, vllm=vllm)))
    for keyframe_s in (1e9, 0.5):
        _encoded_round_trip(items, keyframe_s)


def test_the_time_metrics_answered_is_recorded_with_its_observation() -> None:
    """A replay times rates as the live dashboard did: by each /metrics answer (issue 20)."""
    items: list[tuple[Kind, float, str, object]] = []
    for second in range(4):
        t = T0 + second
        for obs in fixture_poll(t, WALL0 + second, second):
            vllm = tuple(replace(v, metrics_t=t - 0.25 * (second + 1)) for v in obs.vllm)  # answered before the end
            items.append((Kind.OBSERVATION, t, obs.node, replace(obs, vllm=vllm)))
    for keyframe_s in (1e9, 0.5):
        _encoded_round_trip(items, keyframe_s)


# --- the recorder and the reader ----------------------------------------------------------------------


def test_the_reader_gives_back_what_the_recorder_was_handed(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    recorder = Recorder(tmp_path / "r.db", fleet_spec(), clock=clock, wall=lambda: WALL0 + clock.t - T0)
    sent = record_fixture(recorder, clock, 45)
    recorder.close()
    reader = RecordingReader(tmp_path / "r.db")
    got = list(reader.records())
    assert reader.problem is None
    assert [r.kind for r in got] == [kind for kind, _ in sent]
    for record, (kind, payload) in zip(got, sent, strict=True):
        if kind is Kind.TICK:
            assert record.t == payload
        else:
            assert record.payload == payload
    assert reader.fleet == fleet_spec()
    assert (reader.start_t, reader.end_t) == (T0, T0 + 44)
    assert reader.wall_at(T0 + 10) == WALL0 + 10
    assert recorder.records_written == len(sent)


def test_the_recording_leaves_api_keys_out(tmp_path: Path) -> None:
    data = fleet_spec().model_dump()
    data["nodes"][0]["vllm"][0]["api_key"] = "sk-very-secret"
    fleet = FleetSpec.model_validate(data)
    Recorder(tmp_path / "r.db", fleet).close()
    assert b"sk-very-secret" not in (tmp_path / "r.db").read_bytes()
    assert RecordingReader(tmp_path / "r.db").fleet.nodes[0].vllm[0].api_key is None


def test_a_second_run_appends_a_session_on_the_same_clock(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    write_fixture_recording(path, 20)
    # After a reboot the monotonic clock starts near 0; the wall clock says 100 s later.
    clock = ManualClock(50.0)
    recorder = Recorder(path, fleet_spec(), clock=clock, wall=lambda: WALL0 + 120 + clock.t - 50.0)
    record_fixture(recorder, clock, 20, start=50.0, wall0=WALL0 + 120)
    recorder.close()
    reader = RecordingReader(path)
    records = list(reader.records())
    assert len(reader.sessions) == 2
    second = [r for r in records if r.session == max(reader.sessions)]
    assert second[0].t == pytest.approx(T0 + 120)
    assert isinstance(second[1].payload, NodeObservation) and second[1].payload.t == pytest.approx(T0 + 120)
    times = [r.t for r in records]
    assert times == sorted(times)
    sink = monitor_for(reader.fleet)
    replay_into(RecordingReader(path), sink)
    assert sink.resets == 1  # a new run is a fresh start, as it was live


def test_size_retention_keeps_the_file_bounded(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    limit = 400_000
    clock = ManualClock(T0)
    recorder = Recorder(path, fleet_spec(), clock=clock, max_bytes=limit, flush_interval_s=0.01, retention_every_s=0.0)
    for chunk in range(12):
        record_fixture(recorder, clock, 25, start=T0 + 25 * chunk)
        assert recorder.flush()
        size = path.stat().st_size + (tmp_path / "r.db-wal").stat().st_size
        assert size < 2.5 * limit, (chunk, size)
    written = recorder.records_written
    recorder.close()
    assert path.stat().st_size < 1.6 * limit
    reader = RecordingReader(path)
    records = list(reader.records(synthesize_ticks=False))
    assert reader.problem is None
    assert 0 < len(records) < written
    assert records[0].t > T0  # the oldest went
    assert records[-1].t == T0 + 12 * 25 - 1  # the newest stayed


def test_age_retention_deletes_whole_epochs_older_than_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    clock = ManualClock(T0)
    wall = ManualClock(WALL0)
    recorder = Recorder(path, fleet_spec(), clock=clock, wall=wall, max_age_s=60.0, keyframe_s=20.0)
    record_fixture(recorder, clock, 200, wall=wall)
    recorder.close()
    reader = RecordingReader(path)
    records = list(reader.records(synthesize_ticks=False))
    assert reader.problem is None
    assert T0 + 200 - 60 - 20 <= records[0].t <= T0 + 200 - 60
    assert isinstance(records[0].payload, HostUpdate | NodeObservation)


def test_a_file_that_is_not_a_recording_is_refused_in_one_line(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\n" * 100)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t(x)")
    for path, why in ((text, "not a sparktui recording"), (other, "not a sparktui recording")):
        with pytest.raises(RecordingError, match=why) as caught:
            RecordingReader(path)
        assert "\n" not in str(caught.value)
        with pytest.raises(RecordingError, match=why):
            Recorder(path, fleet_spec())
    with pytest.raises(RecordingError, match="no such recording"):
        RecordingReader(tmp_path / "missing.db")
    with pytest.raises(RecordingError, match="cannot open for recording"):
        Recorder(tmp_path / "no" / "such" / "dir.db", fleet_spec())


def test_a_recording_from_a_newer_sparktui_is_refused(recording: Path) -> None:
    with sqlite3.connect(recording) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    with pytest.raises(RecordingError, match=r"newer sparktui \(format 99\)"):
        RecordingReader(recording)


def test_findings_are_recorded_when_they_open_and_clear(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    recorder = Recorder(tmp_path / "r.db", fleet_spec(), clock=clock)
    finding = Finding(
        "crash-loop", "spark1", "gptoss", Severity.CRIT, "Crash loop", ("4 restarts",), "", "", None, T0, T0
    )
    for step in range(5):  # evaluated every tick, recorded once
        clock.t = T0 + step
        recorder.findings("spark1", [replace(finding, last_seen=clock.t)])
    recorder.findings("spark1", [replace(finding, severity=Severity.WARN)])
    clock.t = T0 + 9
    recorder.findings("spark1", [])
    recorder.action({"action": "restart", "node": "spark1", "result": "ok"})
    recorder.close()
    records = list(RecordingReader(tmp_path / "r.db").records())
    findings = [r.payload for r in records if isinstance(r.payload, Finding)]
    assert [(f.severity, f.cleared_at) for f in findings] == [
        (Severity.CRIT, None),
        (Severity.WARN, None),
        (Severity.WARN, T0 + 9),
    ]
    actions = [r for r in records if r.kind is Kind.ACTION]
    assert len(actions) == 1 and actions[0].node == "spark1"


def test_a_tap_on_the_core_hears_everything_it_is_fed() -> None:
    """A recorder is one tap on the monitor core (``Monitor.attach``), the same in every mode: what the
    core is fed reaches the tap as it was fed."""
    tapped = monitor_for(fleet_spec())
    core = Monitor(fleet_spec(), tapped.catalogue, taps=(tapped,))
    for obs in fixture_poll(T0, WALL0, 0):
        core.observation(obs)
    core.host(HostUpdate("spark1", T0, sample=FRAMES[0]))
    core.log_batch("spark1", "gptoss", log_lines(0))
    core.error("spark2", KeyError("x"))
    for monitor in (core, tapped):
        monitor.tick(T0)
        assert len(monitor.log_buffers["spark1"]["gptoss"]) == 2
        assert list(monitor.errors) == ["spark2: internal error while collecting: KeyError: 'x'"]
    assert core.views == tapped.views


def test_a_recorder_attached_to_the_core_records_what_it_is_fed_and_derives(tmp_path: Path) -> None:
    core = monitor_for(fleet_spec())
    recorder = Recorder(tmp_path / "r.db", fleet_spec())
    core.attach(recorder)
    for second in range(2):
        for obs in fixture_poll(T0 + second, WALL0 + second, second):
            core.observation(obs)
        core.tick(T0 + second)
    recorder.close()
    kinds = [record.kind for record in RecordingReader(tmp_path / "r.db").records()]
    assert kinds.count(Kind.OBSERVATION) == 2 * len(fixture_poll(T0, WALL0, 0))
    assert Kind.TICK in kinds


# --- the black box ------------------------------------------------------------------------------------


def _finding(t: float, rule: str = "crash-loop") -> Finding:
    return Finding(rule, "spark1", "gptoss", Severity.CRIT, "Crash loop", ("x",), "", "", None, t, t)


def test_the_black_box_writes_nothing_without_an_incident(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    box = BlackBox(tmp_path / "box.db", fleet_spec(), 1.0, clock=clock, keyframe_s=20.0)
    record_fixture(box, clock, 200)
    assert box.flush()
    assert 0 < box.window_records < 120 * 7  # about the last minute (and one epoch) in memory
    box.close()
    assert list(RecordingReader(tmp_path / "box.db").records()) == []


@pytest.mark.slow
def test_the_black_box_keeps_the_window_before_and_a_period_after_each_incident(tmp_path: Path) -> None:
    path = tmp_path / "box.db"
    clock = ManualClock(T0)
    box = BlackBox(path, fleet_spec(), 1.0, after_s=30.0, clock=clock, keyframe_s=20.0)
    record_fixture(box, clock, 300)
    box.finding(_finding(clock.t))  # at T0 + 299
    box.finding(_finding(clock.t))  # still open: no second incident
    record_fixture(box, clock, 300, start=T0 + 300)
    box.alert("spark2 down for 5 minutes", node="spark2")  # at T0 + 599
    record_fixture(box, clock, 100, start=T0 + 600)
    box.close()
    assert [reason for _, reason in box.incidents] == ["spark1/gptoss: Crash loop", "spark2 down for 5 minutes"]
    reader = RecordingReader(path)
    records = list(reader.records(synthesize_ticks=False))
    assert reader.problem is None
    first = [r.t for r in records if r.t < T0 + 400]
    second = [r.t for r in records if r.t >= T0 + 400]
    assert T0 + 299 - 60 - 20 <= min(first) <= T0 + 299 - 60 and max(first) == T0 + 299 + 30
    assert T0 + 599 - 60 - 20 <= min(second) <= T0 + 599 - 60 and max(second) == T0 + 599 + 30
    assert any(isinstance(r.payload, Finding) for r in records)
    sink = monitor_for(reader.fleet)
    replay_into(RecordingReader(path), sink)
    assert sink.resets == 1  # the silence between the two incidents


# --- export -------------------------------------------------------------------------------------------


def _views_at_ticks(path: Path) -> dict[tuple[float, str], dict[str, object]]:
    found: dict[tuple[float, str], dict[str, object]] = {}

    def on_tick(sink: Monitor, now: float) -> None:
        for view in sink.views:
            found[(now, view.name)] = {name: metric(view) for name, metric in NODE_METRICS.items()}

    reader = RecordingReader(path)
    replay_into(reader, monitor_for(reader.fleet, on_tick))
    return found


def test_export_jsonl_gives_the_models_numbers_per_node_per_tick(recording: Path) -> None:
    out = io.StringIO()
    rows, problem = export(recording, "jsonl", out=out, catalogue_for=catalogue_for)
    assert problem is None
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rows == len(lines) == 30 * 4
    expected = _views_at_ticks(recording)
    for row in lines:
        assert set(row) == {"time", "t", "node", *METRICS}
        values = expected[(T0 + row["t"], row["node"])]
        for name, value in values.items():
            assert row[name] == value
    last = [r for r in lines if r["node"] == "spark3"][-1]
    assert last["status"] == "down" and last["generation_tps"] is None
    spark1 = [r for r in lines if r["node"] == "spark1"][-1]
    assert spark1["generation_tps"] is not None and spark1["generation_tps"] > 0
    assert datetime.fromisoformat(lines[0]["time"]).timestamp() == pytest.approx(WALL0)


def test_export_csv_with_chosen_metrics(recording: Path) -> None:
    out = io.StringIO()
    rows, _ = export(recording, "csv", ["status", "kv_usage", "findings"], out, catalogue_for=catalogue_for)
    table = list(csv.reader(io.StringIO(out.getvalue())))
    assert table[0] == ["time", "t", "node", "status", "kv_usage", "findings"]
    assert len(table) == rows + 1 == 30 * 4 + 1
    spark4 = [row for row in table[1:] if row[2] == "spark4"]
    assert spark4[-1][4] == ""  # a worker has no KV cache of its own: empty, not 0
    with pytest.raises(ValueError, match="unknown metric 'tokens'"):
        export(recording, "csv", ["tokens"], io.StringIO(), catalogue_for=catalogue_for)


def test_export_of_a_recording_without_ticks_ticks_every_poll_interval(tmp_path: Path) -> None:
    path = write_fixture_recording(tmp_path / "r.db", 20, ticks=False)
    out = io.StringIO()
    rows, _ = export(path, "jsonl", ["status"], out, catalogue_for=catalogue_for)
    times = sorted({json.loads(line)["t"] for line in out.getvalue().splitlines()})
    assert times == [float(s) for s in range(19)]  # each poll interval that records followed
    assert rows == 19 * 4


# --- the command line ---------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sparktui")
    options.add_record_options(parser)
    sub = parser.add_subparsers(dest="command")
    replay_cli.add_parser(sub)
    export_cli.add_parser(sub)
    return parser


def test_from_times_are_read_in_every_form(recording: Path) -> None:
    reader = RecordingReader(recording)
    start = reader.wall_at(reader.start_t)
    local = datetime.fromtimestamp(start)
    assert replay_cli.parse_time("+10s", reader) == start + 10
    assert replay_cli.parse_time("+1m30s", reader) == start + 90
    assert replay_cli.parse_time("-5", reader) == reader.wall_at(reader.end_t) - 5
    assert replay_cli.parse_time(local.strftime("%H:%M:%S"), reader) == pytest.approx(start, abs=1)
    assert replay_cli.parse_time(local.strftime("%Y-%m-%d %H:%M:%S"), reader) == pytest.approx(start, abs=1)
    with pytest.raises(ValueError, match="give HH:MM"):
        replay_cli.parse_time("yesterday", reader)


def test_replay_command_opens_the_source_at_the_asked_time(recording: Path) -> None:
    args = _parser().parse_args(["replay", str(recording), "--speed", "4", "--from", "+12s", "--paused"])
    source = replay_cli.open_replay(args)
    assert source.speed == 4 and not source.playing
    assert source._seek_to == T0 + 12


def test_export_command_writes_the_file_and_errors_are_one_line(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.csv"
    out.write_text("an older file, readable by all\n")
    out.chmod(0o644)
    args = _parser().parse_args(
        ["export", str(recording), "--to", "csv", "--metrics", "status,gpu_temp", "-o", str(out)]
    )
    assert export_cli.run(args) == 0
    assert out.read_text().splitlines()[0] == "time,t,node,status,gpu_temp"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # what the fleet did: for the owner only
    args = _parser().parse_args(["export", str(tmp_path / "nope.db"), "--to", "jsonl"])
    assert export_cli.run(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "nope.db: no such recording" in err


SLACK_URL = "https://hooks.slack.com/services/T0/B0/slackSECRETpath"
HOOK_URL = "https://hooks.example/alerts/hookSECRETpath"
NOTIFIERS = f"""
[[notifiers]]
kind = "slack"
url = "{SLACK_URL}"

[[notifiers]]
kind = "webhook"
url_env = "HOOK_URL"
token_env = "HOOK_TOKEN"

[[notifiers]]
kind = "telegram"
token_env = "BOT_TOKEN"
chat_id = 42
"""
NOTIFIER_SECRETS = (SLACK_URL, HOOK_URL, "hookTOKENsecret", "7012345678:botTOKENsecret")


def _fleet_with_notifiers() -> tuple[FleetSpec, str]:
    text = UI_CONFIG + NOTIFIERS
    env = {"HOOK_URL": HOOK_URL, "HOOK_TOKEN": NOTIFIER_SECRETS[2], "BOT_TOKEN": NOTIFIER_SECRETS[3]}
    return parse_config(text, source="ui-test.toml", env=env), text


@pytest.mark.parametrize("kind", ["record", "black-box"])
def test_a_recording_made_with_notifiers_replays_and_exports_without_their_secrets(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet, text = _fleet_with_notifiers()
    path = tmp_path / "r.db"
    clock = ManualClock(T0)
    if kind == "record":
        recorder: Recorder = Recorder(path, fleet, clock=clock, wall=lambda: WALL0 + clock.t - T0, config_text=text)
    else:
        recorder = BlackBox(path, fleet, 1.0, after_s=5.0, clock=clock, keyframe_s=20.0, config_text=text)
    record_fixture(recorder, clock, 20)
    if isinstance(recorder, BlackBox):
        recorder.alert("spark2 down", node="spark2")
        record_fixture(recorder, clock, 10, start=T0 + 20)
    recorder.close()
    stored = path.read_bytes()
    for secret in NOTIFIER_SECRETS:
        assert secret.encode() not in stored
    reader = RecordingReader(path)
    assert [(n.name, n.kind) for n in reader.fleet.notifiers] == [(n.name, n.kind) for n in fleet.notifiers]
    assert SLACK_URL not in (reader.sessions[1].config or "")
    args = _parser().parse_args(["export", str(path), "--to", "csv", "-o", str(tmp_path / "out.csv")])
    assert export_cli.run(args) == 0, capsys.readouterr().err
    assert len((tmp_path / "out.csv").read_text().splitlines()) > 1
    source = replay_cli.open_replay(_parser().parse_args(["replay", str(path), "--paused"]))
    assert source.fleet.notifiers == reader.fleet.notifiers


def test_a_recording_that_stored_redacted_notifier_urls_reads_back(tmp_path: Path) -> None:
    """Recordings written before REDACTED_URL hold pydantic's ``**********`` for a notifier's URL."""
    fleet, _ = _fleet_with_notifiers()
    path = tmp_path / "r.db"
    Recorder(path, fleet).close()
    with sqlite3.connect(path) as conn:
        (header,) = conn.execute("SELECT fleet FROM sessions").fetchone()
        old = json.loads(header)
        for notifier in old["notifiers"]:
            notifier["url"] = None if notifier["url"] is None else "**********"
        conn.execute("UPDATE sessions SET fleet = ?", (json.dumps(old),))
    reader = RecordingReader(path)
    assert [n.url.get_secret_value() if n.url else None for n in reader.fleet.notifiers] == [
        REDACTED_URL,
        REDACTED_URL,
        None,
    ]


def test_recordings_and_black_box_files_are_readable_by_their_owner_only(tmp_path: Path, umask_022: None) -> None:
    clock = ManualClock(T0)
    recorder = Recorder(tmp_path / "r.db", fleet_spec(), clock=clock)
    record_fixture(recorder, clock, 5)
    box = BlackBox(tmp_path / "box.db", fleet_spec(), 1.0, after_s=1.0, clock=clock, keyframe_s=20.0)
    record_fixture(box, clock, 5, start=T0 + 5)
    box.alert("spark2 down", node="spark2")
    record_fixture(box, clock, 3, start=T0 + 10)
    assert box.flush()
    files = sorted(tmp_path.glob("*.db*"))  # the WAL and shared-memory files too, while open
    assert {f.name for f in files} >= {"r.db", "r.db-wal", "box.db", "box.db-wal"}
    assert {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in files} == {f.name: "0o600" for f in files}
    recorder.close()
    box.close()


def test_record_options_make_a_recorder_or_a_black_box(tmp_path: Path) -> None:
    fleet = fleet_spec()
    parser = _parser()
    assert options.recorder_from_args(parser.parse_args([]), fleet) is None
    recorder = options.recorder_from_args(parser.parse_args(["--record", str(tmp_path / "a.db")]), fleet)
    assert type(recorder) is Recorder and recorder.store.max_bytes == 1024**3
    recorder.close()
    args = parser.parse_args(["--black-box", "5", "--black-box-file", str(tmp_path / "b.db"), "--record-max-mb", "10"])
    box = options.recorder_from_args(args, fleet)
    assert isinstance(box, BlackBox) and box.window_s == 300 and box.store.max_bytes == 10 * 1024 * 1024
    box.close()
    with pytest.raises(SystemExit):
        parser.parse_args(["--record", "a", "--black-box", "5"])


def test_a_demo_config_round_trips_through_the_header(tmp_path: Path) -> None:
    spec = parse_config(
        '[[nodes]]\nname = "a"\nhost = "127.0.0.1"\n[nodes.ssh]\nkey_file = "/tmp/k"\nport = 2222\n'
        '[[nodes.vllm]]\nname = "m"\nport = 8000\nunit = "vllm.service"\n',
        source="demo.toml",
    )
    Recorder(tmp_path / "r.db", spec, config_text="# the text\n").close()
    reader = RecordingReader(tmp_path / "r.db")
    assert reader.fleet == spec
    assert reader.sessions[1].config == "# the text\n"
