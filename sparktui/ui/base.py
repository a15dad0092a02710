"""The screens' base: one typed way back to the app that holds the fleet's state (``spark``).

``sparktui.ui.app`` imports every screen, so the app's class is imported here only for the type
checker and, at run time, when first asked for.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, TypeVar

from textual import events
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.visual import VisualType
from textual.widgets import Footer, Static

if TYPE_CHECKING:
    from sparktui.ui.app import SparkApp

ResultType = TypeVar("ResultType")


def spark_app(app: object) -> SparkApp:
    """``app`` as the dashboard's app: every screen and command provider here runs in one."""
    from sparktui.ui.app import SparkApp

    assert isinstance(app, SparkApp)
    return app


def update_panel(panel: Static, content: VisualType) -> None:
    """Show ``content`` in ``panel``, with a layout pass only when the panel's height changes with it.

    ``Static.update`` asks for a layout by default, and a layout reflows the whole screen, measuring
    every auto-height panel again: at a tick that updates a few panels, most of the screen's cost. A
    panel of fixed height never needs one; a panel of auto height when its content, wrapped at the
    panel's width, takes another number of lines than what it showed (its clamps then act the same).
    """
    height = panel.styles.height
    if height is not None and not height.is_auto:
        panel.update(content, layout=False)
        return
    width = panel.content_size.width
    if width <= 0:  # not laid out yet
        panel.update(content)
        return
    container, viewport = panel.container_size, panel.app.size
    before = panel.get_content_height(container, viewport, width)
    panel.update(content, layout=False)
    if panel.get_content_height(container, viewport, width) != before:
        panel.refresh(layout=True)


COMPACT_FOOTER_BELOW = 140  # columns: a narrower terminal gets the footer's compact style


class SparkScreen(Screen[ResultType]):
    """A full screen of the dashboard."""

    _ready = False  # set by the screen's on_mount, once its widgets are composed and mounted

    def on_resize(self, event: events.Resize) -> None:
        """A narrow terminal packs the footer's keys closer, so the action keys (listed first) fit.
        (Textual calls each class's own handler: a screen's ``on_resize`` runs besides this one.)"""
        with contextlib.suppress(NoMatches):
            self.query_one(Footer).compact = event.size.width < COMPACT_FOOTER_BELOW

    @property
    def spark(self) -> SparkApp:
        return spark_app(self.app)

    @property
    def drawable(self) -> bool:
        """Its widgets are there to query and update: mounted, and neither the screen nor the app is
        being torn down. A render tick or a screen's own timer can fire between ``switch_screen`` and
        mount, and while the app shuts down (the children are removed before the timers stop)."""
        return (
            self._ready
            and self.app.is_running
            and self.is_attached
            and not (self._closing or self._closed or self._pruning)
        )


class SparkModal(ModalScreen[ResultType]):
    """A dialog or list over the dashboard."""

    @property
    def spark(self) -> SparkApp:
        return spark_app(self.app)
