"""Large figures for the kiosk, drawn in solid half blocks so they read from across a room.

Each glyph is a 5-pixel-high bitmap; a pixel is one cell wide and half a cell high, which is square on
a usual terminal font, and ``scale`` multiplies it. The figure is fitted to the space it is given
(``figure_scale``): 3 rows at scale 1, 5 at 2, 8 at 3 and so on. Text with a character the font lacks
is not drawn large (scale 0) and the caller writes it as ordinary text. No data (``NO_DATA``) is drawn
as a thin line across the middle row (``DASH``) at every scale: drawn in blocks like a minus it grew
into a solid bar, which read as a grey block rather than a dash.
"""

from __future__ import annotations

from sparktui.model.units import NO_DATA

GLYPH_HEIGHT = 5
_GLYPHS: dict[str, tuple[str, ...]] = {
    "0": ("###", "#.#", "#.#", "#.#", "###"),
    "1": (".#.", "##.", ".#.", ".#.", "###"),
    "2": ("###", "..#", "###", "#..", "###"),
    "3": ("###", "..#", "###", "..#", "###"),
    "4": ("#.#", "#.#", "###", "..#", "..#"),
    "5": ("###", "#..", "###", "..#", "###"),
    "6": ("###", "#..", "###", "#.#", "###"),
    "7": ("###", "..#", "..#", "..#", "..#"),
    "8": ("###", "#.#", "###", "#.#", "###"),
    "9": ("###", "#.#", "###", "..#", "###"),
    ".": (".", ".", ".", ".", "#"),
    ",": (".", ".", ".", "#", "#"),
    "%": ("#.#", "..#", ".#.", "#..", "#.#"),
    "<": ("..#", ".#.", "#..", ".#.", "..#"),
    "-": ("...", "...", "###", "...", "..."),
    NO_DATA: ("...", "...", "###", "...", "..."),
    " ": ("..",) * GLYPH_HEIGHT,
}
DASH = "━"  # the no-data figure's line
_HALVES = {(False, False): " ", (True, False): "▀", (False, True): "▄", (True, True): "█"}


def drawable(text: str) -> bool:
    """Whether every character of ``text`` has a large glyph."""
    return bool(text) and all(c in _GLYPHS for c in text)


def big_width(text: str, scale: int) -> int:
    """Cells across ``text`` at ``scale``: the glyphs and a one-pixel gap between each two."""
    pixels = sum(len(_GLYPHS[c][0]) for c in text) + len(text) - 1
    return pixels * scale


def big_height(scale: int) -> int:
    """Rows of a figure at ``scale`` (two pixel rows to a cell row)."""
    return (GLYPH_HEIGHT * scale + 1) // 2


def figure_scale(text: str, width: int, height: int) -> int:
    """The largest scale at which ``text`` fits ``width`` x ``height`` cells; 0 when it does not fit at
    scale 1 or has a character the font lacks."""
    if not drawable(text):
        return 0
    scale = 0
    while big_width(text, scale + 1) <= width and big_height(scale + 1) <= height:
        scale += 1
    return scale


def big_lines(text: str, scale: int) -> list[str]:
    """``text`` drawn at ``scale`` (at least 1), one string per row, all of ``big_width`` cells."""
    scale = max(1, scale)
    if text == NO_DATA:
        width, height = big_width(text, scale), big_height(scale)
        return [(DASH if row == height // 2 else " ") * width for row in range(height)]
    rows = []
    for y in range(GLYPH_HEIGHT):
        row = ".".join(_GLYPHS[c][y] for c in text)
        rows.extend(["".join(p * scale for p in row)] * scale)
    if len(rows) % 2:
        rows.append("." * len(rows[0]))
    return [
        "".join(_HALVES[top == "#", bottom == "#"] for top, bottom in zip(upper, lower, strict=True))
        for upper, lower in zip(rows[0::2], rows[1::2], strict=True)
    ]
