"""Replaying a recording into the same monitor core as live data (``sparktui.monitor.core.Monitor``).

``ReplaySource`` is a ``FleetSource``: ``run(core)`` hands the recorded observations, host updates,
log batches and errors to the monitor core at the recorded pace times ``speed``, and moves a clock
(``clock()``, the recording's time) that the consumer reads the core with. It has the controls
of a player: ``pause()``, ``resume()``, ``step()``, ``seek(t)``, ``seek_by(dt)``, ``speed``.

Besides what a live source delivers, a recording drives the core (``ReplaySink``):

- ``tick(now, wall)``: the recorded consumer computed its views here (or, in a recording without
  ticks, a poll interval passed): the core computes views and findings now, as the live one did, and
  its subscribers hear of it;
- ``reset()``: forget everything (a seek backwards, a new session, a gap): the source then replays
  from up to ``rebuild_s`` before the target, fast, so windows, histories and findings are rebuilt.

A finding or an action the recorder was told of is not the core's to know: it goes to the
source's ``on_recorded`` (the replay dashboard shows it).

A damaged file replays up to the damage; ``problem`` then says where, in one line. A record whose
fields cannot be is skipped; ``skipped_note`` says how many, in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Protocol

from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import HostUpdate, NodeObservation
from sparktui.model.specs import FleetSpec
from sparktui.record.store import RecordingReader
from sparktui.record.types import CollectError, Kind, LogBatch, Record, recorded_error

SPEEDS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
REBUILD_S = 300.0  # a seek rebuilds the state from this long before the target
CHUNK = 256  # records read (in a thread) at a time


class ReplaySink(Protocol):
    """What a recording is replayed into: the monitor core (``Monitor``), or a test's stand-in."""

    def observation(self, observation: NodeObservation) -> None: ...
    def host(self, update: HostUpdate) -> None: ...
    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None: ...
    def error(self, node: str, exc: Exception) -> None: ...
    def tick(self, now: float, wall: float | None = None) -> object: ...
    def reset(self) -> None: ...


class Feeder:
    """Hands records to the core by kind; resets it at a new session or after a gap."""

    def __init__(
        self,
        sink: ReplaySink,
        gap_s: float,
        on_tick: Callable[[float], None] | None = None,
        *,
        wall: Callable[[float], float] | None = None,
        on_record: Callable[[Record], None] | None = None,
    ) -> None:
        """``on_tick(t)`` is called after the core's own ``tick`` (an export reads the core then);
        ``wall(t)`` maps the recording's clock to unix time for the alerts (None: the core's own
        mapping); ``on_record`` hears of the records that are neither fed nor a tick."""
        self.sink = sink
        self.gap_s = gap_s
        self.on_tick = on_tick
        self.wall = wall
        self.on_record = on_record
        self.session: int | None = None
        self.last_t: float | None = None

    def reset(self) -> None:
        self.session = None
        self.last_t = None
        self.sink.reset()

    def feed(self, record: Record) -> None:
        if self.session is not None and (
            record.session != self.session or (self.last_t is not None and record.t - self.last_t > self.gap_s)
        ):
            self.reset()
        self.session = record.session
        self.last_t = record.t if self.last_t is None else max(self.last_t, record.t)
        payload = record.payload
        sink = self.sink
        if isinstance(payload, NodeObservation):
            sink.observation(payload)
        elif isinstance(payload, HostUpdate):
            sink.host(payload)
        elif isinstance(payload, LogBatch):
            sink.log_batch(payload.node, payload.instance, payload.lines)
        elif isinstance(payload, CollectError):
            sink.error(payload.node, recorded_error(payload.kind, payload.message))
        elif record.kind is Kind.TICK:
            sink.tick(record.t, self.wall(record.t) if self.wall is not None else None)
            if self.on_tick is not None:
                self.on_tick(record.t)
        elif self.on_record is not None:
            self.on_record(record)


