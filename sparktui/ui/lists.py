"""Textual's list and scrolling widgets with their keys from the one keymap (``keys.py``): ids the
config's ``[keymap]`` can remap, and the vim keys. Textual's own bindings for them have no id, so they
are not inherited."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.widgets import OptionList

from sparktui.ui.keys import LIST_BINDINGS, SCROLL_BINDINGS


class KeyedScroll(VerticalScroll, inherit_bindings=False):
    """A scrolled page (help, findings, a drift detail)."""

    BINDINGS: ClassVar[list[BindingType]] = SCROLL_BINDINGS


class KeyedOptionList(OptionList, inherit_bindings=False):
    """A list to move through and open (alerts, drift)."""

    BINDINGS: ClassVar[list[BindingType]] = LIST_BINDINGS
