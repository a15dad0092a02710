"""Property-based tests of the reader of Prometheus's API answers (``sparktui.sources.promapi``): given
any JSON value, any bytes, any near-valid answer with wrong types in it, the reader returns typed, safe
data or raises ``PrometheusError`` with one short printable line, and nothing else. The body decoder
gives the bytes zlib gives, however the compressed body is cut into chunks.

The budget is bounded (``max_examples``, no deadline): the file runs in seconds on two cores.
"""

from __future__ import annotations

import json
import zlib

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sparktui.model.safe_text import safe_text
from sparktui.sources.promapi import (
    MAX_TIME,
    ActiveTarget,
    AnswerBody,
    PrometheusError,
    Series,
    read_answer,
    read_series,
    read_targets,
)

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WHERE = "Prometheus at http://prom:9090"

# What a broken or hostile server puts where a string, a number or a pair belongs.
HOSTILE_TEXT = (
    "", "abc", "1", "NaN", "+Inf", "-Inf", "1_000", " 1", "1e400", "²", "\x1b]2;pwned\x07", "\x1b]52;c;ZXZpbA==\x1b\\",
    "\x9b2J", "\u202e", "a\nb", "\r", "\x00", "x" * 5000,
)  # fmt: skip
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(HOSTILE_TEXT)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=40,
)


def _or_anything(good: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """Mostly the right shape, sometimes any JSON value in its place."""
    return st.one_of(good, good, good, json_values)


times = _or_anything(st.floats(0, MAX_TIME) | st.integers(0, int(MAX_TIME)))
values = _or_anything(
    st.sampled_from(("1", "0.5", "NaN", "+Inf", "-Inf", "1e+06", "-0")) | st.sampled_from(HOSTILE_TEXT)
)
pairs = _or_anything(st.tuples(times, values).map(list))
labels = _or_anything(
    st.dictionaries(
        st.sampled_from(("__name__", "instance", "job", "model_name", "le")) | st.text(max_size=8),
        _or_anything(st.sampled_from(HOSTILE_TEXT) | st.text(max_size=20)),
        max_size=6,
    )
)
entries = _or_anything(
    st.fixed_dictionaries({"metric": labels, "value": pairs})
    | st.fixed_dictionaries({"metric": labels, "values": _or_anything(st.lists(pairs, max_size=4))})
    | st.fixed_dictionaries({"labels": labels, "lastError": _or_anything(st.sampled_from(HOSTILE_TEXT))})
)
data = _or_anything(
    st.fixed_dictionaries(
        {
            "resultType": _or_anything(st.sampled_from(("vector", "matrix", "scalar", "string"))),
            "result": _or_anything(st.lists(entries, max_size=5)),
        }
    )
    | st.fixed_dictionaries({"activeTargets": _or_anything(st.lists(entries, max_size=5))})
)
answers = _or_anything(
    st.fixed_dictionaries(
        {"status": _or_anything(st.sampled_from(("success", "error"))), "data": data, "error": json_values}
    )
)


def _safe(text: str) -> bool:
    """No escape sequence, control character, line break or bidi override: what ``safe_text`` leaves
    alone (it keeps characters that are merely unassigned, which ``isprintable()`` refuses)."""
    return safe_text(text, len(text) + 1) == text


def _one_line(exc: PrometheusError) -> None:
    text = str(exc)
    assert text.startswith(WHERE + ": ") and _safe(text) and len(text) < 400, text


def _check_series(found: list[Series]) -> None:
    for series in found:
        assert all(type(k) is str and type(v) is str and _safe(k) and _safe(v) for k, v in series.labels.items())
        for at, value in series.samples:
            assert type(at) is float and 0 <= at <= MAX_TIME
            float(value)  # a number, as the readers after this one take it


def _check_targets(found: list[ActiveTarget]) -> None:
    for target in found:
        assert all(_safe(k) and _safe(v) for k, v in target.labels.items())
        assert _safe(target.last_error)


def _read(body: bytes) -> None:
    """Both readers of ``data`` over one body: typed safe data, or one line."""
    try:
        _check_series(read_series(read_answer(body, 200, WHERE), WHERE))
    except PrometheusError as exc:
        _one_line(exc)
    try:
        _check_targets(read_targets(read_answer(body, 200, WHERE), WHERE))
    except PrometheusError as exc:
        _one_line(exc)


@FUZZ
@given(json_values)
@example({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"a": {}}, "value": [1, "1"]}]}})
@example({"status": "error", "error": {"nested": ["not", "text"]}})
def test_the_reader_given_any_json_value_returns_or_raises_only_prometheus_error(value: object) -> None:
    _read(json.dumps(value).encode())
    # the same value where each part of an answer belongs
    _read(json.dumps({"status": "success", "data": value}).encode())
    for kind in ("vector", "matrix"):
        _read(json.dumps({"status": "success", "data": {"resultType": kind, "result": value}}).encode())
    _read(json.dumps({"status": "success", "data": {"activeTargets": value}}).encode())


