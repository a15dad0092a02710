"""Records in and out of blobs: JSON of the model's dataclasses, payloads of parts, chained zlib.

A blob is one flag byte and a zlib stream (``Z_PLAIN``), a zlib stream compressed with the previous
payload of the same stream as its preset dictionary (``Z_CHAINED``), or the payload as is
(``RAW``). A *stream* is an observation of one node, a host sample of one node, or the log of one
vLLM instance; everything else stands alone. A payload is a list of *parts*, each a one-byte codec
and a four-byte length: part 0 is JSON (``LITERAL``); an observation's HTTP bodies follow, each
``LITERAL`` or ``LINES``: a line delta (``sparktui.record.delta``) against the same body in the
stream's previous record. Every ``KEYFRAME_S`` seconds (an *epoch*) every stream starts afresh.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any, TypeVar

from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import Finding
from sparktui.model.host import CpuFrequency, HostProcess, HostSample, ServiceState, ShmEntry
from sparktui.model.logbuffer import LogLine
from sparktui.model.memory import HostMemory, MemoryPressure
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, VllmObservation
from sparktui.model.specs import REDACTED_URL, FleetSpec
from sparktui.record.delta import decode_lines, encode_lines, line_index
from sparktui.record.types import ActionEvent, CollectError, DamagedRecord, Kind, LogBatch, Payload, Tick

KEYFRAME_S = 300.0  # a new epoch (every stream starts afresh) this often
DEFAULT_MAX_EPOCH_BYTES = 8 * 1024 * 1024
ZLIB_LEVEL = 6

RAW, Z_PLAIN, Z_CHAINED = 0, 1, 2  # blob flags
LITERAL, LINES = 0, 1  # part codecs
_PART = struct.Struct(">BI")


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
        **({"cpu_freq": asdict(sample.cpu_freq)} if sample.cpu_freq is not None else {}),
    }


def host_sample_from_json(data: Mapping[str, Any]) -> HostSample:
    load = _floats(data.get("load"))
    services = data.get("services")
    shm = data.get("shm")
    processes = data.get("processes")
    pressure = data.get("pressure")
    cpu_freq = data.get("cpu_freq")
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
        cpu_freq=None if cpu_freq is None else _build(CpuFrequency, cpu_freq),
    )


def host_update_to_json(update: HostUpdate) -> dict[str, Any]:
    """Without ``t``: the record's time is the update's."""
    return {
        "sample": None if update.sample is None else host_sample_to_json(update.sample),
        "problem": update.problem,
        **({"connection_lost": True} if update.connection_lost else {}),
        **({"nvidia_smi": update.nvidia_smi} if update.nvidia_smi is not None else {}),
        **({"fabric": update.fabric} if update.fabric is not None else {}),
    }


def host_update_from_json(node: str, t: float, data: Mapping[str, Any]) -> HostUpdate:
    sample = data.get("sample")
    return HostUpdate(
        node=node,
        t=t,
        sample=None if sample is None else host_sample_from_json(sample),
        problem=data.get("problem"),
        connection_lost=bool(data.get("connection_lost", False)),
        nvidia_smi=data.get("nvidia_smi"),
        fabric=data.get("fabric"),
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


def fleet_json(fleet: FleetSpec) -> str:
    """The fleet spec as JSON for the recording's header, without the API keys the loader filled in
    and with every notifier URL replaced by ``REDACTED_URL`` (a Slack or webhook URL is its secret)."""
    data = fleet.model_dump(mode="json")
    for node in data.get("nodes", ()):
        for vllm in node.get("vllm", ()):
            vllm["api_key"] = None
    return json.dumps(_notifier_urls_redacted(data), separators=(",", ":"), sort_keys=True)


def fleet_from_json(text: str) -> FleetSpec:
    """The fleet of a recording's header. A replay or an export sends no notification: a notifier's URL
    reads back as ``REDACTED_URL``, also from files that stored pydantic's ``**********`` for it."""
    return FleetSpec.model_validate(_notifier_urls_redacted(json.loads(text)))


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
    if result.location is not None:
        out["location"] = result.location
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
        location=data.get("location"),
    )


def _observation_parts(obs: NodeObservation) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    bodies: list[tuple[str, bytes]] = []
    vllm = []
    for v in obs.vllm:
        entry: dict[str, Any] = {
            "name": v.name,
            **{
                part: _result_json(getattr(v, part), f"v/{v.name}/{part}", bodies)
                for part in ("health", "metrics", "version", "models", "canary")
            },
        }
        if v.metrics_t is not None:  # kept as its lead on the poll's end, which replays re-time
            entry["metrics_before_s"] = obs.t - v.metrics_t
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


def _observation_from_parts(node: str, t: float, meta: Mapping[str, Any], bodies: Sequence[bytes]) -> NodeObservation:
    vllm = tuple(
        VllmObservation(
            name=v["name"],
            health=_result_from_json(v.get("health"), bodies),
            metrics=_result_from_json(v.get("metrics"), bodies),
            version=_result_from_json(v.get("version"), bodies),
            models=_result_from_json(v.get("models"), bodies),
            canary=_result_from_json(v.get("canary"), bodies),
            metrics_t=t - float(v["metrics_before_s"]) if "metrics_before_s" in v else None,
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
