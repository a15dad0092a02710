"""Wrapping text at a width the way a reader expects: at spaces, and a word longer than a row (a JSON
body, a URL) between its tokens, never inside a name. Pure: the dialogs (``render.IndentedText``) and
the log view (``log_reader``) lay their rows out with it. A text's width in cells is the caller's
``measure`` (Rich's ``cell_len`` on screen), so nothing here loads Rich."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

Measure = Callable[[str], int]  # a text's width in cells

# Where a word too long for a row (a JSON body, a URL) may break: after these, or after a JSON key's
# colon (`"max_tokens":`), or after a path's slash (not inside `://`).
_BREAK_AFTER = frozenset(",;&|")


def _breaks_after(word: str, index: int) -> bool:
    char, before = word[index], word[index - 1 : index]
    after = word[index + 1 : index + 2]
    if char in _BREAK_AFTER:
        return True
    if char == ":":
        return before in ('"', "'")
    return char == "/" and after not in ("/", "") and before not in ("/", ":", "")


def _word_pieces(word: str, width: int, measure: Measure) -> list[tuple[int, int]]:
    """A word's pieces (start, end) between its token boundaries, each at most ``width`` cells: a piece
    with no boundary inside that is still too long is cut at the width, the last resort."""
    bounds = [0, *(i + 1 for i in range(len(word) - 1) if _breaks_after(word, i)), len(word)]
    pieces: list[tuple[int, int]] = []
    for first, end in itertools.pairwise(bounds):
        start = first
        while measure(word[start:end]) > width:
            cut = start + 1
            while cut < end and measure(word[start : cut + 1]) <= width:
                cut += 1
            pieces.append((start, cut))
            start = cut
        pieces.append((start, end))
    return pieces


def wrap_ranges(line: str, width: int, measure: Measure = len) -> list[tuple[int, int]]:
    """The rows of ``line`` wrapped at ``width`` cells, as (start, end) offsets into it: at spaces, as a
    word processor does; a word longer than a row (a JSON body, a URL) is broken at its tokens
    (``_breaks_after``), never inside ``max_tokens``, and starts on the row it follows when a piece fits."""
    width = max(width, 1)
    rows: list[tuple[int, int]] = []
    row: tuple[int, int] | None = None
    used = 0
    for match in re.finditer(r"\S+", line):
        word_start, word = match.start(), match.group()
        pieces = [(0, len(word))] if measure(word) <= width else _word_pieces(word, width, measure)
        for piece_start, piece_end in pieces:
            start, end = word_start + piece_start, word_start + piece_end
            size = measure(line[start:end])
            if row is not None:
                gap = measure(line[row[1] : start])  # the spaces before a word; none between two pieces
                if used + gap + size <= width:
                    row, used = (row[0], end), used + gap + size
                    continue
                rows.append(row)
            row, used = (start, end), size
    if row is not None:
        rows.append(row)
    return rows or [(0, 0)]


def hanging_rows(text: str, indent: int, width: int, measure: Measure = len) -> list[tuple[int, int]]:
    """The rows of ``text`` at ``width`` cells when each row after the first is drawn after ``indent``
    spaces (at most half the width), as (start, end) offsets into it: the first row is ``text`` from its
    start (its first ``indent`` characters, a prefix or the line's own indent, stay on it), the rest is
    wrapped by ``wrap_ranges`` at the width left beside the indent."""
    indent = min(indent, max(width // 2, 0))
    rows = wrap_ranges(text[indent:], width - indent, measure)
    return [(0 if number == 0 else indent + start, indent + end) for number, (start, end) in enumerate(rows)]