@FUZZ
@given(answers)
@example({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [["soon", "1"]]}]}})
@example({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [10**400, "1"]}]}})
@example({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [True, "1"]}]}})
def test_the_reader_given_a_near_valid_answer_returns_or_raises_only_prometheus_error(answer: object) -> None:
    _read(json.dumps(answer).encode())


@FUZZ
@given(st.binary(max_size=200))
@example(b"[" * 100_000)
@example(b'{"status":"success","data":' + b"[" * 100_000 + b"]" * 100_000 + b"}")
@example(b"\xff\xfe{}")
def test_the_reader_given_any_bytes_raises_only_prometheus_error(body: bytes) -> None:
    _read(body)


def test_labels_are_made_safe_text_where_they_enter() -> None:
    hostile = {"model_name": "Qwen\x1b]2;pwned\x07\u202e3\x9b2J", "x": "y" * 5000}
    entry = {"metric": hostile, "value": [1, "1"]}
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [entry]}}).encode()
    (series,) = read_series(read_answer(body, 200, WHERE), WHERE)
    assert series.labels["model_name"] == "Qwen3"  # the OSC, the bidi override and the 8-bit CSI gone
    assert len(series.labels["x"]) == 2048 and series.labels["x"].endswith("…")


# --- the body --------------------------------------------------------------------------------------------

CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _compressed(data: bytes, wbits: int) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return compressor.compress(data) + compressor.flush()


@FUZZ
@given(st.binary(max_size=4000), st.sampled_from(sorted(CODINGS)), st.lists(st.integers(1, 300), max_size=20))
def test_the_body_decodes_as_zlib_does_in_any_chunks(data: bytes, coding: str, cuts: list[int]) -> None:
    wire = _compressed(data, CODINGS[coding])
    body = AnswerBody(coding, WHERE)
    at = 0
    for cut in cuts:
        body.feed(wire[at : at + cut])
        at += cut
    body.feed(wire[at:])
    assert bytes(body.finish()) == data


@FUZZ
@given(st.binary(max_size=300), st.sampled_from(("gzip", "deflate", "x-gzip", "br", "gzip, gzip", "identity", None)))
def test_the_body_given_any_bytes_raises_only_prometheus_error(wire: bytes, coding: str | None) -> None:
    try:
        body = AnswerBody(coding, WHERE)
        body.feed(wire)
        body.finish()
    except PrometheusError as exc:
        _one_line(exc)


@pytest.mark.parametrize("coding", sorted(CODINGS))
def test_inflating_stops_at_the_cap(coding: str) -> None:
    wire = _compressed(b"\x00" * 10_000_000, CODINGS[coding])
    body = AnswerBody(coding, WHERE, decoded_cap=100_000)
    with pytest.raises(PrometheusError, match=rf"inflates \({coding}\) to over"):
        body.feed(wire)
    assert len(body.body) <= 100_000


def test_a_value_that_is_not_a_number_is_refused() -> None:
    body = b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1_000"]}]}}'
    with pytest.raises(PrometheusError, match=r"result\[0\]\.value value '1_000' is not a number"):
        read_series(read_answer(body, 200, WHERE), WHERE)
