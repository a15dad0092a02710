"""What the kiosk shows, decided without Textual: the figures of a tile or a node page (formatted by
``model.units`` from the views), the grid the tiles share, the clock line and the burn-in shift.
The kiosk's widgets only draw what these return."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sparktui.model.engines import busiest_engine_words
from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.host import MemoryLedger
from sparktui.model.levels import Level, kv_level, memory_level, ttft_level
from sparktui.model.memory import HostMemory
from sparktui.model.specs import Thresholds
from sparktui.model.status import State
from sparktui.model.units import NO_DATA, fmt_gib, fmt_in_seconds, fmt_number, fmt_pct, fmt_rate
from sparktui.ui.bigfont import figure_scale

DEAD = (State.DOWN, State.STALE)  # their last numbers are not shown as if current
BANNERED = (State.FAILING, *DEAD)  # on the banner's critical line: an open CRIT, or no service
# The picture's position, one step every ``[kiosk] shift_every_s``: by one cell at a time, two across
# and one down at most, so nothing is cut at the edge (the screen gives up 2 columns and 1 row for it).
SHIFTS = ((0, 0), (1, 0), (2, 0), (2, 1), (1, 1), (0, 1))
SHIFT_MARGIN = (2, 1)
WIDE_SAMPLE = "8,888"  # the widest figure a tile should fit large (generation tok/s in thousands)
TILE_ASPECT = 4.0  # columns per row of a pleasing tile when no size draws figures large


@dataclass(frozen=True, slots=True)
class Figure:
    """One key figure: its label (``short`` when space is tight) and its text as ``model.units`` writes it."""

    key: str
    label: str
    short: str
    text: str
    usual_unit: str = ""  # the unit named when the text has none ("–")
    level: Level | None = None  # against the config's thresholds: a warning or critical figure is coloured

    @property
    def number(self) -> str:
        """The part drawn large: the text without its unit ("0.71 s" → "0.71")."""
        return self.text.rpartition(" ")[0] if " " in self.text else self.text

    @property
    def unit(self) -> str:
        return self.text.rpartition(" ")[2] if " " in self.text else self.usual_unit


@dataclass(frozen=True, slots=True)
class KioskTile:
    """A node as the kiosk draws it: status, why, and figures. Down or stale, its engine's figures are
    "–"; its memory (figure and ``ledger``, the bar) is the host's reading while that is fresh, whatever
    the engine's state: the reading its memory alerts and findings cite."""

    name: str
    state: State
    reason: str
    figures: tuple[Figure, ...]
    requests: str
    ledger: MemoryLedger | None = None
    memory_words: str = NO_DATA  # the memory figures a finding cites (``memory_words``), for the node page


def serving_instance(view: NodeView) -> InstanceView | None:
    """The instance whose numbers stand for the node: the first that serves HTTP (a TP worker does not)."""
    serving = [i for i in view.instances if i.url is not None]
    return serving[0] if serving else (view.instances[0] if view.instances else None)


def _figures(view: NodeView, acceptance: bool, limits: Thresholds) -> tuple[Figure, ...]:
    live = view.status.state not in DEAD
    instance = serving_instance(view) if live else None
    rates = instance.rates if instance is not None else None
    ttft = rates.latency.get("ttft") if rates is not None else None
    spec = rates.spec_decode if rates is not None else None
    memory = view.fresh_host_memory  # read apart from the engine: a node whose vLLM is down has it
    figures = [
        Figure("gen", "generation tok/s", "gen tok/s", fmt_rate(rates.generation_tokens_per_s if rates else None, "")),
        Figure(
            "kv",
            f"KV cache{busiest_engine_words(instance.kv if instance else None)}",  # data parallel: the busiest
            "KV",
            fmt_pct(instance.kv_usage if instance else None, 0),
            level=kv_level(instance.kv_usage if instance else None, limits),
        ),
        Figure(
            "ttft",
            "TTFT p90",
            "TTFT",
            fmt_in_seconds(ttft.p90 if ttft is not None else None),  # one unit on every tile
            "s",
            level=ttft_level(ttft.p90 if ttft is not None and ttft.count else None, limits),
        ),
    ]
    if acceptance:
        figures.append(
            Figure(
                "accept",
                "acceptance length",
                "accept",
                fmt_number(spec.mean_acceptance_length if spec is not None else None, 2),
            )
        )
    available = memory.mem_available if memory else None
    figures.append(
        Figure("mem", "memory available", "mem", fmt_gib(available), "GiB", level=memory_level(available, limits))
    )
    return tuple(figures)


def kiosk_tile(view: NodeView, acceptance: bool = False, limits: Thresholds | None = None) -> KioskTile:
    """The tile (or, with ``acceptance``, the node page) of ``view``; its figures' levels against
    ``limits`` (the config's ``[thresholds]``)."""
    state = view.status.state
    instance = serving_instance(view) if state not in DEAD else None
    requests = (
        f"run {fmt_number(instance.running)} · wait {fmt_number(instance.waiting)}"
        if instance is not None and instance.url is not None
        else ""
    )
    reason = view.status.reasons[0] if view.status.reasons and state is not State.UP else ""
    figures = _figures(view, acceptance, limits if limits is not None else Thresholds())
    ledger = view.ledger if view.fresh_host_memory is not None else None
    words = memory_words(view.fresh_host_memory)
    return KioskTile(view.name, state, reason, figures, requests, ledger, words)


