"""The recovery actions in the dashboard: the confirmation that names node, target and the exact
commands (every action of a fix, in order) and warns of what running it now would break, and the
action log. Running, refusing and auditing happen in ``sparktui.actions``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.widgets import Static

from sparktui.actions.plans import ActionPlan, FixPlan
from sparktui.actions.progress import RunningAction
from sparktui.ui.base import SparkModal
from sparktui.ui.footer import KeyFooter
from sparktui.ui.keys import ACTION_LOG_BINDINGS, CONFIRM_BINDINGS
from sparktui.ui.lists import KeyedScroll
from sparktui.ui.render import IndentedText


class ConfirmAction(SparkModal[bool]):
    """y runs the plan shown (one action, or a fix's actions in order), n or escape does not. Nothing
    runs without it. The warnings (requests in flight, a load under way) come first, in the warning colour."""

    BINDINGS: ClassVar[list[BindingType]] = CONFIRM_BINDINGS
    # The title and the warnings docked on top, "y runs it" docked at the bottom, the plan's lines between
    # them, scrolled when they do not fit (a fix's three steps at 80x24): the dialog never cuts its keys.
    DEFAULT_CSS = """
    ConfirmAction { align: center middle; }
    ConfirmAction > #confirm { width: 100; max-width: 95%; height: auto; max-height: 90%; border: thick $warning;
                               background: $surface; padding: 0 2; }
    ConfirmAction #confirm-scroll { height: auto; max-height: 100%; }
    ConfirmAction #confirm-head { dock: top; height: auto; padding-top: 1; }
    ConfirmAction #confirm-title { text-style: bold; margin-bottom: 1; }
    ConfirmAction #confirm-warnings { color: $warning; text-style: bold; margin-bottom: 1; }
    ConfirmAction #confirm-warnings.-empty { display: none; }
    ConfirmAction #confirm-keys { dock: bottom; height: auto; padding: 1 0; }
    """

    def __init__(self, plan: ActionPlan | FixPlan) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        lines = self.plan.confirmation()
        warnings = self.plan.warnings
        body = [line for line in lines[1:] if not line.lstrip().startswith("warning: ")]
        with Vertical(id="confirm"):
            with Vertical(id="confirm-head"):
                yield Static(lines[0], id="confirm-title")
                yield Static(
                    "\n".join(f"⚠ {warning}" for warning in warnings),
                    id="confirm-warnings",
                    classes="" if warnings else "-empty",
                )
            yield Static(Text(CONFIRM_KEYS, style="bold"), id="confirm-keys")
            with KeyedScroll(id="confirm-scroll"):
                yield Static(IndentedText(_body_text(body)), id="confirm-body")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.call_after_refresh(self._say_how_to_scroll)

    def on_resize(self) -> None:
        self.call_after_refresh(self._say_how_to_scroll)

    def _say_how_to_scroll(self) -> None:
        """A plan taller than the dialog says that the rest is below, beside ``y``: a scrollbar alone
        is easy to miss, and the steps hidden below are what ``y`` runs."""
        if not self.is_attached:
            return
        scrolls = self.query_one("#confirm-scroll", KeyedScroll).max_scroll_y > 0
        keys = f"{CONFIRM_KEYS}; {SCROLL_KEYS}" if scrolls else CONFIRM_KEYS
        self.query_one("#confirm-keys", Static).update(Text(keys, style="bold"))


CONFIRM_KEYS = "y runs it, n or escape cancels"
SCROLL_KEYS = "↑ ↓ PgUp PgDn scroll the plan"


def _body_text(lines: Sequence[str]) -> Text:
    """The plan's lines as they are (indentation kept, also on their wrapped rows: ``IndentedText``; no
    markup read in a command), a fix's steps in bold."""
    text = Text()
    for index, line in enumerate(lines):
        text.append(("\n" if index else "") + line, style="bold" if line.startswith("  step ") else "")
    return text


class ActionLogScreen(SparkModal[None]):
    """Every action of this session: its report, newest first."""

    BINDINGS: ClassVar[list[BindingType]] = ACTION_LOG_BINDINGS
    DEFAULT_CSS = """
    ActionLogScreen { align: center middle; }
    ActionLogScreen > KeyedScroll { width: 110; max-width: 95%; height: 85%; border: round $primary;
                                        background: $surface; padding: 0 1; }
    """

    def __init__(
        self,
        entries: Sequence[tuple[str, Sequence[str]]],
        running: Sequence[RunningAction] = (),
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__()
        self.entries = entries
        self.running = running
        self.clock = clock

    def compose(self) -> ComposeResult:
        with KeyedScroll():
            if not self.entries and not self.running:
                yield Static("No action run in this session.")
            now = self.clock() if self.clock is not None else 0.0
            for action in reversed(self.running):  # running now: its progress so far
                yield Static(Text(f"{action.at}  ⟳ {action.summary(now)}", style="bold"))
                yield Static("\n".join(f"  {line}" for line in action.lines) or "  started")
            for when, lines in reversed(self.entries):
                yield Static(Text(f"{when}  {lines[0] if lines else ''}", style="bold"))
                # the report's lines as they are (no markup read), indented, and so on their wrapped rows
                yield Static(IndentedText(Text("\n".join(f"  {line}" for line in lines[1:]) or " ")))
        yield KeyFooter()
