"""The alerts in the dashboard: every rule of ``sparktui watch`` (docs/alerts.md) with where it stands,
firing first, then silenced, pending (with how long of its ``for`` time) and the quiet ones. Shown, not
sent. Silencing one here (``s``) holds it back for an hour (not in kiosk mode)."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets.option_list import Option

from sparktui.diagnosis.alerts import RuleState, RuleStatus, held_text, rule_condition, status_timing
from sparktui.ui.base import SparkModal
from sparktui.ui.footer import KeyFooter
from sparktui.ui.keys import ALERTS_BINDINGS
from sparktui.ui.lists import KeyedOptionList

SILENCE_S = 3600.0
SEVERITY_VARIABLES = {"crit": "status-crit", "warn": "status-warn", "info": "status-loading"}
EVIDENCE_LINES = 2
STATE_WIDTH = 13  # "silenced crit"


def status_text(status: RuleStatus, now: float, colours: dict[str, str]) -> Table:
    """One rule: its state, then what holds, how long, the rule (and, firing, its evidence and fix)."""
    dim = colours["dim"]
    state = status.state
    line = Table.grid(padding=(0, 1))
    line.add_column(width=STATE_WIDTH, no_wrap=True)
    line.add_column(ratio=1)
    body = Text()
    if state is RuleState.OK:
        body.append(f"{status.rule.name}  ", style="bold")
        body.append(rule_condition(status.rule), style=dim)
        line.add_row(Text("ok", style=colours["status-ok"]), body)
        return line
    severity = status.severity.value if status.severity is not None else "warn"
    colour = colours[SEVERITY_VARIABLES.get(severity, "status-warn")]
    body.append(f"{status.key}  ", style="bold")
    body.append(status.summary)
    timing = status_timing(status, now)
    if state is RuleState.PENDING and status.silenced_until is not None:
        timing += f", silenced for {held_text(status.silenced_until - now)} more"
    body.append(f"\n{timing} · rule: {rule_condition(status.rule)}", style=dim)
    if status.alert is not None and state is RuleState.FIRING:
        for evidence in status.alert.evidence[:EVIDENCE_LINES]:
            body.append(f"\n{evidence}", style=dim)
        if status.alert.fix:
            body.append(f"\nfix: {status.alert.fix}")
    line.add_row(Text(f"{state.value} {severity}", style=f"bold {colour}"), body)
    return line


def alerts_title(statuses: tuple[RuleStatus, ...]) -> str:
    counts = {state: sum(1 for s in statuses if s.state is state) for state in RuleState}
    shown = " · ".join(f"{counts[state]} {state.value}" for state in RuleState if counts[state])
    return f"Alerts: {shown or 'no rules'}"


class AlertsScreen(SparkModal[None]):
    BINDINGS: ClassVar[list[BindingType]] = ALERTS_BINDINGS
    DEFAULT_CSS = """
    AlertsScreen { align: center middle; }
    AlertsScreen > KeyedOptionList {
        width: 100%; max-width: 172; height: auto; max-height: 100%; border: round $primary; background: $surface;
        /* A neutral cursor: the states keep their colours under it. */
        & > .option-list--option-highlighted { background: $foreground 15%; color: $foreground; }
        &:focus > .option-list--option-highlighted { background: $foreground 20%; }
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self.statuses: tuple[RuleStatus, ...] = ()

    def compose(self) -> ComposeResult:
        yield KeyedOptionList(id="alerts")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._fill()
        self.query_one("#alerts", KeyedOptionList).highlighted = 0 if self.statuses else None
        self.set_interval(1.0, self._fill, name="alerts-refresh")

    def _fill(self) -> None:
        spark = self.spark
        now = spark.clock()
        self.statuses = spark.alerts.rule_states(now)
        options = self.query_one("#alerts", KeyedOptionList)
        highlighted = options.highlighted
        kept = options.get_option_at_index(highlighted).id if highlighted is not None else None
        options.clear_options()
        options.add_options(
            Option(status_text(status, now, spark.colours), id=str(status.key or status.rule.name))
            for status in self.statuses
        )
        options.border_title = alerts_title(self.statuses)
        if kept is not None:
            try:
                options.highlighted = options.get_option_index(kept)
            except LookupError:
                options.highlighted = 0 if self.statuses else None

    def action_silence(self) -> None:
        spark = self.spark
        if spark.kiosk:
            return
        index = self.query_one("#alerts", KeyedOptionList).highlighted
        if index is None or index >= len(self.statuses):
            return
        status = self.statuses[index]
        if status.key is None:
            self.notify(f"{status.rule.name} is quiet: nothing to silence", timeout=4)
            return
        spark.alerts.silence(status.key, spark.clock() + SILENCE_S)
        self.notify(f"{status.key} silenced for an hour", timeout=4)
        self._fill()
