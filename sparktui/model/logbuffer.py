"""A vLLM instance's log as the dashboard keeps it: a bounded buffer of timestamped lines.

Pure: no I/O and no asyncio. ``sparktui.sources.logs`` reads ``journalctl -o short-iso`` or
``docker logs --timestamps`` over SSH, parses each line with the functions here and appends them in
batches. The buffer keeps the newest lines within a line count and a byte budget and counts what it
dropped, so a chatty or crash-looping server can never grow the dashboard's memory.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from itertools import islice
from typing import Literal

from sparktui.model.safe_text import LOG_LINE_LIMIT, safe_text, strip_escape_sequences

LogFormat = Literal["journal", "docker", "kernel"]
# The node's kernel log, held beside its instances' logs under this name (brackets: no instance has it).
KERNEL_LOG = "[kernel]"

GAP_RECONNECTED = "— connection lost, reconnected —"
GAP_RESTARTED = "— log command ended, restarted —"
DEFAULT_MAX_LINES = 10_000
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_LINE_CHARS = 16 * 1024

# Colour and cursor escapes (a container run with a TTY, coloured loggers): dropped for search and display.
_ISO = (
    r"(?P<date>\d{4}-\d{2}-\d{2})T(?P<time>\d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d{1,9}))?"
    r"(?P<tz>Z|[+-]\d{2}:?\d{2})"
)
# journalctl -o short-iso: "2026-11-26T10:15:02+0000 spark1 vllm[4242]: message" (systemd < 255 writes
# +0000, newer +00:00; short-iso-precise adds microseconds). The identifier may lack a [pid].
_JOURNAL = re.compile(rf"^{_ISO} (?P<host>\S+) (?P<rest>.*)$")
_JOURNAL_IDENT = re.compile(r"^[^\s\[\]:]+(?:\[\d+\])?: ?")
# docker logs --timestamps: RFC 3339 with up to nanoseconds, then one space, then the line as written.
_DOCKER = re.compile(rf"^{_ISO} ?(?P<rest>.*)$")


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of a log. ``seq`` grows by one per line ever appended, so a view can ask for what is new."""

    seq: int
    timestamp: datetime | None  # None: the source gave none (a journal continuation line, an error)
    text: str
    gap: bool = False  # a marker sparktui inserted (lines may be missing here), not a line from the node


def _clean(line: str) -> str:
    line = line.rstrip("\r\n")
    return strip_escape_sequences(line) if "\x1b" in line or "\x9b" in line or "\x9d" in line else line


def _redrawn(text: str) -> str:
    """A progress bar redrawn with carriage returns (tqdm while loading weights): what a terminal shows;
    then nothing that could drive the terminal it is shown on (``safe_text``)."""
    if "\r" in text:
        text = next((part for part in reversed(text.split("\r")) if part), "")
    return safe_text(text, LOG_LINE_LIMIT)


def _timestamp(match: re.Match[str]) -> datetime | None:
    try:
        year, month, day = (int(p) for p in match["date"].split("-"))
        hour, minute, second = (int(p) for p in match["time"].split(":"))
        micro = int((match["frac"] or "0")[:6].ljust(6, "0"))
        tz_text = match["tz"]
        if tz_text == "Z":
            tz = UTC
        else:
            sign = -1 if tz_text[0] == "-" else 1
            digits = tz_text[1:].replace(":", "")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            tz = UTC if not offset else timezone(sign * offset)
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    except ValueError:  # a date that matched the pattern but does not exist (month 13)
        return None


def parse_journal_line(line: str) -> tuple[datetime | None, str]:
    """``journalctl -o short-iso`` → (time, message), host and ``ident[pid]:`` removed.

    Lines journalctl writes itself (``-- No entries --``, ``-- Boot … --``) and continuation lines of a
    multi-line message have no timestamp and are returned whole.
    """
    line = _clean(line)
    match = _JOURNAL.match(line)
    stamp = _timestamp(match) if match is not None else None
    if match is None or stamp is None:
        return None, _redrawn(line)
    rest = match["rest"]
    ident = _JOURNAL_IDENT.match(rest)
    return stamp, _redrawn(rest[ident.end() :] if ident else rest)


