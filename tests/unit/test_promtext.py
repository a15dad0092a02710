"""The Prometheus text parser: correct on every fixture, strict on garbage."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.model.promtext import ParseError, PromParser, looks_truncated, parse
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
    assert labels == {"path": "C:\\dir", "quote": 'say "hi"', "nl": "a\nb", "brace": "}{ ,="}
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
