"""Fleet-wide screens: every finding (active and recently cleared) and the drift between instances."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from sparktui.model.drift import CommandWord, DriftGroup, DriftLine, DriftReport, drift_groups
from sparktui.model.units import NO_DATA, fmt_clock
from sparktui.ui.base import SparkModal
from sparktui.ui.footer import KeyFooter
from sparktui.ui.keys import DRIFT_BINDINGS, DRIFT_DETAIL_BINDINGS, FINDINGS_BINDINGS
from sparktui.ui.lists import KeyedOptionList, KeyedScroll
from sparktui.ui.render import IndentedText, finding_text


class FindingsScreen(SparkModal[None]):
    BINDINGS: ClassVar[list[BindingType]] = FINDINGS_BINDINGS
    DEFAULT_CSS = """
    FindingsScreen { align: center middle; }
    FindingsScreen > KeyedScroll { width: 95%; height: 90%; border: round $primary; background: $surface;
                                      padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        spark = self.spark
        with KeyedScroll():
            active = [f for findings in spark.findings.values() for f in findings]
            yield Static(Text(f"Active findings ({len(active)})", style="bold"))
            if not active:
                yield Static("none: every rule of the catalogue is quiet")
            clock = spark.monitor.wall_at  # the findings' times are on the tick's clock
            for finding in active:
                head = Text(f"{finding.node}  ", style="bold")
                body = finding_text(finding, spark.colours, evidence_lines=5, keymap=spark.fleet.keymap)
                opened = Text(f"\n    opened {fmt_clock(clock(finding.opened_at))}", style=spark.colours["dim"])
                yield Static(IndentedText(head + body + opened))  # the evidence wraps under its indent
            cleared = spark.diagnosis.history()
            yield Static(Text(f"\nCleared ({len(cleared)})", style="bold"))
            for finding in cleared[-20:][::-1]:
                when = f"opened {fmt_clock(clock(finding.opened_at))}, cleared {fmt_clock(clock(finding.cleared_at))}"
                yield Static(Text(f"{finding.node}  {finding.title}  ({when})", style=spark.colours["dim"]))
        yield KeyFooter()


def _members_table(group: DriftGroup, lines: Sequence[DriftLine], colours: dict[str, str]) -> Table:
    """Fields as rows, the group's members as columns; values never wrap (a number is never split)."""
    table = Table(box=None, padding=(0, 2, 0, 0), show_edge=False, header_style="bold")
    table.add_column("", no_wrap=True, style=colours["dim"])
    for member in group.members:
        table.add_column(member, no_wrap=True, overflow="ellipsis")
    differs = f"bold {colours['status-warn']}"
    for line in lines:
        style = differs if line.differs else "bold" if line.varies else ""
        table.add_row(line.label, *(Text(v, style=style) for v in line.values))
    return table


def drift_summary(group: DriftGroup, colours: dict[str, str]) -> RenderableType:
    """A group as the drift list shows it: only what differs, or one line when nothing does."""
    title = Text()
    title.append(group.title, style="bold")
    title.append(f"  {', '.join(group.members)}: ", style=colours["dim"])
    if group.alone:
        title.append("alone, nothing to compare", style=colours["dim"])
        return title
    if not group.differing and not group.command_differs:
        title.append("the same", style=colours["status-ok"])
        return title
    count = len(group.differing) + group.command_differs
    title.append(f"{count} difference{'s' if count > 1 else ''}", style=f"bold {colours['status-warn']}")
    parts: list[RenderableType] = [title]
    if group.differing:
        parts.append(_members_table(group, group.differing, colours))
    if group.command_differs:
        parts.append(Text("launch commands differ: enter shows them, the differing flags marked", style=colours["dim"]))
    return RichGroup(*parts)


def drift_title(groups: Sequence[DriftGroup]) -> str:
    differ = sum(1 for g in groups if not g.alone and (g.differing or g.command_differs))
    agree = sum(1 for g in groups if not g.alone) - differ
    alone = sum(1 for g in groups if g.alone)
    return f"Drift: {differ} differ · {agree} agree · {alone} alone · enter: detail"


class DriftScreen(SparkModal[None]):
    """Instances that must agree (the ranks of a job, the hosts of a model), the differences first."""

    BINDINGS: ClassVar[list[BindingType]] = DRIFT_BINDINGS
    DEFAULT_CSS = """
    DriftScreen { align: center middle; }
    DriftScreen > KeyedOptionList {
        width: 100%; max-width: 172; height: auto; max-height: 100%; border: round $primary; background: $surface;
        & > .option-list--option-highlighted { background: $foreground 15%; color: $foreground; }
        &:focus > .option-list--option-highlighted { background: $foreground 20%; }
    }
    """

    def __init__(self, report: DriftReport) -> None:
        super().__init__()
        self.report = report
        self.groups = drift_groups(report)

    def compose(self) -> ComposeResult:
        options = [Option(drift_summary(g, self.spark.colours), id=str(i)) for i, g in enumerate(self.groups)]
        if not options:
            options = [Option("no vLLM instance is known yet", disabled=True)]
        yield KeyedOptionList(*options, id="drift")
        yield KeyFooter()

    def on_mount(self) -> None:
        options = self.query_one("#drift", KeyedOptionList)
        options.border_title = drift_title(self.groups)
        if self.groups:
            options.highlighted = 0

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_index < len(self.groups):
            self.app.push_screen(DriftDetailScreen(self.groups[event.option_index]))


def command_text(words: Sequence[CommandWord], colours: dict[str, str]) -> Text:
    text = Text()
    for index, word in enumerate(words):
        if index:
            text.append(" ")
        text.append(word.text, style=f"bold reverse {colours['status-warn']}" if word.differs else "")
    return text


class DriftDetailScreen(SparkModal[None]):
    """One group: every field side by side, then each member's launch command with the flags the
    others lack marked."""

    BINDINGS: ClassVar[list[BindingType]] = DRIFT_DETAIL_BINDINGS
    DEFAULT_CSS = """
    DriftDetailScreen { align: center middle; }
    DriftDetailScreen > KeyedScroll { width: 100%; max-width: 172; height: auto; max-height: 100%;
                                      border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, group: DriftGroup) -> None:
        super().__init__()
        self.group = group

    def compose(self) -> ComposeResult:
        colours = self.spark.colours
        group = self.group
        with KeyedScroll() as page:
            page.border_title = f"Drift: {group.title}"
            yield Static(_members_table(group, group.lines, colours))
            yield Static(Text("\nLaunch commands (the rank and host flags left out)", style="bold"))
            for member, words in zip(group.members, group.commands, strict=True):
                line = Text(f"{member}: ", style="bold")
                line.append_text(command_text(words, colours) if words is not None else Text(NO_DATA))
                yield Static(line)
        yield KeyFooter()
