"""Workarounds for known bugs of the pinned Textual (8.2.8), applied once by ``sparktui.ui.app``.

Both keep gone widgets reachable; ``benchmarks/soak.py`` found them (an operator hopping between the
fleet and node screens for minutes) and ``tests/ui/test_textual_fixes.py`` fails without each.

**Footer keeps its old keys alive** (Textualize/textual#6666, open). ``Footer.compose`` binds every
``FooterKey`` it yields to the footer's ``compact`` reactive (``data_bind``), which stores a watcher
entry ``(key, setter)`` on the footer. The footer recomposes whenever its screen's bindings change
(twice each time the operator comes back from a node screen), and the entries of the removed keys are
pruned only when ``compact`` changes, which it never does: each visit to a node left about 26 dead
keys reachable from the fleet screen's footer, for as long as the dashboard ran. The fix drops the
entries of closed nodes after each recompose, as Textual itself does on a change.

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
from textual.widget import Widget
from textual.widgets import Footer

WATCHERS = "__watchers"  # where Textual keeps the watchers of an object's reactives (textual/reactive.py)

_original_recompose = Footer.recompose


def prune_closed_watchers(node: object) -> None:
    """Forget the watcher entries of ``node``'s reactives whose watching node has closed."""
    watchers: dict[str, list[tuple[object, object]]] = getattr(node, WATCHERS, {})
    for entries in watchers.values():
        entries[:] = [(watcher, callback) for watcher, callback in entries if not getattr(watcher, "_closing", False)]


async def _recompose_and_prune(self: Widget) -> None:
    await _original_recompose(self)
    prune_closed_watchers(self)


@lru_cache(1024)
def inner_outer(base_background: Color, background: Color) -> tuple[Style, Style]:
    """Textual's ``StylesCache.get_inner_outer``, cached on its arguments only."""
    return Style(background=base_background + background), Style(background=base_background)


def _get_inner_outer(_self: StylesCache, base_background: Color, background: Color) -> tuple[Style, Style]:
    return inner_outer(base_background, background)


def apply() -> None:
    """Install the workarounds (idempotent)."""
    Footer.recompose = _recompose_and_prune  # type: ignore[method-assign]
    StylesCache.get_inner_outer = _get_inner_outer  # type: ignore[method-assign,assignment]
