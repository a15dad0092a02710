"""Active alerts in the dashboard: the same rules as ``sparktui watch`` (docs/alerts.md), shown, not
sent. Silencing one here hides it from the banner for an hour (not in kiosk mode)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from sparktui.diagnosis.alerts import Alert
from sparktui.ui.base import SparkModal
from sparktui.ui.keys import ALERTS_BINDINGS

SILENCE_S = 3600.0
SEVERITY_VARIABLES = {"crit": "status-crit", "warn": "status-warn", "info": "status-loading"}


def alert_text(alert: Alert, colours: dict[str, str], silenced: bool) -> Text:
    severity = alert.severity.value
    text = Text(f"{severity:4} ", style=f"bold {colours[SEVERITY_VARIABLES.get(severity, 'status-warn')]}")
    text.append(f"{alert.node}  {alert.name}: {alert.summary}")
    if silenced:
        text.append("  (silenced)", style=colours["dim"])
    for line in alert.evidence[:2]:
        text.append(f"\n      {line}", style=colours["dim"])
    if alert.fix:
        text.append(f"\n      fix: {alert.fix}")
    return text


class AlertsScreen(SparkModal[None]):
    BINDINGS: ClassVar[list[BindingType]] = ALERTS_BINDINGS
    DEFAULT_CSS = """
    AlertsScreen { align: center middle; }
    AlertsScreen > OptionList { width: 95%; height: 80%; border: round $primary; background: $surface; }
    AlertsScreen > Static { width: 95%; height: auto; }
    """

    def compose(self) -> ComposeResult:
        yield Static(
            Text("Alerts (the rules of sparktui watch; s silences the highlighted one for an hour)", style="bold")
        )
        yield OptionList(id="alerts")
        yield Footer()

    def on_mount(self) -> None:
        self._fill()

    def _fill(self) -> None:
        spark = self.spark
        options = self.query_one("#alerts", OptionList)
        options.clear_options()
        now = spark.clock()
        alerts = spark.alerts.active()
        if not alerts:
            options.add_option(Option("no alert is firing", disabled=True))
        for index, alert in enumerate(alerts):
            silenced = spark.alerts.silenced_until(alert.key, now) is not None
            options.add_option(Option(alert_text(alert, spark.colours, silenced), id=str(index)))

    def action_silence(self) -> None:
        spark = self.spark
        if spark.kiosk:
            return
        options = self.query_one("#alerts", OptionList)
        alerts = spark.alerts.active()
        index = options.highlighted
        if index is None or index >= len(alerts):
            return
        alert = alerts[index]
        spark.alerts.silence(alert.key, spark.clock() + SILENCE_S)
        self.notify(f"{alert.node} {alert.name} silenced for an hour", timeout=4)
        self._fill()
