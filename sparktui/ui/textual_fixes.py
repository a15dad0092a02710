"""A workaround for a known bug of the pinned Textual (8.2.8), applied once by ``sparktui.ui.app``.

The bug keeps gone widgets reachable; ``benchmarks/soak.py`` found it (an operator hopping between the
fleet and node screens for minutes) and ``tests/ui/test_textual_fixes.py`` fails without it. (Textual's
``Footer`` had one too, textual#6666; the dashboard's own footer, ``sparktui.ui.footer``, replaced it.)

**A cache keyed by every widget's render cache** (Textualize/textual#6665, open).
``StylesCache.get_inner_outer`` is an ``lru_cache(1024)`` on an instance method, so it keeps the
``StylesCache`` (every rendered line of a widget) of the last 1024 widgets that drew a background,
long after they are gone (about 20 MiB of the dashboard's RSS in the soak, once full). The fix caches
on the two colours alone, which is all the result depends on.
"""

from __future__ import annotations

from functools import lru_cache

from textual._styles_cache import StylesCache
from textual.color import Color
from textual.style import Style


@lru_cache(1024)
def inner_outer(base_background: Color, background: Color) -> tuple[Style, Style]:
    """Textual's ``StylesCache.get_inner_outer``, cached on its arguments only."""
    return Style(background=base_background + background), Style(background=base_background)


def _get_inner_outer(_self: StylesCache, base_background: Color, background: Color) -> tuple[Style, Style]:
    return inner_outer(base_background, background)


def apply() -> None:
    """Install the workaround (idempotent)."""
    StylesCache.get_inner_outer = _get_inner_outer  # type: ignore[method-assign,assignment]
