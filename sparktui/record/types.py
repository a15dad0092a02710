"""What a recording holds: the record kinds, the payloads that are not the model's own types, and the
errors of reading one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

from sparktui.diagnosis.engine import Finding
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import HostUpdate, NodeObservation


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
    """A record whose blob does not decode (or decodes to more than a record may hold): the reading
    stops before it. The message is one line, without the record's id (the reader adds it)."""


class RefusedRecord(DamagedRecord):
    """A record that decodes to fields that cannot be (a wrong type, a time or number out of range):
    the reading skips it and goes on. The message is one line naming the field."""


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
