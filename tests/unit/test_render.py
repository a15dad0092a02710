"""The renderers' drawing rules: shared scales, charts, the memory bar without colour, wrapping."""

from __future__ import annotations

import io
import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from sparktui.model.history import FLEET, History
from sparktui.model.levels import Level
from sparktui.ui.render import (
    EIGHTHS,
    MEMORY_PATTERNS,
    IndentedText,
    column_rows,
    level_text,
    memory_bar,
    spark_text,
)
from sparktui.ui.themes import VARIABLE_DEFAULTS
from sparktui.ui.wrap import wrap_ranges
from tests.support.ui_data import NOW, fed_app

COLOURS = dict(VARIABLE_DEFAULTS)


def test_a_shared_scale_keeps_a_small_series_low() -> None:
    own = spark_text([10.0, 20.0], 2, "green").plain
    shared = spark_text([10.0, 20.0], 2, "green", high=400.0).plain
    assert own == "▄█"
    assert shared == "▁▁"  # 20 of 400 is the lowest block, not a full one


def test_column_chart_stacks_eighths_from_the_bottom() -> None:
    chart = column_rows([0.0, 1.0, 2.0, 4.0], 4, 2)
    assert chart == ("   █", " ▄██")  # 1/4 of 2 rows = 4 eighths; 2/4 = a full bottom row; 4/4 = both rows


def test_column_chart_keeps_the_newest_value_on_the_right() -> None:
    chart = column_rows([float(v) for v in range(100)], 10, 1, high=100.0)
    assert chart == ("▇▇▇▇██████",)  # 90..99 of 100: 7.2 to 7.92 eighths, rounded


def test_memory_bar_patterns_separate_the_parts_without_colour() -> None:
    app = fed_app()
    ledger = next(v.ledger for v in app.views if v.name == "spark1")
    assert ledger is not None and ledger.total
    patterned = memory_bar(ledger, 40, COLOURS, patterns=True).plain
    plain = memory_bar(ledger, 40, COLOURS).plain
    assert set(plain) == {"█"}
    shown = [label for label, size in ledger.segments() if round(size / ledger.total * 40) > 0]
    assert {MEMORY_PATTERNS[label] for label in shown} <= set(patterned)
    assert len(set(patterned)) >= 2


def test_level_text_colours_only_warnings_and_worse() -> None:
    assert level_text("5%", Level.OK, COLOURS) == "5%"
    assert level_text("5%", None, COLOURS) == "5%"
    assert VARIABLE_DEFAULTS["status-warn"] in str(level_text("96%", Level.WARN, COLOURS).style)  # type: ignore[union-attr]
    assert VARIABLE_DEFAULTS["status-crit"] in str(level_text("1.6G", Level.CRIT, COLOURS).style)  # type: ignore[union-attr]


def test_history_keeps_fleet_totals_beside_the_nodes() -> None:
    app = fed_app()
    history = History()
    history.record(app.views, NOW)
    gen = [i.rates.generation_tokens_per_s for v in app.views for i in v.instances if i.rates is not None]
    known = [g for g in gen if g is not None]
    assert known
    assert history.series(FLEET, "generation_tps") == (sum(known),)


def test_a_findings_line_names_the_key_of_its_whole_fix() -> None:
    """The fleet's list of open findings named d (drop caches) for a fix of three actions on x."""
    from sparktui.diagnosis.catalogue import Severity
    from sparktui.diagnosis.engine import Finding
    from sparktui.ui.render import finding_line

    launch = Finding(
        "launch-readiness", "spark1", "qwen36", Severity.WARN, "vLLM would not start now", ("e",),
        "", "Drop the page cache.", "drop-caches", 0.0, 0.0,
    )  # fmt: skip
    blocked = Finding(
        "page-cache-blocks-start", "spark1", "qwen36", Severity.CRIT, "Page cache blocks the start", ("e",),
        "", "Drop, restart, warm up.", "drop-caches", 0.0, 0.0,
    )  # fmt: skip
    assert "[d] vLLM would not start now" in finding_line(launch, COLOURS).plain
    assert "[x] Page cache blocks the start" in finding_line(blocked, COLOURS).plain


