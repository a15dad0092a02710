"""The kiosk: a read-only wall screen. It rotates fleet → each node; the tiles share the whole screen
and their key figures grow with it (``bigfont``), so they read from across a room. A clock says when
the newest data came and turns to the warning colour when none has come for longer than the stale
limit; a banner goes up when a node is down or its data is stale or an alert fires, each line in its
own severity's colour (a warning amber beside a critical red); the picture moves by a cell every
``[kiosk] shift_every_s`` against burn-in. It takes no input but the unlock key (``[kiosk]
unlock_key``), and the app refuses every action while it is up (``SparkApp.check_action``).

What is shown is decided in ``kiosk_figures`` (pure); the widgets here only draw it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Grid, Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Static

from sparktui.model.fleet import NodeView
from sparktui.model.host import MemoryLedger
from sparktui.model.specs import Thresholds
from sparktui.model.status import State
from sparktui.model.units import NO_DATA
from sparktui.ui.base import SparkScreen
from sparktui.ui.bigfont import big_lines, big_width, figure_scale
from sparktui.ui.keys import KIOSK_BINDINGS
from sparktui.ui.kiosk_figures import (
    BANNER_ALERTS,
    SHIFT_MARGIN,
    BannerLine,
    Figure,
    KioskTile,
    best_grid,
    burn_in_shift,
    figure_cell_score,
    kiosk_banner,
    kiosk_clock,
    kiosk_tile,
    tile_score,
)
from sparktui.ui.render import LEVEL_VARIABLES, SEVERITY_VARIABLES, STATUS_GLYPH, memory_bar, status_text
from sparktui.ui.themes import STATUS_VARIABLES

NODE_FIGURES = 5  # a node page: generation, KV, TTFT, acceptance length, memory


class FigureCell(Widget):
    """A key figure with its label: large when its space allows (``scale``), on one line when not."""

    DEFAULT_CSS = """
    FigureCell { width: 1fr; height: 1fr; color: $foreground; }
    """

    def __init__(self, key: str) -> None:
        super().__init__(id=f"fig-{key}", classes="figure")
        self.figure = Figure(key, "", "", "")
        self.colour = ""
        self.dim = ""

    def show(self, figure: Figure, colour: str, dim: str) -> None:
        if (figure, colour, dim) != (self.figure, self.colour, self.dim):
            self.figure, self.colour, self.dim = figure, colour, dim
            self.refresh()

    @property
    def scale(self) -> int:
        """The figure's scale in the space it has now (0: written as text)."""
        width, height = self.content_size
        return figure_scale(self.figure.number, width, height - 1)

    def render(self) -> Text:
        figure = self.figure
        width, height = self.content_size
        scale = self.scale
        label = f"{figure.label} {figure.unit}".rstrip()
        number = Style(color=self.colour or None, bold=True)
        if scale:
            text = Text(label + "\n", style=self.dim)
            lines = big_lines(figure.number, scale)
            pad = " " * max(0, (width - big_width(figure.number, scale)) // 2)
            text.append("\n".join(pad + line for line in lines), style=number)
            return text
        if height < 2:
            text = Text(f"{figure.short} ", style=self.dim)
            text.append(figure.number, style=number)
            if figure.number != NO_DATA:
                text.append(f" {figure.unit}".rstrip(), style=self.dim)
            return text
        short = f"{figure.short} {figure.unit}".rstrip()
        text = Text((label if len(label) <= width else short) + "\n", style=self.dim)
        text.append(figure.number, style=number)
        return text


class MemoryLine(Widget):
    """The unified-memory bar across the line, after its label (``memory_bar``), sized as it is drawn."""

    DEFAULT_CSS = """
    MemoryLine { height: 1; }
    """

    def __init__(self, label: str = "", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.label = label
        self.ledger: MemoryLedger | None = None
        self.colours: Mapping[str, str] = {}

    def show(self, ledger: MemoryLedger | None, colours: Mapping[str, str]) -> None:
        if (ledger, colours) != (self.ledger, self.colours):
            self.ledger, self.colours = ledger, dict(colours)
            self.refresh()

    def render(self) -> Text:
        if not self.colours:
            return Text()
        text = Text(self.label, style=self.colours["dim"])
        width = max(1, self.content_size.width - len(self.label))
        # Without colour (NO_COLOR) each part of the bar has its own shade.
        text.append_text(memory_bar(self.ledger, width, self.colours, patterns=self.app.no_color))
        return text


class FigureGrid(Grid):
    """Figure cells sharing their space in the grid that draws them largest."""

    DEFAULT_CSS = """
    FigureGrid { height: 1fr; grid-gutter: 0 2; }
    """

    def on_resize(self, event: events.Resize) -> None:
        count = len(self.children)
        columns, rows = best_grid(count, event.size.width, event.size.height, figure_cell_score)
        self.styles.grid_size_columns = columns
        self.styles.grid_size_rows = rows


class NodeTile(Vertical):
    DEFAULT_CSS = """
    NodeTile { border: heavy $panel; height: 1fr; width: 1fr; padding: 0 1; }
    NodeTile #head { height: auto; max-height: 2; }
    NodeTile .line { height: 1; }
    """

    def __init__(self, node: str) -> None:
        super().__init__(id=f"tile-{node}", classes="tile")
        self.node = node
        self._border = ""

    def compose(self) -> ComposeResult:
        yield Static(id="head")
        with FigureGrid(id="figures"):
            for key in ("gen", "kv", "ttft", "mem"):
                yield FigureCell(key)
        yield Static(classes="line", id="numbers")
        yield MemoryLine(id="memory")

    def show(self, view: NodeView, colours: Mapping[str, str], limits: Thresholds) -> None:
        tile = kiosk_tile(view, limits=limits)
        colour = colours[STATUS_VARIABLES[tile.state]]
        self.query_one("#head", Static).update(_band(tile, colours))
        _show_figures(self, tile, colours)
        self.query_one("#numbers", Static).update(Text(tile.requests, style=colours["dim"]))
        self.query_one("#memory", MemoryLine).show(tile.ledger, colours)
        if colour != self._border:  # a style set each tick would lay the tile out again
            self._border = colour
            self.styles.border = ("heavy", colour)


def _band(tile: KioskTile, colours: Mapping[str, str]) -> Text:
    """The node, then its status as a band of the status colour (glyph and word, for colour-blind
    eyes too), then the reason."""
    colour = colours[STATUS_VARIABLES[tile.state]]
    band = Text(f"{tile.name} ", style="bold")
    band.append(f" {STATUS_GLYPH[tile.state]} {tile.state.value.upper()} ", style=f"bold reverse {colour}")
    if tile.reason:
        band.append(f"  {tile.reason}", style=colour)
    return band


def _show_figures(parent: Widget, tile: KioskTile, colours: Mapping[str, str]) -> None:
    for figure in tile.figures:
        # A figure past its threshold in the warning (amber) or critical (red) colour, as on the fleet
        # screen, whatever the node's state (a down node's memory is what its alerts are about); no data dim.
        level = LEVEL_VARIABLES.get(figure.level) if figure.level is not None else None
        plain = colours["dim"] if figure.number == NO_DATA else ""  # "": the theme's text colour
        number = colours[level] if level else plain
        parent.query_one(f"#fig-{figure.key}", FigureCell).show(figure, number, colours["dim"])


class BannerRow(Static):
    """A line of the banner, its background its severity's colour (``SEVERITY_VARIABLES``)."""

    DEFAULT_CSS = """
    BannerRow { height: auto; padding: 0 1; display: none; color: auto 95%; text-style: bold; }
    BannerRow.shown { display: block; }
    """

    def __init__(self) -> None:
        super().__init__(classes="banner-line")
        self.line: BannerLine | None = None
        self._background = ""

    def show(self, line: BannerLine | None, colours: Mapping[str, str]) -> None:
        if line != self.line:
            self.line = line
            self.update(line.text if line is not None else "")
            self.set_class(line is not None, "shown")
            for severity in SEVERITY_VARIABLES:
                self.set_class(line is not None and line.severity == severity, severity)
        background = colours[SEVERITY_VARIABLES[line.severity]] if line is not None else ""
        if background and background != self._background:  # a style set each tick would lay it out again
            self._background = background
            self.styles.background = background


class TileGrid(Grid):
    """The fleet's tiles, sharing the whole screen in the grid that draws their figures largest."""

    DEFAULT_CSS = """
    TileGrid { height: 1fr; grid-gutter: 0 1; }
    """

    def on_resize(self, event: events.Resize) -> None:
        columns, rows = best_grid(len(self.children), event.size.width, event.size.height, tile_score)
        self.styles.grid_size_columns = columns
        self.styles.grid_size_rows = rows


class KioskScreen(SparkScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = KIOSK_BINDINGS
    DEFAULT_CSS = """
    KioskScreen { layout: vertical; }
    #kiosk-banner { height: auto; display: none; }
    #kiosk-banner.shown { display: block; }
    #kiosk-top { height: 1; background: $panel; }
    #kiosk-title { width: 1fr; padding: 0 1; }
    #kiosk-clock { width: auto; padding: 0 1; }
    #kiosk-clock.stale { background: $warning; color: $background; text-style: bold; }
    #kiosk-fleet.hidden { display: none; }
    #kiosk-node { height: 1fr; display: none; padding: 0 1; }
    #kiosk-node.shown { display: block; }
    #node-title { height: 1; margin: 1 0; }
    #node-reasons { height: auto; max-height: 4; margin: 1 0 0 0; }
    #node-memory-figures { height: auto; max-height: 2; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.page = 0  # 0: the fleet; n: the nth node
        self.shift_offset = (0, 0)

    def compose(self) -> ComposeResult:
        with Vertical(id="kiosk-banner"):
            for _ in range(1 + BANNER_ALERTS):  # the down nodes' line, then the alerts
                yield BannerRow()
        with Horizontal(id="kiosk-top"):
            yield Static(id="kiosk-title")
            yield Static(id="kiosk-clock")
        with TileGrid(id="kiosk-fleet"):
            for node in self.spark.fleet.nodes:
                yield NodeTile(node.name)
        with Vertical(id="kiosk-node"):
            yield Static(id="node-title")
            with FigureGrid(id="node-figures"):
                for key in ("gen", "kv", "ttft", "accept", "mem"):
                    yield FigureCell(key)
            yield Static(id="node-reasons")
            yield MemoryLine("unified memory  ", id="node-memory")
            yield Static(id="node-memory-figures")

    def on_mount(self) -> None:
        self._ready = True
        self.set_interval(self.spark.fleet.kiosk.rotate_s, self.rotate, name="kiosk-rotate")
        self.update_views(self.spark.views)

    def rotate(self) -> None:
        self.page = (self.page + 1) % (len(self.spark.fleet.nodes) + 1)
        self.update_views(self.spark.views)

    def _shift(self) -> None:
        """Against burn-in: the picture's position follows the app's clock (``burn_in_shift``)."""
        dx, dy = burn_in_shift(self.spark.clock(), self.spark.fleet.kiosk.shift_every_s)
        if (dx, dy) != self.shift_offset:
            self.shift_offset = (dx, dy)
            self.styles.padding = (dy, SHIFT_MARGIN[0] - dx, SHIFT_MARGIN[1] - dy, dx)

    def update_views(self, views: Sequence[NodeView]) -> None:
        if not self.drawable:
            return
        app = self.spark
        colours = app.colours
        self._shift()
        lines = kiosk_banner(views, app.firing_alerts(), app.own_problems())
        banner = self.query_one("#kiosk-banner")
        banner.set_class(bool(lines), "shown")
        for index, row in enumerate(banner.query(BannerRow)):
            row.show(lines[index] if index < len(lines) else None, colours)
        counts: dict[State, int] = {}
        for view in views:
            counts[view.status.state] = counts.get(view.status.state, 0) + 1
        title = Text("sparktui kiosk  ", style="bold")
        for state, count in counts.items():
            title.append_text(status_text(state, colours, label=False, no_color=self.app.no_color))
            title.append(f" {count} {state.value}  ")
        page = "fleet" if self.page == 0 else views[self.page - 1].name if self.page <= len(views) else "fleet"
        title.append(f"│ {page}")
        self.query_one("#kiosk-title", Static).update(title)
        clock = kiosk_clock(views)
        clock_widget = self.query_one("#kiosk-clock", Static)
        clock_widget.update(clock.text)
        clock_widget.set_class(clock.stale, "stale")
        show_fleet = self.page == 0 or self.page > len(views)
        self.query_one("#kiosk-fleet").set_class(not show_fleet, "hidden")
        self.query_one("#kiosk-node").set_class(not show_fleet, "shown")
        if show_fleet:
            for view in views:
                self.query_one(f"#tile-{view.name}", NodeTile).show(view, colours, app.fleet.thresholds)
        else:
            self._node_page(views[self.page - 1])

    def _node_page(self, view: NodeView) -> None:
        colours = self.spark.colours
        tile = kiosk_tile(view, acceptance=True, limits=self.spark.fleet.thresholds)
        self.query_one("#node-title", Static).update(_band(tile, colours))
        _show_figures(self.query_one("#kiosk-node"), tile, colours)
        reasons = "\n".join(view.status.reasons) or "all healthy"
        self.query_one("#node-reasons", Static).update(Text(reasons, style=colours[STATUS_VARIABLES[tile.state]]))
        self.query_one("#node-memory", MemoryLine).show(tile.ledger, colours)
        self.query_one("#node-memory-figures", Static).update(Text(tile.memory_words, style=colours["dim"]))

    def action_unlock(self) -> None:
        self.spark.unlock_kiosk()
