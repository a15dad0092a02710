"""The footer: the keys of the screen shown, each whole (its key and its full label), as many as fit.

Textual's ``Footer`` lays out every key and lets the terminal cut the last ones mid-label ("p Pa",
"a Ac", a lone "!"), and draws the command palette's key over whatever is under it. This one shows
the most important of the screen's keys that fit the width whole, in the screen's order, and leaves
the rest out: fewer hints, never a cut one. The recovery actions come first (an operator at 80
columns in an incident still sees ``x Fix``), then the screen's and the app's keys in their order,
``^p Commands`` last. ``?`` lists every key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget

from sparktui.ui.keys import ACTION_BINDINGS

_RECOVERY_ACTIONS = frozenset(b.id for b in ACTION_BINDINGS if isinstance(b, Binding) and b.id)
COMPACT_FOOTER_BELOW = 140  # columns: a narrower terminal gets one space between two hints, not two


@dataclass(frozen=True, slots=True)
class Hint:
    """One key of the footer: the key as shown (``^p``, ``?``), what it does, the key to press on a click."""

    key: str
    label: str
    press: str
    enabled: bool = True
    first: bool = False  # a recovery action: shown before any other key

    @property
    def width(self) -> int:
        return cell_len(self.key) + (1 + cell_len(self.label) if self.label else 0)


def gap_for(width: int) -> int:
    """Columns between two hints at a terminal ``width`` columns wide."""
    return 1 if width < COMPACT_FOOTER_BELOW else 2


def fit_hints(hints: Sequence[Hint], width: int, gap: int) -> tuple[Hint, ...]:
    """Of ``hints`` (in the screen's order), the most important that fit in ``width`` columns whole,
    ``gap`` apart, in the screen's order. Importance: the ``first`` ones, then the order; it stops at the
    first that does not fit, so a less important key never shows in place of a more important one."""
    by_priority = sorted(range(len(hints)), key=lambda index: not hints[index].first)
    chosen: set[int] = set()
    used = 0
    for index in by_priority:
        needed = hints[index].width + (gap if chosen else 0)
        if used + needed > width:
            break
        chosen.add(index)
        used += needed
    return tuple(hint for index, hint in enumerate(hints) if index in chosen)


def screen_hints(screen: Screen[object]) -> list[Hint]:
    """The keys ``screen`` shows in a footer, in its order: its active bindings marked to show, one per
    action (the first key of it), then the command palette's key."""
    app = screen.app
    hints: list[Hint] = []
    actions: set[str] = set()
    palette = app.COMMAND_PALETTE_BINDING if app.ENABLE_COMMAND_PALETTE else None
    active = screen.active_bindings
    for key, (_, binding, enabled, _) in active.items():
        if not binding.show or key == palette or binding.action in actions:
            continue
        actions.add(binding.action)
        first = binding.id in _RECOVERY_ACTIONS
        hints.append(Hint(app.get_key_display(binding), binding.description, key, enabled, first))
    if palette is not None and palette in active:
        _, binding, enabled, _ = active[palette]
        hints.append(Hint(app.get_key_display(binding), binding.description, palette, enabled))
    return hints


class KeyFooter(Widget):
    """One line at the bottom of a screen: the keys that fit whole (``fit_hints``); a click presses one."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"key-footer--key", "key-footer--label"}
    DEFAULT_CSS = """
    KeyFooter { dock: bottom; height: 1; width: 1fr; background: $footer-background; }
    KeyFooter > .key-footer--key { color: $footer-key-foreground; background: $footer-key-background;
                                   text-style: bold; }
    KeyFooter > .key-footer--label { color: $footer-description-foreground;
                                     background: $footer-description-background; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._spans: list[tuple[int, int, Hint]] = []  # (start, end, hint) of what the last render showed

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, _screen: Screen[object]) -> None:
        self.refresh()

    def render(self) -> Text:
        width = self.size.width
        gap = gap_for(width)
        key_style = self.get_component_rich_style("key-footer--key")
        label_style = self.get_component_rich_style("key-footer--label")
        text = Text(no_wrap=True, overflow="crop", end="")
        self._spans = []
        for hint in fit_hints(screen_hints(self.screen), width, gap):
            if text:
                text.append(" " * gap)
            start = len(text)
            dim = Style() if hint.enabled else Style(dim=True)
            text.append(hint.key, key_style + dim)
            if hint.label:
                text.append(" " + hint.label, label_style + dim)
            self._spans.append((start, len(text), hint))
        return text

    def on_click(self, event: events.Click) -> None:
        for start, end, hint in self._spans:
            if start <= event.x < end:
                if hint.enabled:
                    self.app.simulate_key(hint.press)
                else:
                    self.app.bell()
                return
