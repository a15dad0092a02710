"""The recording file: a SQLite database of timestamped records, and the codecs in and out of it.

Layout (format 1)::

    meta(key, value)            format = "sparktui-recording", version = "1", created, writer
    sessions(id, t0, wall0, fleet, config, ticks)
                                one row per run of a recorder: its clock at start (``t0``, the
                                monotonic clock the sources stamp with) and the unix time then
                                (``wall0``); the fleet spec as JSON (secrets left out), the config
                                text when known; ``ticks`` = 1 once the run recorded a tick
    epochs(id, session, first_id, t, wall)
                                a new epoch every ``KEYFRAME_S`` seconds (or ``max_epoch_bytes``):
                                the first record of each stream in an epoch stands alone
    records(id, epoch, t, kind, node, data)
                                ``t`` on the session's clock; ``kind`` a ``Kind``; ``data`` a blob

A blob is one flag byte and a zlib stream (``Z_PLAIN``), a zlib stream compressed with the previous
payload of the same stream as its preset dictionary (``Z_CHAINED``), or the payload as is
(``RAW``). A *stream* is an observation of one node, a host sample of one node, or the log of one
vLLM instance; everything else stands alone. A payload is a list of *parts*, each a one-byte codec
and a four-byte length: part 0 is JSON (``LITERAL``); an observation's HTTP bodies follow, each
``LITERAL`` or ``LINES``: a line delta against the same body in the stream's previous record.
A scrape of /metrics repeats its series from one poll to the next and only some values change, so
the delta holds the changed values and a few counts (docs/record.md has the numbers).

Reading starts at the first record of an epoch (where every stream starts afresh), so retention
deletes whole epochs, oldest first, and a seek needs to decode at most one epoch it does not show.
Damage (a truncated file, a corrupt page or blob) ends the reading at the last good record with a
one-line ``problem``.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import struct
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from enum import IntEnum
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import Finding
from sparktui.model.host import HostProcess, HostSample, ServiceState, ShmEntry
from sparktui.model.logbuffer import LogLine
from sparktui.model.memory import HostMemory, MemoryPressure
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, VllmObservation
from sparktui.model.specs import FleetSpec
from sparktui.record import DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES

FORMAT = "sparktui-recording"
FORMAT_VERSION = 1
KEYFRAME_S = 300.0  # a new epoch (every stream starts afresh) this often
DEFAULT_MAX_EPOCH_BYTES = 8 * 1024 * 1024
GAP_S = 30.0  # see RecordingReader.gap_s
ZLIB_LEVEL = 6

RAW, Z_PLAIN, Z_CHAINED = 0, 1, 2  # blob flags
LITERAL, LINES = 0, 1  # part codecs
_PART = struct.Struct(">BI")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
    id INTEGER PRIMARY KEY, t0 REAL NOT NULL, wall0 REAL NOT NULL, fleet TEXT NOT NULL,
    config TEXT, ticks INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS epochs(
    id INTEGER PRIMARY KEY, session INTEGER NOT NULL, first_id INTEGER NOT NULL, t REAL NOT NULL,
    wall REAL NOT NULL);
CREATE TABLE IF NOT EXISTS records(
    id INTEGER PRIMARY KEY, epoch INTEGER NOT NULL, t REAL NOT NULL, kind INTEGER NOT NULL,
    node TEXT NOT NULL, data BLOB NOT NULL);
"""


class Kind(IntEnum):
    OBSERVATION = 1
    HOST = 2
    LOG = 3
    ERROR = 4
    TICK = 5
    FINDING = 6
    ACTION = 7


class RecordingError(Exception):
    """The file cannot be opened as a recording; the message is one line for the operator."""


class DamagedRecord(ValueError):
    """A record whose blob does not decode."""


# --- what a recording holds, besides the model's own types ------------------------------------------


@dataclass(frozen=True, slots=True)
class LogBatch:
    node: str
    instance: str
    lines: tuple[LogLine, ...]


@dataclass(frozen=True, slots=True)
class CollectError:
    """``FleetSink.error``: a collector failed by a bug. ``kind`` is the exception's type name."""

    node: str
    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class Tick:
    """The consumer computed its views here (recorded), or a poll interval passed (``synthetic``)."""

    synthetic: bool = False


@dataclass(frozen=True, slots=True)
class ActionEvent:
    """An action, an alert or a note: any JSON object, with its time."""

    event: Mapping[str, object]


Payload = NodeObservation | HostUpdate | LogBatch | CollectError | Tick | Finding | ActionEvent


@dataclass(frozen=True, slots=True)
class Record:
    """One record as read back. ``t`` is on the recording's clock (see ``RecordingReader``)."""

    id: int
    session: int
    t: float
    kind: Kind
    node: str
    payload: Payload


# --- JSON of the model's dataclasses ----------------------------------------------------------------

T = TypeVar("T")


