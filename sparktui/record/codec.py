"""Records in and out of blobs: JSON of the model's dataclasses, payloads of parts, chained zlib.

A blob is one flag byte and a zlib stream (``Z_PLAIN``), a zlib stream compressed with the previous
payload of the same stream as its preset dictionary (``Z_CHAINED``), or the payload as is
(``RAW``). A *stream* is an observation of one node, a host sample of one node, or the log of one
vLLM instance; everything else stands alone. A payload is a list of *parts*, each a one-byte codec
and a four-byte length: part 0 is JSON (``LITERAL``); an observation's HTTP bodies follow, each
``LITERAL`` or ``LINES``: a line delta (``sparktui.record.delta``) against the same body in the
stream's previous record. Every ``KEYFRAME_S`` seconds (an *epoch*) every stream starts afresh.

A recording may come from another machine, so reading one trusts nothing in it: every inflation
stops at ``MAX_RECORD_BYTES``, JSON is bounded in size and depth, and every field is read through
``_Fields`` (its type checked, a number finite and in range, text made safe by ``safe_text``). A blob
that does not decode raises ``DamagedRecord``; a record whose fields cannot be, ``RefusedRecord``.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any, TypeVar

from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import MAX_EVIDENCE_CHARS, Finding
from sparktui.model.host import CpuFrequency, HostProcess, HostSample, ServiceState, ShmEntry
from sparktui.model.logbuffer import LogLine
from sparktui.model.memory import HostMemory, MemoryPressure
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.model.safe_text import DEFAULT_LIMIT, LABEL_LIMIT, LOG_LINE_LIMIT, safe_text
from sparktui.model.specs import REDACTED_URL, FleetSpec
from sparktui.record.delta import decode_lines, encode_lines, line_index
from sparktui.record.types import (
    ActionEvent,
    CollectError,
    DamagedRecord,
    Kind,
    LogBatch,
    Payload,
    RefusedRecord,
    Tick,
)

KEYFRAME_S = 300.0  # a new epoch (every stream starts afresh) this often
DEFAULT_MAX_EPOCH_BYTES = 8 * 1024 * 1024
ZLIB_LEVEL = 6

RAW, Z_PLAIN, Z_CHAINED = 0, 1, 2  # blob flags
LITERAL, LINES = 0, 1  # part codecs
_PART = struct.Struct(">BI")

# What reading one record may take (a recording is untrusted input; docs/record.md lists these).
MiB = 1024 * 1024
MAX_RECORD_BYTES = 32 * MiB  # a payload, inflated; and the HTTP bodies of one record, rebuilt
MAX_RECORD_LINES = 1_000_000  # lines of one record's bodies (the reader keeps each as an object)
MAX_HELD_BYTES = 512 * MiB  # what the reader keeps of every stream's last payload and bodies, at once
LINE_COST = 48  # bytes a kept line costs beyond its text (a bytes object and its list slot)
MAX_JSON_BYTES = 8 * MiB  # a record's JSON part, and the fleet in a recording's header
MAX_JSON_DEPTH = 32  # nesting of arrays and objects
MAX_CLOCK_S = 1e10  # any time on a recorder's monotonic clock: centuries either side of its start
MAX_UNIX_TIME = 1e11  # a unix time (the year 5138): dates and clocks can still be formatted
MAX_NUMBER = 1e18  # any other number
MAX_INT = 2**63 - 1
MAX_FIELD_CHARS = 4096  # a text field that is not a name, a reason or a log line (a process's arguments)


# --- JSON of the model's dataclasses ----------------------------------------------------------------

T = TypeVar("T")


def _shown(value: object) -> str:
    """A value named in a refusal: short, and safe to print."""
    if isinstance(value, str):
        return repr(safe_text(value, 24))
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else safe_text(repr(value), 24)


def checked_text(value: object, where: str, limit: int = DEFAULT_LIMIT) -> str:
    """A string of a recording, made safe to show (``safe_text``: one line, at most ``limit``)."""
    if not isinstance(value, str):
        raise RefusedRecord(f"{where} is {_shown(value)}, not a string")
    return safe_text(value, limit)


def checked_number(value: object, where: str, low: float = -MAX_NUMBER, high: float = MAX_NUMBER) -> float:
    """A number of a recording: finite and within [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RefusedRecord(f"{where} is {_shown(value)}, not a number")
    number = float(value) if isinstance(value, float) or abs(value) <= MAX_INT else math.inf
    if not low <= number <= high:  # NaN too
        raise RefusedRecord(f"{where} is {_shown(value)}, outside {low:g} to {high:g}")
    return number


def checked_int(value: object, where: str, low: int = -MAX_INT, high: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RefusedRecord(f"{where} is {_shown(value)}, not an integer")
    if not low <= value <= high:
        raise RefusedRecord(f"{where} is {_shown(value)}, outside {low} to {high}")
    return value


def clock_time(value: object, where: str) -> float:
    """A time on a recorder's monotonic clock (a record's ``t``, a session's ``t0``, a finding's times)."""
    return checked_number(value, where, -MAX_CLOCK_S, MAX_CLOCK_S)


def unix_time(value: object, where: str) -> float:
    """A unix time (a session's ``wall0``, a poll's ``wall``, a process's start)."""
    return checked_number(value, where, 0.0, MAX_UNIX_TIME)


def _checked_flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise RefusedRecord(f"{where} is {_shown(value)}, not true or false")
    return value


_MISSING: Any = object()


class _Fields:
    """A JSON object of a record, read one checked field at a time (the one place a recording's fields
    are typed): each read raises ``RefusedRecord`` naming the field when it is missing, of the wrong
    type, or out of range. Unknown keys are ignored (a newer writer)."""

    __slots__ = ("data", "where")

    def __init__(self, data: object, where: str) -> None:
        if not isinstance(data, dict):
            raise RefusedRecord(f"{where} is {_shown(data)}, not an object")
        self.data: dict[str, Any] = data
        self.where = where

    def _at(self, key: str) -> str:
        return f"{self.where}.{key}"

    def _get(self, key: str, default: Any) -> Any:
        value = self.data.get(key, default)
        if value is _MISSING:
            raise RefusedRecord(f"{self._at(key)} is missing")
        return value

    def text(self, key: str, limit: int = DEFAULT_LIMIT, default: str = _MISSING) -> str:
        return checked_text(self._get(key, default), self._at(key), limit)

    def opt_text(self, key: str, limit: int = DEFAULT_LIMIT) -> str | None:
        value = self.data.get(key)
        return None if value is None else checked_text(value, self._at(key), limit)

    def raw_text(self, key: str) -> str | None:
        """A text the model parses (and makes safe) itself: its type checked, its lines kept."""
        value = self.data.get(key)
        if value is not None and not isinstance(value, str):
            raise RefusedRecord(f"{self._at(key)} is {_shown(value)}, not a string")
        return value

    def number(self, key: str, low: float = -MAX_NUMBER, high: float = MAX_NUMBER, default: float = _MISSING) -> float:
        return checked_number(self._get(key, default), self._at(key), low, high)

    def opt_number(self, key: str, low: float = -MAX_NUMBER, high: float = MAX_NUMBER) -> float | None:
        value = self.data.get(key)
        return None if value is None else checked_number(value, self._at(key), low, high)

    def integer(self, key: str, low: int = -MAX_INT, high: int = MAX_INT, default: int = _MISSING) -> int:
        return checked_int(self._get(key, default), self._at(key), low, high)

    def opt_integer(self, key: str, low: int = -MAX_INT, high: int = MAX_INT) -> int | None:
        value = self.data.get(key)
        return None if value is None else checked_int(value, self._at(key), low, high)

    def flag(self, key: str, default: bool = False) -> bool:
        return _checked_flag(self.data.get(key, default), self._at(key))

    def obj(self, key: str) -> _Fields:
        return _Fields(self._get(key, _MISSING), self._at(key))

    def opt_obj(self, key: str) -> _Fields | None:
        value = self.data.get(key)
        return None if value is None else _Fields(value, self._at(key))

    def items(self, key: str, default: Any = _MISSING) -> list[Any]:
        """A JSON array (``default`` when it is missing)."""
        value = self._get(key, default)
        if not isinstance(value, list | tuple):
            raise RefusedRecord(f"{self._at(key)} is {_shown(value)}, not a list")
        return list(value)

    def opt_items(self, key: str) -> list[Any] | None:
        return None if self.data.get(key) is None else self.items(key)

    def mapping(self, key: str, default: Any = _MISSING) -> dict[str, Any]:
        value = self._get(key, default)
        if not isinstance(value, dict):
            raise RefusedRecord(f"{self._at(key)} is {_shown(value)}, not an object")
        return value


# The field types of the flat dataclasses ``_build`` makes, and how each is read: a name ending in
# ``_epoch`` is a unix time (the model formats it as a date).
_SCALARS: dict[str, Callable[[object, str, str], object]] = {
    "str": lambda value, where, _name: checked_text(value, where, MAX_FIELD_CHARS),
    "int": lambda value, where, _name: checked_int(value, where),
    "float": lambda value, where, name: (
        unix_time(value, where) if name.endswith("_epoch") else checked_number(value, where)
    ),
    "bool": lambda value, where, _name: _checked_flag(value, where),
}


def _build(cls: type[T], data: _Fields) -> T:
    """A flat dataclass from a JSON object, each field read by its type (``_SCALARS``): unknown keys
    ignored (a newer writer), missing keys left to the defaults."""
    values: dict[str, object] = {}
    for field in fields(cls):  # type: ignore[arg-type]
        if field.name not in data.data:
            continue
        value = data.data[field.name]
        kind = str(field.type)
        if value is None and kind.endswith(" | None"):
            values[field.name] = None
            continue
        values[field.name] = _SCALARS[kind.removesuffix(" | None")](value, data._at(field.name), field.name)
    try:
        return cls(**values)
    except TypeError:
        raise RefusedRecord(f"{data.where} lacks a field of {cls.__name__}") from None


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
        **({"cpu_freq": asdict(sample.cpu_freq)} if sample.cpu_freq is not None else {}),
    }


def host_sample_from_json(data: object, where: str = "sample") -> HostSample:
    """The reverse of ``host_sample_to_json``; ``RefusedRecord`` names a field that cannot be."""
    f = _Fields(data, where)
    load = f.opt_items("load")
    if load is not None and len(load) != 3:
        raise RefusedRecord(f"{where}.load has {len(load)} values, not 3")
    services = f.opt_obj("services")
    shm = f.opt_items("shm")
    processes = f.opt_items("processes")
    pressure = f.opt_obj("pressure")
    cpu_freq = f.opt_obj("cpu_freq")
    return HostSample(
        remote_epoch=unix_time(f.data.get("remote_epoch"), f"{where}.remote_epoch"),
        memory=_build(HostMemory, f.obj("memory")),
        pressure=None if pressure is None else _build(MemoryPressure, pressure),
        pressure_problem=f.opt_text("pressure_problem"),
        shm=None if shm is None else tuple(_build(ShmEntry, _Fields(e, f"{where}.shm[]")) for e in shm),
        processes=None
        if processes is None
        else tuple(_build(HostProcess, _Fields(p, f"{where}.processes[]")) for p in processes),
        load=None if load is None else _load(load, f"{where}.load[]"),
        uptime_s=f.opt_number("uptime_s", 0.0),
        services=None if services is None else _services(services),
        problems=tuple(checked_text(p, f"{where}.problems[]") for p in f.items("problems", ())),
        seq=f.integer("seq", 0, default=0),
        refreshed={
            checked_text(k, f"{where}.refreshed key", LABEL_LIMIT): checked_number(v, f"{where}.refreshed[]")
            for k, v in f.mapping("refreshed", {}).items()
        },
        section_problems={
            checked_text(k, f"{where}.section_problems key", LABEL_LIMIT): checked_text(v, f"{where}.section_problems")
            for k, v in f.mapping("section_problems", {}).items()
        },
        cpu_freq=None if cpu_freq is None else _build(CpuFrequency, cpu_freq),
    )


def _services(services: _Fields) -> dict[str, ServiceState]:
    return {
        checked_text(name, f"{services.where} key", LABEL_LIMIT): _build(ServiceState, _Fields(state, services.where))
        for name, state in services.data.items()
    }


def _load(values: list[Any], where: str) -> tuple[float, float, float]:
    one, five, fifteen = (checked_number(v, where, 0.0) for v in values)
    return one, five, fifteen


def host_update_to_json(update: HostUpdate) -> dict[str, Any]:
    """Without ``t``: the record's time is the update's."""
    return {
        "sample": None if update.sample is None else host_sample_to_json(update.sample),
        "problem": update.problem,
        **({"connection_lost": True} if update.connection_lost else {}),
        **({"nvidia_smi": update.nvidia_smi} if update.nvidia_smi is not None else {}),
        **({"fabric": update.fabric} if update.fabric is not None else {}),
    }


def host_update_from_json(node: str, t: float, data: object) -> HostUpdate:
    f = _Fields(data, "host")
    sample = f.data.get("sample")
    return HostUpdate(
        node=node,
        t=t,
        sample=None if sample is None else host_sample_from_json(sample, "host.sample"),
        problem=f.opt_text("problem"),
        connection_lost=f.flag("connection_lost"),
        # The model parses these answers (and makes what it shows of them safe) as it does live.
        nvidia_smi=f.raw_text("nvidia_smi"),
        fabric=f.raw_text("fabric"),
    )


def log_line_to_json(line: LogLine) -> list[Any]:
    stamp = None if line.timestamp is None else line.timestamp.isoformat()
    return [line.seq, stamp, line.text, 1] if line.gap else [line.seq, stamp, line.text]


def log_line_from_json(data: object, where: str = "line") -> LogLine:
    """``[seq, ISO time or null, text]`` and a 1 after a gap marker; the text made safe as the log
    sources make it (``safe_text``, up to ``LOG_LINE_LIMIT``)."""
    if not isinstance(data, list) or len(data) not in (3, 4):
        raise RefusedRecord(f"{where} is {_shown(data)}, not [seq, time, text]")
    stamp: datetime | None = None
    if data[1] is not None:
        text = checked_text(data[1], f"{where} time", 64)
        try:
            stamp = datetime.fromisoformat(text)
        except ValueError:
            raise RefusedRecord(f"{where} time is {_shown(text)}, not an ISO 8601 time") from None
    gap = len(data) > 3 and data[3] not in (0, False, None)
    return LogLine(checked_int(data[0], f"{where} seq", 0), stamp, checked_text(data[2], where, LOG_LINE_LIMIT), gap)


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


def finding_from_json(data: object) -> Finding:
    f = _Fields(data, "finding")
    severity = f.text("severity", LABEL_LIMIT)
    try:
        level = Severity(severity)
    except ValueError:
        raise RefusedRecord(f"finding.severity is {_shown(severity)}, not a severity") from None
    cleared = f.data.get("cleared_at")
    return Finding(
        id=f.text("id", LABEL_LIMIT),
        node=f.text("node", LABEL_LIMIT),
        instance=f.opt_text("instance", LABEL_LIMIT),
        severity=level,
        title=f.text("title", default=""),
        evidence=tuple(checked_text(e, "finding.evidence[]", MAX_EVIDENCE_CHARS) for e in f.items("evidence", ())),
        explanation=f.text("explanation", MAX_FIELD_CHARS, default=""),
        fix=f.text("fix", MAX_FIELD_CHARS, default=""),
        action=f.opt_text("action", LABEL_LIMIT),
        opened_at=clock_time(f.data.get("opened_at"), "finding.opened_at"),
        last_seen=clock_time(f.data.get("last_seen"), "finding.last_seen"),
        cleared_at=None if cleared is None else clock_time(cleared, "finding.cleared_at"),
        lines=tuple(log_line_from_json(line, "finding.lines[]") for line in f.items("lines", ())),
    )


def fleet_json(fleet: FleetSpec) -> str:
    """The fleet spec as JSON for the recording's header, without the API keys the loader filled in
    and with every notifier URL replaced by ``REDACTED_URL`` (a Slack or webhook URL is its secret)."""
    data = fleet.model_dump(mode="json")
    for node in data.get("nodes", ()):
        for vllm in node.get("vllm", ()):
            vllm["api_key"] = None
    return json.dumps(_notifier_urls_redacted(data), separators=(",", ":"), sort_keys=True)


def fleet_from_json(text: str | bytes) -> FleetSpec:
    """The fleet of a recording's header. A replay or an export sends no notification: a notifier's URL
    reads back as ``REDACTED_URL``, also from files that stored pydantic's ``**********`` for it.
    ``DamagedRecord`` when it is not JSON within ``load_json``'s bounds; pydantic's ``ValidationError``
    when it is not a fleet."""
    return FleetSpec.model_validate(_notifier_urls_redacted(load_json(text)))


def _notifier_urls_redacted(data: Any) -> Any:
    notifiers = data.get("notifiers") if isinstance(data, dict) else None
    for notifier in notifiers if isinstance(notifiers, list) else ():
        if isinstance(notifier, dict) and notifier.get("url") is not None:
            notifier["url"] = REDACTED_URL
    return data


def config_text_without_secrets(fleet: FleetSpec, text: str) -> str:
    """The config file's text with every notifier URL written in it replaced by ``REDACTED_URL``."""
    for notifier in fleet.notifiers:
        secret = notifier.url.get_secret_value() if notifier.url is not None else ""
        if secret:
            text = text.replace(secret, REDACTED_URL)
    return text


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=str).encode()


