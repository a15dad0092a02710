"""Text from a remote made safe to print: no terminal control, one line, bounded.

Everything an endpoint or a node sends that ends up on a screen or in a log (a ``/version`` string, a
``model_name`` label, a log line, a unit's state, an error a server echoed) goes through
``safe_text`` where it enters, so no layer above has to remember it. A terminal obeys escape
sequences wherever they come from: an OSC renames the tmux pane or writes the clipboard, a CSI
clears the screen or moves the cursor, a bare CR overwrites the line before it.
"""

from __future__ import annotations

import re

DEFAULT_LIMIT = 512  # characters: an error line
LABEL_LIMIT = 200  # characters of a label value, a version, a model id
LOG_LINE_LIMIT = 256 * 1024  # characters of one log line (the log buffer cuts it shorter, with a note)
ELLIPSIS = "…"

# Escape sequences, removed whole (ECMA-48): a CSI with its parameters and final byte; an OSC, DCS,
# SOS, PM or APC string up to its terminator (BEL or ST) or the end of the text; any other two-byte
# escape. Each also in its 8-bit C1 form (0x9B CSI, 0x9D OSC, ...).
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)


# Every format character (Unicode category Cf, as of Python 3.11's Unicode 14): the bidirectional
# marks, overrides and isolates that reorder what is shown (U+202E), the zero-width ones that hide text
# (U+200B, U+2060, U+FEFF), the soft hyphen, and the invisible tag characters (U+E0000–U+E007F) that
# smuggle text. Written out, not scanned at import (a scan of every code point costs 0.3 s of start);
# tests/unit/test_safe_text.py checks it against unicodedata.
FORMAT_CHARACTERS = (
    "\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
# Breaks and tabs become a space (the text stays one line, its words apart); every other C0 control,
# DEL and C1 control is dropped, and so is every format character (bidirectional, zero-width, tags).
_BREAKS = re.compile(r"[\t\n\v\f\r\x85\u2028\u2029]+")
_CONTROLS = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{FORMAT_CHARACTERS}]")


def strip_escape_sequences(text: str) -> str:
    """``text`` without its escape sequences (colours, cursor moves, titles), controls left as they are."""
    return _ESCAPE_SEQUENCE.sub("", text)


def safe_text(text: str, limit: int = DEFAULT_LIMIT) -> str:
    """``text`` without escape sequences or control characters, on one line, at most ``limit``
    characters (the last one ``…`` when it was cut)."""
    if text.isprintable() and len(text) <= limit:
        return text  # the common case: nothing to do
    cleaned = _CONTROLS.sub("", _BREAKS.sub(" ", _ESCAPE_SEQUENCE.sub("", text)))
    if len(cleaned) <= limit:
        return cleaned
    return cleaned[: max(0, limit - 1)] + ELLIPSIS if limit > 0 else ""


def safe_lines(text: str, line_limit: int = LOG_LINE_LIMIT) -> str:
    """Many lines (a command's output): each made safe by ``safe_text``, the line breaks and the tabs
    between fields (``docker ps --format`` uses them) kept, a CR before a line break dropped."""
    return "\n".join(
        "\t".join(safe_text(field, line_limit) for field in line.removesuffix("\r").split("\t"))
        for line in text.split("\n")
    )
