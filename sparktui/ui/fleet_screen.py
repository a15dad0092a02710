"""The fleet screen: every node at a glance, one keyed table row each, a summary line above and the
highlighted node's reasons below."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.widgets import Footer, Input, Static

from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.status import State
from sparktui.model.units import NO_DATA, fmt_number, fmt_pct, fmt_rate, fmt_seconds
from sparktui.ui.base import SparkScreen
from sparktui.ui.keys import FLEET_BINDINGS
from sparktui.ui.render import finding_text, findings_cell, memory_bar, node_reason, spark_text, status_text
from sparktui.ui.table import RowTable, TableColumn

if TYPE_CHECKING:
    from sparktui.ui.app import SparkApp


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    width: int
    min_screen: int  # the column is shown from this terminal width up


# Widths are content widths; the table adds 2 cells of padding per column. From 160 columns up
# everything shows (151 cells); narrower terminals drop the columns with the highest min_screen.
COLUMNS: tuple[Column, ...] = (
    Column("node", "Node", 9, 0),
    Column("status", "Status", 10, 0),
    Column("model", "Model", 20, 118),
    Column("gen", "Gen t/s", 7, 0),
    Column("trend", "Gen trend", 10, 136),
    Column("prompt", "Prompt t/s", 10, 148),
    Column("reqs", "Run/Wait", 8, 0),
    Column("kv", "KV", 4, 0),
    Column("ttft", "TTFT p90", 8, 0),
    Column("accept", "Acc len", 7, 128),
    Column("mem", "Memory", 14, 96),
    Column("gpu", "GPU", 10, 154),
    Column("svc", "Svc", 3, 157),
    Column("find", "Find", 4, 0),
    Column("age", "Age", 4, 0),
)


def _model_name(instance: InstanceView) -> str:
    name = instance.model_name or (instance.served_models[0] if instance.served_models else "")
    return name.rsplit("/", 1)[-1] if name else NO_DATA


def _ttft(instance: InstanceView) -> str:
    latency = instance.rates.latency.get("ttft") if instance.rates else None
    if latency is None or not latency.count:
        return NO_DATA
    return fmt_seconds(latency.p90, latency.floor)


def _accept(instance: InstanceView) -> str:
    spec = instance.rates.spec_decode if instance.rates else None
    return fmt_number(spec.mean_acceptance_length, 2) if spec is not None else NO_DATA


class FleetScreen(SparkScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = FLEET_BINDINGS
    DEFAULT_CSS = """
    FleetScreen { layout: vertical; }
    #summary { height: 1; padding: 0 1; background: $panel; }
    #banner { height: auto; padding: 0 1; display: none; background: $error 30%; color: $text; }
    #banner.shown { display: block; }
    #fleet { height: 1fr; }
    #detail { height: auto; max-height: 8; padding: 0 1; border-top: solid $panel; }
    #filter { dock: bottom; display: none; }
    #filter.shown { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._columns: tuple[Column, ...] = ()
        self._filter = ""
        self._order: list[str] = []
        self._row_cells: dict[str, tuple[Text | str, ...]] = {}  # row key -> its cells, in column order
        self._panels: dict[str, Text | str] = {}  # what each panel shows now

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="summary")
            yield Static(id="banner")
            yield RowTable(id="fleet")
            yield Static(id="detail")
        yield Input(placeholder="filter nodes by name, model or status (escape clears)", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self._ready = True
        self._rebuild_columns(self.size.width)
        self.update_views(self.spark.views)

    def on_resize(self) -> None:
        wanted = self._wanted_columns(self.size.width)
        if wanted != self._columns:
            self._rebuild_columns(self.size.width)
            self.update_views(self.spark.views)

    @staticmethod
    def _wanted_columns(width: int) -> tuple[Column, ...]:
        return tuple(c for c in COLUMNS if width >= c.min_screen)

    def _rebuild_columns(self, width: int) -> None:
        self._columns = self._wanted_columns(width)
        self.query_one("#fleet", RowTable).set_columns([TableColumn(c.key, c.label, c.width) for c in self._columns])
        self._order = []
        self._row_cells = {}

    # --- data -------------------------------------------------------------------------------------

    def _rows(self, views: Sequence[NodeView]) -> list[tuple[str, NodeView, InstanceView | None, str]]:
        """(row key, node, instance, label) in display order: each multi-node job's ranks together."""
        rows: list[tuple[str, NodeView, InstanceView | None, str]] = []
        placed: set[str] = set()
        by_job: dict[str, list[tuple[NodeView, InstanceView]]] = {}
        for view in views:
            for ranked in view.instances:
                job = _job_of(self.spark, view.name, ranked.name)
                if job:
                    by_job.setdefault(job, []).append((view, ranked))
        for view in views:
            if view.name in placed:
                continue
            instances: tuple[InstanceView | None, ...] = view.instances or (None,)
            for instance in instances:
                job = _job_of(self.spark, view.name, instance.name) if instance else None
                if job and instance is not None and instance.role == "worker":
                    continue  # drawn under its head
                rows.append((f"{view.name}/{instance.name if instance else ''}", view, instance, view.name))
                placed.add(view.name)
                for ranked_view, rank in by_job.get(job or "", []):
                    if rank.role == "worker":
                        rows.append((f"{ranked_view.name}/{rank.name}", ranked_view, rank, f"└ {ranked_view.name}"))
                        placed.add(ranked_view.name)
        return [r for r in rows if self._matches(r[1], r[2])]

    def _matches(self, view: NodeView, instance: InstanceView | None) -> bool:
        if not self._filter:
            return True
        haystack = " ".join(
            [view.name, view.status.state.value, *(view.status.reasons)]
            + ([instance.name, instance.model_name or ""] if instance else [])
        ).lower()
        return self._filter.lower() in haystack

    def _cells(self, view: NodeView, instance: InstanceView | None, label: str) -> dict[str, Text | str]:
        app = self.spark
        colours = app.colours
        state = view.status.state
        gen = instance.rates.generation_tokens_per_s if instance and instance.rates else None
        prompt = instance.rates.prompt_tokens_per_s if instance and instance.rates else None
        is_worker = instance is not None and instance.url is None
        trend = app.history.series(view.name, instance.name, "generation_tps") if instance else ()
        gpu = view.gpu
        age = view.age_s
        services = view.services
        services_up = sum(1 for s in services if s.status.state is State.UP)
        cells: dict[str, Text | str] = {
            "node": Text(label, style="bold"),
            "status": status_text(state, colours),
            "model": "(TP worker)" if is_worker else (_model_name(instance) if instance else NO_DATA),
            "gen": "" if is_worker else fmt_rate(gen, ""),
            "trend": "" if is_worker else spark_text(trend, 10, colours["status-ok"]),
            "prompt": "" if is_worker else fmt_rate(prompt, ""),
            "reqs": ""
            if is_worker or instance is None
            else f"{fmt_number(instance.running)}/{fmt_number(instance.waiting)}",
            "kv": "" if is_worker or instance is None else fmt_pct(instance.kv_usage, 0),
            "ttft": "" if is_worker or instance is None else _ttft(instance),
            "accept": "" if is_worker or instance is None else _accept(instance),
            "mem": memory_bar(view.ledger, 14, colours),
            "gpu": (f"{fmt_number(gpu.temperature_c)}°C {fmt_number(gpu.power_w)}W" if gpu else NO_DATA),
            "svc": f"{services_up}/{len(services)}" if services else "",
            "find": findings_cell(app.findings.get(view.name, ()), colours),
            "age": "" if age is None else f"{age:.0f}s",
        }
        if state is not State.UP and instance is not None and instance.status.state is not State.UP:
            cells["model"] = Text(str(cells["model"]), style=colours["dim"])
        return cells

    def update_views(self, views: Sequence[NodeView], changed: frozenset[str] | None = None) -> None:
        """Draw ``views``; with ``changed``, only those nodes' rows are worked out again (the others
        keep their cells until the next full update)."""
        if not self.drawable:
            return
        rows = self._rows(views)
        self._order = [key for key, *_ in rows]
        table_rows: list[tuple[str, tuple[Text | str, ...]]] = []
        known = self._row_cells
        self._row_cells = {}
        for key, view, instance, label in rows:
            cells = known.get(key) if changed is not None and view.name not in changed else None
            if cells is None:
                by_column = self._cells(view, instance, label)
                cells = tuple(by_column[c.key] for c in self._columns)
            self._row_cells[key] = cells
            table_rows.append((key, cells))
        self.query_one("#fleet", RowTable).set_rows(table_rows)
        if changed is None:  # fleet totals and banners at the render tick; a node's arrival redraws its row
            self._update_summary(views)
        highlighted = self.highlighted(views)
        if changed is None or (highlighted is not None and highlighted.name in changed):
            self._update_detail(views)

    def _update_summary(self, views: Sequence[NodeView]) -> None:
        app = self.spark
        gen = sum(i.rates.generation_tokens_per_s or 0.0 for v in views for i in v.instances if i.rates is not None)
        prompt = sum(i.rates.prompt_tokens_per_s or 0.0 for v in views for i in v.instances if i.rates is not None)
        counts: dict[State, int] = {}
        for view in views:
            counts[view.status.state] = counts.get(view.status.state, 0) + 1
        summary = Text()
        summary.append(f"{len(views)} nodes  ", style="bold")
        for state in (State.UP, State.DEGRADED, State.LOADING, State.STALE, State.DOWN, State.UNKNOWN):
            if counts.get(state):
                summary.append_text(status_text(state, app.colours, label=False))
                summary.append(f" {counts[state]} {state.value}  ")
        summary.append(f"│ generation {fmt_rate(gen, ' tok/s')}  prompt {fmt_rate(prompt, ' tok/s')}")
        if app.paused:
            summary.append("  │ PAUSED (p resumes)", style=f"bold {app.colours['status-warn']}")
        self._show("#summary", summary)
        bad = [v for v in views if v.status.state in (State.DOWN, State.STALE)]
        lines = ["  ".join(f"{v.name} {v.status.state.value.upper()}: {node_reason(v)}" for v in bad)] if bad else []
        alerts = app.alert_banner()
        if alerts:
            more = f"  (+{len(alerts) - 2} more: ! lists them)" if len(alerts) > 2 else "  (! lists them)"
            lines.append("alerts: " + " | ".join(alerts[:2]) + more)
        if lines:
            self._show("#banner", "\n".join(lines))
        self.query_one("#banner", Static).set_class(bool(lines), "shown")

    def _update_detail(self, views: Sequence[NodeView]) -> None:
        view = self.highlighted(views)
        if view is None:
            self._show("#detail", "")
            return
        text = Text()
        text.append(f"{view.name} ({view.host})  ", style="bold")
        text.append_text(status_text(view.status.state, self.spark.colours))
        for reason in view.status.reasons[:4]:
            text.append(f"\n  {reason}")
        if len(view.status.reasons) > 4:
            text.append(f"\n  … and {len(view.status.reasons) - 4} more (enter opens the node)")
        for finding in self.spark.findings.get(view.name, ())[:2]:
            text.append("\n")
            text.append_text(
                finding_text(finding, self.spark.colours, evidence_lines=1, keymap=self.spark.fleet.keymap)
            )
        self._show("#detail", text)

    def _show(self, selector: str, content: Text | str) -> None:
        """Update a panel only when what it shows changed (an update costs a layout pass)."""
        if self._panels.get(selector) != content:
            self._panels[selector] = content
            self.query_one(selector, Static).update(content)

    def highlighted(self, views: Sequence[NodeView] | None = None) -> NodeView | None:
        views = views if views is not None else self.spark.views
        table = self.query_one("#fleet", RowTable)
        if not self._order or table.cursor_row >= len(self._order):
            return None
        node = self._order[table.cursor_row].split("/", 1)[0]
        return next((v for v in views if v.name == node), None)

    def on_row_table_row_highlighted(self, _event: RowTable.RowHighlighted) -> None:
        self._update_detail(self.spark.views)

    def on_row_table_row_selected(self, _event: RowTable.RowSelected) -> None:
        self.action_open_node()

    # --- actions ----------------------------------------------------------------------------------

    def action_open_node(self) -> None:
        view = self.highlighted()
        if view is not None:
            self.spark.open_node(view.name)

    def action_pick_node(self, number: int) -> None:
        names = [v.name for v in self.spark.views]
        if 1 <= number <= len(names):
            self.spark.open_node(names[number - 1])

    def action_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.add_class("shown")
        field.focus()

    def action_clear_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.value = ""
        field.remove_class("shown")
        self._filter = ""
        self.query_one("#fleet", RowTable).focus()
        self.update_views(self.spark.views)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._filter = event.value.strip()
        self.update_views(self.spark.views)

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        self.query_one("#fleet", RowTable).focus()


def _job_of(app: SparkApp, node: str, instance: str) -> str | None:
    spec = app.fleet.node(node)
    if spec is None:
        return None
    found = next((v for v in spec.vllm if v.name == instance), None)
    return found.job if found is not None and found.role != "single" else None
