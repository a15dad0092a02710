"""Small renderers that turn model values into Rich text for table cells and panels.

Colours come from the theme's variables (``themes.palette``), resolved once per theme change and
passed in; numbers come formatted from ``model.units`` so the dashboard and the headless commands say
the same thing. Nothing here computes a number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

from sparktui.actions.plans import finding_fix, fix_sequence_text
from sparktui.config import load_catalogue
from sparktui.diagnosis.engine import Finding
from sparktui.model.fleet import NodeView
from sparktui.model.host import MemoryLedger
from sparktui.model.levels import Level
from sparktui.model.status import State
from sparktui.model.units import NO_DATA
from sparktui.ui.keys import action_key
from sparktui.ui.themes import MEMORY_VARIABLES, STATUS_VARIABLES
from sparktui.ui.wrap import hanging_rows

BLOCKS = "▁▂▃▄▅▆▇█"
STATUS_GLYPH = {
    State.UP: "●",
    State.DEGRADED: "▲",
    State.LOADING: "◌",
    State.UNKNOWN: "?",
    State.FAILING: "▼",
    State.STALE: "◇",
    State.DOWN: "✖",
}


def spark_text(
    values: Sequence[float], width: int, colour: str, floor: float | None = 0.0, high: float | None = None
) -> Text:
    """A one-line sparkline of the last ``width`` values, scaled from ``floor`` (or the minimum) to
    ``high`` (a scale shared by several lines, so rows compare) or else the values' own maximum."""
    tail = [v for v in values[-width:] if not math.isnan(v)]
    if not tail:
        return Text(NO_DATA, style=colour)
    low = floor if floor is not None else min(tail)
    top = max(tail) if high is None else max(high, low)
    span = top - low
    chars = [BLOCKS[0] if span <= 0 else BLOCKS[max(0, min(7, int((v - low) / span * 7.999)))] for v in tail]
    return Text("".join(chars).rjust(width), style=colour)


EIGHTHS = " ▁▂▃▄▅▆▇█"


def column_rows(values: Sequence[float], width: int, height: int, high: float | None = None) -> tuple[str, ...]:
    """The rows of a chart of the last ``width`` values, top row first, each ``width`` cells: one column
    a value, ``height`` rows of eighth blocks (8 steps a row) from 0 to ``high`` (else the values'
    maximum); the newest value is the right-most column. Each column is worked out once and the rows
    read across them (a chart is redrawn every tick: 20 rows of 76 columns, twice, on the fleet screen)."""
    tail = [max(0.0, v) for v in values[-width:] if not math.isnan(v)]
    top = high if high is not None else max(tail, default=0.0)
    steps = height * 8
    columns = []
    for value in tail:
        whole, part = divmod(0 if top <= 0 else round(min(1.0, value / top) * steps), 8)
        columns.append("█" * height if whole >= height else " " * (height - 1 - whole) + EIGHTHS[part] + "█" * whole)
    if not columns:
        return (" " * width,) * height
    return tuple("".join(row).rjust(width) for row in zip(*columns, strict=True))


# The states drawn in reverse video without colour: the red ones a node is in by its own fault.
MARKED_WITHOUT_COLOUR = frozenset({State.FAILING, State.DOWN})


def status_style(state: State, colours: Mapping[str, str], no_color: bool = False) -> str:
    """A status's style: bold in its colour; without colour (``NO_COLOR``) a down or failing one in
    reverse video, since the terminal's greys make its red no brighter than a healthy green, and a
    down node must stand out most."""
    if no_color and state in MARKED_WITHOUT_COLOUR:
        return "bold reverse"
    return f"bold {colours[STATUS_VARIABLES[state]]}"


def status_text(state: State, colours: Mapping[str, str], label: bool = True, no_color: bool = False) -> Text:
    glyph = STATUS_GLYPH[state]
    return Text(f"{glyph} {state.value}" if label else glyph, style=status_style(state, colours, no_color))


# Each memory segment's fill: one shade each, so the parts stay apart without colour (NO_COLOR).
MEMORY_PATTERNS = {"vLLM": "█", "models held": "▚", "other": "▓", "reclaimable cache": "▒", "shmem": "░", "free": "·"}


def memory_bar(ledger: MemoryLedger | None, width: int, colours: Mapping[str, str], patterns: bool = False) -> Text:
    """The unified-memory bar: vLLM | models held (where a server says so) | other | reclaimable cache |
    shmem | free, to scale; ``patterns``
    fills each part with its own shade (MEMORY_PATTERNS) for a screen without colour."""
    segments = ledger.segments() if ledger is not None else ()
    total = sum(size for _, size in segments)
    if not segments or total <= 0:
        return Text(NO_DATA.center(width), style=colours["dim"])
    text = Text()
    used = 0
    for index, (label, size) in enumerate(segments):
        cells = round(size / total * width) if index < len(segments) - 1 else width - used
        cells = max(0, min(cells, width - used))
        used += cells
        fill = MEMORY_PATTERNS[label] if patterns else "█"
        text.append(fill * cells, style=colours[MEMORY_VARIABLES[label]])
    return text


LEVEL_VARIABLES = {Level.OK: "", Level.WARN: "status-warn", Level.CRIT: "status-crit"}


