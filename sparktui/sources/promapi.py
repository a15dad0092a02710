"""Prometheus's HTTP API answers, read once where they enter (docs/prometheus.md#what-an-answer-may-hold).

Everything sparktui takes from a Prometheus (or VictoriaMetrics) server comes through here: the body as
it arrives (``AnswerBody``: gzip and deflate inflated while it is read, refused past the caps), then
the JSON (``read_answer``: the envelope ``{"status": ..., "data": ...}``, after a scan that bounds what
parsing it can cost), then the shape of ``data`` (``read_series`` for a vector or a matrix,
``read_targets`` for ``/api/v1/targets``). Every field is checked for type, every label made safe text
(``safe_text``); what comes out is plain typed data (``Series``, ``ActiveTarget``) that no layer above
has to check again. Anything else is a ``PrometheusError`` with a one-line reason.

Pure: bytes in, data out; the HTTP client is ``sparktui.sources.prometheus``'s.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping
from typing import NamedTuple, cast

from sparktui.model.promtext import MAX_LABEL_VALUE
from sparktui.model.safe_text import LABEL_LIMIT, safe_text

# The most series one answer may hold. A vLLM instance exports about 280 of the series sparktui reads
# (its histograms' buckets are most of them), a GPU exporter or node_exporter 10 to 25: a fleet of 8
# Sparks with 4 instances each answers about 10,000, and the 64-node demo about 20,000. 50,000 leaves
# 5x the first and 2.5x the second, and keeps the largest answer admitted (a range query's) near 150 MB
# once parsed (benchmarks/bench_prometheus_hostile.py).
MAX_SERIES = 50_000
# JSON values (objects, arrays, members, elements) per series that an answer may hold on average: a
# series of a range query over BACKFILL_STEPS + 1 points with 10 labels holds about 45. Counted before
# parsing, this bounds what json.loads can build: a value costs 35 to 75 bytes once parsed, so a
# hostile answer of small arrays or keys costs about what the largest answer admitted does.
VALUES_PER_SERIES = 48
MAX_JSON_VALUES = MAX_SERIES * VALUES_PER_SERIES
# Bytes of an answer after decoding (a 50,000-series range answer is about 18 MB), and on the wire.
MAX_DECODED_BYTES = 32 * 1024 * 1024
MAX_RAW_BYTES = 32 * 1024 * 1024
INFLATE_STEP = 256 * 1024  # bytes inflated at a time
# What sparktui asks for in Accept-Encoding, and so all it decodes.
ENCODINGS = "gzip, deflate"
# A label value is written back into exposition text (``series_head``), escaped: at most twice as long,
# which the text parser's bound on a label value must still admit.
LABEL_VALUE_LIMIT = MAX_LABEL_VALUE // 2
# Labels of one series: a real one has 5 to 15 (its own, the target's, a relabelling's few).
MAX_LABELS = 128
# Samples of a series of a matrix, and distinct times over the whole answer: a range query's fall on
# its steps (the caller says how many); another matrix (a range selector's) is bounded by this.
MAX_TIMES = 1_000
# Unix times an answer may hold: after 1970 and before 2286 (a time that is not a number, or is
# infinite, or far outside, is a broken server).
MAX_TIME = 1e10
# A sample value as Prometheus and VictoriaMetrics write it (Go's strconv, NaN and ±Inf included). Go
# writes a float in full ('f' format), so the longest is a few hundred digits.
_VALUE = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|Inf|NaN)\Z")
MAX_VALUE_CHARS = 400


class PrometheusError(Exception):
    """Prometheus did not answer a query usefully. The message is one line for the operator."""


class Series(NamedTuple):
    """One series of a vector or a matrix: its labels (``__name__`` included where the answer has it),
    safe text, and its samples as (unix time, value as the server wrote it): one for an instant vector,
    the steps of a range query for a matrix. (A tuple: made once per series of every answer, and a
    frozen dataclass costs several times as much to make.)"""

    labels: Mapping[str, str]
    samples: tuple[tuple[float, str], ...]


class ActiveTarget(NamedTuple):
    """A target of ``/api/v1/targets``: its labels and the error of its last scrape ("" when none)."""

    labels: Mapping[str, str]
    last_error: str


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


# --- the body ------------------------------------------------------------------------------------------


class AnswerBody:
    """The body of one answer, fed the bytes as they come off the wire (``feed``), decoded as
    ``Content-Encoding`` says while it is read: inflating stops at ``decoded_cap``, so a compression
    bomb costs at most the cap, never what it would inflate to."""

    def __init__(
        self,
        encoding: str | None,
        where: str,
        *,
        raw_cap: int = MAX_RAW_BYTES,
        decoded_cap: int = MAX_DECODED_BYTES,
    ) -> None:
        self.where = where
        self.raw_cap = raw_cap
        self.decoded_cap = decoded_cap
        self.raw_size = 0
        self.body = bytearray()
        codings = [c.strip().lower() for c in (encoding or "").split(",") if c.strip().lower() not in ("", "identity")]
        self.coding = codings[0] if len(codings) == 1 else None
        if codings and self.coding not in ("gzip", "x-gzip", "deflate"):
            shown = safe_text(encoding or "", LABEL_LIMIT)
            raise PrometheusError(f"{where}: the answer is compressed as {shown!r}; sparktui asks for {ENCODINGS}")
        self._inflate = None if self.coding is None else zlib.decompressobj(_wbits(self.coding))
        self._inflated_any = False

    def feed(self, chunk: bytes) -> None:
        self.raw_size += len(chunk)
        if self.raw_size > self.raw_cap:
            raise PrometheusError(f"{self.where}: the answer is over {_mib(self.raw_cap)}, the bound on an answer")
        if self._inflate is None:
            self._append(chunk)
            return
        data = chunk
        while data and not self._inflate.eof:
            try:
                # At most one byte past the room left (that byte is the refusal), in steps: zlib builds
                # each step's output twice before it is appended, so a step is kept small.
                room = self.decoded_cap - len(self.body) + 1
                out = self._inflate.decompress(data, min(room, INFLATE_STEP))
            except zlib.error as exc:
                if self.coding == "deflate" and not self._inflated_any:
                    # "deflate" is a zlib stream by the RFC; some servers send raw deflate (as httpx allows).
                    self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                    self._inflated_any = True
                    continue
                raise PrometheusError(f"{self.where}: cannot decode the {self.coding} answer: {exc}") from None
            self._inflated_any = True
            self._append(out)
            data = self._inflate.unconsumed_tail

    def _append(self, data: bytes) -> None:
        if len(self.body) + len(data) > self.decoded_cap:
            how = f" inflates ({self.coding}) to" if self.coding else " is"
            raise PrometheusError(
                f"{self.where}: the answer{how} over {_mib(self.decoded_cap)}, the bound on an answer"
            )
        self.body += data

    def finish(self) -> bytearray:
        """The whole body, decoded; a compressed one must have ended."""
        if self._inflate is not None and not self._inflate.eof:
            raise PrometheusError(f"{self.where}: the {self.coding} answer is cut short")
        return self.body


def _wbits(coding: str) -> int:
    return 16 + zlib.MAX_WBITS if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS


# --- the JSON ------------------------------------------------------------------------------------------


def read_answer(body: bytes | bytearray, status: int, where: str) -> object:
    """The ``data`` of an API answer: its JSON parsed within the budgets, a success, or the server's
    own error as the reason."""
    series = body.count(b'"metric"')  # each series of a vector or matrix has one (counted again below)
    if series > MAX_SERIES:
        raise PrometheusError(f"{where}: the answer has {series:,} series, over the bound of {MAX_SERIES:,}")
    # Every JSON value but the outermost follows a comma, a colon or an opening bracket (those inside
    # strings count too: an upper bound), so this bounds the objects json.loads can make.
    values = sum(body.count(c) for c in (b",", b":", b"[", b"{"))
    if values > MAX_JSON_VALUES:
        raise PrometheusError(
            f"{where}: the answer holds over {MAX_JSON_VALUES:,} JSON values, more than {MAX_SERIES:,} series need"
        )
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
        raise PrometheusError(f"{where}: HTTP {status}, and the answer is not Prometheus's JSON API") from None
    if type(answer) is not dict:
        raise PrometheusError(f"{where}: HTTP {status}, and the answer is not Prometheus's JSON API")
    if answer.get("status") != "success":
        error = answer.get("error")
        reason = error if type(error) is str and error.strip() else "not a success"
        raise PrometheusError(f"{where}: HTTP {status}: {first_line(reason)}")
    return answer.get("data")


def read_series(data: object, where: str, max_times: int = MAX_TIMES) -> list[Series]:
    """The series of a query's ``data``: a vector (one sample each) or a matrix (the steps: at most
    ``max_times`` samples a series, and as many distinct times over the whole answer)."""
    if type(data) is not dict:
        raise _malformed(where, "data", data, "an object")
    kind = data.get("resultType")
    if type(kind) is not str:
        raise _malformed(where, "data.resultType", kind, "a string")
    if kind not in ("vector", "matrix"):
        raise PrometheusError(f"{where}: the answer is a {safe_text(kind, 40)}, not a vector or matrix")
    result = data.get("result")
    if type(result) is not list:
        raise _malformed(where, "data.result", result, "an array")
    if len(result) > MAX_SERIES:
        raise PrometheusError(f"{where}: the answer has {len(result):,} series, over the bound of {MAX_SERIES:,}")
    vector = kind == "vector"
    times: set[float] = set()
    out: list[Series] = []
    for i, entry in enumerate(result):
        # Paths for the reasons are written only when one is given: this loop runs once per series.
        if type(entry) is not dict:
            raise _malformed(where, f"result[{i}]", entry, "an object")
        labels = _labels(entry.get("metric"), where, "result[{}].metric", i)
        if vector:
            if "value" not in entry and "histogram" in entry:
                continue  # a native histogram: sparktui reads none
            samples: tuple[tuple[float, str], ...] = (_sample(entry.get("value"), where, "result[{}].value", i),)
        else:
            points = entry.get("values")
            if points is None and "histograms" in entry:
                continue
            if type(points) is not list:
                raise _malformed(where, f"result[{i}].values", points, "an array")
            if len(points) > max_times:  # at most one sample per step
                raise PrometheusError(
                    f"{where}: result[{i}].values has {len(points):,} samples, more than the {max_times:,} asked for"
                )
            samples = tuple(_sample(p, where, "result[{}].values[{}]", i, j) for j, p in enumerate(points))
            times.update(at for at, _value in samples)
            if len(times) > max_times:
                raise PrometheusError(
                    f"{where}: the answer's samples fall at over {max_times:,} distinct times, more than were asked for"
                )
        out.append(Series(labels, samples))
    return out


def read_targets(data: object, where: str) -> list[ActiveTarget]:
    """The active targets of ``/api/v1/targets``'s ``data``."""
    if type(data) is not dict:
        raise _malformed(where, "data", data, "an object")
    active = data.get("activeTargets")
    if type(active) is not list:
        raise _malformed(where, "data.activeTargets", active, "an array")
    if len(active) > MAX_SERIES:
        raise PrometheusError(f"{where}: the answer has {len(active):,} targets, over the bound of {MAX_SERIES:,}")
    out: list[ActiveTarget] = []
    for i, entry in enumerate(active):
        if type(entry) is not dict:
            raise _malformed(where, f"activeTargets[{i}]", entry, "an object")
        last_error = entry.get("lastError", "")
        if type(last_error) is not str:
            raise _malformed(where, f"activeTargets[{i}].lastError", last_error, "a string")
        labels = _labels(entry.get("labels"), where, "activeTargets[{}].labels", i)
        out.append(ActiveTarget(labels, safe_text(last_error)))
    return out