def load_json(text: str | bytes) -> Any:
    """JSON of a recording, at most ``MAX_JSON_BYTES`` and ``MAX_JSON_DEPTH`` deep; ``DamagedRecord``
    (one line) when it is not."""
    if len(text) > MAX_JSON_BYTES:
        raise DamagedRecord(f"its JSON is {len(text):,} bytes, more than the {MAX_JSON_BYTES // MiB} MiB allowed")
    try:
        value = json.loads(text)
    except RecursionError:
        raise DamagedRecord(f"its JSON is nested more than {MAX_JSON_DEPTH} deep") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer of thousands of digits
        raise DamagedRecord(f"its JSON does not parse ({safe_text(str(exc), 120)})") from None
    containers = [(value, 1)] if isinstance(value, dict | list) else []
    while containers:
        item, depth = containers.pop()
        if depth > MAX_JSON_DEPTH:
            raise DamagedRecord(f"its JSON is nested more than {MAX_JSON_DEPTH} deep")
        inner = item.values() if isinstance(item, dict) else item
        containers.extend((v, depth + 1) for v in inner if isinstance(v, dict | list))
    return value


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
    cost: int = 0  # what the reader's copy holds, in bytes (its text and ``LINE_COST`` a line)


@dataclass(slots=True)
class _Stream:
    payload: bytes | None = None
    bodies: dict[str, _Body] | None = None
    held: int = 0  # what the reader keeps of it, in bytes (``_held_bytes``)


