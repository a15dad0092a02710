"""What the log view shows, as plain state with no Textual or Rich in it: a node's log lines merged in
time order across its instances, the instance filter, where a search matches and which match is the
current one, whether the view follows the end, and how lines wrap into screen rows.

The log screen and the node screen's log tail (``log_screen.py``) only draw this; the tests drive it
directly (``tests/unit/test_log_reader.py``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sparktui.model.logbuffer import KERNEL_LOG, LogBuffer, LogLine, without_engine_clock
from sparktui.ui.wrap import Measure, hanging_rows

MAX_LINES = 20_000  # lines a view holds, over all the node's instances (each buffer holds its own bound)


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One line as the view shows it: ``text`` is what is drawn (instance prefix, time, message), and
    what a search looks in."""

    instance: str
    line: LogLine
    text: str
    signature: bool  # matches a known failure signature (the finding explains it)


@dataclass(frozen=True, slots=True)
class Match:
    """A search hit: the shown line's index and the character span in its ``text``."""

    line: int
    start: int
    end: int


def find_matches(texts: Sequence[str], query: str, first_line: int = 0) -> list[Match]:
    """Every non-overlapping occurrence of ``query`` in ``texts``, case-insensitive, in order
    (``first_line``: the index of ``texts[0]`` among the shown lines)."""
    if not query:
        return []
    pattern = re.compile(re.escape(query), re.IGNORECASE)
    return [
        Match(first_line + index, found.start(), found.end())
        for index, text in enumerate(texts)
        for found in pattern.finditer(text)
    ]


def nearest_match(matches: Sequence[Match], line: int) -> int | None:
    """The match to start from when a search is entered with ``line`` at the bottom of the view: the
    last one at or above it (logs are read from the newest end), else the first one."""
    if not matches:
        return None
    index = bisect_right(matches, line, key=lambda m: m.line) - 1
    return index if index >= 0 else 0


def step_match(count: int, current: int | None, forward: bool) -> int | None:
    """The next (``forward``) or previous match after ``current``, wrapping round at either end."""
    if count <= 0:
        return None
    if current is None:
        return 0 if forward else count - 1
    return (current + (1 if forward else -1)) % count


@dataclass(slots=True)
class Follow:
    """Following the end of the log: on at first, off when the reader scrolls up or jumps to a match,
    on again at the end (End, F, or scrolling down to the last line). ``unseen`` counts the lines that
    arrived while it was off."""

    on: bool = True
    unseen: int = 0

    def scrolled(self, *, up: bool, at_end: bool) -> None:
        if at_end and not up:
            self.resume()
        elif up:
            self.on = False

    def pause(self) -> None:
        self.on = False

    def resume(self) -> None:
        self.on = True
        self.unseen = 0

    def arrived(self, count: int) -> None:
        if not self.on:
            self.unseen += count


def row_starts(counts: Sequence[int]) -> list[int]:
    """The first screen row of each line, and after them the total row count, from the rows each line
    takes (one, or its wrapped rows: ``line_rows``)."""
    starts = [0]
    total = 0
    for count in counts:
        total += count
        starts.append(total)
    return starts


def hanging_indent(entry: LogEntry) -> int:
    """Where a shown line's wrapped rows start: under its message (after the instance, the time and the
    message's own indent, a traceback's), so a wrapped line reads as one."""
    return len(entry.text) - len(shown_message(entry.line).lstrip(" "))


def line_rows(entry: LogEntry, cells: int, width: int, measure: Measure = len) -> list[tuple[int, int]]:
    """A shown line's rows at ``width`` cells, as (start, end) offsets into its text: itself when it
    fits (most do: no wrapping is worked out), else wrapped at spaces and tokens under its message
    (``hanging_rows``)."""
    if cells <= width:
        return [(0, len(entry.text))]
    return hanging_rows(entry.text, hanging_indent(entry), width, measure)


def locate_row(starts: Sequence[int], row: int) -> tuple[int, int] | None:
    """The line a screen row belongs to and which of its wrapped parts it is; None past the end."""
    if row < 0 or row >= starts[-1]:
        return None
    line = bisect_right(starts, row) - 1
    return line, row - starts[line]


def shown_message(line: LogLine) -> str:
    """A line's message as drawn: without the engine's own clock where the line's stamp says the
    same moment (``without_engine_clock``); as it came where it has no stamp."""
    return line.text if line.timestamp is None else without_engine_clock(line.text)


def shown_text(instance: str, line: LogLine, prefix: bool) -> str:
    """A line as drawn: ``[instance] `` when the node has several (the kernel's, ``[kernel]``, is
    bracketed already), the time in the screen's one zone (the operator's, as every time on screen),
    then the message, without the engine's own clock where the line's stamp says the same moment."""
    head = (f"{instance} " if instance == KERNEL_LOG else f"[{instance}] ") if prefix else ""
    if line.timestamp is None:
        return head + line.text
    return f"{head}{line.timestamp.astimezone():%H:%M:%S} {shown_message(line)}"