def _build(cls: type[T], data: Mapping[str, Any]) -> T:
    """A flat dataclass from a JSON object: unknown keys ignored (a newer writer), missing keys left
    to the defaults."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in data.items() if k in names})


def _floats(values: Sequence[Any] | None) -> tuple[float, ...] | None:
    return None if values is None else tuple(float(v) for v in values)


def host_sample_to_json(sample: HostSample) -> dict[str, Any]:
    """A ``HostSample`` as a JSON-ready dict (``host_sample_from_json`` reads it back equal)."""
    return {
        "remote_epoch": sample.remote_epoch,
        "memory": asdict(sample.memory),
        "pressure": None if sample.pressure is None else asdict(sample.pressure),
        "pressure_problem": sample.pressure_problem,
        "shm": None if sample.shm is None else [asdict(e) for e in sample.shm],
        "processes": None if sample.processes is None else [asdict(p) for p in sample.processes],
        "load": None if sample.load is None else list(sample.load),
        "uptime_s": sample.uptime_s,
        "services": None if sample.services is None else {k: asdict(v) for k, v in sample.services.items()},
        "problems": list(sample.problems),
        "seq": sample.seq,
        "refreshed": dict(sample.refreshed),
        "section_problems": dict(sample.section_problems),
    }


def host_sample_from_json(data: Mapping[str, Any]) -> HostSample:
    load = _floats(data.get("load"))
    services = data.get("services")
    shm = data.get("shm")
    processes = data.get("processes")
    pressure = data.get("pressure")
    return HostSample(
        remote_epoch=float(data["remote_epoch"]),
        memory=_build(HostMemory, data["memory"]),
        pressure=None if pressure is None else _build(MemoryPressure, pressure),
        pressure_problem=data.get("pressure_problem"),
        shm=None if shm is None else tuple(_build(ShmEntry, e) for e in shm),
        processes=None if processes is None else tuple(_build(HostProcess, p) for p in processes),
        load=None if load is None else (load[0], load[1], load[2]),
        uptime_s=data.get("uptime_s"),
        services=None if services is None else {k: _build(ServiceState, v) for k, v in services.items()},
        problems=tuple(data.get("problems", ())),
        seq=int(data.get("seq", 0)),
        refreshed={k: float(v) for k, v in data.get("refreshed", {}).items()},
        section_problems=dict(data.get("section_problems", {})),
    )


def host_update_to_json(update: HostUpdate) -> dict[str, Any]:
    """Without ``t``: the record's time is the update's."""
    return {
        "sample": None if update.sample is None else host_sample_to_json(update.sample),
        "problem": update.problem,
        **({"connection_lost": True} if update.connection_lost else {}),
    }


def host_update_from_json(node: str, t: float, data: Mapping[str, Any]) -> HostUpdate:
    sample = data.get("sample")
    return HostUpdate(
        node=node,
        t=t,
        sample=None if sample is None else host_sample_from_json(sample),
        problem=data.get("problem"),
        connection_lost=bool(data.get("connection_lost", False)),
    )


def log_line_to_json(line: LogLine) -> list[Any]:
    stamp = None if line.timestamp is None else line.timestamp.isoformat()
    return [line.seq, stamp, line.text, 1] if line.gap else [line.seq, stamp, line.text]


def log_line_from_json(data: Sequence[Any]) -> LogLine:
    stamp = None if data[1] is None else datetime.fromisoformat(data[1])
    return LogLine(int(data[0]), stamp, str(data[2]), len(data) > 3 and bool(data[3]))


def finding_to_json(finding: Finding) -> dict[str, Any]:
    return {
        "id": finding.id,
        "node": finding.node,
        "instance": finding.instance,
        "severity": finding.severity.value,
        "title": finding.title,
        "evidence": list(finding.evidence),
        "explanation": finding.explanation,
        "fix": finding.fix,
        "action": finding.action,
        "opened_at": finding.opened_at,
        "last_seen": finding.last_seen,
        "cleared_at": finding.cleared_at,
        "lines": [log_line_to_json(line) for line in finding.lines],
    }


def finding_from_json(data: Mapping[str, Any]) -> Finding:
    cleared = data.get("cleared_at")
    return Finding(
        id=str(data["id"]),
        node=str(data["node"]),
        instance=data.get("instance"),
        severity=Severity(data["severity"]),
        title=str(data.get("title", "")),
        evidence=tuple(data.get("evidence", ())),
        explanation=str(data.get("explanation", "")),
        fix=str(data.get("fix", "")),
        action=data.get("action"),
        opened_at=float(data["opened_at"]),
        last_seen=float(data["last_seen"]),
        cleared_at=None if cleared is None else float(cleared),
        lines=tuple(log_line_from_json(line) for line in data.get("lines", ())),
    )


def _shift_finding(finding: Finding, offset: float) -> Finding:
    cleared = finding.cleared_at
    return replace(
        finding,
        opened_at=finding.opened_at + offset,
        last_seen=finding.last_seen + offset,
        cleared_at=None if cleared is None else cleared + offset,
    )


def fleet_json(fleet: FleetSpec) -> str:
    """The fleet spec as JSON for the recording's header, without the API keys the loader filled in."""
    data = fleet.model_dump(mode="json")
    for node in data.get("nodes", ()):
        for vllm in node.get("vllm", ()):
            vllm["api_key"] = None
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=str).encode()