def parse_docker_line(line: str) -> tuple[datetime | None, str]:
    """``docker logs --timestamps`` → (time, text). A line without the prefix is returned whole."""
    line = _clean(line)
    match = _DOCKER.match(line)
    stamp = _timestamp(match) if match is not None else None
    if match is None or stamp is None:
        return None, _redrawn(line)
    return stamp, _redrawn(match["rest"])


def parse_kernel_line(line: str) -> tuple[datetime | None, str]:
    """The kernel log: ``journalctl -k -o short-iso`` (``… spark1 kernel: NVRM: …``) or, on a node
    without a journal, ``dmesg --time-format iso`` (``2026-11-26T10:15:02,123456+00:00 NVRM: …``).
    A journal line names its identifier ``kernel:``; anything else is read as dmesg's."""
    match = _JOURNAL.match(_clean(line))
    if match is not None and match["rest"].startswith("kernel:"):
        return parse_journal_line(line)
    return parse_docker_line(line)


def parse_log_line(fmt: LogFormat, line: str) -> tuple[datetime | None, str]:
    if fmt == "kernel":
        return parse_kernel_line(line)
    return parse_journal_line(line) if fmt == "journal" else parse_docker_line(line)


class LogBuffer:
    """The newest lines of one log, within ``max_lines`` lines and ``max_bytes`` bytes of text.

    When a bound is exceeded the oldest lines go and ``dropped`` counts them. A line longer than
    ``max_line_chars`` is cut, with a note of how much was cut.
    """

    def __init__(
        self,
        max_lines: int = DEFAULT_MAX_LINES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_line_chars: int = DEFAULT_MAX_LINE_CHARS,
    ) -> None:
        if max_lines < 1 or max_bytes < 1 or max_line_chars < 1:
            raise ValueError("LogBuffer bounds must be positive")
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.max_line_chars = max_line_chars
        # The lines and, apart, their sizes in bytes: a (line, size) pair would cost a tuple a line
        # (56 bytes, a fifth of a typical line's memory; benchmarks/bench_stores.py).
        self._lines: deque[LogLine] = deque()
        self._sizes: deque[int] = deque()
        self._bytes = 0
        self._next_seq = 0
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._lines)

    def __iter__(self) -> Iterator[LogLine]:
        return iter(self._lines)

    @property
    def bytes(self) -> int:
        """UTF-8 size of the text held now."""
        return self._bytes

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next line will get (also: how many lines were ever appended)."""
        return self._next_seq

    def append(self, timestamp: datetime | None, text: str, *, gap: bool = False) -> LogLine:
        # The one door of every log line into the model, whatever brought it (a live stream parsed it
        # safe already; a recording or a test may not have): nothing in a buffer can drive a terminal.
        text = safe_text(text, LOG_LINE_LIMIT)
        if len(text) > self.max_line_chars:
            cut = len(text) - self.max_line_chars
            text = f"{text[: self.max_line_chars]} …[{cut} more characters]"
        line = LogLine(self._next_seq, timestamp, text, gap)
        size = len(text.encode("utf-8", "replace"))
        self._next_seq += 1
        self._lines.append(line)
        self._sizes.append(size)
        self._bytes += size
        while len(self._lines) > self.max_lines or (self._bytes > self.max_bytes and len(self._lines) > 1):
            self._lines.popleft()
            self._bytes -= self._sizes.popleft()
            self.dropped += 1
        return line

    def append_batch(self, entries: Iterable[tuple[datetime | None, str]]) -> list[LogLine]:
        """Append parsed lines in order; returns them as stored (with their ``seq``)."""
        return [self.append(timestamp, text) for timestamp, text in entries]

    def mark_gap(self, text: str = GAP_RECONNECTED, timestamp: datetime | None = None) -> LogLine:
        """Insert a marker where lines may be missing (the stream was lost and resumed)."""
        return self.append(timestamp, text, gap=True)

    def tail(self, n: int) -> list[LogLine]:
        """The newest ``n`` lines, oldest first."""
        if n <= 0:
            return []
        newest = list(islice(reversed(self._lines), n))
        newest.reverse()
        return newest

    def since(self, seq: int) -> list[LogLine]:
        """Lines with ``seq`` greater than or equal to ``seq`` that are still held, oldest first."""
        if not self._lines or seq >= self._next_seq:
            return []
        start = max(0, len(self._lines) - (self._next_seq - seq))
        return list(islice(self._lines, start, None))

    def search(self, text: str, *, case_sensitive: bool = False, limit: int | None = None) -> list[LogLine]:
        """Lines containing ``text`` (case-insensitive by default), oldest first; the newest ``limit``."""
        if not text:
            return []
        if case_sensitive:
            found = [line for line in self._lines if text in line.text]
        else:
            needle = text.casefold()
            found = [line for line in self._lines if needle in line.text.casefold()]
        return found if limit is None else found[-limit:] if limit > 0 else []

    def clear(self) -> None:
        self._lines.clear()
        self._sizes.clear()
        self._bytes = 0


class ReplayFilter:
    """Drops the lines a log command prints again when it is re-run after a reconnect.

    ``journalctl -n N`` and ``docker logs --tail N`` start with up to N lines from the past, most of which
    the buffer already holds. After ``restart()``, up to ``tail_lines`` lines are checked: a line older
    than the newest line already seen is dropped, and so is a line with that same timestamp and text;
    the first newer line ends the check. A line without a timestamp follows the line before it.
    """

    def __init__(self, tail_lines: int) -> None:
        self.tail_lines = tail_lines
        self._last: datetime | None = None
        self._at_last: Counter[str] = Counter()  # texts seen at ``_last``, with counts
        self._replay_at_last: Counter[str] = Counter()
        self._to_check = 0
        self._dropping = False

    def restart(self) -> None:
        self._to_check = self.tail_lines if self._last is not None else 0
        self._dropping = False
        self._replay_at_last = Counter(self._at_last)

    def accept(self, timestamp: datetime | None, text: str) -> bool:
        """Whether the line is new; call for every line in order."""
        if self._to_check > 0:
            self._to_check -= 1
            if timestamp is None:
                if self._dropping:
                    return False
            elif self._is_replay(timestamp, text):
                self._dropping = True
                return False
            else:
                self._to_check = 0
        self._dropping = False
        if timestamp is not None:
            self._seen(timestamp, text)
        return True

    def _is_replay(self, timestamp: datetime, text: str) -> bool:
        assert self._last is not None
        if timestamp < self._last:
            return True
        if timestamp == self._last and self._replay_at_last[text] > 0:
            self._replay_at_last[text] -= 1
            return True
        return False

    def _seen(self, timestamp: datetime, text: str) -> None:
        if self._last is None or timestamp > self._last:
            self._last = timestamp
            self._at_last = Counter()
        if timestamp == self._last:
            self._at_last[text] += 1


# An engine's own clock at the head of its lines, in the zone of its process (a container's is UTC):
# vLLM's "(APIServer pid=4127) INFO 12-07 01:57:14 [api_server.py:123] …" (its date and time, group 2),
# SGLang's "[2026-12-07 01:57:14] …" (all of group 2). Beside sparktui's own stamp of the same moment
# in the operator's zone, "20:57:14 … INFO 12-07 01:57:14" read as two clocks five hours apart.
ENGINE_CLOCKS = (
    re.compile(
        r"^(\([\w ]+pid=\d+\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"
        r"( \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?) "
    ),
    re.compile(r"^()(\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\] )"),
)


def without_engine_clock(text: str) -> str:
    """``text`` without the engine's own date and time at its head (``ENGINE_CLOCKS``): the line's
    stamp, from the node's journal or container runtime, is the same moment on the screen's one clock."""
    for pattern in ENGINE_CLOCKS:
        match = pattern.match(text)
        if match is not None:
            return text[: match.start(2)] + text[match.end(2) :]
    return text