def _held_bytes(stream: _Stream) -> int:
    """What the reader keeps of a stream: its last payload (the next one's dictionary) and bodies."""
    return len(stream.payload or b"") + sum(body.cost for body in (stream.bodies or {}).values())


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
    """The payload of a blob, inflated to at most ``MAX_RECORD_BYTES``: a blob that would inflate to
    more is refused when the inflater gets there, before more is held."""
    if not blob:
        raise DamagedRecord("empty blob")
    flag, data = blob[0], memoryview(blob)[1:]
    if flag == RAW:
        return bytes(data)
    if flag == Z_PLAIN:
        unpacker = zlib.decompressobj()
    elif flag == Z_CHAINED:
        if dictionary is None:
            raise DamagedRecord("a chained record without the record before it")
        unpacker = zlib.decompressobj(zdict=dictionary)
    else:
        raise DamagedRecord(f"unknown blob flag {flag}")
    try:
        out = unpacker.decompress(data, MAX_RECORD_BYTES + 1)
    except zlib.error as exc:
        raise DamagedRecord(f"its compressed data is corrupt ({exc})") from None
    if len(out) > MAX_RECORD_BYTES:
        raise DamagedRecord(f"it inflates to more than the {MAX_RECORD_BYTES // MiB} MiB a record may hold")
    if not unpacker.eof:
        raise DamagedRecord("compressed data ends early")
    return out


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
    if result.location is not None:
        out["location"] = result.location
    if result.body:
        out["body"] = len(bodies) + 1  # its part's position in the payload
        bodies.append((slot, result.body))
    return out