# --- line deltas ------------------------------------------------------------------------------------


def _key(line: bytes) -> bytes:
    """What identifies a line across scrapes: the series (text before the last space), or the line."""
    head, sep, _ = line.rpartition(b" ")
    return head if sep else line


def line_index(lines: Sequence[bytes]) -> dict[bytes, int]:
    """Each line's key to its first position (``encode_lines`` looks ahead with it)."""
    index: dict[bytes, int] = {}
    for i, line in enumerate(lines):
        index.setdefault(_key(line), i)
    return index


def encode_lines(previous: Sequence[bytes], index: Mapping[bytes, int], new: Sequence[bytes]) -> bytes:
    """``new`` as operations on ``previous``, one a line: ``=N`` copy N lines, ``-N`` skip N lines,
    ``~V`` the next line with its value (after the last space) replaced by V, ``+L`` the line L."""
    ops: list[bytes] = []
    copies = 0
    j = 0
    count = len(previous)
    for line in new:
        if j < count and line == previous[j]:
            copies += 1
            j += 1
            continue
        key = _key(line)
        found = index.get(key)
        if j < count and _key(previous[j]) != key and found is not None and found > j:
            if copies:
                ops.append(b"=%d" % copies)
                copies = 0
            ops.append(b"-%d" % (found - j))
            j = found
            if line == previous[j]:
                copies = 1
                j += 1
                continue
        if copies:
            ops.append(b"=%d" % copies)
            copies = 0
        if j < count and key != line and _key(previous[j]) == key:
            ops.append(b"~" + line[len(key) + 1 :])
            j += 1
        else:
            ops.append(b"+" + line)
    if copies:
        ops.append(b"=%d" % copies)
    return b"\n".join(ops)


def decode_lines(previous: Sequence[bytes], delta: bytes) -> list[bytes]:
    out: list[bytes] = []
    j = 0
    count = len(previous)
    for op in delta.split(b"\n"):
        code, rest = op[:1], op[1:]
        if code == b"=":
            n = int(rest)
            if j + n > count:
                raise DamagedRecord("line delta copies past the previous body")
            out.extend(previous[j : j + n])
            j += n
        elif code == b"-":
            j += int(rest)
        elif code == b"~":
            if j >= count:
                raise DamagedRecord("line delta replaces past the previous body")
            head, sep, _ = previous[j].rpartition(b" ")
            if not sep:
                raise DamagedRecord("line delta replaces a value in a line without one")
            out.append(head + b" " + rest)
            j += 1
        elif code == b"+":
            out.append(rest)
        else:
            raise DamagedRecord(f"unknown line delta operation {code!r}")
    return out


# --- payloads and blobs -----------------------------------------------------------------------------


def _pack(parts: Sequence[tuple[int, bytes]]) -> bytes:
    return b"".join(_PART.pack(codec, len(data)) + data for codec, data in parts)


def _unpack(payload: bytes) -> list[tuple[int, bytes]]:
    parts: list[tuple[int, bytes]] = []
    at = 0
    while at < len(payload):
        if at + _PART.size > len(payload):
            raise DamagedRecord("payload ends inside a part header")
        codec, size = _PART.unpack_from(payload, at)
        at += _PART.size
        if at + size > len(payload):
            raise DamagedRecord("payload ends inside a part")
        parts.append((codec, payload[at : at + size]))
        at += size
    return parts


@dataclass(slots=True)
class _Body:
    lines: list[bytes]
    index: dict[bytes, int] | None = None  # the writer's lookahead; the reader does not need it


@dataclass(slots=True)
class _Stream:
    payload: bytes | None = None
    bodies: dict[str, _Body] | None = None


_STREAM_PREFIX = {Kind.OBSERVATION: "o:", Kind.HOST: "h:", Kind.LOG: "l:"}


def _stream_key(kind: Kind, node: str) -> str | None:
    """The chain a record continues: one per node and kind (a node's instances share its log chain)."""
    prefix = _STREAM_PREFIX.get(kind)
    return None if prefix is None else prefix + node


def _compress(payload: bytes, dictionary: bytes | None) -> bytes:
    if len(payload) < 64:
        return bytes((RAW,)) + payload
    if dictionary:
        packer = zlib.compressobj(ZLIB_LEVEL, zdict=dictionary)
        return bytes((Z_CHAINED,)) + packer.compress(payload) + packer.flush()
    return bytes((Z_PLAIN,)) + zlib.compress(payload, ZLIB_LEVEL)


