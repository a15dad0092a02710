"""Prometheus text exposition (0.0.4 and OpenMetrics 1.0) parsing.

A scrape is parsed into ``Exposition``: samples grouped by sample name, each with its labels and
value. The parser is strict about structure: a line that is not a sample, a comment or blank, a
label name given twice, a label value over ``MAX_LABEL_VALUE`` characters, a number Prometheus would
not read (``1_000``), the same series twice in one scrape, or anything after ``# EOF`` is a
``ParseError`` naming the line, and so is a text of more than ``MAX_SERIES`` samples (counted before
any is parsed). It is tolerant about what the formats allow: timestamps,
``NaN``/``+Inf``, escaped label values, ``# EOF``, OpenMetrics exemplars (``... # {trace_id="a"} 0.6``,
checked for shape and dropped).

It is also the one place where the text of a Prometheus exposition becomes safe to show: every label value
is made safe here (``safe_text``: no escape sequence, control, bidirectional override or line break), so
a ``finished_reason``, a ``position`` or a ``model_name`` holding an OSC 52 reaches no layer above as
anything but plain text, whichever field reads it. Names are safe by their grammar.

It is written for the poll loop: a scrape's label blocks repeat exactly from one scrape to the next,
so ``PromParser`` keeps the parsed ``name{labels}`` heads in a bounded memo and most lines cost one
dictionary lookup and one ``float()``. Memory is linear in the text and small (a few bytes per
character, whatever the text holds). ``benchmarks/bench_parse.py`` measures it against
``prometheus_client``'s parser; ``benchmarks/bench_parse_hostile.py`` measures hostile texts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sparktui.model.safe_text import safe_text

Labels = Mapping[str, str]
Sample = tuple[Labels, float]

_NO_LABELS: Labels = MappingProxyType({})
_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
# One ``name="value"`` of a label block. The value is the "unrolled loop" form with possessive
# quantifiers: a run of plain characters is one regex step, so matching a long value costs no
# backtracking state per character (``(?:[^"\\]|\\.)*`` cost ~190 bytes of memory per character).
_LABEL_RE = re.compile(r'\s*+([a-zA-Z_][a-zA-Z0-9_]*+)\s*+=\s*+"([^"\\\n]*+(?:\\.[^"\\\n]*+)*+)"\s*+(,|\Z)')
# A series head (``name`` or ``name{labels}``) at the start of a line, label values read quote-aware:
# the slow path for the lines the fast path cannot split (an OpenMetrics exemplar after the value).
_HEAD_RE = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*+(?:\{[^"}]*+(?:"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"[^"}]*+)*+\})?')
# What follows the value of an OpenMetrics exemplar's ``#``: ``{labels} value [timestamp]``.
_EXEMPLAR_RE = re.compile(r"\s*+\{(.*)\}\s++(\S++)(?:\s++(\S++))?\s*+\Z")
_METRIC_TYPES = frozenset(
    {"counter", "gauge", "histogram", "summary", "untyped", "unknown", "gaugehistogram", "stateset", "info"}
)
# The longest label value accepted, in characters. Real label values are model names, paths and
# version strings; a longer one is a broken or hostile endpoint, refused before it is copied anywhere.
MAX_LABEL_VALUE = 4096
# The most samples one exposition may hold. A real vLLM 0.33 scrape holds about 500 per engine; eight
# data-parallel engines serving a few models stay under 10,000. A text with more is a broken or hostile
# endpoint (100,000 distinct series held the event loop for 4 s a poll): refused whole, counted in C
# before a line is split.
MAX_SERIES = 20_000


class ParseError(ValueError):
    """The text is not a Prometheus exposition; the message names the line and what is wrong."""

    def __init__(self, line_no: int, reason: str, line: str) -> None:
        snippet = line if len(line) <= 60 else line[:57] + "..."
        super().__init__(f"line {line_no}: {reason}: {snippet!r}")
        self.line_no = line_no
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Exposition:
    """One scrape: samples by sample name (``foo_bucket``, ``foo_total``...), plus TYPE lines."""

    samples: Mapping[str, list[Sample]]
    types: Mapping[str, str] = field(default_factory=dict)
    lines: int = 0
    series: int = 0  # sample lines in the text, kept or not: 0 is an exposition with nothing in it

    def get(self, name: str) -> list[Sample]:
        return self.samples.get(name, [])

    def __contains__(self, name: object) -> bool:
        return name in self.samples

    def names(self) -> Iterator[str]:
        return iter(self.samples)

    def first_value(self, name: str) -> float | None:
        series = self.samples.get(name)
        return series[0][1] if series else None


def _unescape(value: str) -> str:
    """Undo the format's three escapes (backslash, double quote, newline; others stay as written), in
    C: split at the escaped backslashes, after which the other two cannot overlap. A regex with a
    Python callback per escape took 0.7 s on 4 MB of escaped quotes."""
    if "\\" not in value:
        return value
    parts = value.split("\\\\")
    return "\\".join(part.replace('\\"', '"').replace("\\n", "\n") for part in parts)


def _parse_labels(block: str) -> Labels | str:
    """Parse the inside of ``{...}``; a reason string if it is not a valid label set."""
    labels: dict[str, str] = {}
    pos, end = 0, len(block)
    while pos < end:
        m = _LABEL_RE.match(block, pos)
        if m is None:
            return "malformed labels" if block[pos:].strip() else MappingProxyType(labels)
        if m.end(2) - m.start(2) > MAX_LABEL_VALUE:
            return f"label {m.group(1)} is over {MAX_LABEL_VALUE} characters"
        name = m.group(1)
        if name in labels:
            return f"duplicate label name {name}"
        labels[name] = safe_text(_unescape(m.group(2)), MAX_LABEL_VALUE)
        pos = m.end()
        if m.group(3) != ",":
            break
    if pos < end and block[pos:].strip():
        return "malformed labels"
    return MappingProxyType(labels)


def parse_number(text: str) -> float | None:
    """A number as the exposition formats write it (``NaN`` and ``+Inf`` included), else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    # Python's float() also takes "1_000" and non-ASCII digits; the exposition formats do not.
    if "_" in text or not text.isascii():
        return None
    return value


