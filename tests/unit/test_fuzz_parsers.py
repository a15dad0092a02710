"""Property-based tests of everything that reads what an endpoint sends: the Prometheus text parser,
the vLLM normaliser and the numbers derived from it, the exporter readers, and the instance's whole
/metrics path. Seeded with real scrapes (``tests/data``) and mutated; only the documented errors may
come out (``ParseError`` from the parser, ``ScrapeProblem`` from the normaliser), and the instance path
raises nothing at all. A differential test checks the parser against prometheus_client's on valid
text, 0.0.4 and OpenMetrics.

The budget is bounded (``max_examples``, no deadline): the whole file runs in well under a minute on
two cores.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.parser import text_string_to_metric_families

from sparktui.engines import readings
from sparktui.engines.vllm.scrape import WANTED, normalise
from sparktui.model.exporters import gpu_reading
from sparktui.model.fleet import FleetState
from sparktui.model.memory import host_memory_from_exposition, pressure_from_exposition
from sparktui.model.promtext import MAX_LABEL_VALUE, Exposition, ParseError, PromParser, parse
from sparktui.model.safe_text import safe_text
from sparktui.model.scrape import EngineScrape, ScrapeProblem
from sparktui.model.tracker import ScrapeTracker
from tests.conftest import DATA, VLLM_FIXTURES
from tests.unit.test_status import FLEET, observe, ok, view

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VLLM_SCRAPES = tuple(
    (VLLM_FIXTURES / scenario / name).read_text()
    for scenario, name in (
        ("mtp2-steady", "scrape-003.prom"),
        ("mtp3-poor-pos2", "scrape-010.prom"),
        ("disable-log-stats", "scrape-001.prom"),
        ("restart", "scrape-005.prom"),
    )
)
EXPORTER_SCRAPES = tuple(p.read_text() for p in sorted((DATA / "exporters").glob("*.prom")))
GOOD = normalise(parse(VLLM_SCRAPES[0]))

# What a broken or hostile endpoint puts into a scrape.
TOKENS = (
    '"', "{", "}", "\\", ",", "=", " ", "\t", "\n", "#", "# EOF\n", "# TYPE x flurb\n", "NaN", "+Inf", "-Inf",
    "1_000", "1e400", "-0", "abc", 'le="abc"', 'le="NaN"', "\x00", "é", "\ufffd", "٣", ' # {trace_id="x"} 1',
    'a="1",a="2"', "}{", "\r", "\x1b[31m", "\u2028",
)  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, seeds: tuple[str, ...]) -> str:
    """A real scrape with a few hostile edits: inserted tokens or text, cut ranges, repeated lines,
    a sample's value replaced, the end cut off."""
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(("insert", "text", "cut", "repeat", "value", "truncate")))
        if edit == "insert":
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif edit == "text":
            text = text[:at] + draw(st.text(max_size=12)) + text[at:]
        elif edit == "cut":
            text = text[:at] + text[at + draw(st.integers(1, 200)) :]
        elif edit == "repeat":
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            line = text[start : end + 1] if end >= 0 else text[start:] + "\n"
            text = text[:start] + line + text[start:]
        elif edit == "value":
            lines = text.split("\n")
            index = draw(st.integers(0, len(lines) - 1))
            head, _sep, _value = lines[index].rpartition(" ")
            if head and not lines[index].startswith("#"):
                lines[index] = f"{head} {draw(st.sampled_from(('NaN', '+Inf', '-Inf', '1_0', '', 'x', '1e309')))}"
            text = "\n".join(lines)
        else:
            text = text[:at]
    return text


def _finite_numbers(scrape: EngineScrape) -> bool:
    numbers: list[float] = []
    for model in scrape.models.values():
        numbers.extend(model.counters.values())
        numbers.extend(v for v in (model.running, model.waiting, model.waiting_for_capacity) if v is not None)
        numbers.extend(model.kv_usage_by_engine.values())
        for hist in model.histograms.values():
            numbers.extend((*hist.cumulative, hist.sum, hist.count))
            numbers.extend(b for b in hist.bounds if not math.isinf(b))
    return all(math.isfinite(n) for n in numbers)


@FUZZ
@given(mutated(VLLM_SCRAPES))
@example('vllm:num_requests_running{model_name="m"} 7\nvllm:num_requests_running{model_name="m"} 7\n')
@example('vllm:time_to_first_token_seconds_bucket{le="abc"} 1\nvllm:time_to_first_token_seconds_count 1\n')
@example('vllm:kv_cache_usage_perc{engine="0"} NaN\n')
def test_parser_and_normaliser_raise_only_their_documented_errors(text: str) -> None:
    for parser in (PromParser(), PromParser(keep=WANTED.__contains__)):
        try:
            expo = parser.parse(text)
        except ParseError as exc:
            assert str(exc).startswith(f"line {exc.line_no}: ")
            assert len(str(exc)) < 300 and str(exc).isprintable()  # one short, inert line, whatever the text
            continue
        try:
            scrape = normalise(expo)
        except ScrapeProblem as exc:
            assert len(str(exc)) < 200 and str(exc).isprintable()
            continue
        assert _finite_numbers(scrape)
        # And what is derived from it, after a good scrape and before another.
        tracker = ScrapeTracker()
        tracker.observe(0.0, GOOD)
        tracker.observe(1.0, scrape)
        tracker.observe(2.0, GOOD)
        tracker.rates(window_s=60.0)
        tracker.last_interval_rates()


