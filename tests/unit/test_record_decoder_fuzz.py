"""Property tests of the recording's decoder (``sparktui.record.codec.Decoder``): records the real
encoder wrote, with one field anywhere in their JSON replaced by an arbitrary value (wrong types, huge
or non-finite numbers, deep nesting, hostile text), or with arbitrary times, node names and blobs. Only
the documented error may come out (``DamagedRecord``, and its ``RefusedRecord``), and what decodes holds
no terminal control in its text.

The budget is bounded (``max_examples``, no deadline): the file runs in well under a minute on two cores.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from dataclasses import fields, is_dataclass
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import Finding
from sparktui.model.host import HostProcess, HostSample, ServiceState, ShmEntry
from sparktui.model.logbuffer import LogLine
from sparktui.model.memory import HostMemory, MemoryPressure
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.record.codec import LITERAL, RAW, Decoder, Encoder
from sparktui.record.types import ActionEvent, CollectError, DamagedRecord, Kind, LogBatch, Payload, Tick

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
T = 1000.0
WALL = 1_780_000_000.0

METRICS = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\nvllm:kv 0.5\n"
SAMPLE = HostSample(
    remote_epoch=WALL,
    memory=HostMemory(1.3e11, 2.5e10, 1.0e9, 2.0e6, 9.9e10, 3.0e9, 12.0, 0.0, 5.5e8),
    pressure=MemoryPressure(1.5, 0.25, 0.0, 0.0, 123.4, 7.0),
    pressure_problem=None,
    shm=(ShmEntry("psm_1", 1 << 30, "psm", 4096),),
    processes=(HostProcess(4242, 1, 5 << 30, WALL - 60, "serve", "vllm serve Qwen/Qwen3"),),
    load=(1.5, 0.75, 0.5),
    uptime_s=86400.0,
    services={"qwen": ServiceState("qwen", "systemd", "vllm.service", "active", "running", 0, 1, WALL - 60)},
    problems=("a problem",),
    seq=3,
    refreshed={"processes": WALL},
    section_problems={"shm": "cannot list"},
)
OK = HttpResult("http://10.0.0.1:8000/metrics", FetchKind.OK, 200, METRICS, 0.01, content_type="text/plain")
LINES = (LogLine(1, datetime(2026, 5, 30, tzinfo=UTC), "INFO"), LogLine(2, None, "reconnected", gap=True))
PAYLOADS: tuple[tuple[Kind, Payload], ...] = (
    (
        Kind.OBSERVATION,
        NodeObservation(
            "spark1",
            T,
            WALL,
            (ServerObservation("qwen", OK, OK, metrics_t=T - 0.1),),
            gpu_exporter=OK,
            services=(("asr", HttpResult("http://10.0.0.1:8765/health", FetchKind.REFUSED, error="refused")),),
        ),
    ),
    (Kind.HOST, HostUpdate("spark1", T, sample=SAMPLE, problem="slow", nvidia_smi="GPU 0: GB10", fabric="nic")),
    (Kind.LOG, LogBatch("spark1", "qwen", LINES)),
    (Kind.ERROR, CollectError("spark1", "RuntimeError", "boom")),
    (Kind.TICK, Tick()),
    (
        Kind.FINDING,
        Finding("crash-loop", "spark1", "qwen", Severity.CRIT, "Crash", ("4 restarts",), "why", "fix", None, T, T),
    ),
    (Kind.ACTION, ActionEvent({"action": "restart", "node": "spark1", "steps": [1, {"ok": True}]})),
)

HOSTILE_TEXT = st.lists(
    st.sampled_from(["\x1b", "]52;c;", "\x07", "\x9b", "\x9d", "\u202e", "\r", "\n", "\x00", "a", "é", "[2J"]),
    max_size=12,
).map("".join)
NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([0, -1, 1e308, -1e308, 10**19, 2**63]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, HOSTILE_TEXT)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(HOSTILE_TEXT, inner, max_size=4)),
    max_leaves=12,
)
CONTROLS = ("\x1b", "\x07", "\x9b", "\x9d", "\u202e", "\r", "\n", "\x00")


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value, itself included."""
    found = [path]
    if isinstance(value, dict):
        for key, inner in value.items():
            found.extend(_paths(inner, (*path, key)))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found.extend(_paths(inner, (*path, index)))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replaced(copy[head], rest, new)
    return copy


def _parts(payload: bytes) -> list[tuple[int, bytes]]:
    parts, at = [], 0
    while at < len(payload):
        codec, size = struct.unpack_from(">BI", payload, at)
        parts.append((codec, payload[at + 5 : at + 5 + size]))
        at += 5 + size
    return parts


def _blob(parts: list[tuple[int, bytes]]) -> bytes:
    return bytes((RAW,)) + b"".join(struct.pack(">BI", codec, len(data)) + data for codec, data in parts)


def _encoded(kind: Kind, payload: Payload) -> list[tuple[int, bytes]]:
    """The record's parts as the real encoder writes them (a fresh stream: bodies as they are)."""
    data = Encoder().encode(kind, T, "spark1", payload).data
    return _parts(data[1:] if data[0] == RAW else zlib.decompress(data[1:]))


def strings_in(value: object) -> list[str]:
    """Every string inside a payload (dataclasses, mappings, sequences)."""
    if isinstance(value, str):
        return [value]
    if is_dataclass(value) and not isinstance(value, type):
        return [s for f in fields(value) for s in strings_in(getattr(value, f.name))]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings_in(k), *strings_in(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings_in(v)]
    return []


def _decoded_or_refused(kind: Kind, t: object, node: object, blob: bytes) -> Payload | None:
    try:
        decoded = Decoder().decode(kind, t, node, blob)
    except DamagedRecord as exc:
        assert "\n" not in str(exc)
        return None
    assert not [s for s in strings_in(decoded) if any(c in s for c in CONTROLS)]
    assert isinstance(t, int | float) and math.isfinite(t)
    return decoded


@FUZZ
@given(st.sampled_from(PAYLOADS), st.data())
def test_a_field_replaced_by_anything_decodes_or_is_refused(record: tuple[Kind, Payload], data: st.DataObject) -> None:
    kind, payload = record
    parts = _encoded(kind, payload)
    meta = json.loads(parts[0][1])
    path = data.draw(st.sampled_from(_paths(meta)))
    hostile = _replaced(meta, path, data.draw(VALUES))
    text = json.dumps(hostile).encode()
    _decoded_or_refused(kind, T, "spark1", _blob([(LITERAL, text), *parts[1:]]))


@FUZZ
@given(
    st.sampled_from(PAYLOADS),
    st.one_of(NUMBERS, HOSTILE_TEXT, st.none(), st.binary(max_size=8)),
    st.one_of(HOSTILE_TEXT, st.none(), st.integers(), st.binary(max_size=8)),
)
def test_any_time_and_node_decode_or_are_refused(record: tuple[Kind, Payload], t: object, node: object) -> None:
    kind, payload = record
    _decoded_or_refused(kind, t, node, _blob(_encoded(kind, payload)))


@FUZZ
@given(st.sampled_from(list(Kind)), st.binary(max_size=300), st.sampled_from(PAYLOADS))
def test_any_blob_decodes_or_is_refused(kind: Kind, blob: bytes, record: tuple[Kind, Payload]) -> None:
    _decoded_or_refused(kind, T, "spark1", blob)
    # A good record's blob with arbitrary bytes in the middle of it, too.
    good = Encoder().encode(record[0], T, "spark1", record[1]).data
    at = len(good) // 2
    _decoded_or_refused(record[0], T, "spark1", good[:at] + blob[:16] + good[at:])
