"""Small renderers that turn model values into Rich text for table cells and panels.

Colours come from the theme's variables (``themes.palette``), resolved once per theme change and
passed in; numbers come formatted from ``model.units`` so the dashboard and the headless commands say
the same thing. Nothing here computes a number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rich.text import Text

from sparktui.actions.plans import finding_fix, fix_sequence_text
from sparktui.config import load_catalogue
from sparktui.diagnosis.engine import Finding
from sparktui.model.fleet import NodeView
from sparktui.model.host import MemoryLedger
from sparktui.model.status import State
from sparktui.model.units import NO_DATA
from sparktui.ui.keys import action_key
from sparktui.ui.themes import MEMORY_VARIABLES, STATUS_VARIABLES

BLOCKS = "▁▂▃▄▅▆▇█"
STATUS_GLYPH = {
    State.UP: "●",
    State.DEGRADED: "▲",
    State.LOADING: "◌",
    State.UNKNOWN: "?",
    State.STALE: "◇",
    State.DOWN: "✖",
}


def spark_text(values: Sequence[float], width: int, colour: str, floor: float | None = 0.0) -> Text:
    """A one-line sparkline of the last ``width`` values, scaled from ``floor`` (or the minimum)."""
    tail = [v for v in values[-width:] if not math.isnan(v)]
    if not tail:
        return Text(NO_DATA, style=colour)
    low = floor if floor is not None else min(tail)
    high = max(tail)
    span = high - low
    chars = [BLOCKS[0] if span <= 0 else BLOCKS[min(7, int((v - low) / span * 7.999))] for v in tail]
    return Text("".join(chars).rjust(width), style=colour)


def status_text(state: State, colours: Mapping[str, str], label: bool = True) -> Text:
    colour = colours[STATUS_VARIABLES[state]]
    glyph = STATUS_GLYPH[state]
    return Text(f"{glyph} {state.value}" if label else glyph, style=f"bold {colour}")


def memory_bar(ledger: MemoryLedger | None, width: int, colours: Mapping[str, str]) -> Text:
    """The unified-memory bar: vLLM | other | reclaimable cache | shmem | free, to scale."""
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
        text.append("█" * cells, style=colours[MEMORY_VARIABLES[label]])
    return text


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


def findings_cell(findings: Sequence[Finding], colours: Mapping[str, str]) -> Text | str:
    """A finding count with the worst severity's glyph, for a table cell; empty when there is none."""
    if not findings:
        return ""
    worst = max(findings, key=lambda f: f.severity.rank).severity.value
    return Text(f"{len(findings)} {SEVERITY_GLYPH[worst]}", style=f"bold {colours[SEVERITY_VARIABLES[worst]]}")


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
    fix = finding_fix(finding, load_catalogue())
    if len(fix) > 1:
        key = action_key("fix", keymap)
        what = fix_sequence_text(fix)
        text.append(f"  [{key}: {what}]" if key else f"  [{what}]", style=colours["status-loading"])
    elif finding.action:
        key = action_key(finding.action, keymap)
        what = finding.action.replace("-", " ")
        text.append(f"  [{key}: {what}]" if key else f"  [{what}]", style=colours["status-loading"])
    for line in finding.evidence[:evidence_lines]:
        text.append(f"\n    {line}", style=colours["dim"])
    if len(finding.evidence) > evidence_lines:
        text.append(f"\n    … {len(finding.evidence) - evidence_lines} more", style=colours["dim"])
    text.append(f"\n    fix: {finding.fix}")
    return text