def _result_from_json(data: object, bodies: Sequence[bytes], where: str) -> HttpResult | None:
    if data is None:
        return None
    f = _Fields(data, where)
    kind = f.text("kind", LABEL_LIMIT)
    try:
        fetch = FetchKind(kind)
    except ValueError:
        raise RefusedRecord(f"{where}.kind is {_shown(kind)}, not a kind of answer") from None
    at = f.opt_integer("body", 1, len(bodies) - 1)
    return HttpResult(
        url=f.text("url", MAX_FIELD_CHARS),
        kind=fetch,
        status=f.opt_integer("status", 0, 999),
        body=b"" if at is None else bodies[at],
        elapsed_s=f.number("elapsed_s", 0.0, MAX_CLOCK_S, default=0.0),
        error=f.opt_text("error"),
        content_type=f.opt_text("content_type", LABEL_LIMIT),
        location=f.opt_text("location", LABEL_LIMIT),
    )


def _observation_parts(obs: NodeObservation) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    bodies: list[tuple[str, bytes]] = []
    vllm = []
    for v in obs.vllm:
        entry: dict[str, Any] = {
            "name": v.name,
            **{
                part: _result_json(getattr(v, part), f"v/{v.name}/{part}", bodies)
                for part in ("health", "metrics", "version", "models", "canary", "detail")
            },
        }
        if v.metrics_t is not None:  # kept as its lead on the poll's end, which replays re-time
            entry["metrics_before_s"] = obs.t - v.metrics_t
        if v.model_metrics is not None:
            entry["model_metrics"] = [
                [model, _result_json(r, f"v/{v.name}/m/{model}", bodies)] for model, r in v.model_metrics
            ]
        vllm.append(entry)
    meta = {
        "wall": obs.wall,
        "vllm": vllm,
        "gpu_exporter": _result_json(obs.gpu_exporter, "gpu", bodies),
        "node_exporter": _result_json(obs.node_exporter, "node", bodies),
        "services": [[name, _result_json(r, f"s/{name}", bodies)] for name, r in obs.services],
        "slots": [slot for slot, _ in bodies],
    }
    return meta, bodies