@FUZZ
@given(mutated(VLLM_SCRAPES), st.sampled_from((b"", b"\xff", b"\xc3", b"\x00\x80")))
@example(VLLM_SCRAPES[0].replace('le="0.001"', 'le="abc"', 1), b"")
def test_an_instance_given_any_body_shows_a_status_and_raises_nothing(text: str, tail: bytes) -> None:
    state = FleetState(FLEET, readings())
    observe(state, 0.0, ok(), ok(VLLM_SCRAPES[0]))
    observe(state, 1.0, ok(), replace(ok(), body=text.encode() + tail))
    observe(state, 2.0, ok(), ok(VLLM_SCRAPES[0]))
    view(state, 2.0)
    observe(state, 3.0, ok(), replace(ok(), body=text.encode() + tail))
    node = view(state, 3.0)
    assert all(reason and reason.isprintable() for reason in node.status.reasons)


@FUZZ
@given(mutated(EXPORTER_SCRAPES))
def test_exporter_readers_raise_only_the_parse_error(text: str) -> None:
    try:
        expo = parse(text)
    except ParseError:
        return
    memory = host_memory_from_exposition(expo)
    pressure_from_exposition(expo)
    gpu_reading(expo, host_mem_total_bytes=memory.mem_total if memory else None)
    gpu_reading(expo)


# --- differential: the same samples and values as prometheus_client on valid text ----------------------

NAMES = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True).filter(
    lambda n: not n.endswith(("_total", "_created", "_bucket", "_count", "_sum", "_info", "_gcount", "_gsum"))
)
LABEL_NAMES = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,8}", fullmatch=True)
LABEL_VALUES = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
VALUES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(10**12), 10**12).map(str),
    st.sampled_from(("NaN", "+Inf", "-Inf", "0", "-0.0", "1e-9", "1.5E+3")),
)


Series = tuple[str, frozenset[tuple[str, str]]]
Case = tuple[str, dict[Series, str]]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@st.composite
def exposition(draw: st.DrawFn, openmetrics: bool) -> Case:
    """Valid text with distinct series, and what it holds: (name, labels) -> value as written."""
    families = draw(st.lists(NAMES, min_size=1, max_size=5, unique=True))
    lines: list[str] = []
    expected: dict[Series, str] = {}
    for family in families:
        counter = draw(st.booleans()) if openmetrics else False
        lines.append(f"# HELP {family} some help")
        lines.append(f"# TYPE {family} {'counter' if counter else 'gauge'}")
        name = f"{family}_total" if counter else family
        label_sets = draw(st.lists(st.dictionaries(LABEL_NAMES, LABEL_VALUES, max_size=3), max_size=4))
        seen: set[frozenset[tuple[str, str]]] = set()
        for labels in label_sets:
            key = _safe_labels(labels)  # what the parser keeps: the values made safe to show
            if key in seen:
                continue
            seen.add(key)
            value = repr(draw(st.floats(min_value=0, max_value=1e12))) if counter else draw(VALUES)
            inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            braces = bool(labels) or draw(st.booleans())  # "name{} 1" is valid too
            line = f"{name}{{{inner}}} {value}" if braces else f"{name} {value}"
            if draw(st.booleans()):
                line += f" {draw(st.integers(0, 2 * 10**9))}"
            if counter and draw(st.booleans()):
                line += ' # {trace_id="abc123"} 0.67'
            lines.append(line)
            expected[(name, key)] = value
    if openmetrics:
        lines.append("# EOF")
    return "\n".join(lines) + "\n", expected


def _safe_labels(labels: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    """Labels as the parser gives them: each value made safe to show (``safe_text``), since the parser
    is where an exposition's text becomes safe."""
    return frozenset((k, safe_text(v, MAX_LABEL_VALUE)) for k, v in labels.items())


def _same(ours: float, theirs: float) -> bool:
    return ours == theirs or (math.isnan(ours) and math.isnan(theirs))


def _ours(expo: Exposition) -> dict[Series, float]:
    return {
        (name, frozenset(labels.items())): value for name, series in expo.samples.items() for labels, value in series
    }


@FUZZ
@given(exposition(openmetrics=False))
def test_text_format_parses_to_the_same_samples_as_prometheus_client(
    case: Case,
) -> None:
    text, written = case
    theirs = {
        (s.name, _safe_labels(s.labels)): s.value for f in text_string_to_metric_families(text) for s in f.samples
    }
    ours = _ours(parse(text))
    assert ours.keys() == theirs.keys() == written.keys()
    assert all(_same(ours[key], theirs[key]) for key in theirs)


@FUZZ
@given(exposition(openmetrics=True))
def test_openmetrics_parses_to_the_same_samples_as_prometheus_client(
    case: Case,
) -> None:
    text, written = case
    families = om_families(text)  # type: ignore[no-untyped-call]
    theirs = {(s.name, _safe_labels(s.labels)): s.value for f in families for s in f.samples}
    ours = _ours(parse(text))
    assert ours.keys() == theirs.keys() == written.keys()
    assert all(_same(ours[key], theirs[key]) for key in theirs)
