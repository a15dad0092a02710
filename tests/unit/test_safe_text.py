"""safe_text: what a remote sends, made safe to print."""

from __future__ import annotations

import pytest

from sparktui.model.safe_text import safe_lines, safe_text

ESC = "\x1b"


@pytest.mark.parametrize(
    ("sent", "shown"),
    [
        ("0.33.0", "0.33.0"),
        (f"0.33{ESC}]2;pwned{ESC}\\.0", "0.33.0"),  # OSC 2 (window title), ST-terminated
        (f"0.33{ESC}]52;c;ZXZpbA==\x07.0", "0.33.0"),  # OSC 52 (clipboard), BEL-terminated
        (f"{ESC}[2J{ESC}[H{ESC}[31;1mred{ESC}[0m", "red"),  # clear screen, cursor home, colours
        (f"a{ESC}[?1049hb", "ab"),  # private-mode CSI (alternate screen)
        ("a\x9b2Jb\x9d0;t\x9cc", "abc"),  # the 8-bit C1 forms of CSI and OSC
        (f"a{ESC}Pq#0;2;0;0;0{ESC}\\b", "ab"),  # DCS (sixel)
        (f"a{ESC}7b{ESC}8c{ESC}(0d", "abcd"),  # two-byte escapes: save/restore cursor, charset
        ("one\r\ntwo\rthree\nfour\tfive", "one two three four five"),  # breaks and tabs: one line
        ("bell\x07 back\x08space del\x7f nul\x00", "bell backspace del nul"),
        ("abc\u202egnp.exe", "abcgnp.exe"),  # a bidi override reorders what is shown
        (f"unterminated {ESC}]0;title", "unterminated "),
        ("GB10 — ünïcödé stays", "GB10 — ünïcödé stays"),
    ],
)
def test_escape_sequences_and_control_characters_are_removed(sent: str, shown: str) -> None:
    assert safe_text(sent) == shown


def test_long_text_is_cut_to_the_limit_with_an_ellipsis() -> None:
    assert safe_text("x" * 100, limit=10) == "x" * 9 + "…"
    assert safe_text("x" * 10, limit=10) == "x" * 10
    assert len(safe_text(f"{ESC}[31m" * 1000 + "y" * 5000)) == 512


def test_nothing_that_comes_out_can_drive_a_terminal() -> None:
    every_char = "".join(chr(c) for c in range(0x00, 0xA0)) * 3
    shown = safe_text(every_char, limit=10_000)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in shown)


def test_many_lines_keep_their_breaks_and_tabs_and_lose_the_rest() -> None:
    sent = "vllm-a\tvllm/vllm-openai:v0.33\t\x1b]2;x\x07ok\r\nline two\x1b[2J\rstill two\n\x1b[31mred\x1b[0m\n"
    assert safe_lines(sent) == "vllm-a\tvllm/vllm-openai:v0.33\tok\nline two still two\nred\n"


def test_every_format_character_is_dropped() -> None:
    """The written-out class of format characters holds every one this Python's Unicode knows: bidi
    marks and overrides, zero-width characters, the soft hyphen, the invisible tag characters."""
    import sys
    import unicodedata

    format_characters = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert len(format_characters) > 150
    assert safe_text("a" + "".join(format_characters) + "b", limit=10_000) == "ab"
    assert safe_text("e\u0301 \U0001f600 中文 ✓") == "e\u0301 \U0001f600 中文 ✓"  # marks, emoji and CJK stay
