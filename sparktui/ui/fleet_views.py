"""Fleet-wide screens: every finding (active and recently cleared) and the drift between instances."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from sparktui.model.drift import FIELDS, DriftReport
from sparktui.model.units import fmt_clock
from sparktui.ui.base import SparkModal
from sparktui.ui.keys import DRIFT_BINDINGS, FINDINGS_BINDINGS
from sparktui.ui.render import finding_text


class FindingsScreen(SparkModal[None]):
    BINDINGS: ClassVar[list[BindingType]] = FINDINGS_BINDINGS
    DEFAULT_CSS = """
    FindingsScreen { align: center middle; }
    FindingsScreen > VerticalScroll { width: 95%; height: 90%; border: round $primary; background: $surface;
                                      padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        spark = self.spark
        with VerticalScroll():
            active = [f for findings in spark.findings.values() for f in findings]
            yield Static(Text(f"Active findings ({len(active)})", style="bold"))
            if not active:
                yield Static("none: every rule of the catalogue is quiet")
            clock = spark.monitor.wall_at  # the findings' times are on the tick's clock
            for finding in active:
                head = Text(f"{finding.node}  ", style="bold")
                body = finding_text(finding, spark.colours, evidence_lines=5, keymap=spark.fleet.keymap)
                opened = Text(f"\n    opened {fmt_clock(clock(finding.opened_at))}", style=spark.colours["dim"])
                yield Static(head + body + opened)
            cleared = spark.diagnosis.history()
            yield Static(Text(f"\nCleared ({len(cleared)})", style="bold"))
            for finding in cleared[-20:][::-1]:
                when = f"opened {fmt_clock(clock(finding.opened_at))}, cleared {fmt_clock(clock(finding.cleared_at))}"
                yield Static(Text(f"{finding.node}  {finding.title}  ({when})", style=spark.colours["dim"]))
        yield Footer()


def drift_table(report: DriftReport, colours: dict[str, str]) -> Table:
    table = Table(box=None, padding=(0, 1), show_edge=False)
    table.add_column("node / instance")
    table.add_column("job")
    for field in FIELDS:
        table.add_column(field.replace("_", " "), overflow="fold", max_width=60 if field == "command" else 24)
    for row in report.rows:
        cells = [Text(f"{row.node}/{row.instance}"), Text(f"{row.job or ''} {row.role if row.job else ''}")]
        for field in FIELDS:
            value = row.values.get(field)
            style = f"bold {colours['status-warn']}" if report.differs(row.node, row.instance, field) else ""
            cells.append(Text(value if value is not None else "–", style=style))
        table.add_row(*cells)
    return table


class DriftScreen(SparkModal[None]):
    """What each instance runs; values that differ between ranks of a job or hosts of a model in warn colour."""

    BINDINGS: ClassVar[list[BindingType]] = DRIFT_BINDINGS
    DEFAULT_CSS = """
    DriftScreen { align: center middle; }
    DriftScreen > VerticalScroll { width: 98%; height: 90%; border: round $primary; background: $surface;
                                   padding: 0 1; }
    """

    def __init__(self, report: DriftReport) -> None:
        super().__init__()
        self.report = report

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            count = len(self.report.mismatches)
            title = f"Fleet drift: {count} instance(s) differ from their peers" if count else "Fleet drift: none"
            yield Static(Text(title, style="bold"))
            yield Static(drift_table(self.report, self.spark.colours))
        yield Footer()
