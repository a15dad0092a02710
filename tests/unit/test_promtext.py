"""The Prometheus text parser: correct on every fixture, strict on garbage."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.model.promtext import MAX_LABEL_VALUE, ParseError, PromParser, looks_truncated, parse
from tests.conftest import DATA

ALL_FIXTURES = sorted(p for p in DATA.rglob("*.prom"))


def _reference_samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # prometheus_client appends _total to counters that lack it on the wire; we keep wire names.
            name = sample.name if sample.name in text else sample.name.removesuffix("_total")
            out[(name, frozenset(sample.labels.items()))] = sample.value
    return out


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: str(p.relative_to(DATA)))
def test_every_fixture_parses_to_the_same_samples_as_prometheus_client(path: Path) -> None:
    text = path.read_text()
    ours = {
        (name, frozenset(labels.items())): value
        for name, series in parse(text).samples.items()
        for labels, value in series
    }
    reference = _reference_samples(text)
    assert ours.keys() == reference.keys()
    for key, value in reference.items():
        assert ours[key] == value or (math.isnan(value) and math.isnan(ours[key]))


def test_escaped_label_values_are_unescaped() -> None:
    text = 'm{path="C:\\\\dir",quote="say \\"hi\\"",nl="a\\nb",brace="}{ ,="} 1\n'
    ((labels, value),) = parse(text).get("m")
    # An escaped newline is unescaped, then made a space: a label value is one line of text to show.
    assert labels == {"path": "C:\\dir", "quote": 'say "hi"', "nl": "a b", "brace": "}{ ,="}
    assert value == 1.0


def test_special_values_and_timestamps() -> None:
    text = 'a NaN\nb +Inf\nc -Inf 1700000000000\nd{x="1"} 2.5e3 1700000000000\n'
    expo = parse(text)
    assert math.isnan(expo.first_value("a") or 0.0)
    assert expo.first_value("b") == math.inf
    assert expo.first_value("c") == -math.inf
    assert expo.first_value("d") == 2500.0


def test_openmetrics_eof_stops_parsing_and_types_are_recorded() -> None:
    text = "# HELP x_total help\n# TYPE x counter\nx_total 3\n# EOF\n"
    expo = parse(text)
    assert expo.first_value("x_total") == 3.0
    assert expo.types == {"x": "counter"}


def test_blank_and_comment_lines_are_skipped() -> None:
    expo = parse("\n# just a comment\n\n  \nm 1\n")
    assert list(expo.names()) == ["m"]


def test_keep_filter_drops_other_names_but_still_checks_them() -> None:
    parser = PromParser(keep=lambda name: name.startswith("vllm:"))
    expo = parser.parse("python_info 1\nvllm:x 2\n")
    assert list(expo.names()) == ["vllm:x"]
    with pytest.raises(ParseError):
        parser.parse('python_info{a="1" 1\nvllm:x 2\n')


@pytest.mark.parametrize(
    ("text", "line_no"),
    [
        ("<html><body>Bad Gateway</body></html>\n", 1),
        ('m 1\nm{a="1",} 2\nm{a=1} 3\n', 3),
        ("ok 1\nbroken_value abc\n", 2),
        ("ok 1\nno_value\n", 2),
        ("1bad_name 2\n", 1),
        ("# TYPE m flurb\nm 1\n", 1),
        ("m 1 2 3\n", 1),
    ],
)
def test_garbage_is_rejected_with_the_line_number(text: str, line_no: int) -> None:
    with pytest.raises(ParseError) as caught:
        parse(text)
    assert caught.value.line_no == line_no
    assert str(caught.value).startswith(f"line {line_no}: ")


def test_memo_gives_identical_results_on_repeated_scrapes() -> None:
    text = (DATA / "vllm-0.33" / "mtp2-steady" / "scrape-015.prom").read_text()
    parser = PromParser()
    first, second = parser.parse(text), parser.parse(text)
    assert first.samples == second.samples
    assert sum(len(v) for v in first.samples.values()) > 400


def test_truncated_body_is_recognised() -> None:
    text = (DATA / "vllm-0.33" / "mtp2-steady" / "scrape-015.prom").read_text()
    assert not looks_truncated(text)
    assert looks_truncated(text[: len(text) // 2])


def test_a_huge_label_value_is_a_parse_error_and_costs_memory_linear_in_the_text() -> None:
    text = 'vllm:num_requests_running{model_name="' + "x" * 2_000_000 + '"} 1\n'
    tracemalloc.start()
    try:
        with pytest.raises(ParseError) as caught:
            parse(text)
        _size, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.reason == f"label model_name is over {MAX_LABEL_VALUE} characters"
    # A copy or two of the text is fine; the old label regex took ~190 bytes per character (380 MB).
    assert peak < 8 * len(text)


def test_a_label_value_at_the_cap_is_accepted() -> None:
    ((labels, _value),) = parse('m{a="' + "y" * MAX_LABEL_VALUE + '"} 1\n').get("m")
    assert len(labels["a"]) == MAX_LABEL_VALUE


@pytest.mark.parametrize(
    "text",
    [
        'vllm:num_requests_running{model_name="m"} 7\nvllm:num_requests_running{model_name="m"} 7\n',
        # The same label set written differently is the same series.
        'm{a="1",b="2"} 1\nother 3\nm{ b = "2" , a="1" } 2\n',
        "m 1 1700000000000\nm 2 1700000001000\n",
    ],
)
def test_a_duplicate_series_is_a_parse_error_naming_it(text: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse(text)
    assert caught.value.reason.startswith("duplicate series ")
    assert caught.value.line_no == len(text.splitlines())


def test_a_duplicate_series_outside_the_keep_filter_is_still_an_error() -> None:
    with pytest.raises(ParseError, match="duplicate series python_info"):
        PromParser(keep=lambda name: name.startswith("vllm:")).parse("python_info 1\nvllm:x 2\npython_info 1\n")


def test_the_same_name_with_other_labels_is_not_a_duplicate() -> None:
    expo = parse('m{a="1"} 1\nm{a="2"} 2\nm 3\n')
    assert [value for _labels, value in expo.get("m")] == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ('foo_bucket{le="1"} 3 # {trace_id="abc"} 0.67\n', 3.0),
        ('foo_bucket{le="+Inf"} 5 # {trace_id="a b}#"} 0.67 1700000000.5\n', 5.0),
        ('foo_total 17 1700000000 # {trace_id="x"} 1\n', 17.0),
        ('foo{path="/a#b"} 2\n', 2.0),
    ],
)
def test_openmetrics_exemplars_are_accepted_and_dropped(line: str, value: float) -> None:
    parser = PromParser()
    for _ in range(2):  # cold, then through the memo
        expo = parser.parse(line + "# EOF\n")
        ((name, ((_labels, got),)),) = expo.samples.items()
        assert got == value
        assert "trace_id" not in name


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('m{a="1",a="2"} 1\n', "duplicate label name a"),
        ("m 1_000\n", "value is not a number"),
        ("m \u0661\u0662\n", "value is not a number"),  # Arabic-Indic digits: float() takes them
        ("m 1 17_00\n", "timestamp is not a number"),
        ("m 1 soon\n", "timestamp is not a number"),
        ("m 1 NaN\n", "timestamp is not a number"),
        ("m 1 +Inf\n", "timestamp is not a number"),
        ("m 1\n# EOF\nm2 2\n", "content after # EOF"),
        ('m 1 # {trace_id="x"}\n', "malformed exemplar"),
        ('m{le="1"} 1 # {trace_id="x"} nope\n', "malformed exemplar"),
        ('m{le="1"} 1 # {trace_id=x} 1\n', "malformed exemplar"),
    ],
)
def test_what_prometheus_refuses_is_a_parse_error_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse(text)
    assert caught.value.reason == reason


def test_blank_lines_after_eof_are_fine() -> None:
    assert parse("m 1\n# EOF\n\n").first_value("m") == 1.0


def test_the_memo_of_heads_is_bounded_by_entries_and_by_characters() -> None:
    by_entries = PromParser(memo_limit=100)
    by_entries.parse("".join(f'm{{n="{i}"}} 1\n' for i in range(1_000)))
    assert len(by_entries._memo) == 100
    by_chars = PromParser(memo_chars=10_000)
    value = "v" * 1_000
    by_chars.parse("".join(f'm{{n="{i}",v="{value}"}} 1\n' for i in range(100)))
    assert sum(len(head) for head in by_chars._memo) < 10_000 + 1_100
    # Full: the next scrape starts a new memo, so heads that changed are remembered again.
    by_entries.parse('m{n="new"} 1\n')
    assert list(by_entries._memo) == ['m{n="new"}']


def test_a_duplicate_series_is_named_as_shown_without_its_escape_sequences() -> None:
    line = 'm{a="\x1b[31mred\x07"} 1\n'
    with pytest.raises(ParseError) as caught:
        parse(line + line)
    assert caught.value.reason == 'duplicate series m{a="red"}'
    assert "\x1b" not in str(caught.value)
