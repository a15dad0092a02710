"""A recording is untrusted input (it may come from another machine): hostile ones, written by the real
recorder and store (and raw SQLite edits for what they would never write), read by the real command
line in a subprocess. Each refusal is one line with a non-zero exit, never a traceback; a decompression
bomb is stopped at its cap in bounded memory; a record that cannot be is skipped and counted; text is
made safe where it is decoded. ``export``'s output: ``test_export_output.py``."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import Finding
from sparktui.model.host import HostProcess, ServiceState
from sparktui.model.logbuffer import LogLine
from sparktui.model.memory import HostMemory
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult
from sparktui.record import codec
from sparktui.record.codec import LITERAL, RAW, Z_PLAIN
from sparktui.record.recorder import Recorder
from sparktui.record.store import RecordingReader
from sparktui.record.types import Kind, RecordingError
from tests.integration.test_record import FRAMES, T0, WALL0, ManualClock, fixture_poll, record_fixture
from tests.support.ui_data import fleet_spec
from tests.unit.test_record_decoder_fuzz import strings_in

ROOT = Path(__file__).resolve().parents[2]
SECONDS = 10
HOSTILE_AT = 5  # the second the hostile records are written at, between good ones
MiB = 1024 * 1024


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str
    max_rss_bytes: int


# A small parent that runs the command and reports its child's peak memory: a child forked from pytest
# itself would count the pages it shares with pytest's large process as its own.
MEASURED = (
    "import resource, subprocess, sys; code = subprocess.call(sys.argv[2:]); "
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); sys.exit(code)"
)


def sparktui(*args: str | Path, tmp: Path) -> Ran:
    """``python -m sparktui ARGS`` in a subprocess, with its peak memory."""
    out, err, rss = tmp / "stdout", tmp / "stderr", tmp / "max-rss-kib"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        command = [sys.executable, "-c", MEASURED, str(rss), sys.executable, "-m", "sparktui", *map(str, args)]
        code = subprocess.run(command, stdout=stdout, stderr=stderr, cwd=ROOT, check=False).returncode
    return Ran(code, out.read_text(), err.read_text(), int(rss.read_text()) * 1024)


def one_line(text: str) -> str:
    assert "Traceback" not in text, text
    assert text.count("\n") == 1 and text.endswith("\n"), text
    return text


def record(path: Path, hostile: Callable[[Recorder], None] | None = None) -> Path:
    """SECONDS of the fixture fleet through the real recorder, with ``hostile`` writing its records
    (through the same recorder) at HOSTILE_AT."""
    clock = ManualClock(T0)
    recorder = Recorder(path, fleet_spec(), clock=clock, wall=lambda: WALL0 + clock.t - T0)
    record_fixture(recorder, clock, HOSTILE_AT)
    if hostile is not None:
        clock.t = T0 + HOSTILE_AT - 0.5
        hostile(recorder)
    record_fixture(recorder, clock, SECONDS - HOSTILE_AT, start=T0 + HOSTILE_AT, wall0=WALL0 + HOSTILE_AT)
    recorder.close()
    assert recorder.problem is None
    return path


def append_raw(path: Path, kind: Kind, data: bytes, node: str = "") -> int:
    """A record the codec would never write, appended to the last epoch; returns its id."""
    with sqlite3.connect(path) as conn:
        record_id, epoch, t = conn.execute("SELECT max(id) + 1, max(epoch), max(t) + 0.5 FROM records").fetchone()
        conn.execute(
            "INSERT INTO records(id, epoch, t, kind, node, data) VALUES (?, ?, ?, ?, ?, ?)",
            (record_id, epoch, t, int(kind), node, data),
        )
    return int(record_id)


def payload(*parts: bytes) -> bytes:
    """A payload as docs/record.md describes it: parts of a codec byte and a 4-byte length each."""
    return b"".join(bytes((LITERAL,)) + len(part).to_bytes(4, "big") + part for part in parts)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("good") / "fleet.db")


@pytest.fixture(scope="module")
def good_rows(good: Path, tmp_path_factory: pytest.TempPathFactory) -> int:
    ran = sparktui("export", good, "--to", "csv", tmp=tmp_path_factory.mktemp("run"))
    assert ran.returncode == 0, ran.stderr
    return len(ran.stdout.splitlines()) - 1


def copy_of(good: Path, folder: Path) -> Path:
    copy = folder / "fleet.db"
    copy.write_bytes(good.read_bytes())
    copy.chmod(0o600)
    return copy


@pytest.fixture
def recording(good: Path, tmp_path: Path) -> Path:
    return copy_of(good, tmp_path)


# --- what is read from a recording --------------------------------------------------------------------


def bomb(inflated: int) -> bytes:
    """A blob whose one JSON part inflates to ``inflated`` bytes of spaces (about 1/1000 of it stored)."""
    packer = zlib.compressobj(9)
    chunks = [packer.compress(bytes((LITERAL,)) + (inflated + 2).to_bytes(4, "big"))]
    spaces = b" " * MiB
    chunks.extend(packer.compress(spaces) for _ in range(inflated // MiB))
    chunks.append(packer.compress(b"{}") + packer.flush())
    return bytes((Z_PLAIN,)) + b"".join(chunks)


@pytest.mark.slow
def test_a_decompression_bomb_is_refused_at_its_cap_in_bounded_memory(
    recording: Path, good_rows: int, tmp_path: Path
) -> None:
    blob = bomb(1024 * MiB)
    assert len(blob) < 1.2 * MiB  # a 1 MiB record that inflates to 1 GiB
    bad = append_raw(recording, Kind.ACTION, blob)
    ran = sparktui("export", recording, "--to", "csv", tmp=tmp_path)
    assert ran.returncode == 1
    line = one_line(ran.stderr)
    assert f"record {bad} cannot be decoded" in line
    assert f"inflates to more than the {codec.MAX_RECORD_BYTES // MiB} MiB a record may hold" in line
    assert len(ran.stdout.splitlines()) - 1 == good_rows  # everything before it exported
    # Python, the model and one record at its cap: far from the GiB the blob asks for.
    assert ran.max_rss_bytes < 400 * MiB, ran.max_rss_bytes


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("'text'", "is malformed (its data is not a blob)"),
        (f"zeroblob({32 * MiB + 1})", "more than the 32 MiB a record may hold"),  # codec.MAX_RECORD_BYTES
    ],
    ids=["text", "too large"],
)
def test_a_record_that_cannot_be_read_ends_the_export_in_one_line(
    recording: Path, tmp_path: Path, data: str, reason: str
) -> None:
    bad = append_raw(recording, Kind.ACTION, b"")
    with sqlite3.connect(recording) as conn:
        conn.execute(f"UPDATE records SET data = {data} WHERE id = ?", (bad,))
    ran = sparktui("export", recording, "--to", "jsonl", tmp=tmp_path)
    assert ran.returncode == 1
    line = one_line(ran.stderr)
    assert f"record {bad}" in line and reason in line


def test_a_record_at_an_impossible_time_is_skipped_and_the_export_says_how_many(
    recording: Path, good_rows: int, tmp_path: Path
) -> None:
    with sqlite3.connect(recording) as conn:
        observations = [row[0] for row in conn.execute("SELECT id FROM records WHERE kind = 1 ORDER BY id LIMIT 3")]
        conn.execute("UPDATE records SET t = 1e308 WHERE id = ?", (observations[0],))
        conn.execute("UPDATE records SET t = 'NaN' WHERE id = ?", (observations[1],))
        conn.execute("UPDATE records SET t = -9e999 WHERE id = ?", (observations[2],))
    ran = sparktui("export", recording, "--to", "csv", tmp=tmp_path)
    assert ran.returncode == 1
    line = one_line(ran.stderr)
    assert "skipped 3 records that cannot be" in line
    assert f"record {observations[0]} (its time is 1e+308, outside" in line
    assert len(ran.stdout.splitlines()) - 1 == good_rows  # read to its end, not stopped after one row


def _host_with(**memory: object) -> Callable[[Recorder], None]:
    def write(recorder: Recorder) -> None:
        sample = replace(FRAMES[0], memory=replace(HostMemory(), **memory))  # type: ignore[arg-type]
        recorder.host(HostUpdate("spark1", recorder.clock(), sample=sample))

    return write


def _nested_action(depth: int) -> Callable[[Recorder], None]:
    def write(recorder: Recorder) -> None:
        event: dict[str, object] = {"action": "restart"}
        for _ in range(depth):
            event = {"inner": event}
        recorder.action(event)

    return write


def _log_line(line: LogLine) -> Callable[[Recorder], None]:
    return lambda recorder: recorder.log_batch("spark1", "gptoss", (line,))


def _observation_status(status: object) -> Callable[[Recorder], None]:
    def write(recorder: Recorder) -> None:
        obs = fixture_poll(recorder.clock(), WALL0 + HOSTILE_AT, 0)[0]
        assert obs.vllm[0].health is not None
        health = replace(obs.vllm[0].health, status=status)  # type: ignore[arg-type]
        recorder.observation(replace(obs, vllm=(replace(obs.vllm[0], health=health),)))

    return write


HOSTILE_FIELDS = {
    "a number that is text": (_host_with(mem_total="abc"), "host.sample.memory.mem_total is 'abc', not a number"),
    "a number out of range": (_host_with(mem_total=10**400), "host.sample.memory.mem_total is"),
    "an infinite number": (_host_with(cached=float("inf")), "host.sample.memory.cached is inf, outside"),
    "an object for a number": (_host_with(dirty={"a": [1]}), "host.sample.memory.dirty is an object, not a number"),
    "a status out of range": (_observation_status(10**30), ".health.status is"),
    "nested JSON": (_nested_action(200), "its JSON is nested more than 32 deep"),
    "a log line's number": (_log_line(LogLine("7", None, "x")), "log.lines[] seq is '7', not an integer"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", list(HOSTILE_FIELDS))
def test_a_record_with_a_field_that_cannot_be_is_skipped_naming_the_field(tmp_path: Path, case: str) -> None:
    hostile, reason = HOSTILE_FIELDS[case]
    path = record(tmp_path / "fleet.db", hostile)
    reader = RecordingReader(path)
    records = list(reader.records())
    reader.close()
    assert reader.problem is None
    assert reader.skipped == 1
    assert reader.skipped_note is not None and reason in reader.skipped_note, reader.skipped_note
    assert "\n" not in reader.skipped_note
    assert max(r.t for r in records) == T0 + SECONDS - 1  # read on past it


@pytest.mark.parametrize(
    ("json_text", "reason"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested more than 32 deep"),
        (b'{"instance": "gptoss", "lines": [[1, null, "x"]]}' + b" " * (9 * MiB), "more than the 8 MiB allowed"),
        (b'{"instance": "gptoss", "lines": [[' + b"9" * 5000 + b', null, "x"]]}', "does not parse"),
        (b'{"instance": "gptoss", "lines": [["1", null, "x"]]}', "log.lines[] seq is '1', not an integer"),
        (b'{"instance": {"a": 1}, "lines": []}', "log.instance is an object, not a string"),
        (b'{"instance": "gptoss", "lines": [[1, "yesterday", "x"]]}', "'yesterday', not an ISO 8601 time"),
    ],
    ids=["deep", "large", "long number", "seq", "instance", "time"],
)
def test_json_a_recorder_would_never_write_is_skipped_in_one_line(
    recording: Path, tmp_path: Path, json_text: bytes, reason: str
) -> None:
    bad = append_raw(recording, Kind.LOG, bytes((RAW,)) + payload(json_text), node="spark1")
    ran = sparktui("export", recording, "--to", "jsonl", tmp=tmp_path)
    assert ran.returncode == 1
    line = one_line(ran.stderr)
    assert f"skipped 1 record that cannot be: record {bad} (" in line and reason in line


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("UPDATE sessions SET wall0 = 1e308", "session 1's wall0 is 1e+308, outside 0 to 1e+11"),
        ("UPDATE sessions SET t0 = 'soon'", "session 1's t0 is 'soon', not a number"),
        ("UPDATE epochs SET t = x'00'", "epoch 1's time is b'\\x00', not a number"),
        ("UPDATE sessions SET fleet = '" + "[" * 50_000 + "]" * 50_000 + "'", "nested more than 32 deep"),
        ("UPDATE sessions SET fleet = x'00'", "session 1 is malformed"),
        ("UPDATE sessions SET fleet = '42'", "does not fit this sparktui (Input should be a valid dictionary"),
        (f"UPDATE sessions SET fleet = zeroblob({9 * MiB})", "larger than 8 MiB"),
    ],
    ids=["wall0", "t0", "epoch", "deep fleet", "blob fleet", "not a fleet", "large fleet"],
)
def test_a_hostile_header_refuses_the_recording_in_one_line(
    recording: Path, tmp_path: Path, sql: str, reason: str
) -> None:
    with sqlite3.connect(recording) as conn:
        conn.execute(sql)
    with pytest.raises(RecordingError) as refused:
        RecordingReader(recording)
    assert reason in str(refused.value) and "\n" not in str(refused.value)
    ran = sparktui("export", recording, "--to", "csv", tmp=tmp_path)
    assert ran.returncode == 2
    assert reason in one_line(ran.stderr)


def test_replay_and_export_of_a_recording_that_cannot_be_read_are_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "fleet.db"
    folder.mkdir()
    for command in (("replay", folder), ("export", folder, "--to", "csv")):
        ran = sparktui(*command, tmp=tmp_path)
        assert ran.returncode == 2
        assert "cannot read the recording (Is a directory)" in one_line(ran.stderr)


# --- text from a recording ------------------------------------------------------------------------------

ATTACK = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]2;pwned\x1b\\\x1b[2J\x9b31m\u202eevil\r\nforged line\x07"
CONTROLS = ("\x1b", "\x07", "\x9b", "\x9d", "\u202e", "\r", "\n")


def test_text_read_from_a_recording_is_made_safe_where_it_is_decoded(tmp_path: Path) -> None:
    def hostile(recorder: Recorder) -> None:
        t = recorder.clock()
        recorder.log_batch("spark1", "gptoss", (LogLine(1, None, ATTACK), LogLine(2, None, ATTACK, gap=True)))
        recorder.error("spark1", RuntimeError(ATTACK))
        service = ServiceState("gptoss", "docker", ATTACK, ATTACK, problem=ATTACK)
        process = HostProcess(1, 0, 1, None, ATTACK, ATTACK)
        sample = replace(FRAMES[0], processes=(process,), services={ATTACK: service}, problems=(ATTACK,))
        recorder.host(HostUpdate("spark1", t, sample=sample, problem=ATTACK))
        recorder.action({"action": ATTACK, ATTACK: [ATTACK, {"nested": ATTACK}]})
        failed = HttpResult(url="http://192.168.1.11:8001/health", kind=FetchKind.ERROR, error=ATTACK, location=ATTACK)
        obs = fixture_poll(t, WALL0 + HOSTILE_AT, 0)[0]
        recorder.observation(replace(obs, vllm=(replace(obs.vllm[0], health=failed),)))
        finding = Finding(
            "crash-loop", "spark1", "gptoss", Severity.CRIT, ATTACK, (ATTACK,), ATTACK, ATTACK, None, t, t
        )
        recorder.findings("spark1", [finding], t)

    path = record(tmp_path / "fleet.db", hostile)
    reader = RecordingReader(path)
    payloads = [r.payload for r in reader.records(synthesize_ticks=False)]
    reader.close()
    assert reader.problem is None and reader.skipped == 0
    texts = [s for p in payloads for s in strings_in(p)]
    assert sum("evil" in s for s in texts) >= 15  # every field above came back
    assert [s for s in texts if any(c in s for c in CONTROLS)] == []
