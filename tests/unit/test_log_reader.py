"""The log view's logic without a screen: merging, filtering, search, match steps, follow and wrapping."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

import pytest

from sparktui.model.logbuffer import KERNEL_LOG, LogBuffer, LogLine
from sparktui.ui.log_reader import (
    Follow,
    LogEntry,
    LogReader,
    Match,
    find_matches,
    hanging_indent,
    line_rows,
    locate_row,
    nearest_match,
    row_starts,
    shown_text,
    step_match,
)

T0 = datetime(2026, 11, 26, 10, 0, 0, tzinfo=UTC)


def _at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_find_matches_gives_every_occurrence_case_insensitively_with_its_span() -> None:
    texts = ["Engine error here", "nothing", "ERROR twice: error"]
    assert find_matches(texts, "error") == [Match(0, 7, 12), Match(2, 0, 5), Match(2, 13, 18)]
    assert find_matches(texts, "") == []
    assert find_matches(["a.b", "axb"], ".") == [Match(0, 1, 2)]  # the query is text, not a pattern


def test_a_search_starts_from_the_newest_match_at_or_above_the_view_and_steps_round() -> None:
    matches = [Match(2, 0, 1), Match(5, 0, 1), Match(9, 0, 1)]
    assert nearest_match(matches, 7) == 1
    assert nearest_match(matches, 100) == 2
    assert nearest_match(matches, 0) == 0  # none above: the first one
    assert nearest_match([], 3) is None
    assert step_match(3, 2, forward=True) == 0
    assert step_match(3, 0, forward=False) == 2
    assert step_match(3, None, forward=False) == 2
    assert step_match(0, None, forward=True) is None


def test_follow_stops_on_scroll_up_counts_what_arrives_and_resumes_at_the_end() -> None:
    follow = Follow()
    follow.arrived(5)
    assert follow.on and follow.unseen == 0
    follow.scrolled(up=True, at_end=False)
    assert not follow.on
    follow.arrived(3)
    follow.scrolled(up=False, at_end=False)
    assert not follow.on and follow.unseen == 3
    follow.scrolled(up=False, at_end=True)
    assert follow.on and follow.unseen == 0


def test_wrapped_lines_take_their_rows_and_a_row_finds_its_line() -> None:
    starts = row_starts([1, 1, 3, 1])
    assert starts == [0, 1, 2, 5, 6]
    assert locate_row(starts, 3) == (2, 1)
    assert locate_row(starts, 5) == (3, 0)
    assert locate_row(starts, 6) is None


def _entry(message: str, prefix: str = "[qwen36] 09:00:02 ") -> LogEntry:
    return LogEntry("qwen36", LogLine(0, T0, message), prefix + message, False)


def test_a_wrapped_log_line_breaks_at_spaces_and_tokens_and_goes_on_under_its_message() -> None:
    entry = _entry('INFO request {"model":"RedHatAI/Qwen3.6-35B-A3B-NVFP4","max_tokens":16,"stream":true}')
    rows = line_rows(entry, len(entry.text), 48)
    indent = hanging_indent(entry)
    assert indent == len("[qwen36] 09:00:02 ")
    drawn = [
        entry.text[start:end] if n == 0 else " " * indent + entry.text[start:end] for n, (start, end) in enumerate(rows)
    ]
    assert drawn[0].startswith("[qwen36] 09:00:02 INFO request") and len(drawn) > 1
    assert all(len(row) <= 48 for row in drawn), drawn
    assert any('"max_tokens":' in row for row in drawn), drawn  # never "max_t" + "okens"
    assert "".join(entry.text[start:end] for start, end in rows).replace(" ", "") == entry.text.replace(" ", "")
    # a traceback's line goes on under its own indent; a line that fits is one row
    frame = _entry('  File "/usr/lib/python3/dist-packages/vllm/engine/core.py", line 83, in __init__')
    assert hanging_indent(frame) == len("[qwen36] 09:00:02   ")
    assert line_rows(frame, len(frame.text), 200) == [(0, len(frame.text))]


def test_the_reader_merges_instances_in_time_order_keeping_continuations_with_their_line() -> None:
    first, second = LogBuffer(), LogBuffer()
    first.append(_at(0), "a0")
    first.append(_at(20), "Traceback (most recent call last):")
    first.append(None, '  File "x.py"')  # a continuation: stays after its line
    second.append(_at(10), "b10")
    second.append(_at(30), "b30")
    reader = LogReader()
    assert reader.pull({"qwen": first, "asr": second}) == 5
    assert [e.line.text for e in reader.shown] == [
        "a0",
        "b10",
        "Traceback (most recent call last):",
        '  File "x.py"',
        "b30",
    ]
    assert all(e.text.startswith(f"[{e.instance}] ") for e in reader.shown)  # two instances: each line says whose
    assert reader.pull({"qwen": first, "asr": second}) == 0  # nothing new
    second.append(_at(40), "b40")
    assert reader.pull({"qwen": first, "asr": second}) == 1
    assert reader.shown[-1].line.text == "b40"


def test_the_instance_filter_cycles_and_the_search_follows_it() -> None:
    first, second = LogBuffer(), LogBuffer()
    first.append(_at(0), "error in qwen")
    second.append(_at(1), "error in asr")
    reader = LogReader()
    reader.pull({"qwen": first, "asr": second})
    reader.search("error")
    assert len(reader.matches) == 2
    assert reader.cycle_instance() == "qwen"
    assert [e.instance for e in reader.shown] == ["qwen"] and len(reader.matches) == 1
    assert reader.cycle_instance() == "asr"
    assert reader.cycle_instance() is None
    assert len(reader.shown) == 2


def test_new_lines_are_searched_as_they_come_and_counted_while_not_following() -> None:
    buffer = LogBuffer()
    buffer.append(_at(0), "ok")
    reader = LogReader()
    reader.pull({"qwen": buffer})
    reader.search("oom")
    assert reader.matches == []
    reader.follow.pause()
    buffer.append(_at(1), "CUDA OOM")
    buffer.append(_at(2), "fine")
    reader.pull({"qwen": buffer})
    assert reader.matches == [Match(1, reader.shown[1].text.index("OOM"), reader.shown[1].text.index("OOM") + 3)]
    assert reader.follow.unseen == 2


def test_jumping_to_a_match_stops_following_and_steps_through_them() -> None:
    buffer = LogBuffer()
    for n in range(6):
        buffer.append(_at(n), f"line {n} {'hit' if n % 2 else ''}")
    reader = LogReader()
    reader.pull({"qwen": buffer})
    reader.search("hit")
    assert [m.line for m in reader.matches] == [1, 3, 5]
    assert reader.jump(forward=False, bottom_line=4) == reader.matches[1]  # nearest at or above line 4
    assert not reader.follow.on
    assert reader.jump(forward=True, bottom_line=4) == reader.matches[2]
    assert reader.jump(forward=True, bottom_line=4) == reader.matches[0]  # round to the first
    assert reader.matches_on(3) == [reader.matches[1]] and reader.matches_on(2) == []


def test_signature_lines_are_marked_and_the_oldest_lines_go_past_the_bound() -> None:
    buffer = LogBuffer()
    buffer.append(_at(0), "INFO fine")
    buffer.append(_at(1), "ValueError: Free memory on device cuda:0 (4.75/119.67 GiB)")
    buffer.append(_at(2), "INFO fine again")
    buffer.append(_at(3), "INFO fine, once more")
    reader = LogReader(signatures=(re.compile(r"Free memory on device"),), max_lines=3)
    reader.pull({"qwen": buffer})
    assert [e.signature for e in reader.shown] == [False, False]  # over the bound: down to 90 %, the oldest went
    assert [e.line.text for e in reader.shown] == ["INFO fine again", "INFO fine, once more"]
    buffer.append(_at(4), "ValueError: Free memory on device cuda:0 (1.67/119.67 GiB)")
    reader.pull({"qwen": buffer})
    assert [e.signature for e in reader.shown] == [False, False, True]


def test_a_buffer_that_starts_again_is_read_afresh() -> None:
    """A replay sought back fills new buffers from line 0: the view shows them, not what it had."""
    before = LogBuffer()
    for n in range(5):
        before.append(_at(n), f"old {n}")
    reader = LogReader()
    reader.pull({"qwen": before})
    generation = reader.generation
    again = LogBuffer()
    again.append(_at(0), "new 0")
    assert reader.pull({"qwen": again}) == 1
    assert [e.line.text for e in reader.shown] == ["new 0"]
    assert reader.generation > generation  # the view's rendered lines are stale


def test_the_kernel_log_is_one_of_the_logs_shown_alone_and_back_and_bracketed_once() -> None:
    vllm, kernel = LogBuffer(), LogBuffer()
    vllm.append(_at(0), "INFO Starting vLLM API server")
    kernel.append(_at(1), "NVRM: Xid (PCI:000f:01:00): 43, pid=4127, name=python3, Ch 00000008")
    vllm.append(_at(2), "INFO Application startup complete.")
    reader = LogReader()
    reader.pull({"qwen": vllm, KERNEL_LOG: kernel})
    assert [e.instance for e in reader.shown] == ["qwen", KERNEL_LOG, "qwen"]  # merged in time order
    assert reader.shown[1].text.startswith("[kernel] ") and "[[" not in reader.shown[1].text
    assert reader.toggle_kernel() == KERNEL_LOG
    assert [e.instance for e in reader.shown] == [KERNEL_LOG]
    assert reader.toggle_kernel() is None
    assert len(reader.shown) == 3


def test_a_line_shows_one_clock_the_stamps_in_the_operators_zone_not_the_engines_own_beside_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TZ=America/New_York: vLLM's container logs "01:57:14" (UTC); the screen said "20:57:14 … 01:57:14"."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        at = datetime(2026, 12, 7, 1, 57, 14, tzinfo=UTC)
        vllm = LogLine(0, at, "(APIServer pid=4127) INFO 12-07 01:57:14 [api_server.py:123] Started server")
        sglang = LogLine(1, at, "[2026-12-07 01:57:14] Prefill batch. #new-seq: 1")
        untimed = LogLine(2, None, "INFO 12-07 01:57:14 [x.py:1] a continuation with no stamp keeps its own")
        assert (
            shown_text("qwen36", vllm, False) == "20:57:14 (APIServer pid=4127) INFO [api_server.py:123] Started server"
        )
        assert shown_text("qwen36", sglang, True) == "[qwen36] 20:57:14 Prefill batch. #new-seq: 1"
        assert shown_text("qwen36", untimed, False) == untimed.text
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