def _decompress(blob: bytes, dictionary: bytes | None) -> bytes:
    if not blob:
        raise DamagedRecord("empty blob")
    flag, data = blob[0], blob[1:]
    if flag == RAW:
        return data
    if flag == Z_PLAIN:
        return zlib.decompress(data)
    if flag == Z_CHAINED:
        if dictionary is None:
            raise DamagedRecord("a chained record without the record before it")
        unpacker = zlib.decompressobj(zdict=dictionary)
        out = unpacker.decompress(data) + unpacker.flush()
        if not unpacker.eof:
            raise DamagedRecord("compressed data ends early")
        return out
    raise DamagedRecord(f"unknown blob flag {flag}")


def _result_json(result: HttpResult | None, slot: str, bodies: list[tuple[str, bytes]]) -> dict[str, Any] | None:
    if result is None:
        return None
    out: dict[str, Any] = {"url": result.url, "kind": result.kind.value}
    if result.status is not None:
        out["status"] = result.status
    if result.elapsed_s:
        out["elapsed_s"] = result.elapsed_s
    if result.error is not None:
        out["error"] = result.error
    if result.content_type is not None:
        out["content_type"] = result.content_type
    if result.body:
        out["body"] = len(bodies) + 1  # its part's position in the payload
        bodies.append((slot, result.body))
    return out


def _result_from_json(data: Mapping[str, Any] | None, bodies: Sequence[bytes]) -> HttpResult | None:
    if data is None:
        return None
    at = data.get("body")
    return HttpResult(
        url=data["url"],
        kind=FetchKind(data["kind"]),
        status=data.get("status"),
        body=b"" if at is None else bodies[at],
        elapsed_s=float(data.get("elapsed_s", 0.0)),
        error=data.get("error"),
        content_type=data.get("content_type"),
    )


def _observation_parts(obs: NodeObservation) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    bodies: list[tuple[str, bytes]] = []
    vllm = []
    for v in obs.vllm:
        vllm.append(
            {
                "name": v.name,
                **{
                    part: _result_json(getattr(v, part), f"v/{v.name}/{part}", bodies)
                    for part in ("health", "metrics", "version", "models")
                },
            }
        )
    meta = {
        "wall": obs.wall,
        "vllm": vllm,
        "gpu_exporter": _result_json(obs.gpu_exporter, "gpu", bodies),
        "node_exporter": _result_json(obs.node_exporter, "node", bodies),
        "services": [[name, _result_json(r, f"s/{name}", bodies)] for name, r in obs.services],
        "slots": [slot for slot, _ in bodies],
    }
    return meta, bodies


def _observation_from_parts(node: str, t: float, meta: Mapping[str, Any], bodies: Sequence[bytes]) -> NodeObservation:
    vllm = tuple(
        VllmObservation(
            name=v["name"],
            health=_result_from_json(v.get("health"), bodies),
            metrics=_result_from_json(v.get("metrics"), bodies),
            version=_result_from_json(v.get("version"), bodies),
            models=_result_from_json(v.get("models"), bodies),
        )
        for v in meta["vllm"]
    )
    services = []
    for name, data in meta.get("services", ()):
        result = _result_from_json(data, bodies)
        if result is not None:
            services.append((str(name), result))
    return NodeObservation(
        node=node,
        t=t,
        wall=float(meta["wall"]),
        vllm=vllm,
        gpu_exporter=_result_from_json(meta.get("gpu_exporter"), bodies),
        node_exporter=_result_from_json(meta.get("node_exporter"), bodies),
        services=tuple(services),
    )


@dataclass(frozen=True, slots=True)
class EncodedRecord:
    """A record ready for the file. ``epoch`` is the encoder's own count (the store numbers them)."""

    epoch: int
    t: float
    kind: Kind
    node: str
    data: bytes


class Encoder:
    """Turns records into blobs, each stream chained to its previous record within an epoch."""

    def __init__(self, keyframe_s: float = KEYFRAME_S, max_epoch_bytes: int = DEFAULT_MAX_EPOCH_BYTES) -> None:
        self.keyframe_s = keyframe_s
        self.max_epoch_bytes = max_epoch_bytes
        self.epoch = 0
        self._epoch_t: float | None = None
        self._epoch_bytes = 0
        self._streams: dict[str, _Stream] = {}

    def new_epoch(self, t: float) -> None:
        """Every stream starts afresh from the next record."""
        self.epoch += 1
        self._epoch_t = t
        self._epoch_bytes = 0
        self._streams = {}

    def encode(self, kind: Kind, t: float, node: str, payload: Payload) -> EncodedRecord:
        if (
            self._epoch_t is None
            or t - self._epoch_t >= self.keyframe_s
            or t < self._epoch_t
            or self._epoch_bytes >= self.max_epoch_bytes
        ):
            self.new_epoch(t)
        key = _stream_key(kind, node)
        stream = None if key is None else self._streams.setdefault(key, _Stream())
        plain = self._payload(kind, payload, stream)
        data = _compress(plain, stream.payload if stream is not None else None)
        if stream is not None:
            stream.payload = plain
        self._epoch_bytes += len(data)
        return EncodedRecord(self.epoch, t, kind, node, data)

    def _payload(self, kind: Kind, payload: Payload, stream: _Stream | None) -> bytes:
        if isinstance(payload, NodeObservation):
            meta, bodies = _observation_parts(payload)
            parts: list[tuple[int, bytes]] = [(LITERAL, _dumps(meta))]
            assert stream is not None
            previous = stream.bodies or {}
            current: dict[str, _Body] = {}
            for slot, body in bodies:
                lines = body.split(b"\n")
                before = previous.get(slot)
                if before is None:
                    parts.append((LITERAL, body))
                else:
                    if before.index is None:
                        before.index = line_index(before.lines)
                    parts.append((LINES, encode_lines(before.lines, before.index, lines)))
                current[slot] = _Body(lines)
            # A slot missing from this poll (/version is asked now and then) keeps its last body.
            stream.bodies = {**previous, **current}
            return _pack(parts)
        return _pack([(LITERAL, _dumps(_json_of(kind, payload)))])