def _vllm_from_json(data: object, t: float, bodies: Sequence[bytes]) -> ServerObservation:
    v = _Fields(data, "observation.vllm[]")
    name = v.text("name", LABEL_LIMIT)
    before = v.opt_number("metrics_before_s", -MAX_CLOCK_S, MAX_CLOCK_S)

    def part(key: str) -> HttpResult | None:
        return _result_from_json(v.data.get(key), bodies, f"observation.vllm[{name}].{key}")

    per_model = v.opt_items("model_metrics")
    return ServerObservation(
        name=name,
        health=part("health"),
        metrics=part("metrics"),
        version=part("version"),
        models=part("models"),
        canary=part("canary"),
        detail=part("detail"),
        metrics_t=None if before is None else t - before,
        model_metrics=None if per_model is None else _named_results(per_model, bodies, f"observation.vllm[{name}]"),
    )


def _named_results(entries: list[Any], bodies: Sequence[bytes], where: str) -> tuple[tuple[str, HttpResult], ...]:
    """``[[name, answer], ...]`` (a node's side services, a router's models' ``/metrics``), each checked."""
    found = []
    for entry in entries:
        if not isinstance(entry, list) or len(entry) != 2:
            raise RefusedRecord(f"{where}[] is {_shown(entry)}, not [name, answer]")
        name = checked_text(entry[0], f"{where}[] name", LABEL_LIMIT)
        result = _result_from_json(entry[1], bodies, f"{where}[{name}]")
        if result is not None:
            found.append((name, result))
    return tuple(found)