class ReplaySource:
    """A recording as a ``FleetSource`` (see the module docstring).

    ``start`` is a unix time to begin at (None: the recording's start). ``speed`` may be
    ``math.inf`` (as fast as possible). With ``stop_at_end`` ``run()`` returns at the end of the
    recording; otherwise it waits there for a seek until cancelled, like a player.
    """

    drives_ticks = True

    def __init__(
        self,
        path: Path | str,
        speed: float = 1.0,
        start: float | None = None,
        *,
        stop_at_end: bool = False,
        playing: bool = True,
        rebuild_s: float = REBUILD_S,
    ) -> None:
        """Raises ``RecordingError`` (one line) when the file is not a readable recording."""
        if not speed > 0:
            raise ValueError("the replay speed must be positive")
        self.reader = RecordingReader(path)
        self.path = self.reader.path
        self.fleet: FleetSpec = self.reader.fleet
        self.speed = speed
        self.stop_at_end = stop_at_end
        self.playing = playing
        self.rebuild_s = rebuild_s
        self.start_t = self.reader.start_t
        self.end_t = self.reader.end_t
        self.cursor = self.start_t
        self.rebuilding = False  # True while a seek replays fast up to its target
        self.ended = False
        self.delivered = 0
        self._seek_to: float | None = None if start is None else self._clamp(self.reader.t_at(start))
        self._steps = 0
        self._wake: asyncio.Event | None = None
        self._records: Iterator[Record] | None = None
        self._pending: deque[Record] = deque()
        self._exhausted = False
        self._feeder: Feeder | None = None
        self.on_moved: Callable[[], None] | None = None  # called after a seek or a step is done
        self.on_recorded: Callable[[Record], None] | None = None  # a finding or an action recorded

    # --- the clock ------------------------------------------------------------------------------------

    def clock(self) -> float:
        """The replay's time on the recording's clock: pass it to the consumer as its clock."""
        return self.cursor

    def wall(self, t: float | None = None) -> float:
        """The unix time of ``t`` (default: now in the replay)."""
        return self.reader.wall_at(self.cursor if t is None else t)

    @property
    def problem(self) -> str | None:
        """Where the file is damaged, once the replay got there (one line)."""
        return self.reader.problem

    @property
    def skipped_note(self) -> str | None:
        """The records refused so far, because their fields cannot be (one line; None: none)."""
        return self.reader.skipped_note

    # --- controls -------------------------------------------------------------------------------------

    def pause(self) -> None:
        self.playing = False
        self._poke()

    def resume(self) -> None:
        """Play on; at the end, from the start again."""
        if self.ended and self._seek_to is None:
            self.seek(self.start_t)
        self.playing = True
        self._poke()

    def toggle(self) -> None:
        if self.playing:
            self.pause()
        else:
            self.resume()

    def step(self) -> None:
        """Pause, and move to the next tick of the recording (one refresh of the dashboard)."""
        self.playing = False
        self._steps += 1
        self._poke()

    def seek(self, t: float) -> None:
        """Go to ``t`` on the recording's clock (clamped to the recording). Backwards, or far
        forwards, the consumer is reset and the state rebuilt from ``rebuild_s`` before ``t``."""
        self._seek_to = self._clamp(t)
        self._poke()

    def seek_by(self, dt: float) -> None:
        self.seek((self._seek_to if self._seek_to is not None else self.cursor) + dt)

    def faster(self) -> float:
        self.speed = next((s for s in SPEEDS if s > self.speed), self.speed)
        self._poke()
        return self.speed

    def slower(self) -> float:
        self.speed = next((s for s in reversed(SPEEDS) if s < self.speed), self.speed)
        self._poke()
        return self.speed

    def _clamp(self, t: float) -> float:
        return min(max(t, self.start_t), max(self.start_t, self.end_t))

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # --- running --------------------------------------------------------------------------------------

    async def run(self, core: ReplaySink) -> None:
        self._wake = asyncio.Event()
        self._feeder = Feeder(core, self.reader.gap_s, wall=self.reader.wall_at, on_record=self._recorded)
        loop = asyncio.get_running_loop()
        target = self._seek_to if self._seek_to is not None else self.start_t
        self._seek_to = None
        try:
            await self._rebuild(target)
            self._moved()
            last_real = loop.time()
            while True:
                if self._seek_to is not None:
                    await self._seek(self._seek_to)
                    last_real = loop.time()
                    self._moved()
                    continue
                if self._steps:
                    self._steps -= 1
                    await self._step()
                    self._moved()
                    continue
                now_real = loop.time()
                if self.playing:
                    await self._play(now_real - last_real)
                last_real = now_real
                if self._at_end():
                    self.ended = True
                    self.playing = False
                    if self.stop_at_end:
                        return
                else:
                    self.ended = False
                await self._wait()
        finally:
            self._close_records()

    def _recorded(self, record: Record) -> None:
        if self.on_recorded is not None:
            self.on_recorded(record)

    def _moved(self) -> None:
        if self.on_moved is not None and self._seek_to is None and not self._steps:
            self.on_moved()

    async def _wait(self) -> None:
        assert self._wake is not None
        self._wake.clear()
        timeout: float | None = None
        if self.playing:
            timeout = 0.25
            upcoming = self._pending[0] if self._pending else None
            if upcoming is not None and not math.isinf(self.speed):
                timeout = min(0.25, max(0.02, (upcoming.t - self.cursor) / self.speed))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wake.wait()

    def _at_end(self) -> bool:
        return self._exhausted and not self._pending and not self._steps and self._seek_to is None

    async def _play(self, real_s: float) -> None:
        target = math.inf if math.isinf(self.speed) else self.cursor + real_s * self.speed
        upcoming = await self._peek()
        if upcoming is not None and upcoming.t > max(target, self.cursor) + self.reader.gap_s:
            target = upcoming.t  # nothing was recorded in between: skip the silence
        await self._deliver_until(target)
        self._move_cursor(target)

    def _move_cursor(self, target: float) -> None:
        if self._exhausted and not self._pending:
            target = min(target, self.end_t)  # the clock stops at the last record
        self.cursor = max(self.cursor, target)

    async def _seek(self, t: float) -> None:
        self._seek_to = None
        if t < self.cursor or t - self.cursor > self.rebuild_s:
            await self._rebuild(t)
        else:
            await self._deliver_until(t)
            self.cursor = t

    async def _step(self) -> None:
        while (record := await self._peek()) is not None:
            self._pending.popleft()
            self._feed(record)
            self.cursor = max(self.cursor, record.t)
            if record.kind is Kind.TICK:
                return

    async def _rebuild(self, t: float) -> None:
        """Reset the consumer and replay, fast, from an epoch before ``t - rebuild_s`` up to ``t``."""
        assert self._feeder is not None
        self.rebuilding = True
        try:
            if self.delivered:
                self._feeder.reset()  # a fresh consumer needs none
            self._close_records()
            from_id = self.reader.first_id_before(max(self.start_t, t - self.rebuild_s))
            self._records = self.reader.records(from_id)
            self._exhausted = False
            self.cursor = self.start_t
            await self._deliver_until(t)
            self.cursor = t
        finally:
            self.rebuilding = False

    async def _deliver_until(self, t: float) -> None:
        count = 0
        while (record := await self._peek()) is not None and record.t <= t:
            self._pending.popleft()
            self._feed(record)
            count += 1
            if count % CHUNK == 0:
                await asyncio.sleep(0)  # a long fast-forward lets the UI breathe

    def _feed(self, record: Record) -> None:
        assert self._feeder is not None
        self._feeder.feed(record)
        self.delivered += 1
        self.end_t = max(self.end_t, record.t)

    async def _peek(self) -> Record | None:
        if not self._pending and not self._exhausted and self._records is not None:
            records = self._records
            chunk = await asyncio.to_thread(lambda: list(islice(records, CHUNK)))
            if not chunk:
                self._exhausted = True
            self._pending.extend(chunk)
        return self._pending[0] if self._pending else None

    def _close_records(self) -> None:
        self._pending.clear()
        if self._records is not None:
            close = getattr(self._records, "close", None)
            # Cancelled while a thread reads a chunk: that thread finishes; the generator goes with it.
            if close is not None:
                with contextlib.suppress(ValueError):
                    close()
            self._records = None


def replay_into(reader: RecordingReader, sink: ReplaySink, on_tick: Callable[[float], None] | None = None) -> int:
    """Every record of ``reader`` into ``sink`` (the core), synchronously and as fast as possible (for
    exports and tests); returns how many were delivered. ``reader.problem`` tells of damage."""
    feeder = Feeder(sink, reader.gap_s, on_tick, wall=reader.wall_at)
    count = 0
    for record in reader.records():
        feeder.feed(record)
        count += 1
    return count
