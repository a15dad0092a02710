"""The black box (``--black-box MINUTES``): the last minutes in memory, kept on disk around incidents.

Everything a consumer collects is encoded as for a recording (compressed, chained) and held in a
rolling window of ``minutes``. When a finding opens (``finding``/``findings``) or an alert fires
(``alert``), the window is written to the file and recording goes on for ``after_s`` more; then the
black box goes back to memory only. Incidents close together share one stretch of the file. The file
is a recording like any other (``sparktui replay`` skips the silences between incidents), with the
same retention limits.
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import Finding
from sparktui.model.specs import FleetSpec
from sparktui.record import DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES
from sparktui.record.codec import EncodedRecord
from sparktui.record.recorder import FLUSH_INTERVAL_S, RETENTION_EVERY_S, Clock, Recorder, _Item, _Trigger

DEFAULT_AFTER_S = 120.0
KEYFRAME_S = 60.0  # epochs are what the window drops: short ones keep it close to the minutes asked


class BlackBox(Recorder):
    """A ``Recorder`` that keeps only the minutes around incidents (see the module docstring).

    ``min_severity`` is the least severe finding that is an incident (default: any).
    ``incidents`` lists (time, reason) of each trigger, as the writer handled them.
    """

    def __init__(
        self,
        path: Path | str,
        fleet: FleetSpec,
        minutes: float,
        *,
        after_s: float = DEFAULT_AFTER_S,
        min_severity: Severity = Severity.INFO,
        max_age_s: float | None = DEFAULT_MAX_AGE_S,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
        config_text: str | None = None,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        keyframe_s: float = KEYFRAME_S,
        retention_every_s: float = RETENTION_EVERY_S,
    ) -> None:
        if not minutes > 0:
            raise ValueError("the black box window must be positive")
        self.window_s = minutes * 60.0
        self.after_s = after_s
        self.min_severity = min_severity
        self.incidents: list[tuple[float, str]] = []
        self._ring: deque[EncodedRecord] = deque()
        self._epoch_starts: deque[tuple[int, float]] = deque()  # (encoder epoch, its first record's t)
        self._persist_until = -float("inf")
        super().__init__(
            path,
            fleet,
            max_age_s=max_age_s,
            max_bytes=max_bytes,
            clock=clock,
            wall=wall,
            config_text=config_text,
            flush_interval_s=flush_interval_s,
            keyframe_s=keyframe_s,
            retention_every_s=retention_every_s,
        )

    # --- triggers (event loop) --------------------------------------------------------------------------

    def finding(self, finding: Finding) -> None:
        opens = finding.cleared_at is None and finding.key not in self.findings_log.open
        super().finding(finding)
        if opens and finding.severity.rank >= self.min_severity.rank:
            where = finding.node if finding.instance is None else f"{finding.node}/{finding.instance}"
            self.trigger(f"{where}: {finding.title}")

    def alert(self, reason: str, node: str | None = None) -> None:
        """An alert fired: note it in the recording and keep the minutes around it."""
        super().alert(reason, node)
        self.trigger(reason)

    def trigger(self, reason: str, t: float | None = None) -> None:
        """Keep the window before ``t`` (default now) and ``after_s`` after it."""
        self._enqueue(_Trigger(self.clock() if t is None else t, reason))

    # --- the writer thread ------------------------------------------------------------------------------

    @property
    def window_records(self) -> int:
        """Records held in memory now."""
        return len(self._ring)

    def _write(self, batch: list[_Item | _Trigger]) -> None:
        out: list[EncodedRecord] = []
        for item in batch:
            if isinstance(item, _Trigger):
                out.extend(self._ring)
                self._ring.clear()
                self._epoch_starts.clear()
                self._persist_until = max(self._persist_until, item.t + self.after_s)
                self.incidents.append((item.t, item.reason))
                continue
            record = self._encode(item)
            if record.t <= self._persist_until:
                out.append(record)
            else:
                self._keep(record)
        self.store.write(out)

    def _keep(self, record: EncodedRecord) -> None:
        if not self._epoch_starts or self._epoch_starts[-1][0] != record.epoch:
            self._epoch_starts.append((record.epoch, record.t))
        self._ring.append(record)
        # Drop whole epochs (reading starts at one) while the next one still covers the window.
        cutoff = record.t - self.window_s
        while len(self._epoch_starts) > 1 and self._epoch_starts[1][1] <= cutoff:
            dropped, _ = self._epoch_starts.popleft()
            while self._ring and self._ring[0].epoch == dropped:
                self._ring.popleft()
