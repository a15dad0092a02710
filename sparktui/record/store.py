"""The recording file: a SQLite database of timestamped records, its writer and its reader.

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
                                (``sparktui.record.codec`` says what is in one)

Reading starts at the first record of an epoch (where every stream starts afresh), so retention
deletes whole epochs, oldest first, and a seek needs to decode at most one epoch it does not show.
Damage (a truncated file, a corrupt page or blob, a record that would inflate past its budget) ends
the reading at the last good record with a one-line ``problem``; a record that decodes to fields that
cannot be (``RefusedRecord``) is skipped, counted in ``skipped`` and told by ``skipped_note``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from sparktui.diagnosis.engine import Finding
from sparktui.model.observations import HostUpdate, NodeObservation
from sparktui.model.specs import FleetSpec
from sparktui.record import DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES
from sparktui.record.codec import (
    MAX_CLOCK_S,
    MAX_JSON_BYTES,
    MAX_RECORD_BYTES,
    Decoder,
    EncodedRecord,
    MiB,
    clock_time,
    config_text_without_secrets,
    fleet_from_json,
    fleet_json,
    unix_time,
)
from sparktui.record.types import DamagedRecord, Kind, Payload, Record, RecordingError, RefusedRecord, Tick

FORMAT = "sparktui-recording"
FORMAT_VERSION = 1
GAP_S = 30.0  # see RecordingReader.gap_s

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
            # What the fleet did, its logs and the config: for the owner only. SQLite gives the WAL and
            # shared-memory files the database file's mode.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
            self.conn = _connect(path, read_only=False)
        except (sqlite3.Error, OSError) as exc:
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
                    (
                        t0,
                        wall0,
                        fleet_json(fleet),
                        None if config_text is None else config_text_without_secrets(fleet, config_text),
                    ),
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
            # SQLite may have rolled back already (a full disk does): the first error is the one to tell.
            with contextlib.suppress(sqlite3.Error):
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
        try:
            with self.path.open("rb"):  # SQLite would say only "unable to open database file"
                pass
        except FileNotFoundError:
            raise RecordingError(f"{self.path}: no such recording") from None
        except OSError as exc:
            raise RecordingError(f"{self.path}: cannot read the recording ({exc.strerror})") from None
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
        except (sqlite3.DatabaseError, RefusedRecord) as exc:
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
            self.fleet = fleet_from_json(last.fleet)
        except DamagedRecord as exc:
            self.conn.close()
            raise RecordingError(f"{self.path}: the fleet in the recording's header is damaged ({exc})") from None
        except ValidationError as exc:
            self.conn.close()
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            field = f"{where}: " if where else ""  # empty: the fleet is not even an object
            raise RecordingError(
                f"{self.path}: the fleet in the recording does not fit this sparktui ({field}{first['msg']})"
            ) from None
        self.problem: str | None = None
        self.skipped = 0  # records refused and passed over (``skipped_note`` says why)
        self._skip_reason: str | None = None
        self._counted_to = 0  # the last record counted in ``skipped`` (a seek reads records again)
        self.start_t = self.epochs[0].t if self.epochs else 0.0
        self.end_t = self._end_t()

    def _sessions(self) -> dict[int, Session]:
        # A header field larger than any fleet is not read into memory: it reads as NULL, and is refused.
        rows = self.conn.execute(
            "SELECT id, t0, wall0, CASE WHEN length(fleet) <= ? THEN fleet END, "
            "CASE WHEN length(config) <= ? THEN config END, ticks FROM sessions ORDER BY id",
            (MAX_JSON_BYTES, MAX_JSON_BYTES),
        ).fetchall()
        sessions: dict[int, Session] = {}
        first: tuple[float, float] | None = None
        for sid, stored_t0, stored_wall0, fleet, config, ticks in rows:
            if not isinstance(sid, int) or not isinstance(fleet, str) or not isinstance(config, str | None):
                raise RefusedRecord(f"session {sid!r} is malformed or larger than {MAX_JSON_BYTES // MiB} MiB")
            t0 = clock_time(stored_t0, f"session {sid}'s t0")
            wall0 = unix_time(stored_wall0, f"session {sid}'s wall0")
            if first is None:
                first = (t0, wall0)
            offset = (wall0 - first[1]) - (t0 - first[0])
            sessions[sid] = Session(sid, t0, wall0, fleet, config, bool(ticks), offset)
        return sessions

    def _epochs(self) -> list[Epoch]:
        out = []
        for eid, session, first_id, t in self.conn.execute("SELECT id, session, first_id, t FROM epochs ORDER BY id"):
            if not isinstance(eid, int) or not isinstance(first_id, int):
                raise RefusedRecord(f"epoch {eid!r} is malformed")
            found = self.sessions.get(session)
            if found is not None:
                out.append(Epoch(eid, session, first_id, clock_time(t, f"epoch {eid}'s time") + found.offset))
        return out

    def _end_t(self) -> float:
        try:
            row = self.conn.execute(
                "SELECT t, epoch FROM records WHERE typeof(t) IN ('integer', 'real') AND abs(t) <= ? "
                "ORDER BY id DESC LIMIT 1",
                (MAX_CLOCK_S,),
            ).fetchone()
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
        # A blob larger than a record may hold is not read into memory: it reads as NULL (its size says why).
        query = (
            "SELECT id, epoch, t, kind, node, length(data), CASE WHEN length(data) <= ? THEN data END "
            "FROM records WHERE id >= ? ORDER BY id"
        )
        try:
            cursor = self.conn.execute(query, (MAX_RECORD_BYTES, from_id))
            last_id = from_id - 1
            for record_id, record_epoch, t, kind_value, node, size, data in cursor:
                if not isinstance(record_id, int) or record_id <= last_id:
                    after = f"the row after record {last_id}" if last_id >= from_id else "its first row"
                    raise DamagedRecord(f"{after} is malformed")
                if not isinstance(data, bytes):
                    if isinstance(size, int) and size > MAX_RECORD_BYTES:
                        raise DamagedRecord(
                            f"record {record_id} is {size:,} bytes, more than the "
                            f"{MAX_RECORD_BYTES // MiB} MiB a record may hold"
                        )
                    raise DamagedRecord(f"record {record_id} is malformed (its data is not a blob)")
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
                try:
                    payload = decoder.decode(kind, t, node, data)
                except RefusedRecord as exc:
                    self._skip(record_id, str(exc))
                    continue
                except DamagedRecord as exc:
                    self._damaged(last_t, read, f"record {record_id} cannot be decoded ({exc})")
                    return
                at = float(t) + session.offset
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
                yield Record(record_id, session.id, at, kind, str(node), payload)
        except (sqlite3.DatabaseError, DamagedRecord) as exc:
            self._damaged(last_t, read, str(exc))

    def _skip(self, record_id: int, why: str) -> None:
        if record_id <= self._counted_to:
            return  # read again after a seek: counted the first time
        self._counted_to = record_id
        self.skipped += 1
        if self._skip_reason is None:
            self._skip_reason = f"record {record_id} ({why})"

    @property
    def skipped_note(self) -> str | None:
        """One line on the records refused so far (None: none), naming the first and why."""
        if not self.skipped:
            return None
        noun = "record that cannot be" if self.skipped == 1 else "records that cannot be, the first"
        return f"{self.path.name}: skipped {self.skipped:,} {noun}: {self._skip_reason}"

    def _damaged(self, last_t: float | None, read: int, why: str) -> None:
        where = f"after {wall_text(self.wall_at(last_t))}" if last_t is not None else "at its start"
        self.problem = f"{self.path.name} is damaged {where} ({read:,} records read): {why}; replayed up to there"

    def recorded_findings(self) -> list[Record]:
        """Every finding the recorder was told of, oldest first (reads the whole file)."""
        return [r for r in self.records(synthesize_ticks=False) if r.kind is Kind.FINDING]

    def close(self) -> None:
        self.conn.close()


def _shift_finding(finding: Finding, offset: float) -> Finding:
    cleared = finding.cleared_at
    return replace(
        finding,
        opened_at=finding.opened_at + offset,
        last_seen=finding.last_seen + offset,
        cleared_at=None if cleared is None else cleared + offset,
    )


def _shift(payload: Payload, t: float, offset: float) -> Payload:
    if isinstance(payload, NodeObservation | HostUpdate):
        return replace(payload, t=t)
    if isinstance(payload, Finding):
        return _shift_finding(payload, offset)
    return payload