def _json_of(kind: Kind, payload: Payload) -> object:
    if isinstance(payload, HostUpdate):
        return host_update_to_json(payload)
    if isinstance(payload, LogBatch):
        return {"instance": payload.instance, "lines": [log_line_to_json(line) for line in payload.lines]}
    if isinstance(payload, CollectError):
        return {"kind": payload.kind, "message": payload.message}
    if isinstance(payload, Tick):
        return {}
    if isinstance(payload, Finding):
        return finding_to_json(payload)
    if isinstance(payload, ActionEvent):
        return dict(payload.event)
    raise TypeError(f"cannot record a {kind.name} of type {type(payload).__name__}")


class Decoder:
    """The reverse of ``Encoder``; ``new_epoch()`` at every epoch change, in the writer's order."""

    def __init__(self) -> None:
        self._streams: dict[str, _Stream] = {}

    def new_epoch(self) -> None:
        self._streams = {}

    def decode(self, kind: Kind, t: float, node: str, data: bytes) -> Payload:
        key = _stream_key(kind, node)
        stream = None if key is None else self._streams.setdefault(key, _Stream())
        plain = _decompress(data, stream.payload if stream is not None else None)
        if stream is not None:
            stream.payload = plain
        parts = _unpack(plain)
        if not parts or parts[0][0] != LITERAL:
            raise DamagedRecord("a payload without its JSON part")
        meta = json.loads(parts[0][1])
        if kind is Kind.OBSERVATION:
            assert stream is not None
            return self._observation(stream, node, t, meta, parts[1:])
        return _payload_of(kind, node, t, meta)

    @staticmethod
    def _observation(
        stream: _Stream, node: str, t: float, meta: Mapping[str, Any], parts: Sequence[tuple[int, bytes]]
    ) -> NodeObservation:
        slots = meta.get("slots", [])
        if len(slots) != len(parts):
            raise DamagedRecord("an observation whose bodies do not match its slots")
        previous = stream.bodies or {}
        current: dict[str, _Body] = {}
        bodies: list[bytes] = [b""]
        for slot, (codec, data) in zip(slots, parts, strict=True):
            if codec == LITERAL:
                lines = data.split(b"\n")
                body = data
            elif codec == LINES:
                before = previous.get(slot)
                if before is None:
                    raise DamagedRecord(f"a line delta of {slot} without the body before it")
                lines = decode_lines(before.lines, data)
                body = b"\n".join(lines)
            else:
                raise DamagedRecord(f"unknown part codec {codec}")
            current[slot] = _Body(lines)
            bodies.append(body)
        stream.bodies = {**previous, **current}
        return _observation_from_parts(node, t, meta, bodies)


_ERROR_TYPES: dict[str, type[Exception]] = {}


class RecordedError(Exception):
    """An error a collector reported while recording; its class is named after the original's."""


def recorded_error(kind: str, message: str) -> Exception:
    """An exception that prints as the recorded one did (``type(exc).__name__``, ``str(exc)``)."""
    cls = _ERROR_TYPES.get(kind)
    if cls is None:
        name = kind if kind.isidentifier() else "RecordedError"
        cls = _ERROR_TYPES[kind] = type(name, (RecordedError,), {})
    return cls(message)


def _payload_of(kind: Kind, node: str, t: float, meta: Any) -> Payload:
    if kind is Kind.HOST:
        return host_update_from_json(node, t, meta)
    if kind is Kind.LOG:
        return LogBatch(node, str(meta["instance"]), tuple(log_line_from_json(line) for line in meta["lines"]))
    if kind is Kind.ERROR:
        return CollectError(node, str(meta.get("kind", "Exception")), str(meta.get("message", "")))
    if kind is Kind.TICK:
        return Tick()
    if kind is Kind.FINDING:
        return finding_from_json(meta)
    if kind is Kind.ACTION:
        if not isinstance(meta, dict):
            raise DamagedRecord("an action that is not a JSON object")
        return ActionEvent(meta)
    raise DamagedRecord(f"unknown record kind {kind}")