def _labels(raw: object, where: str, path: str, *at: int) -> Mapping[str, str]:
    """A series' labels, text to text, made safe: the answer's own dict when every label already is
    (the common case: no copy), checked in C over all of them at once. ``path.format(*at)`` names
    them in a reason."""
    if type(raw) is not dict:
        raise _malformed(where, path.format(*at), raw, "an object of labels")
    if len(raw) > MAX_LABELS:
        raise PrometheusError(f"{where}: {path.format(*at)} has {len(raw):,} labels, over the bound of {MAX_LABELS}")
    try:
        values = "".join(raw.values())  # JSON keys are always str; a value that is not fails the join
    except TypeError:
        name, value = next((k, v) for k, v in raw.items() if type(v) is not str)
        raise _malformed(where, f"{path.format(*at)}.{safe_text(name, 40)}", value, "a string") from None
    names = "".join(raw)
    if (
        values.isprintable()
        and names.isprintable()
        and (len(values) <= LABEL_VALUE_LIMIT or max(map(len, raw.values())) <= LABEL_VALUE_LIMIT)
        and (len(names) <= LABEL_LIMIT or max(map(len, raw)) <= LABEL_LIMIT)
    ):
        return cast(dict[str, str], raw)
    return {safe_text(k, LABEL_LIMIT): safe_text(v, LABEL_VALUE_LIMIT) for k, v in raw.items()}