def _finite_number(text: str) -> bool:
    number = parse_number(text)
    return number is not None and math.isfinite(number)


def series_text(name: str, labels: Labels) -> str:
    """``name{a="1",b="2"}``: one series as the exposition writes it, labels in sorted order."""
    if not labels:
        return name
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _shown(text: str, limit: int = 80) -> str:
    """Remote text for a reason: control characters escaped (nothing may paint the terminal), cut short."""
    shown = text[: limit + 1]
    if not shown.isprintable():
        shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in shown)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


# A parsed series head: its name, labels, and the series written canonically (for duplicates).
_Head = tuple[str, Labels, str]


class PromParser:
    """Parses expositions; keeps a bounded memo of parsed series heads across scrapes.

    One parser per scrape target keeps the memo small and hot. ``keep`` selects the sample names to
    keep (``None`` keeps all); skipped lines are still checked for structure and duplicates. The memo
    is bounded by entries and by the characters of its keys, so an endpoint that sends new heads every
    scrape cannot grow it past a few MB.
    """

    def __init__(
        self, keep: Callable[[str], bool] | None = None, memo_limit: int = 20_000, memo_chars: int = 4_000_000
    ) -> None:
        self._keep = keep
        self._memo: dict[str, _Head] = {}
        self._memo_limit = memo_limit
        self._memo_chars_limit = memo_chars
        self._memo_chars = 0

    def _head(self, head: str) -> _Head | str:
        """``name`` or ``name{labels}`` -> (name, labels, canonical series), or a reason."""
        brace = head.find("{")
        if brace < 0:
            name, labels = head, _NO_LABELS
        else:
            if not head.endswith("}"):
                return "malformed metric name or labels"
            name = head[:brace]
            parsed = _parse_labels(head[brace + 1 : -1])
            if isinstance(parsed, str):
                return parsed
            labels = parsed
        if _NAME_RE.match(name) is None:
            return "malformed metric name or labels"
        return name, labels, series_text(name, labels)

    def _remember(self, head: str, parsed: _Head) -> None:
        # Full: the heads of this scrape are not kept (the memo starts again at the next scrape).
        if len(self._memo) < self._memo_limit and self._memo_chars < self._memo_chars_limit:
            self._memo[head] = parsed
            self._memo_chars += len(head)

    def _new_head(self, line_no: int, line: str, head: str, rest: list[str]) -> tuple[str, list[str], _Head]:
        """A sample line whose head is not in the memo, or that is not of a plain sample's shape: its
        head parsed (and remembered), or read as a sample with an OpenMetrics exemplar; a
        ``ParseError`` when it is neither. Off the hot path: the memo answers most lines."""
        found = self._head(head) if rest and len(rest) <= 2 else "expected 'name{labels} value [timestamp]'"
        if isinstance(found, str):
            # Not a plain sample: maybe one with an OpenMetrics exemplar ("... # {labels} value").
            split = _split_exemplar(line)
            if split is None or isinstance(split, str):
                raise ParseError(line_no, split or found, line)
            head, rest = split
            found = self._memo.get(head) or self._head(head)
            if isinstance(found, str):
                raise ParseError(line_no, found, line)
        self._remember(head, found)
        return head, rest, found

    def parse(self, text: str) -> Exposition:
        samples: dict[str, list[Sample]] = {}
        types: dict[str, str] = {}
        every_series: list[str] = []  # checked for duplicates at the end: one set() beats a test per line
        keep = self._keep
        memo = self._memo
        if len(memo) >= self._memo_limit or self._memo_chars >= self._memo_chars_limit:
            memo.clear()
            self._memo_chars = 0
        # A sample line is at least 4 characters ("a 1\n"): a shorter text cannot be over the budget,
        # and a real scrape (72 KB for one engine) pays no count of its lines.
        if len(text) > 4 * MAX_SERIES and (count := _sample_lines(text)) > MAX_SERIES:
            raise TooManySeries(count)
        lines = text.split("\n")
        line_no = 0
        for line_no, raw in enumerate(lines, start=1):
            line = raw.strip()
            if not line:
                continue
            if line[0] == "#":
                # Only TYPE and EOF mean anything; HELP and other comments cost no call.
                if (line.startswith("# TYPE ") or line == "# EOF") and _read_comment(line, line_no, lines, types):
                    break
                continue
            # Split the series head from "value [timestamp]". Label values may hold spaces and
            # braces, so a head with labels ends at the last '}'.
            close = line.rfind("}")
            if close >= 0 and "{" in line:
                head = line[: close + 1]
                rest = line[close + 1 :].split()
            else:
                parts = line.split()
                head, rest = parts[0], parts[1:]
            parsed = memo.get(head)
            if parsed is None or not rest or len(rest) > 2:
                head, rest, parsed = self._new_head(line_no, line, head, rest)
            number = rest[0]
            try:
                value = float(number)
            except ValueError:
                raise ParseError(line_no, "value is not a number", line) from None
            if "_" in number or not number.isascii():
                raise ParseError(line_no, "value is not a number", line)
            if len(rest) == 2 and not _finite_number(rest[1]):
                raise ParseError(line_no, "timestamp is not a number", line)
            name, labels, series = parsed
            every_series.append(series)
            if keep is not None and not keep(name):
                continue
            bucket = samples.get(name)
            if bucket is None:
                samples[name] = [(labels, value)]
            else:
                bucket.append((labels, value))
        if len(set(every_series)) != len(every_series):
            _raise_duplicate(lines, every_series)
        return Exposition(samples=samples, types=types, lines=line_no, series=len(every_series))


