"""The screens' base, and what a screen may ask of the app (``Dashboard``, reached as ``spark``).

A screen draws what the monitor core knows and asks the app to navigate or to act; it never reaches
into the app. ``Dashboard`` names everything it may use, typed, and nothing else; the app
(``sparktui.ui.app.SparkApp``) is one, checked by the type checker (``tests/ui/test_dashboard.py``).
No module here imports the app: the app imports the screens, never the other way round.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from textual.screen import ModalScreen, Screen
from textual.visual import VisualType
from textual.widgets import Static

if TYPE_CHECKING:
    from sparktui.actions.progress import RunningAction
    from sparktui.diagnosis.alerts import AlertEngine
    from sparktui.diagnosis.engine import DiagnosisEngine, Finding
    from sparktui.model.fleet import NodeView
    from sparktui.model.history import History
    from sparktui.model.logbuffer import LogBuffer
    from sparktui.model.specs import FleetSpec
    from sparktui.monitor.core import Monitor

ResultType = TypeVar("ResultType")


class Dashboard(Protocol):
    """What a screen, a dialog or the command palette may ask of the app (see the module docstring)."""

    # the fleet and how the app runs
    fleet: FleetSpec
    read_only: bool
    kiosk: bool
    clock: Callable[[], float]
    paused: bool
    # what the core knows
    monitor: Monitor

    @property
    def views(self) -> tuple[NodeView, ...]: ...
    @property
    def findings(self) -> dict[str, tuple[Finding, ...]]: ...
    @property
    def history(self) -> History: ...
    @property
    def diagnosis(self) -> DiagnosisEngine: ...
    @property
    def alerts(self) -> AlertEngine: ...
    @property
    def signature_patterns(self) -> tuple[re.Pattern[str], ...]: ...
    @property
    def window_s(self) -> float: ...

    action_log: list[tuple[str, tuple[str, ...]]]  # the actions run this session, newest last
    running_actions: list[RunningAction]  # confirmed and not ended, oldest first

    def log_buffers(self, node_name: str) -> Mapping[str, LogBuffer]: ...
    def firing_alerts(self) -> list[tuple[str, str]]: ...
    def own_problems(self) -> list[str]: ...

    # how to draw
    colours: dict[str, str]
    theme: str
    no_color: bool

    @property
    def theme_names(self) -> list[str]: ...

    # navigation and actions
    def open_node(self, name: str, instance: str | None = None) -> None: ...
    def open_logs(self, name: str) -> None: ...
    def close_node(self) -> None: ...
    def step_node(self, current: str, step: int) -> None: ...
    def unlock_kiosk(self) -> None: ...
    def start_action(self, action_id: str, node: str | None = None) -> None: ...
    def action_toggle_pause(self) -> None: ...


def spark_app(app: object) -> Dashboard:
    """``app`` as the dashboard: every screen and command provider here runs in one (``Dashboard``)."""
    return cast("Dashboard", app)


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


class SparkScreen(Screen[ResultType]):
    """A full screen of the dashboard."""

    _ready = False  # set by the screen's on_mount, once its widgets are composed and mounted

    @property
    def spark(self) -> Dashboard:
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
    def spark(self) -> Dashboard:
        return spark_app(self.app)