def _sample(raw: object, where: str, path: str, *at: int) -> tuple[float, str]:
    """``[time, "value"]``: a unix time (a number) and a value as Prometheus writes one (a string).
    ``path.format(*at)`` names it in a reason."""
    if type(raw) is list and len(raw) == 2:
        time, value = raw
        if (
            (type(time) is float or type(time) is int)
            and 0 <= time <= MAX_TIME  # NaN fails it too
            and type(value) is str
            and len(value) <= MAX_VALUE_CHARS
            and _VALUE.match(value)
        ):
            return float(time), value
    raise _bad_sample(raw, where, path.format(*at))


def _bad_sample(raw: object, where: str, path: str) -> PrometheusError:
    """Why ``raw`` is not a sample."""
    if type(raw) is not list or len(raw) != 2:
        return _malformed(where, path, raw, "a [time, value] pair")
    time, value = raw
    if type(time) is not float and type(time) is not int:
        return _malformed(where, f"{path} time", time, "a number")
    if not 0 <= time <= MAX_TIME:
        return PrometheusError(f"{where}: malformed answer: {path} time {time!r:.40} is not a unix time")
    if type(value) is not str:
        return _malformed(where, f"{path} value", value, "a string")
    return PrometheusError(f"{where}: malformed answer: {path} value {safe_text(value, 40)!r} is not a number")


_KINDS = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def _kind(value: object) -> str:
    return "missing" if value is None else _KINDS.get(type(value), type(value).__name__)


def _malformed(where: str, path: str, value: object, wanted: str) -> PrometheusError:
    found = "missing or null" if value is None else f"{_kind(value)}"
    return PrometheusError(f"{where}: malformed answer: {path} is {found}, not {wanted}")


def first_line(text: str) -> str:
    """The first line of a server's text, made safe to print."""
    lines = text.strip().splitlines()
    return safe_text(lines[0], 300) if lines else ""