def _read_comment(line: str, line_no: int, lines: list[str], types: dict[str, str]) -> bool:
    """A ``#`` line: a TYPE line's type is kept in ``types``; True at ``# EOF``, which ends the
    exposition (nothing but blank lines may follow it)."""
    if line.startswith("# TYPE "):
        parts = line.split(None, 3)
        if len(parts) != 4 or parts[3].strip() not in _METRIC_TYPES:
            raise ParseError(line_no, "malformed TYPE line", line)
        types[parts[2]] = parts[3].strip()
        return False
    if line == "# EOF":
        for after, rest_line in enumerate(lines[line_no:], start=line_no + 1):
            if rest_line.strip():
                raise ParseError(after, "content after # EOF", rest_line.strip())
        return True
    return False


class TooManySeries(ParseError):
    """An exposition of more than ``MAX_SERIES`` samples, refused before parsing."""

    def __init__(self, count: int) -> None:
        ValueError.__init__(self, f"{count:,} series, over the budget of {MAX_SERIES:,} a scrape; not read")
        self.line_no = 0
        self.reason = str(self)
        self.count = count


def _sample_lines(text: str) -> int:
    """Lines that are not blank or comments, counted without splitting the text (an upper bound:
    a line of spaces counts)."""
    return text.count("\n") + (not text.endswith("\n")) - text.count("\n#") - text.startswith("#") - text.count("\n\n")