def memory_words(memory: HostMemory | None) -> str:
    """The host's memory figures as its memory findings cite them (``HostMemory.cited_figures``), so the
    node page has each number its banner's lines quote."""
    figures = memory.cited_figures if memory is not None else ()
    return " · ".join(figures) if figures else NO_DATA


# --- the banner ----------------------------------------------------------------------------------------

BANNER_ALERTS = 3  # alert lines at most, under the line of down and stale nodes


@dataclass(frozen=True, slots=True)
class BannerLine:
    """One line of the kiosk's banner and its severity (a ``Severity`` value: "crit", "warn", "info"),
    which colours that line alone: a warning is amber beside a critical alert's red."""

    severity: str
    text: str


def kiosk_banner(
    views: Sequence[NodeView], firing: Sequence[tuple[str, str]], problems: Sequence[str]
) -> tuple[BannerLine, ...]:
    """The banner's lines: the failing, down and stale nodes with their reasons on one critical line, then the
    firing alerts (``firing``: severity and line, worst first), then sparktui's own ``problems``
    (warnings: a recording that stopped matters less to whoever watches the kiosk), ``BANNER_ALERTS``
    of those at most."""
    dead = [kiosk_tile(v) for v in views if v.status.state in BANNERED]
    lines = [BannerLine("crit", "   ".join(f"{t.name} {t.state.value.upper()}: {t.reason}" for t in dead))]
    alerts = [BannerLine(severity, line) for severity, line in firing] + [BannerLine("warn", p) for p in problems]
    return tuple((lines if dead else []) + alerts[:BANNER_ALERTS])


# --- the grid ------------------------------------------------------------------------------------------


def best_grid(count: int, width: int, height: int, cell_score: Callable[[int, int], float]) -> tuple[int, int]:
    """(columns, rows) to share ``width`` x ``height`` among ``count`` cells: the one whose cells score
    best (``cell_score`` of a cell's size), then the one with fewer empty cells, then the one whose
    cells are nearest ``TILE_ASPECT``."""
    count = max(1, count)
    best: tuple[tuple[float, int, float], tuple[int, int]] | None = None
    for columns in range(1, count + 1):
        rows = math.ceil(count / columns)
        cell_w, cell_h = width // columns, height // rows
        aspect = cell_w / cell_h if cell_h > 0 else math.inf
        closeness = abs(math.log(aspect / TILE_ASPECT)) if 0 < aspect < math.inf else math.inf
        key = (cell_score(cell_w, cell_h), -(columns * rows - count), -closeness)
        if best is None or key > best[0]:
            best = (key, (columns, rows))
    assert best is not None
    return best[1]


def figure_cell_score(width: int, height: int) -> float:
    """How well a figure's cell shows it: its large scale (a label line above), else whether the
    figure fits on one line with its short label."""
    scale = figure_scale(WIDE_SAMPLE, width, height - 1)
    return float(scale) if scale else (0.5 if width >= 14 and height >= 1 else 0.0)


TILE_FRAME = (4, 5)  # a tile's border and padding across, border and its three text lines down


def tile_score(width: int, height: int, figures: int = 4) -> float:
    """A tile's score: that of its figures, laid out as best they can in it."""
    inner_w, inner_h = width - TILE_FRAME[0], height - TILE_FRAME[1]
    if inner_w <= 0 or inner_h <= 0:
        return -1.0
    columns, rows = best_grid(figures, inner_w, inner_h, figure_cell_score)
    return figure_cell_score(inner_w // columns, inner_h // rows)


# --- the clock and the burn-in shift --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KioskClock:
    """The kiosk's clock line: when the newest data was collected, local time with the zone, and how
    old it is; ``stale`` when no node has had data within the stale limit (every polled node stale)."""

    text: str
    stale: bool


def kiosk_clock(views: Sequence[NodeView], local: Callable[[float], time.struct_time] = time.localtime) -> KioskClock:
    polled = [v for v in views if v.polled_wall is not None and v.age_s is not None]
    if not polled:
        return KioskClock(f"updated {NO_DATA} · no data yet", stale=True)
    newest = min(polled, key=lambda v: v.age_s or 0.0)
    assert newest.polled_wall is not None and newest.age_s is not None
    stamp = time.strftime("%H:%M:%S %Z", local(newest.polled_wall))
    stale = all(v.status.state is State.STALE for v in polled)
    return KioskClock(f"updated {stamp} · {fmt_number(max(0.0, newest.age_s))} s ago", stale=stale)


def burn_in_shift(now: float, every_s: float) -> tuple[int, int]:
    """(columns, rows) the picture is moved by at ``now``: the next step of ``SHIFTS`` every ``every_s``."""
    return SHIFTS[int(now // every_s) % len(SHIFTS)]