def _observation_from_parts(node: str, t: float, meta: _Fields, bodies: Sequence[bytes]) -> NodeObservation:
    services = _named_results(meta.items("services", ()), bodies, "observation.services")
    return NodeObservation(
        node=node,
        t=t,
        wall=unix_time(meta.data.get("wall"), "observation.wall"),
        vllm=tuple(_vllm_from_json(v, t, bodies) for v in meta.items("vllm")),
        gpu_exporter=_result_from_json(meta.data.get("gpu_exporter"), bodies, "observation.gpu_exporter"),
        node_exporter=_result_from_json(meta.data.get("node_exporter"), bodies, "observation.node_exporter"),
        services=services,
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
    """The reverse of ``Encoder``; ``new_epoch()`` at every epoch change, in the writer's order.

    ``decode`` raises ``DamagedRecord`` when the blob cannot be decoded, or would take more than a
    record may (``MAX_RECORD_BYTES``, ``MAX_RECORD_LINES``, ``MAX_HELD_BYTES``): what follows in its
    stream cannot be decoded either. It raises ``RefusedRecord`` (a ``DamagedRecord``) when the blob
    decodes to fields that cannot be: the stream is kept, and the next record decodes.
    """

    def __init__(self) -> None:
        self._streams: dict[str, _Stream] = {}
        self._held = 0

    def new_epoch(self) -> None:
        self._streams = {}
        self._held = 0

    def decode(self, kind: Kind, t: object, node: object, data: bytes) -> Payload:
        if not isinstance(node, str) or not node.isprintable() or len(node) > LABEL_LIMIT:
            raise RefusedRecord(f"its node is {_shown(node)}, not a node's name")
        key = _stream_key(kind, node)
        stream = None if key is None else self._streams.setdefault(key, _Stream())
        plain = _decompress(data, stream.payload if stream is not None else None)
        parts = _unpack(plain)
        if not parts or parts[0][0] != LITERAL:
            raise DamagedRecord("a payload without its JSON part")
        bodies: list[bytes] = []
        if stream is not None:
            stream.payload = plain  # the next record's dictionary, whatever its JSON holds
        if kind is Kind.OBSERVATION:
            assert stream is not None
            meta = load_json(parts[0][1])  # its slots say which bodies the next record's deltas apply to
            bodies = self._bodies(stream, meta, parts[1:])
        if stream is not None:
            self._hold(stream)
        # The stream is up to date: a refusal from here on skips this record only.
        if kind is not Kind.OBSERVATION:
            try:
                meta = load_json(parts[0][1])
            except DamagedRecord as exc:
                raise RefusedRecord(str(exc)) from None
        at = clock_time(t, "its time")
        if kind is Kind.OBSERVATION:
            return _observation_from_parts(node, at, _Fields(meta, "observation"), bodies)
        return _payload_of(kind, node, at, meta)

    def _hold(self, stream: _Stream) -> None:
        held = _held_bytes(stream)
        self._held += held - stream.held
        stream.held = held
        if self._held > MAX_HELD_BYTES:
            raise DamagedRecord(
                f"its epoch's streams hold more than the {MAX_HELD_BYTES // MiB} MiB a reader keeps at once"
            )

    @staticmethod
    def _bodies(stream: _Stream, meta: object, parts: Sequence[tuple[int, bytes]]) -> list[bytes]:
        """The observation's HTTP bodies (``bodies[i]`` is its part ``i``), and the stream's bodies
        updated for the next record's line deltas."""
        slots = meta.get("slots", []) if isinstance(meta, dict) else None
        if not isinstance(slots, list) or not all(isinstance(slot, str) for slot in slots):
            raise DamagedRecord("an observation whose slots are not a list of names")
        if len(slots) != len(parts):
            raise DamagedRecord("an observation whose bodies do not match its slots")
        previous = stream.bodies or {}
        current: dict[str, _Body] = {}
        bodies: list[bytes] = [b""]
        size = lines_held = 0
        for slot, (codec, data) in zip(slots, parts, strict=True):
            if codec == LITERAL:
                if data.count(b"\n") >= MAX_RECORD_LINES - lines_held:
                    raise DamagedRecord(f"its bodies have more than the {MAX_RECORD_LINES:,} lines a record may")
                lines = data.split(b"\n")
                body = data
            elif codec == LINES:
                before = previous.get(slot)
                if before is None:
                    raise DamagedRecord(f"a line delta of {safe_text(slot, 40)} without the body before it")
                lines = decode_lines(before.lines, data, MAX_RECORD_LINES - lines_held)
                body = b"\n".join(lines)
            else:
                raise DamagedRecord(f"unknown part codec {codec}")
            size += len(body)
            lines_held += len(lines)
            if size > MAX_RECORD_BYTES:
                raise DamagedRecord(f"its bodies are more than the {MAX_RECORD_BYTES // MiB} MiB a record may hold")
            current[slot] = _Body(lines, cost=len(body) + LINE_COST * len(lines))
            bodies.append(body)
        stream.bodies = {**previous, **current}
        return bodies


def _action_value(value: object, where: str) -> object:
    """A value of an action's JSON, its text made safe (``load_json`` bounded its depth)."""
    if isinstance(value, str):
        return checked_text(value, where)
    if isinstance(value, dict):
        return {checked_text(k, f"{where} key", LABEL_LIMIT): _action_value(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_action_value(v, f"{where}[]") for v in value]
    if isinstance(value, float):
        return checked_number(value, where)
    return value  # an int, a bool or null


def _payload_of(kind: Kind, node: str, t: float, meta: object) -> Payload:
    if kind is Kind.HOST:
        return host_update_from_json(node, t, meta)
    if kind is Kind.LOG:
        f = _Fields(meta, "log")
        return LogBatch(
            node,
            f.text("instance", LABEL_LIMIT),
            tuple(log_line_from_json(line, "log.lines[]") for line in f.items("lines")),
        )
    if kind is Kind.ERROR:
        f = _Fields(meta, "error")
        return CollectError(node, f.text("kind", LABEL_LIMIT, default="Exception"), f.text("message", default=""))
    if kind is Kind.TICK:
        return Tick()
    if kind is Kind.FINDING:
        return finding_from_json(meta)
    if kind is Kind.ACTION:
        if not isinstance(meta, dict):
            raise RefusedRecord("an action that is not a JSON object")
        event = _action_value(meta, "action")
        assert isinstance(event, dict)
        return ActionEvent(event)
    raise DamagedRecord(f"unknown record kind {kind}")