def _raise_duplicate(lines: list[str], every_series: list[str]) -> None:
    """Raise a ``ParseError`` at the first sample line that repeats a series (its k-th sample line)."""
    first: dict[str, int] = {}
    repeats = [i for i, series in enumerate(every_series) if first.setdefault(series, i) != i]
    if not repeats:
        return
    repeated = repeats[0]
    samples_before = 0
    for line_no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line[0] == "#":
            continue
        if samples_before == repeated:
            raise ParseError(line_no, f"duplicate series {_shown(every_series[repeated])}", line)
        samples_before += 1


def _split_exemplar(line: str) -> tuple[str, list[str]] | str | None:
    """``head value [ts] # {labels} value [ts]`` -> (head, [value, ts]); None if it is not that shape,
    a reason if it is but the exemplar is malformed.

    The exemplar is checked for shape and dropped: nothing in sparktui reads trace ids.
    """
    m = _HEAD_RE.match(line)
    if m is None:
        return None
    before, hash_, exemplar = line[m.end() :].partition("#")
    rest = before.split()
    if not hash_ or not rest or len(rest) > 2 or not before[:1].isspace():
        return None
    ex = _EXEMPLAR_RE.match(exemplar)
    if ex is None or isinstance(_parse_labels(ex.group(1)), str) or parse_number(ex.group(2)) is None:
        return "malformed exemplar"
    if ex.group(3) is not None and parse_number(ex.group(3)) is None:
        return "malformed exemplar"
    return m.group(0), rest


def parse(text: str, keep: Callable[[str], bool] | None = None) -> Exposition:
    """Parse one exposition without a memo (tests, one-off use)."""
    return PromParser(keep).parse(text)


def decode(body: bytes) -> str:
    """A scrape's body as text: UTF-8, as both formats require, else a ``ParseError`` at the first bad
    byte's line. A multi-byte character cut off at the very end is dropped (the body was truncated,
    which ``looks_truncated`` then tells)."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and exc.start >= len(body) - 3:
            return body[: exc.start].decode("utf-8")
        line_no = body.count(b"\n", 0, exc.start) + 1
        start = body.rfind(b"\n", 0, exc.start) + 1
        line = body[start : start + 80].decode("utf-8", errors="replace").split("\n")[0]
        raise ParseError(line_no, "not UTF-8 text", line) from None


def looks_truncated(text: str) -> bool:
    """A complete exposition ends with a newline (both text formats require it)."""
    return bool(text) and not text.endswith("\n")
