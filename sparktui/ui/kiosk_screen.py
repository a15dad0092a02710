"""The kiosk: a read-only wall screen. It rotates fleet → each node, shows the numbers that matter in
figures readable from across a room, puts a banner up when a node is down or its data is stale, and
moves the picture by a cell every few minutes against burn-in. It takes no input but the unlock key
(``[kiosk] unlock_key``), and the app refuses every action while it is up (``SparkApp.check_action``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Grid, Horizontal, Vertical
from textual.widgets import Digits, Static

from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.status import State
from sparktui.model.units import fmt_gib, fmt_number
from sparktui.ui.base import SparkScreen
from sparktui.ui.keys import KIOSK_BINDINGS
from sparktui.ui.render import memory_bar, node_reason, status_text
from sparktui.ui.themes import STATUS_VARIABLES

SHIFTS = ((0, 0), (1, 0), (1, 1), (0, 1))  # offsets cycled against burn-in


def _first(view: NodeView) -> InstanceView | None:
    serving = [i for i in view.instances if i.url is not None]
    return serving[0] if serving else (view.instances[0] if view.instances else None)


def _figure(value: float | None, decimals: int = 0, width: int = 6) -> str:
    """Fixed-width text for a Digits widget (a width change would re-layout it every tick)."""
    if value is None:
        return "-".rjust(width)
    return f"{value:.{decimals}f}".rjust(width)[-width:]


class NodeTile(Vertical):
    DEFAULT_CSS = """
    NodeTile { border: heavy $panel; height: auto; padding: 0 1; }
    NodeTile Digits { width: auto; }
    NodeTile .line { height: 1; }
    """

    def __init__(self, node: str) -> None:
        super().__init__(id=f"tile-{node}")
        self.node = node

    def compose(self) -> ComposeResult:
        yield Static(classes="line", id="head")
        yield Digits("", id="gen")
        yield Static(classes="line", id="numbers")
        yield Static(classes="line", id="memory")

    def show(self, view: NodeView, colours: dict[str, str]) -> None:
        instance = _first(view)
        head = Text(f"{view.name}  ", style="bold")
        head.append_text(status_text(view.status.state, colours))
        if view.status.state is not State.UP:
            head.append(f"  {node_reason(view)}", style=colours[STATUS_VARIABLES[view.status.state]])
        self.query_one("#head", Static).update(head)
        gen = instance.rates.generation_tokens_per_s if instance and instance.rates else None
        self.query_one("#gen", Digits).update(_figure(gen) + " t/s" if gen is not None else "    - t/s")
        numbers = Text()
        if instance is not None and instance.url is not None:
            ttft = instance.rates.latency.get("ttft") if instance.rates else None
            numbers.append(f"KV {fmt_number(None if instance.kv_usage is None else instance.kv_usage * 100)}%  ")
            numbers.append(f"TTFT p90 {fmt_number(ttft.p90 if ttft else None, 1)} s  ")
            numbers.append(f"run {fmt_number(instance.running)} wait {fmt_number(instance.waiting)}")
        self.query_one("#numbers", Static).update(numbers)
        memory = Text()
        memory.append_text(memory_bar(view.ledger, 24, colours))
        if view.host_memory is not None:
            memory.append(f" {fmt_gib(view.host_memory.mem_available)} avail")
        self.query_one("#memory", Static).update(memory)
        self.styles.border = ("heavy", colours[STATUS_VARIABLES[view.status.state]])


class KioskScreen(SparkScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = KIOSK_BINDINGS
    DEFAULT_CSS = """
    KioskScreen { layout: vertical; }
    #kiosk-banner { height: auto; padding: 0 1; display: none; background: $error; color: $text; text-style: bold; }
    #kiosk-banner.shown { display: block; }
    #kiosk-title { height: 1; padding: 0 1; background: $panel; }
    #kiosk-fleet { grid-size: 2; grid-gutter: 0 1; grid-rows: auto; height: 1fr; }
    #kiosk-node { height: 1fr; display: none; padding: 1 2; }
    #kiosk-node.shown { display: block; }
    #kiosk-fleet.hidden { display: none; }
    .figure-row { height: auto; }
    .figure { width: 1fr; height: auto; border: round $panel; padding: 0 1; }
    .figure Digits { width: auto; }
    #node-reasons { height: auto; margin: 1 0; }
    #node-memory { height: auto; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.page = 0  # 0: the fleet; n: the nth node
        self._shift = 0

    def compose(self) -> ComposeResult:
        yield Static(id="kiosk-banner")
        yield Static(id="kiosk-title")
        with Grid(id="kiosk-fleet"):
            for node in self.spark.fleet.nodes:
                yield NodeTile(node.name)
        with Vertical(id="kiosk-node"):
            yield Static(id="node-title")
            with Horizontal(classes="figure-row"):
                for key, label in (
                    ("gen", "generation tok/s"),
                    ("kv", "KV cache %"),
                    ("ttft", "TTFT p90 s"),
                    ("accept", "acceptance length"),
                ):
                    with Vertical(classes="figure"):
                        yield Static(label)
                        yield Digits("", id=f"fig-{key}")
            yield Static(id="node-reasons")
            yield Static(id="node-memory")

    def on_mount(self) -> None:
        self._ready = True
        kiosk = self.spark.fleet.kiosk
        self.set_interval(kiosk.rotate_s, self.rotate, name="kiosk-rotate")
        self.set_interval(kiosk.shift_every_s, self.shift, name="kiosk-shift")
        self.update_views(self.spark.views)

    def rotate(self) -> None:
        self.page = (self.page + 1) % (len(self.spark.fleet.nodes) + 1)
        self.update_views(self.spark.views)

    def shift(self) -> None:
        self._shift = (self._shift + 1) % len(SHIFTS)
        self.styles.offset = SHIFTS[self._shift]

    def update_views(self, views: Sequence[NodeView]) -> None:
        if not self.drawable:
            return
        app = self.spark
        colours = app.colours
        bad = [v for v in views if v.status.state in (State.DOWN, State.STALE)]
        lines = ["   ".join(f"{v.name} {v.status.state.value.upper()}: {node_reason(v)}" for v in bad)] if bad else []
        lines += app.alert_banner()[:3]
        banner = self.query_one("#kiosk-banner", Static)
        banner.update("\n".join(lines))
        banner.set_class(bool(lines), "shown")
        counts: dict[State, int] = {}
        for view in views:
            counts[view.status.state] = counts.get(view.status.state, 0) + 1
        title = Text("sparktui kiosk  ", style="bold")
        for state, count in counts.items():
            title.append_text(status_text(state, colours, label=False))
            title.append(f" {count} {state.value}  ")
        page = "fleet" if self.page == 0 else views[self.page - 1].name if self.page <= len(views) else "fleet"
        title.append(f"│ {page}")
        self.query_one("#kiosk-title", Static).update(title)
        show_fleet = self.page == 0 or self.page > len(views)
        self.query_one("#kiosk-fleet").set_class(not show_fleet, "hidden")
        self.query_one("#kiosk-node").set_class(not show_fleet, "shown")
        if show_fleet:
            for view in views:
                self.query_one(f"#tile-{view.name}", NodeTile).show(view, colours)
        else:
            self._node_page(views[self.page - 1])

    def _node_page(self, view: NodeView) -> None:
        colours = self.spark.colours
        instance = _first(view)
        title = Text(f"{view.name}  ", style="bold")
        title.append_text(status_text(view.status.state, colours))
        self.query_one("#node-title", Static).update(title)
        rates = instance.rates if instance else None
        ttft = rates.latency.get("ttft") if rates else None
        spec = rates.spec_decode if rates else None
        figures = {
            "gen": _figure(rates.generation_tokens_per_s if rates else None),
            "kv": _figure(None if instance is None or instance.kv_usage is None else instance.kv_usage * 100, 1),
            "ttft": _figure(ttft.p90 if ttft else None, 2),
            "accept": _figure(spec.mean_acceptance_length if spec else None, 2),
        }
        for key, value in figures.items():
            self.query_one(f"#fig-{key}", Digits).update(value)
        reasons = "\n".join(view.status.reasons) or "all healthy"
        self.query_one("#node-reasons", Static).update(
            Text(reasons, style=colours[STATUS_VARIABLES[view.status.state]])
        )
        memory = Text("unified memory  ")
        memory.append_text(memory_bar(view.ledger, 60, colours))
        if view.host_memory is not None:
            memory.append(
                f"  {fmt_gib(view.host_memory.mem_available)} available of {fmt_gib(view.host_memory.mem_total)}"
            )
        self.query_one("#node-memory", Static).update(memory)

    def action_unlock(self) -> None:
        self.spark.unlock_kiosk()