def level_text(value: str, level: Level | None, colours: Mapping[str, str]) -> Text | str:
    """A number coloured by its level against its threshold (amber warning, red critical); plain when
    normal or unknown."""
    if level is None or level is Level.OK:
        return value
    return Text(value, style=f"bold {colours[LEVEL_VARIABLES[level]]}")


def level_bar(fraction: float | None, width: int, colour: str, empty: str) -> Text:
    """A horizontal gauge for a 0..1 fraction; an unknown value draws a dash, never an empty bar."""
    if fraction is None or math.isnan(fraction):
        return Text(NO_DATA.center(width), style=empty)
    cells = round(max(0.0, min(1.0, fraction)) * width)
    return Text("█" * cells, style=colour) + Text("░" * (width - cells), style=empty)


def node_reason(view: NodeView) -> str:
    """The first reason a node is not healthy, for its row."""
    return view.status.reasons[0] if view.status.reasons else ""


SEVERITY_VARIABLES = {"crit": "status-crit", "warn": "status-warn", "info": "status-loading"}
SEVERITY_GLYPH = {"crit": "✖", "warn": "▲", "info": "●"}
IMBALANCED = "≠"  # a data-parallel engine off its share of the generation (the fleet row, the engine table)


def findings_cell(findings: Sequence[Finding], colours: Mapping[str, str]) -> Text | str:
    """A finding count with the worst severity's glyph, for a table cell; ``NO_DATA`` when there is none
    (a blank cell reads as a cut or missing one)."""
    if not findings:
        return NO_DATA
    worst = max(findings, key=lambda f: f.severity.rank).severity.value
    return Text(f"{len(findings)} {SEVERITY_GLYPH[worst]}", style=f"bold {colours[SEVERITY_VARIABLES[worst]]}")


def finding_line(finding: Finding, colours: Mapping[str, str], keymap: Mapping[str, str] | None = None) -> Text:
    """A finding in one line, for a list: severity, node (instance), title and the key that fixes it."""
    severity = finding.severity.value
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{SEVERITY_GLYPH[severity]} ", style=f"bold {colours[SEVERITY_VARIABLES[severity]]}")
    text.append(finding.node, style="bold")
    if finding.instance:
        text.append(f"/{finding.instance}", style=colours["dim"])
    key, _what = fix_label(finding, keymap)
    if key:
        text.append(f" [{key}]", style=f"bold {colours['status-loading']}")
    text.append(f" {finding.title}")
    return text


def fix_label(finding: Finding, keymap: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """The key that applies a finding's fix and what it does: a fix of several actions on the ``fix``
    key, with them in order ("drop caches → restart → warm up"), a one-action fix on that action's
    key; (None, None) when there is no fix to apply."""
    fix = finding_fix(finding, load_catalogue())
    if len(fix) > 1:
        return action_key("fix", keymap), fix_sequence_text(fix)
    if finding.action:
        return action_key(finding.action, keymap), finding.action.replace("-", " ")
    return None, None


def finding_text(
    finding: Finding,
    colours: Mapping[str, str],
    evidence_lines: int = 3,
    keymap: Mapping[str, str] | None = None,
) -> Text:
    """A finding as the operator reads it: what, where, the evidence, the fix, the key that applies it
    (``keymap``: the config's remapped keys): a fix of several actions on the ``fix`` key, with them in
    order (``[x: drop caches → restart → warm up]``), a one-action fix on that action's key."""
    severity = finding.severity.value
    colour = colours[SEVERITY_VARIABLES[severity]]
    text = Text()
    text.append(f"{SEVERITY_GLYPH[severity]} {finding.title}", style=f"bold {colour}")
    if finding.instance:
        text.append(f"  ({finding.instance})", style=colours["dim"])
    key, what = fix_label(finding, keymap)
    if what:
        text.append(f"  [{key}: {what}]" if key else f"  [{what}]", style=colours["status-loading"])
    for line in finding.evidence[:evidence_lines]:
        text.append(f"\n    {line}", style=colours["dim"])
    if len(finding.evidence) > evidence_lines:
        text.append(f"\n    … {len(finding.evidence) - evidence_lines} more", style=colours["dim"])
    text.append(f"\n    fix: {finding.fix}")
    return text


# --- wrapping that keeps a line's indent ----------------------------------------------------------------


@dataclass(frozen=True, eq=True)
class IndentedText:
    """Text whose wrapped rows keep their line's indent (a plan's command under its step, a finding's
    evidence under its title), wrapped by ``wrap_ranges``, at the width it is drawn at. Equal when its
    text is, so a panel that shows the same again is not redrawn."""

    text: Text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        shown = Text(no_wrap=True, overflow="crop")
        for number, line in enumerate(self.text.split("\n", allow_blank=True)):
            plain = line.plain
            indent = min(len(plain) - len(plain.lstrip(" ")), width // 2)
            for row, (start, end) in enumerate(hanging_rows(plain, indent, width, cell_len)):
                if number or row:
                    shown.append("\n")
                if row:
                    shown.append(" " * indent)
                shown.append_text(line[start:end])
        yield shown

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((cell_len(line) for line in self.text.plain.split("\n")), default=0)
        return Measurement(min(widest, 1), min(widest, options.max_width))  # any width: it wraps
