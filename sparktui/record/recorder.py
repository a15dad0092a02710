"""Recording what a consumer collects, to a file, without ever blocking its event loop.

``Recorder`` taps the monitor core and observes it (``Monitor.attach``), in the dashboard, ``watch``
and the black box alike. Each call only puts the record on a queue; a background thread encodes
(``store.Encoder``) and writes it (``store.RecordingStore``) in one transaction per second, and keeps
the file within its retention limits. ``tick``, ``finding``/``findings`` and ``action`` record what
the consumer derived and did, so a replay can evaluate at the same moments and show what happened.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sparktui.diagnosis.engine import Finding
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import HostUpdate, NodeObservation
from sparktui.model.specs import FleetSpec
from sparktui.record import DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES
from sparktui.record.codec import DEFAULT_MAX_EPOCH_BYTES, KEYFRAME_S, EncodedRecord, Encoder
from sparktui.record.store import RecordingStore
from sparktui.record.types import ActionEvent, CollectError, Kind, LogBatch, Payload, Tick

if TYPE_CHECKING:
    pass

Clock = Callable[[], float]
FLUSH_INTERVAL_S = 1.0
MAX_BATCH = 1000  # records per transaction
MAX_QUEUE = 50_000  # records waiting for the writer; beyond that new ones are dropped (and counted)
RETENTION_EVERY_S = 30.0


@dataclass(frozen=True, slots=True)
class _Item:
    kind: Kind
    t: float
    node: str
    payload: Payload


@dataclass(frozen=True, slots=True)
class _Trigger:
    """Keep what is around ``t`` (a black box's incident), in order with the records."""

    t: float
    reason: str


class _Flush:
    def __init__(self) -> None:
        self.done = threading.Event()


_CLOSE = object()


class FindingLog:
    """Which findings are open, so each is recorded when it opens, changes severity and clears, not
    at every evaluation."""

    def __init__(self) -> None:
        self.open: dict[tuple[str, str, str | None], Finding] = {}

    def changes(self, finding: Finding) -> bool:
        """Whether ``finding`` is news; remembers it."""
        key = finding.key
        before = self.open.get(key)
        if finding.cleared_at is not None:
            # News when it was open: one never seen open (cleared before the recording) is not.
            return self.open.pop(key, None) is not None
        self.open[key] = finding
        return before is None or before.severity != finding.severity or before.opened_at != finding.opened_at

    def cleared(self, node: str, active: Iterable[Finding], now: float) -> list[Finding]:
        """The findings of ``node`` that were open and are not in ``active``: cleared now."""
        keys = {f.key for f in active}
        gone = [f for key, f in self.open.items() if key[0] == node and key not in keys]
        return [replace(f, cleared_at=now) for f in gone]


class Recorder:
    """Records everything a consumer collects to ``path`` (created, or appended to as a new session).

    A ``FleetSink`` plus ``tick``, ``finding``, ``findings`` and ``action``. ``close()`` (or
    ``aclose()``) writes what is queued and closes the file. A failure to write (disk full) stops the
    recording and is kept in ``problem``, one line; the consumer goes on.
    """

    def __init__(
        self,
        path: Path | str,
        fleet: FleetSpec,
        *,
        max_age_s: float | None = DEFAULT_MAX_AGE_S,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
        config_text: str | None = None,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        keyframe_s: float = KEYFRAME_S,
        retention_every_s: float = RETENTION_EVERY_S,
    ) -> None:
        """Opens (or creates) the file now and raises ``RecordingError`` with one line if it cannot."""
        self.path = Path(path)
        self.clock = clock
        self.wall = wall
        self.flush_interval_s = flush_interval_s
        self.retention_every_s = retention_every_s
        epoch_bytes = DEFAULT_MAX_EPOCH_BYTES if max_bytes is None else min(DEFAULT_MAX_EPOCH_BYTES, max_bytes // 8)
        self.encoder = Encoder(keyframe_s=keyframe_s, max_epoch_bytes=max(4096, epoch_bytes))
        self.store = RecordingStore(
            self.path,
            fleet,
            t0=clock(),
            wall0=wall(),
            config_text=config_text,
            max_age_s=max_age_s,
            max_bytes=max_bytes,
        )
        self.problem: str | None = None
        self.dropped = 0
        self.cpu_s = 0.0  # CPU time of the writer thread
        self.findings_log = FindingLog()
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="sparktui-recorder", daemon=True)
        self._thread.start()

    # --- FleetSink ------------------------------------------------------------------------------------

    def observation(self, observation: NodeObservation) -> None:
        self._put(Kind.OBSERVATION, observation.t, observation.node, observation)

    def host(self, update: HostUpdate) -> None:
        self._put(Kind.HOST, update.t, update.node, update)

    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None:
        self._put(Kind.LOG, self.clock(), node, LogBatch(node, instance, tuple(lines)))

    def error(self, node: str, exc: Exception) -> None:
        self._put(Kind.ERROR, self.clock(), node, CollectError(node, type(exc).__name__, str(exc)))

    # --- what the consumer derived and did ------------------------------------------------------------

    def tick(self, now: float) -> None:
        """The consumer computed its views at ``now``: a replay evaluates at the same moments."""
        self._put(Kind.TICK, now, "", Tick())

    def finding(self, finding: Finding) -> None:
        """Record a finding when it opens, changes severity or clears (repeats are skipped)."""
        if self.findings_log.changes(finding):
            self._put(Kind.FINDING, self.clock(), finding.node, finding)

    def findings(self, node: str, active: Sequence[Finding], now: float | None = None) -> None:
        """A node's active findings after an evaluation: new ones are recorded, and the ones that are
        no longer active as cleared at ``now``."""
        now = self.clock() if now is None else now
        for gone in self.findings_log.cleared(node, active, now):
            self.finding(gone)
        for finding in active:
            self.finding(finding)

    def alert(self, reason: str, node: str | None = None) -> None:
        """An alert fired: noted in the recording as an event."""
        event: dict[str, object] = {"alert": reason}
        if node is not None:
            event["node"] = node
        self.action(event)

    def action(self, event: Mapping[str, object]) -> None:
        """An action, alert or note, as a JSON object (``{"action": "restart", "node": …}``)."""
        node = event.get("node")
        self._put(Kind.ACTION, self.clock(), node if isinstance(node, str) else "", ActionEvent(dict(event)))

    # --- the writer -----------------------------------------------------------------------------------

    def _put(self, kind: Kind, t: float, node: str, payload: Payload) -> None:
        self._enqueue(_Item(kind, t, node, payload))

    def _enqueue(self, item: _Item | _Trigger) -> None:
        if self._closed or self.problem is not None:
            return
        if self._queue.qsize() >= MAX_QUEUE:
            self.dropped += 1
            return
        self._queue.put(item)

    def _run(self) -> None:
        next_retention = time.monotonic()
        try:
            while True:
                batch: list[_Item | _Trigger] = []
                closing = False
                flushes: list[_Flush] = []
                item = self._queue.get()
                deadline = time.monotonic() + self.flush_interval_s
                while True:
                    if item is _CLOSE:
                        closing = True
                        break
                    if isinstance(item, _Flush):
                        flushes.append(item)
                        break
                    assert isinstance(item, _Item | _Trigger)
                    batch.append(item)
                    if len(batch) >= MAX_BATCH:
                        break
                    try:
                        item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                    except queue.Empty:
                        break
                self._write(batch)
                if time.monotonic() >= next_retention or closing:
                    self.store.enforce_retention(self.wall())
                    next_retention = time.monotonic() + self.retention_every_s
                self.cpu_s = time.thread_time()
                for flush in flushes:
                    flush.done.set()
                if closing:
                    return
        except Exception as exc:
            self.problem = f"recording stopped: {_write_error(exc)} on {self.path}"
            self._drain()
        finally:
            self.store.close()

    def _write(self, batch: list[_Item | _Trigger]) -> None:
        """Encode and write a batch (in the writer thread)."""
        self.store.write([self._encode(item) for item in batch if isinstance(item, _Item)])

    def _encode(self, item: _Item) -> EncodedRecord:
        return self.encoder.encode(item.kind, item.t, item.node, item.payload)

    def _drain(self) -> None:
        """After a failure: release whoever waits on a flush, drop the rest."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Flush):
                item.done.set()

    # --- control --------------------------------------------------------------------------------------

    def flush(self, timeout_s: float | None = 30.0) -> bool:
        """Wait (blocking) until everything queued so far is on disk; False on timeout or failure."""
        if self._closed or not self._thread.is_alive():
            return False
        marker = _Flush()
        self._queue.put(marker)
        return marker.done.wait(timeout_s) and self.problem is None

    def close(self) -> None:
        """Write what is queued and close the file (blocking)."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_CLOSE)
        self._thread.join()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    @property
    def bytes_written(self) -> int:
        """Blob bytes written so far (the file adds SQLite's page overhead)."""
        return self.store.bytes_written

    @property
    def records_written(self) -> int:
        return self.store.records_written


def _write_error(exc: Exception) -> str:
    """Why a write failed, one line: SQLite's words and its extended code ("disk I/O error
    (SQLITE_IOERR_WRITE)", "database or disk is full (SQLITE_FULL)"), or the exception's."""
    name = exc.sqlite_errorname if isinstance(exc, sqlite3.Error) else None
    return f"{exc} ({name})" if name else f"{type(exc).__name__}: {exc}"