def test_a_series_tail_is_the_newest_points_in_order() -> None:
    history = History()
    for second in range(20):
        history.record([], float(second))  # the fleet totals of an empty fleet: nothing recorded
        history._append(("spark1", "gpu_temp"), float(second), float(second))
    assert history.series("spark1", "gpu_temp", last=5) == (15.0, 16.0, 17.0, 18.0, 19.0)
    assert history.series("spark1", "gpu_temp", last=50) == tuple(float(s) for s in range(20))
    assert history.series(FLEET, "generation_tps") == ()


def test_the_history_counts_its_points_over_every_series_within_each_bound() -> None:
    history = History(max_points=10)
    for second in range(25):
        history._append(("spark1", "gpu_temp"), float(second), float(second))
        if second < 4:
            history._append(("spark2", "gpu_temp"), float(second), float(second))
    assert len(history) == 10 + 4


def _chart_cell_by_cell(values: list[float], width: int, height: int, high: float | None) -> list[str]:
    """The chart as it was drawn before ``column_rows``: every cell worked out on its own."""
    tail = [max(0.0, v) for v in values[-width:] if not math.isnan(v)]
    top = high if high is not None else max(tail, default=0.0)
    rows = []
    for row in range(height - 1, -1, -1):
        cells = []
        for value in tail:
            eighths = 0 if top <= 0 else round(min(1.0, value / top) * height * 8)
            cells.append(EIGHTHS[max(0, min(8, eighths - row * 8))])
        rows.append("".join(cells).rjust(width))
    return rows


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.floats(-10.0, 1e6) | st.just(float("nan")), max_size=30),
    width=st.integers(1, 25),
    height=st.integers(1, 6),
    high=st.none() | st.floats(0.0, 1e6),
)
def test_the_rows_read_across_columns_are_the_chart_cell_by_cell(
    values: list[float], width: int, height: int, high: float | None
) -> None:
    assert list(column_rows(values, width, height, high)) == _chart_cell_by_cell(values, width, height, high)


JSON_COMMAND = (
    '1. over HTTP: POST http://192.168.1.11:8001/v1/chat/completions {"model":"RedHatAI/Qwen3.6-35B-A3B-NVFP4",'
    '"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"stream":true}'
)


def _rows(line: str, width: int) -> list[str]:
    return [line[start:end] for start, end in wrap_ranges(line, width)]


def test_wrapping_breaks_json_between_its_tokens_never_inside_a_name() -> None:
    for width in range(30, 120):  # from 30, every token of the command fits a row
        ranges = wrap_ranges(JSON_COMMAND, width)
        rows = [JSON_COMMAND[start:end] for start, end in ranges]
        assert all(cell_len(row) <= width for row in rows), width
        for (_, end), (start, _) in itertools.pairwise(ranges):
            # each break is at a space, or after a JSON or URL separator: never inside "max_tokens"
            assert JSON_COMMAND[end:start].isspace() or JSON_COMMAND[end - 1] in ",:/", (width, rows)
        assert any('"max_tokens"' in row for row in rows) and any('"stream"' in row for row in rows)
        assert "".join(rows).replace(" ", "") == JSON_COMMAND.replace(" ", "")  # only the spaces broken at go


def test_wrapping_moves_a_word_that_fits_a_row_whole_to_the_next() -> None:
    assert _rows("timeout: 2m10s overall", 12) == ["timeout:", "2m10s", "overall"]
    assert _rows("abcdefghij", 4) == ["abcd", "efgh", "ij"]  # no boundary at all: cut at the width, the last resort


@given(st.text(alphabet=' ab,:/{}"', max_size=60), st.integers(min_value=1, max_value=30))
@settings(max_examples=300, deadline=None)
def test_wrapping_keeps_every_character_but_spaces_and_fits_the_width(line: str, width: int) -> None:
    rows = _rows(line, width)
    assert all(cell_len(row) <= width for row in rows)
    assert "".join(rows).replace(" ", "") == line.replace(" ", "")


def _drawn(renderable: object, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text().rstrip("\n").split("\n")


def test_wrapped_rows_keep_the_indent_of_their_line() -> None:
    text = Text("step 3/3: warmup spark1/gptoss\n        " + JSON_COMMAND + "\n      timeout: 10m10s overall")
    rows = _drawn(IndentedText(text), 70)
    command = [row for row in rows if not row.lstrip().startswith(("step", "timeout"))]
    assert len(command) >= 3  # the command wraps at 70 columns
    assert all(row.startswith(" " * 8) and row[8] != " " for row in command), rows
    assert rows[-1] == "      timeout: 10m10s overall"
    assert any('"max_tokens":3,' in row for row in rows)
