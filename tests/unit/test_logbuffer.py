"""The log buffer and the parsing of journalctl / docker log lines: pure, no SSH."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from sparktui.model.logbuffer import (
    GAP_RECONNECTED,
    LogBuffer,
    ReplayFilter,
    parse_docker_line,
    parse_journal_line,
    parse_log_line,
)
from tests.support.sshd import DOCKER_FAILED_START, FREE_MEMORY_ERROR, JOURNAL_FAILED_START


def at(second: int, micro: int = 0) -> datetime:
    return datetime(2026, 11, 26, 9, 59, second, micro, tzinfo=UTC)


# --- parsing ----------------------------------------------------------------------------------------------


def test_journal_short_iso_line_gives_time_and_message_without_host_and_ident() -> None:
    stamp, text = parse_journal_line(JOURNAL_FAILED_START[4] + "\n")
    assert stamp == at(5)
    assert text == f"ValueError: {FREE_MEMORY_ERROR}"


@pytest.mark.parametrize(
    ("line", "stamp", "text"),
    [
        # systemd >= 255 writes the offset with a colon; short-iso-precise adds microseconds
        ("2026-11-26T09:59:05+00:00 spark1 vllm[1]: up", at(5), "up"),
        ("2026-11-26T09:59:05.250000+0000 spark1 vllm[1]: up", at(5, 250000), "up"),
        ("2026-11-26T10:59:05+0100 spark1 vllm[1]: up", at(5), "up"),
        ("2026-11-26T09:59:05+0000 spark1 kernel: NVRM: Xid 79", at(5), "NVRM: Xid 79"),
        ("2026-11-26T09:59:05+0000 spark1 odd line without ident", at(5), "odd line without ident"),
    ],
)
def test_journal_variants(line: str, stamp: datetime, text: str) -> None:
    assert parse_journal_line(line) == (stamp, text)
    assert parse_log_line("journal", line) == (stamp, text)


def test_journal_offset_is_kept() -> None:
    stamp, _ = parse_journal_line("2026-11-26T10:59:05+0100 spark1 vllm[1]: up")
    assert stamp is not None and stamp.utcoffset() == timedelta(hours=1)
    assert stamp.tzinfo == timezone(timedelta(hours=1))


@pytest.mark.parametrize(
    "line", ["-- No entries --", "-- Boot 3f2a9c41d5e84e6f --", "    continuation of a traceback", ""]
)
def test_journal_lines_without_a_timestamp_are_kept_whole(line: str) -> None:
    assert parse_journal_line(line) == (None, line)


def test_impossible_date_is_not_a_timestamp() -> None:
    line = "2026-13-26T09:59:05+0000 spark1 vllm[1]: up"
    assert parse_journal_line(line) == (None, line)


def test_docker_timestamps_with_nanoseconds_and_trimmed_fractions() -> None:
    assert parse_docker_line(DOCKER_FAILED_START[0]) == (
        datetime(2026, 11, 26, 9, 58, 47, 120418, tzinfo=UTC),
        "INFO 11-26 09:58:47 [api_server.py:1351] vLLM API server version 0.11.0",
    )
    assert parse_docker_line(DOCKER_FAILED_START[1])[0] == datetime(2026, 11, 26, 9, 58, 52, 500000, tzinfo=UTC)
    stamp, text = parse_log_line("docker", DOCKER_FAILED_START[2])
    assert stamp == at(5, 4511)
    assert text == f"(EngineCore_DP0 pid=212) ValueError: {FREE_MEMORY_ERROR}"


def test_docker_line_without_prefix_and_empty_message() -> None:
    assert parse_docker_line("Error response from daemon: No such container: vllm") == (
        None,
        "Error response from daemon: No such container: vllm",
    )
    assert parse_docker_line("2026-11-26T09:59:05Z ") == (at(5), "")


def test_colour_escapes_and_progress_redraws_are_cleaned() -> None:
    coloured = "2026-11-26T09:59:05.1Z \x1b[32mINFO\x1b[0m 11-26 09:59:05 [loader.py:120] Loading weights\r"
    assert parse_docker_line(coloured) == (
        at(5, 100000),
        "INFO 11-26 09:59:05 [loader.py:120] Loading weights",
    )
    redrawn = "2026-11-26T09:59:05.1Z Loading shards:  10%\rLoading shards:  50%\r"
    assert parse_docker_line(redrawn) == (at(5, 100000), "Loading shards:  50%")


@pytest.mark.parametrize("parse", [parse_docker_line, parse_journal_line])
def test_a_log_line_that_would_drive_the_terminal_is_made_safe(
    parse: Callable[[str], tuple[datetime | None, str]],
) -> None:
    prefix = "2026-11-26T09:59:05.1Z " if parse is parse_docker_line else "2026-11-26T09:59:05.1Z spark1 vllm[7]: "
    hostile = prefix + "INFO\x1b]2;pwned\x07 ok\x9b2J \x1b]52;c;ZXZpbA==\x1b\\done\x07\x00\x08 \u202eend\x1bP1$r\x1b\\"
    stamp, text = parse(hostile)
    assert stamp == at(5, 100000)
    assert text == "INFO ok done end"


# --- buffer -----------------------------------------------------------------------------------------------


def test_append_batch_numbers_lines_in_order() -> None:
    buffer = LogBuffer()
    stored = buffer.append_batch([(at(1), "a"), (None, "b"), (at(2), "c")])
    assert [line.seq for line in stored] == [0, 1, 2]
    assert [line.text for line in buffer] == ["a", "b", "c"]
    assert stored[1].timestamp is None and not stored[1].gap
    assert buffer.next_seq == 3 and len(buffer) == 3 and buffer.dropped == 0


def test_line_count_bound_drops_oldest_and_counts_them() -> None:
    buffer = LogBuffer(max_lines=3)
    buffer.append_batch((at(i), f"line {i}") for i in range(10))
    assert [line.text for line in buffer] == ["line 7", "line 8", "line 9"]
    assert buffer.dropped == 7
    assert buffer.next_seq == 10


def test_byte_bound_drops_oldest_and_counts_them() -> None:
    buffer = LogBuffer(max_bytes=100)
    buffer.append_batch((None, "x" * 30) for _ in range(5))  # 150 bytes
    assert len(buffer) == 3 and buffer.bytes == 90 and buffer.dropped == 2
    buffer.append(None, "é" * 20)  # 40 bytes of UTF-8
    assert buffer.bytes == 100 and buffer.dropped == 3
    assert [line.text for line in buffer][-1] == "é" * 20


def test_a_line_longer_than_the_cap_is_cut_with_a_note() -> None:
    buffer = LogBuffer(max_line_chars=10)
    line = buffer.append(None, "y" * 25)
    assert line.text == "yyyyyyyyyy …[15 more characters]"


def test_the_newest_line_stays_even_when_it_alone_is_over_the_byte_budget() -> None:
    buffer = LogBuffer(max_bytes=10, max_line_chars=1000)
    buffer.append(None, "old")
    buffer.append(None, "z" * 50)
    assert [line.text for line in buffer] == ["z" * 50]
    assert buffer.dropped == 1


def test_tail_returns_the_newest_oldest_first() -> None:
    buffer = LogBuffer()
    buffer.append_batch((None, str(i)) for i in range(5))
    assert [line.text for line in buffer.tail(2)] == ["3", "4"]
    assert [line.text for line in buffer.tail(50)] == ["0", "1", "2", "3", "4"]
    assert buffer.tail(0) == []


def test_since_returns_what_is_new_and_still_held() -> None:
    buffer = LogBuffer(max_lines=4)
    buffer.append_batch((None, str(i)) for i in range(6))  # holds seq 2..5
    assert [line.seq for line in buffer.since(4)] == [4, 5]
    assert [line.seq for line in buffer.since(0)] == [2, 3, 4, 5]
    assert buffer.since(6) == []


def test_search_is_case_insensitive_by_default() -> None:
    buffer = LogBuffer()
    buffer.append_batch(parse_journal_line(line) for line in JOURNAL_FAILED_START)
    found = buffer.search("free memory on device")
    assert [line.text for line in found] == [f"ValueError: {FREE_MEMORY_ERROR}"]
    assert buffer.search("free memory on device", case_sensitive=True) == []
    assert len(buffer.search("vllm")) == 3  # "vllm.service" twice and "vLLM API server"
    assert [line.seq for line in buffer.search("vllm", limit=1)] == [found[0].seq + 1]
    assert buffer.search("") == []


def test_gap_marker_is_a_line_flagged_as_gap() -> None:
    buffer = LogBuffer()
    buffer.append(at(1), "before")
    gap = buffer.mark_gap()
    assert gap.gap and gap.text == GAP_RECONNECTED and gap.seq == 1
    assert [line.gap for line in buffer] == [False, True]


def test_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        LogBuffer(max_lines=0)


# --- replay after a reconnect -------------------------------------------------------------------------


def test_replayed_tail_is_dropped_and_new_lines_pass() -> None:
    replay = ReplayFilter(tail_lines=4)
    for second, text in [(1, "a"), (2, "b"), (3, "c")]:
        assert replay.accept(at(second), text)
    replay.restart()
    # journalctl -n 4 prints a, b, c again, then what came while the link was down
    assert [replay.accept(at(s), t) for s, t in [(1, "a"), (2, "b"), (3, "c"), (4, "d")]] == [
        False,
        False,
        False,
        True,
    ]
    assert replay.accept(at(1), "late line with an old clock")  # the check ended at the first new line


def test_lines_with_the_same_second_are_told_apart_by_text_and_count() -> None:
    replay = ReplayFilter(tail_lines=10)
    for text in ("x", "x", "y"):
        replay.accept(at(5), text)
    replay.restart()
    results = [replay.accept(at(5), text) for text in ("x", "x", "y", "x", "z")]
    assert results == [False, False, False, True, True]


def test_continuation_lines_follow_their_line() -> None:
    replay = ReplayFilter(tail_lines=10)
    replay.accept(at(5), "Traceback (most recent call last):")
    replay.accept(None, '  File "gpu_worker.py", line 389, in init_device')
    replay.restart()
    assert not replay.accept(at(5), "Traceback (most recent call last):")
    assert not replay.accept(None, '  File "gpu_worker.py", line 389, in init_device')
    assert replay.accept(at(6), "new")
    assert replay.accept(None, "its continuation")


def test_nothing_is_dropped_before_anything_was_seen_or_after_the_tail() -> None:
    replay = ReplayFilter(tail_lines=2)
    replay.restart()
    assert replay.accept(at(1), "first ever")
    replay.restart()
    assert not replay.accept(at(1), "first ever")
    assert not replay.accept(at(0), "an older line: still within the 2 replayed")
    assert replay.accept(at(0), "third line after the restart: live, whatever its clock")