@dataclass
class LogReader:
    """A node's logs as one view reads them: pulled from the instances' buffers, merged in time order,
    filtered to one instance or all, searched, and followed."""

    signatures: Sequence[re.Pattern[str]] = ()
    measure: Callable[[str], int] = len  # a text's width in cells (the screen passes Rich's cell_len)
    max_lines: int = MAX_LINES
    entries: list[LogEntry] = field(default_factory=list)  # every line pulled, in order
    shown: list[LogEntry] = field(default_factory=list)  # the ones the instance filter keeps
    widths: list[int] = field(default_factory=list)  # cells of each shown line's text
    instances: list[str] = field(default_factory=list)  # in the order they first appeared
    only: str | None = None  # the instance filter; None shows all
    query: str = ""
    matches: list[Match] = field(default_factory=list)
    current: int | None = None  # index into ``matches``
    follow: Follow = field(default_factory=Follow)
    generation: int = 0  # grows whenever a shown line's index may now mean another line
    _prefixed: bool = False  # the lines carry their instance's name (the node has several)
    _next_seq: dict[str, int] = field(default_factory=dict)
    _last_time: dict[str, datetime] = field(default_factory=dict)

    # --- lines in -----------------------------------------------------------------------------------

    def pull(self, buffers: Mapping[str, LogBuffer]) -> int:
        """Take the lines the buffers got since the last pull; returns how many are newly shown. A line
        with no timestamp (a continuation, a traceback) stays after the line before it in its log."""
        if any(buffer.next_seq < self._next_seq.get(name, 0) for name, buffer in buffers.items()):
            self.restart()  # a buffer started again (a replay sought back): read every log afresh
        for name in buffers:
            if name not in self.instances:
                self.instances.append(name)
        prefix = len(self.instances) > 1
        batch: list[tuple[float, int, int, LogEntry]] = []
        for order, (name, buffer) in enumerate(buffers.items()):
            lines = buffer.since(self._next_seq.get(name, 0))
            if not lines:
                continue
            self._next_seq[name] = lines[-1].seq + 1
            for line in lines:
                if line.timestamp is not None:
                    self._last_time[name] = line.timestamp
                at = self._last_time.get(name)
                entry = LogEntry(name, line, shown_text(name, line, prefix), self._is_signature(line.text))
                batch.append((at.timestamp() if at is not None else 0.0, order, line.seq, entry))
        if prefix and not self._prefixed:
            self._prefixed = True
            if self.entries:
                self._reprefix()  # a second instance appeared: every line now says whose it is
        batch.sort(key=lambda item: item[:3])
        new = [entry for *_, entry in batch]
        self.entries.extend(new)
        if len(self.entries) > self.max_lines:  # down to 90 %, so that the next lines do not trim again
            del self.entries[: len(self.entries) - self.max_lines * 9 // 10]
            self._refilter()
            self.follow.arrived(len(new))
            return len(new)
        kept = [e for e in new if self._kept(e)]
        first = len(self.shown)
        self.shown.extend(kept)
        self.widths.extend(self.measure(e.text) for e in kept)
        self.matches.extend(find_matches([e.text for e in kept], self.query, first))
        self.follow.arrived(len(kept))
        return len(kept)

    def restart(self) -> None:
        """Forget every line (the filter and the search stay)."""
        self.entries, self.shown, self.widths, self.matches = [], [], [], []
        self.current = None
        self._next_seq.clear()
        self._last_time.clear()
        self.generation += 1

    def _is_signature(self, text: str) -> bool:
        return any(p.search(text) for p in self.signatures)

    def _kept(self, entry: LogEntry) -> bool:
        return self.only is None or entry.instance == self.only

    def _reprefix(self) -> None:
        self.entries = [
            LogEntry(e.instance, e.line, shown_text(e.instance, e.line, True), e.signature) for e in self.entries
        ]
        self._refilter()

    def _refilter(self) -> None:
        self.generation += 1
        self.shown = [e for e in self.entries if self._kept(e)]
        self.widths = [self.measure(e.text) for e in self.shown]
        self._research()

    # --- filter and search --------------------------------------------------------------------------

    def cycle_instance(self) -> str | None:
        """All instances, then each in turn, then all again; returns the one now shown (None: all)."""
        choices: list[str | None] = [None, *self.instances]
        self.only = choices[(choices.index(self.only) + 1) % len(choices)] if self.only in choices else None
        self._refilter()
        return self.only

    def toggle_kernel(self) -> str | None:
        """The node's kernel log alone (``KERNEL_LOG``), or, when it is shown alone, every log again;
        returns the one now shown (None: all)."""
        self.only = None if self.only == KERNEL_LOG else KERNEL_LOG
        self._refilter()
        return self.only

    def search(self, query: str) -> None:
        self.query = query
        self._research()

    def _research(self) -> None:
        self.matches = find_matches([e.text for e in self.shown], self.query)
        self.current = None

    def jump(self, forward: bool, bottom_line: int) -> Match | None:
        """The match to show next: from the one nearest the view's bottom line at first, then the
        next or previous one. Reading a match is reading the past: following stops."""
        if not self.matches:
            return None
        if self.current is None:
            found = nearest_match(self.matches, bottom_line)
        else:
            found = step_match(len(self.matches), self.current, forward)
        self.current = found
        self.follow.pause()
        return None if found is None else self.matches[found]

    def matches_on(self, line: int) -> list[Match]:
        """The matches on one shown line (for its highlight)."""
        start = bisect_right(self.matches, line - 1, key=lambda m: m.line)
        end = bisect_right(self.matches, line, key=lambda m: m.line)
        return self.matches[start:end]

    @property
    def current_match(self) -> Match | None:
        return None if self.current is None else self.matches[self.current]
