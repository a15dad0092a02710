"""Prometheus text exposition (0.0.4 and OpenMetrics 1.0) parsing.

A scrape is parsed into ``Exposition``: samples grouped by sample name, each with its labels and
value. The parser is strict about structure (a line that is not a sample, a comment or blank is an
error naming the line) and tolerant about what the formats allow (timestamps, ``NaN``/``+Inf``,
escaped label values, ``# EOF``).

It is written for the poll loop: a scrape's label blocks repeat exactly from one scrape to the next,
so ``PromParser`` keeps the parsed ``name{labels}`` heads in a bounded memo and most lines cost one
dictionary lookup and one ``float()``. ``benchmarks/bench_parse.py`` measures it against
``prometheus_client``'s parser.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

Labels = Mapping[str, str]
Sample = tuple[Labels, float]

_NO_LABELS: Labels = MappingProxyType({})
_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*(,|\Z)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_ESCAPE_RE = re.compile(r"\\[\\\"n]")
_METRIC_TYPES = frozenset(
    {"counter", "gauge", "histogram", "summary", "untyped", "unknown", "gaugehistogram", "stateset", "info"}
)


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
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], value) if "\\" in value else value


def _parse_labels(block: str) -> Labels | None:
    """Parse the inside of ``{...}``; None if it is not a valid label set."""
    labels: dict[str, str] = {}
    pos, end = 0, len(block)
    while pos < end:
        if block[pos:].strip() == "":
            break
        m = _LABEL_RE.match(block, pos)
        if m is None:
            return None
        labels[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
        if m.group(3) != ",":
            break
    if pos < end and block[pos:].strip():
        return None
    return MappingProxyType(labels)


def _parse_value(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class PromParser:
    """Parses expositions; keeps a bounded memo of parsed series heads across scrapes.

    One parser per scrape target keeps the memo small and hot. ``keep`` selects the sample names to
    keep (``None`` keeps all); skipped lines are still checked for structure.
    """

    def __init__(self, keep: Callable[[str], bool] | None = None, memo_limit: int = 20_000) -> None:
        self._keep = keep
        self._memo: dict[str, tuple[str, Labels] | None] = {}
        self._memo_limit = memo_limit

    def _head(self, head: str) -> tuple[str, Labels] | None:
        """``name`` or ``name{labels}`` -> (name, labels), or None when malformed."""
        brace = head.find("{")
        if brace < 0:
            name, labels = head, _NO_LABELS
        else:
            if not head.endswith("}"):
                return None
            name = head[:brace]
            parsed = _parse_labels(head[brace + 1 : -1])
            if parsed is None:
                return None
            labels = parsed
        if _NAME_RE.match(name) is None:
            return None
        return name, labels

    def parse(self, text: str) -> Exposition:
        samples: dict[str, list[Sample]] = {}
        types: dict[str, str] = {}
        keep = self._keep
        memo = self._memo
        if len(memo) > self._memo_limit:
            memo.clear()
        line_no = 0
        for line_no, raw in enumerate(text.split("\n"), start=1):
            line = raw.strip()
            if not line:
                continue
            if line[0] == "#":
                if line.startswith("# TYPE "):
                    parts = line.split(None, 3)
                    if len(parts) != 4 or parts[3].strip() not in _METRIC_TYPES:
                        raise ParseError(line_no, "malformed TYPE line", line)
                    types[parts[2]] = parts[3].strip()
                elif line == "# EOF":
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
            if not rest or len(rest) > 2:
                raise ParseError(line_no, "expected 'name{labels} value [timestamp]'", line)
            parsed = memo.get(head)
            if parsed is None:
                parsed = self._head(head)
                if parsed is None:
                    raise ParseError(line_no, "malformed metric name or labels", line)
                memo[head] = parsed
            value = _parse_value(rest[0])
            if value is None:
                raise ParseError(line_no, "value is not a number", line)
            name, labels = parsed
            if keep is not None and not keep(name):
                continue
            bucket = samples.get(name)
            if bucket is None:
                samples[name] = [(labels, value)]
            else:
                bucket.append((labels, value))
        return Exposition(samples=samples, types=types, lines=line_no)


def parse(text: str, keep: Callable[[str], bool] | None = None) -> Exposition:
    """Parse one exposition without a memo (tests, one-off use)."""
    return PromParser(keep).parse(text)


def looks_truncated(text: str) -> bool:
    """A complete exposition ends with a newline (both text formats require it)."""
    return bool(text) and not text.endswith("\n")
