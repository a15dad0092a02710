"""The replay dashboard: ``SparkApp`` on a ``ReplaySource``, read-only, with a player's keys and a
time cursor docked at the top of every screen.

The recording feeds the same monitor core as live data; views, findings and alerts are computed at
the recording's ticks (``tick``) on the recording's clock, and the render timer only draws them. A
seek backwards resets the core (``reset``) and the source replays fast up to the target.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import ClassVar

from textual.binding import BindingType
from textual.css.query import NoMatches
from textual.widgets import Static

from sparktui.model.units import fmt_clock
from sparktui.monitor.core import WINDOW_S
from sparktui.record.replay import ReplaySource
from sparktui.record.store import wall_text
from sparktui.record.types import ActionEvent, Record
from sparktui.ui.app import SparkApp
from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.keys import REPLAY_BINDINGS
from sparktui.ui.kiosk_screen import KioskScreen
from sparktui.ui.node_screen import NodeScreen

BAR_CELLS = 24


class ReplayBar(Static):
    """The time cursor: play state, speed, the recording's time and where it is in the recording."""

    DEFAULT_CSS = """
    ReplayBar { dock: top; height: 1; padding: 0 1; background: $accent 25%; color: $text; }
    """


def _clock_text(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


def _speed_text(speed: float) -> str:
    return f"{speed:g}×"


class ReplayApp(SparkApp):
    """The dashboard on a recording. Actions are refused (it is read-only by construction)."""

    BINDINGS: ClassVar[list[BindingType]] = REPLAY_BINDINGS
    DRAW_ON_ARRIVAL: ClassVar[bool] = False  # the recording's ticks decide what is shown
    NODE_SCREENS_KEPT: ClassVar[int] = 0  # a seek starts the logs again: node screens are made afresh

    def __init__(
        self,
        source: ReplaySource,
        *,
        theme: str | None = None,
        theme_dirs: tuple[Path, ...] = (),
        window_s: float = WINDOW_S,
    ) -> None:
        super().__init__(
            source.fleet,
            collect=True,
            read_only=True,
            theme=theme,
            theme_dirs=theme_dirs,
            clock=source.clock,
            window_s=window_s,
            source=source,
        )
        self.replay = source
        self.title = f"sparktui replay: {source.path.name}"
        self._problem_told = False
        self._skipped_told = False
        source.on_moved = self._moved
        source.on_recorded = self.recorded

    # --- what the core and the recording publish ---------------------------------------------------------

    @property
    def ticks(self) -> int:
        return self.monitor.ticks

    def restarted(self) -> None:
        """The core forgot everything: the replay starts again before a seek target."""
        if self.screen_stack and isinstance(self.screen, NodeScreen):
            self.call_later(self._renew_node_screen)

    def recorded(self, record: Record) -> None:
        """An action or alert the recorder was told of: shown as it happens in the replay."""
        if self.replay.rebuilding or not isinstance(record.payload, ActionEvent):
            return
        event = record.payload.event
        text = ", ".join(f"{k}={v}" for k, v in event.items())
        self.notify(f"{wall_text(self.replay.wall(record.t))} recorded: {text}", timeout=6)

    def _renew_node_screen(self) -> None:
        # The node screen remembers which log lines it showed; the new buffers start again at 0.
        screen = self.screen
        if isinstance(screen, NodeScreen):
            self.switch_screen(NodeScreen(screen.node))

    # --- drawing -------------------------------------------------------------------------------------

    def refresh_views(self, force: bool = False) -> None:
        """The render tick: draw the views of the last recorded tick, and the time cursor."""
        self._show_cursor()
        self._draw(force)

    def _moved(self) -> None:
        self.refresh_views(force=True)

    def cursor_text(self) -> str:
        source = self.replay
        if source.rebuilding:
            state = "⟳ seeking"
        elif source.ended:
            state = "■ end"
        elif source.playing:
            state = "▶ playing"
        else:
            state = "⏸ paused"
        span = max(source.end_t - source.start_t, 1e-9)
        done = min(1.0, max(0.0, (source.cursor - source.start_t) / span))
        at = round(done * (BAR_CELLS - 1))
        bar = "━" * at + "●" + "─" * (BAR_CELLS - 1 - at)
        when = fmt_clock(source.wall(), date=True)
        elapsed = _clock_text(source.cursor - source.start_t)
        total = _clock_text(source.end_t - source.start_t)
        text = f"REPLAY {state} {_speed_text(source.speed)}  {when}  {bar} {elapsed} / {total}"
        if source.problem is not None:
            text += "  ⚠ damaged: replayed up to the damage"
        return text

    def _show_cursor(self) -> None:
        text = self.cursor_text()
        self.sub_title = text
        problem = self.replay.problem
        if problem is not None and not self._problem_told:
            self._problem_told = True
            self.notify(problem, severity="error", timeout=20)
        skipped = self.replay.skipped_note
        if skipped is not None and not self._skipped_told:
            self._skipped_told = True
            self.notify(skipped, severity="warning", timeout=20)
        if not self.screen_stack:
            return
        screen = self.screen
        if not isinstance(screen, (FleetScreen, NodeScreen, KioskScreen)):
            return
        try:
            bar = screen.query_one(ReplayBar)
        except NoMatches:
            bar = ReplayBar(id="replay-cursor")
            screen.mount(bar)
        bar.update(text)

    # --- navigation: the cursor follows onto every screen ---------------------------------------------

    def open_node(self, name: str, instance: str | None = None) -> None:
        super().open_node(name, instance)
        self.call_after_refresh(self.refresh_views, True)

    def close_node(self) -> None:
        super().close_node()
        self.call_after_refresh(self.refresh_views, True)

    def step_node(self, current: str, step: int) -> None:
        super().step_node(current, step)
        self.call_after_refresh(self.refresh_views, True)

    # --- the player's keys ---------------------------------------------------------------------------

    def action_play_pause(self) -> None:
        self.replay.toggle()
        self._show_cursor()

    def action_step(self) -> None:
        self.replay.step()

    def action_seek(self, seconds: float) -> None:
        self.replay.seek_by(seconds)
        self._show_cursor()

    def action_faster(self) -> None:
        self.replay.faster()
        self._show_cursor()

    def action_slower(self) -> None:
        self.replay.slower()
        self._show_cursor()


def run_replay(source: ReplaySource, args: argparse.Namespace | None = None) -> int:
    """``sparktui replay``: the replay dashboard until the user quits."""
    theme = getattr(args, "theme", None) if args is not None else None
    app = ReplayApp(source, theme=theme)
    app.run()
    notes = [note for note in (source.problem, source.skipped_note) if note is not None]
    for note in notes:
        print(f"sparktui replay: {note}")
    if notes:
        return 1
    return app.return_code or 0