# --- the file ---------------------------------------------------------------------------------------


def _connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    if read_only:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    return sqlite3.connect(path, check_same_thread=False, isolation_level=None)


def _check_header(conn: sqlite3.Connection, path: Path) -> None:
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        meta = dict(conn.execute("SELECT key, value FROM meta")) if "meta" in tables else {}
    except sqlite3.DatabaseError as exc:
        raise RecordingError(f"{path}: not a sparktui recording ({exc})") from None
    if meta.get("format") != FORMAT or not {"sessions", "epochs", "records"} <= tables:
        raise RecordingError(f"{path}: not a sparktui recording (no sparktui header)")
    try:
        version = int(meta.get("version", ""))
    except ValueError:
        raise RecordingError(f"{path}: not a sparktui recording (format version {meta.get('version')!r})") from None
    if version > FORMAT_VERSION:
        raise RecordingError(
            f"{path}: written by a newer sparktui (format {version}); this one reads format {FORMAT_VERSION}"
        )


class RecordingStore:
    """Writes records to a recording file; one instance per recorder run (a *session*).

    Not thread-safe: one thread (the recorder's) calls every method after ``__init__``.
    ``max_age_s`` and ``max_bytes`` bound the file (None: no bound): the oldest epochs go first.
    """

    def __init__(
        self,
        path: Path,
        fleet: FleetSpec,
        *,
        t0: float,
        wall0: float,
        config_text: str | None = None,
        max_age_s: float | None = DEFAULT_MAX_AGE_S,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> None:
        self.path = path
        self.t0 = t0
        self.wall0 = wall0
        self.max_age_s = max_age_s
        self.max_bytes = max_bytes
        existed = path.exists() and path.stat().st_size > 0
        try:
            self.conn = _connect(path, read_only=False)
        except sqlite3.Error as exc:
            raise RecordingError(f"{path}: cannot open for recording ({exc})") from None
        try:
            if existed:
                _check_header(self.conn, path)
            else:
                # Before the first table: lets retention give pages back without a full VACUUM.
                self.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self.page_size = int(self.conn.execute("PRAGMA page_size").fetchone()[0])
            if max_bytes is not None:
                # A WAL of at most a quarter of the limit between checkpoints.
                pages = max(16, min(1000, max_bytes // self.page_size // 4))
                self.conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")
                self.conn.execute(f"PRAGMA journal_size_limit = {max(65536, max_bytes // 4)}")
            if not existed:
                self.conn.executescript(SCHEMA)
            with self._transaction():
                if not existed:
                    self.conn.executemany(
                        "INSERT INTO meta(key, value) VALUES (?, ?)",
                        [
                            ("format", FORMAT),
                            ("version", str(FORMAT_VERSION)),
                            ("created", datetime.fromtimestamp(wall0).astimezone().isoformat(timespec="seconds")),
                            ("writer", "sparktui"),
                        ],
                    )
                cursor = self.conn.execute(
                    "INSERT INTO sessions(t0, wall0, fleet, config) VALUES (?, ?, ?, ?)",
                    (t0, wall0, fleet_json(fleet), config_text),
                )
                self.session = int(cursor.lastrowid or 0)
            self._next_id = int(self.conn.execute("SELECT coalesce(max(id), 0) + 1 FROM records").fetchone()[0])
        except sqlite3.Error as exc:
            self.conn.close()
            raise RecordingError(f"{path}: cannot record ({exc})") from None
        except RecordingError:
            self.conn.close()
            raise
        self._epochs: dict[int, int] = {}  # the encoder's epoch -> the file's
        self._ticks = False
        self.bytes_written = 0
        self.records_written = 0

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def write(self, records: Sequence[EncodedRecord]) -> None:
        """Append records in one transaction."""
        if not records:
            return
        rows = []
        with self._transaction():
            for record in records:
                record_id = self._next_id
                self._next_id += 1
                epoch = self._epochs.get(record.epoch)
                if epoch is None:
                    cursor = self.conn.execute(
                        "INSERT INTO epochs(session, first_id, t, wall) VALUES (?, ?, ?, ?)",
                        (self.session, record_id, record.t, self.wall0 + record.t - self.t0),
                    )
                    epoch = self._epochs[record.epoch] = int(cursor.lastrowid or 0)
                if record.kind is Kind.TICK and not self._ticks:
                    self._ticks = True
                    self.conn.execute("UPDATE sessions SET ticks = 1 WHERE id = ?", (self.session,))
                rows.append((record_id, epoch, record.t, int(record.kind), record.node, record.data))
                self.bytes_written += len(record.data)
            self.conn.executemany("INSERT INTO records(id, epoch, t, kind, node, data) VALUES (?, ?, ?, ?, ?, ?)", rows)
        self.records_written += len(rows)

    def size(self) -> tuple[int, int]:
        """(bytes in use, bytes of the file) of the main database file."""
        pages = int(self.conn.execute("PRAGMA page_count").fetchone()[0])
        free = int(self.conn.execute("PRAGMA freelist_count").fetchone()[0])
        return (pages - free) * self.page_size, pages * self.page_size

    def enforce_retention(self, now_wall: float | None = None) -> int:
        """Delete the oldest epochs beyond the age and size limits (never the newest); returns how
        many went. Freed pages are reused by new records; the file shrinks (an incremental vacuum)
        only when it is more than twice the size limit, e.g. after the limit was lowered."""
        now_wall = time.time() if now_wall is None else now_wall
        epochs = self.conn.execute("SELECT id, first_id, wall FROM epochs ORDER BY id").fetchall()
        deleted = 0
        while len(epochs) > 1:
            _, _, next_wall = epochs[1]
            too_old = self.max_age_s is not None and next_wall < now_wall - self.max_age_s
            too_big = self.max_bytes is not None and self.size()[0] > self.max_bytes
            if not (too_old or too_big):
                break
            epoch_id, _, _ = epochs.pop(0)
            with self._transaction():
                self.conn.execute("DELETE FROM records WHERE id < ?", (epochs[0][1],))
                self.conn.execute("DELETE FROM epochs WHERE id = ?", (epoch_id,))
                self.conn.execute(
                    "DELETE FROM sessions WHERE id <> ? AND id NOT IN (SELECT session FROM epochs)", (self.session,)
                )
            deleted += 1
        if deleted and self.max_bytes is not None:
            used, total = self.size()
            if total > 2 * self.max_bytes and total > 2 * used:
                self.conn.execute("PRAGMA incremental_vacuum")
        return deleted

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()


@dataclass(frozen=True, slots=True)
class Session:
    id: int
    t0: float
    wall0: float
    fleet: str
    config: str | None
    ticks: bool
    offset: float  # added to the session's times to put them on the recording's clock


@dataclass(frozen=True, slots=True)
class Epoch:
    id: int
    session: int
    first_id: int
    t: float  # on the recording's clock


def wall_text(wall: float) -> str:
    return datetime.fromtimestamp(wall).strftime("%Y-%m-%d %H:%M:%S")


class RecordingReader:
    """Reads a recording. Times are put on one clock, the *recording's clock*: the first session's
    own (so a one-run recording replays with exactly the times it was recorded with), later sessions
    shifted by their wall clock's distance from the first.

    ``records()`` yields records in the order they were written, stops at the first damage and sets
    ``problem`` to one line that says where. The reader may be used from any one thread at a time.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise RecordingError(f"{self.path}: no such recording")
        try:
            self.conn = _connect(self.path, read_only=True)
        except sqlite3.Error as exc:
            raise RecordingError(f"{self.path}: cannot open ({exc})") from None
        try:
            try:
                _check_header(self.conn, self.path)
            except RecordingError:
                # A file cut short (a copy taken mid-write, a full disk) says it has more pages than it
                # holds, and SQLite refuses it whole; with writable_schema it reads the pages that are
                # there (the connection is read-only: nothing is written).
                self.conn.execute("PRAGMA writable_schema = ON")
                _check_header(self.conn, self.path)
            self.sessions = self._sessions()
            self.epochs = self._epochs()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise RecordingError(f"{self.path}: the recording's header is damaged ({exc})") from None
        except RecordingError:
            self.conn.close()
            raise
        if not self.sessions:
            self.conn.close()
            raise RecordingError(f"{self.path}: the recording has no session")
        last = self.sessions[max(self.sessions)]
        try:
            self.fleet = FleetSpec.model_validate_json(last.fleet)
        except ValidationError as exc:
            self.conn.close()
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise RecordingError(
                f"{self.path}: the fleet in the recording does not fit this sparktui ({where}: {first['msg']})"
            ) from None
        self.problem: str | None = None
        self.start_t = self.epochs[0].t if self.epochs else 0.0
        self.end_t = self._end_t()

    def _sessions(self) -> dict[int, Session]:
        rows = self.conn.execute("SELECT id, t0, wall0, fleet, config, ticks FROM sessions ORDER BY id").fetchall()
        sessions: dict[int, Session] = {}
        first: tuple[float, float] | None = None
        for sid, t0, wall0, fleet, config, ticks in rows:
            if first is None:
                first = (t0, wall0)
            offset = (wall0 - first[1]) - (t0 - first[0])
            sessions[sid] = Session(sid, t0, wall0, fleet, config, bool(ticks), offset)
        return sessions

    def _epochs(self) -> list[Epoch]:
        out = []
        for eid, session, first_id, t in self.conn.execute("SELECT id, session, first_id, t FROM epochs ORDER BY id"):
            found = self.sessions.get(session)
            if found is not None:
                out.append(Epoch(eid, session, first_id, t + found.offset))
        return out

    def _end_t(self) -> float:
        try:
            row = self.conn.execute("SELECT t, epoch FROM records ORDER BY id DESC LIMIT 1").fetchone()
        except sqlite3.DatabaseError:
            row = None  # a damaged tail: the reading finds out where, records() says so
        if row is None:
            return self.start_t
        session = self._session_of(int(row[1]))
        return float(row[0]) + (session.offset if session is not None else 0.0)

    def _session_of(self, epoch_id: int) -> Session | None:
        for epoch in self.epochs:
            if epoch.id == epoch_id:
                return self.sessions.get(epoch.session)
        return None

    @property
    def poll_interval_s(self) -> float:
        return self.fleet.poll_interval_s

    @property
    def gap_s(self) -> float:
        """A silence this long means nothing was recorded (the recorder was not running, or a black
        box kept only the minutes around incidents): a replay skips it and starts afresh after it."""
        return max(GAP_S, 3 * self.poll_interval_s)

    def wall_at(self, t: float) -> float:
        """The unix time of a moment on the recording's clock."""
        first = self.sessions[min(self.sessions)]
        return first.wall0 + (t - first.t0)

    def t_at(self, wall: float) -> float:
        first = self.sessions[min(self.sessions)]
        return first.t0 + (wall - first.wall0)

    def first_id_before(self, t: float) -> int:
        """The first record of the epoch that holds ``t`` (reading must start at an epoch)."""
        start = self.epochs[0].first_id if self.epochs else 0
        for epoch in self.epochs:
            if epoch.t > t:
                break
            start = epoch.first_id
        return start

    def records(self, from_id: int = 0, *, synthesize_ticks: bool = True) -> Iterator[Record]:
        """Records from ``from_id`` (the first of an epoch) on, in the order they were written.

        In a session that recorded no ticks, a synthetic ``Tick`` is yielded every poll interval
        between the records, so a consumer computes its views on the recording's clock either way.
        """
        decoder = Decoder()
        epoch_sessions = {e.id: self.sessions.get(e.session) for e in self.epochs}
        interval = self.poll_interval_s
        gap = self.gap_s
        epoch = -1
        session: Session | None = None
        next_tick: float | None = None
        last_t: float | None = None
        read = 0
        query = "SELECT id, epoch, t, kind, node, data FROM records WHERE id >= ? ORDER BY id"
        try:
            cursor = self.conn.execute(query, (from_id,))
            last_id = from_id - 1
            for record_id, record_epoch, t, kind_value, node, data in cursor:
                if not isinstance(record_id, int) or record_id <= last_id or not isinstance(data, bytes):
                    after = f"the row after record {last_id}" if last_id >= from_id else "its first row"
                    raise DamagedRecord(f"{after} is malformed")
                last_id = record_id
                if record_epoch != epoch:
                    epoch = record_epoch
                    decoder.new_epoch()
                    found = epoch_sessions.get(record_epoch)
                    if found is None:
                        raise DamagedRecord(f"record {record_id} belongs to no known epoch")
                    if session is None or found.id != session.id:
                        next_tick = None
                    session = found
                assert session is not None
                try:
                    kind = Kind(kind_value)
                except ValueError:
                    continue  # a kind a newer sparktui writes: not for us
                at = float(t) + session.offset
                try:
                    payload = decoder.decode(kind, float(t), str(node), bytes(data))
                except (DamagedRecord, zlib.error, ValueError, KeyError, TypeError, IndexError) as exc:
                    self._damaged(last_t, read, f"record {record_id} cannot be decoded ({exc})")
                    return
                if session.offset:
                    payload = _shift(payload, at, session.offset)
                if synthesize_ticks and not session.ticks and kind is not Kind.TICK:
                    if next_tick is None or at - next_tick > gap:
                        next_tick = at
                    while next_tick is not None and next_tick < at:
                        yield Record(0, session.id, next_tick, Kind.TICK, "", Tick(synthetic=True))
                        next_tick += interval
                read += 1
                last_t = at
                yield Record(int(record_id), session.id, at, kind, str(node), payload)
        except (sqlite3.DatabaseError, DamagedRecord) as exc:
            self._damaged(last_t, read, str(exc))

    def _damaged(self, last_t: float | None, read: int, why: str) -> None:
        where = f"after {wall_text(self.wall_at(last_t))}" if last_t is not None else "at its start"
        self.problem = f"{self.path.name} is damaged {where} ({read:,} records read): {why}; replayed up to there"

    def recorded_findings(self) -> list[Record]:
        """Every finding the recorder was told of, oldest first (reads the whole file)."""
        return [r for r in self.records(synthesize_ticks=False) if r.kind is Kind.FINDING]

    def close(self) -> None:
        self.conn.close()


def _shift(payload: Payload, t: float, offset: float) -> Payload:
    if isinstance(payload, NodeObservation | HostUpdate):
        return replace(payload, t=t)
    if isinstance(payload, Finding):
        return _shift_finding(payload, offset)
    return payload
