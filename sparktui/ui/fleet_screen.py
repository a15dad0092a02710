"""The fleet screen: every node at a glance, one keyed table row each, a summary line above and the
highlighted node's reasons below."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Static

from sparktui.model.engines import data_parallel_summary, kv_line
from sparktui.model.fabric import job_lines
from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.history import FLEET, Point
from sparktui.model.levels import (
    Level,
    falling_level,
    gpu_temp_level,
    kv_level,
    memory_level,
    ttft_level,
    waiting_level,
)
from sparktui.model.numbers import known_sum
from sparktui.model.replicas import ModelReplicas, Replica, model_replicas
from sparktui.model.scrape import ModelLoad
from sparktui.model.specs import Thresholds
from sparktui.model.status import State
from sparktui.model.units import (
    NO_DATA,
    fmt_clock,
    fmt_count,
    fmt_duration,
    fmt_gib_short,
    fmt_latency,
    fmt_number,
    fmt_pct,
    fmt_rate,
    fmt_seconds,
)
from sparktui.ui.base import Dashboard, SparkScreen, update_panel
from sparktui.ui.chart import ChartPanel
from sparktui.ui.footer import KeyFooter
from sparktui.ui.keys import FLEET_BINDINGS
from sparktui.ui.render import (
    IMBALANCED,
    MARKED_WITHOUT_COLOUR,
    SEVERITY_GLYPH,
    STATUS_GLYPH,
    IndentedText,
    column_rows,
    finding_line,
    finding_text,
    findings_cell,
    level_text,
    memory_bar,
    node_reason,
    spark_text,
    status_style,
    status_text,
)
from sparktui.ui.table import RowTable, TableColumn


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    width: int
    min_screen: int  # the column is shown from this terminal width up
    grow: int = 0  # cells it may take beyond ``width`` when the terminal is wider than everything shown
    mixed_only: bool = False  # shown only for a fleet that runs more than one engine kind


# Widths are content widths; the table adds 2 cells of padding per column. From 160 columns up
# everything but the bandwidth share shows (151 cells), from 166 that too (157); narrower terminals
# drop the columns with the highest min_screen, and wider ones give the spare cells to the model's
# name first (full names at 200), then to the trend. A fleet of several engine kinds (vLLM beside SGLang,
# an Ollama...) shows which engine each row is: in the place of the prompt rate below 178 columns, and
# narrower in the place of the columns that show last.
COLUMNS: tuple[Column, ...] = (
    Column("node", "Node", 9, 0),
    Column("status", "Status", 10, 0),
    Column("engine", "Engine", 9, 100, mixed_only=True),
    Column("model", "Model", 20, 118, grow=20),
    Column("gen", "Gen t/s", 7, 0),
    Column("trend", "Gen trend", 10, 136, grow=20),
    Column("prompt", "Prompt t/s", 10, 148),
    Column("bw", "BW", 4, 166),  # memory bandwidth per GPU, share of the node's peak (the roofline)
    Column("reqs", "Run/Wait", 8, 0),
    Column("kv", "KV", 4, 0),
    Column("ttft", "TTFT p90", 8, 0),
    Column("accept", "Acc len", 7, 128),
    Column("mem", "Mem avail", 14, 96),
    Column("gpu", "GPU", 10, 154),
    Column("svc", "Svc", 3, 157),
    Column("find", "Find", 4, 0),
    Column("age", "Age", 5, 0),
)
MEM_BAR = 9  # cells of the memory cell's bar; the available GiB follows it
CHARTS_MIN_HEIGHT = 30  # below this many rows the fleet charts give their room to the table


MIXED_PROMPT_MIN_SCREEN = 178  # with the engine column, the prompt rate shows from this width up


def fit_columns(width: int, mixed: bool = False) -> tuple[Column, ...]:
    """The columns shown at a terminal ``width``, with the spare cells given to the growing ones in
    order (each up to its ``grow``); ``mixed``: the fleet runs several engine kinds (the engine column
    shows, and takes the prompt rate's cells at widths below ``MIXED_PROMPT_MIN_SCREEN``)."""
    columns = [c for c in COLUMNS if mixed or not c.mixed_only]
    if mixed:
        columns = [replace(c, min_screen=MIXED_PROMPT_MIN_SCREEN) if c.key == "prompt" else c for c in columns]
    shown = [c for c in columns if width >= c.min_screen]
    while mixed and sum(c.width + 2 for c in shown) + 2 > width and any(c.min_screen for c in shown):
        # The engine column's cells come from the columns that would show first at a wider terminal.
        shown.remove(max(shown, key=lambda c: c.min_screen))
    spare = width - sum(c.width + 2 for c in shown) - 2  # a margin for the scroll bar
    fitted: list[Column] = []
    for column in shown:
        extra = max(0, min(column.grow, spare))
        spare -= extra
        fitted.append(replace(column, width=column.width + extra) if extra else column)
    return tuple(fitted)


def _model_name(instance: InstanceView) -> str:
    if instance.models:  # a router: how many of its models are loaded
        loaded = sum(1 for m in instance.models if m.load is ModelLoad.LOADED)
        return f"{loaded}/{len(instance.models)} models loaded"
    name = instance.model_name or (instance.served_models[0] if instance.served_models else "")
    return name.rsplit("/", 1)[-1] if name else NO_DATA


def _generation(instance: InstanceView | None, gen: float | None, colours: dict[str, str]) -> Text | str:
    """The generation rate; a data-parallel instance with an imbalanced engine marked (its node's
    detail below the table says which engine and by how much)."""
    if instance is None or not instance.imbalanced_engines:
        return fmt_rate(gen, "")
    return Text(f"{fmt_rate(gen, '')}{IMBALANCED}", style=colours["status-warn"])


def _ttft(instance: InstanceView) -> str:
    latency = instance.rates.latency.get("ttft") if instance.rates else None
    if latency is None or not latency.count:
        return NO_DATA
    return fmt_seconds(latency.p90, latency.floor)


def _ttft_p90(instance: InstanceView | None) -> float | None:
    latency = instance.rates.latency.get("ttft") if instance is not None and instance.rates else None
    return latency.p90 if latency is not None and latency.count else None


def _accept(instance: InstanceView) -> str:
    return fmt_number(instance.acceptance_length, 2)


class FleetScreen(SparkScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = FLEET_BINDINGS
    DEFAULT_CSS = """
    FleetScreen { layout: vertical; }
    #summary { height: 1; padding: 0 1; background: $panel; }
    .banner { height: auto; padding: 0 1; display: none; color: $text; text-wrap: nowrap; text-overflow: ellipsis; }
    .banner.shown { display: block; }
    #crit-banner { background: $error 35%; }
    #warn-banner { background: $warning 25%; }
    #fleet { height: auto; max-height: 1fr; }
    #replicas { height: auto; max-height: 4; padding: 0 1; display: none; text-wrap: nowrap; text-overflow: ellipsis; }
    #replicas.shown { display: block; }
    #detail { height: auto; max-height: 8; padding: 0 1; border-top: solid $panel; }
    #charts { height: 2fr; max-height: 20; display: none; }
    #charts.shown { display: block; }
    #lists { height: 1fr; min-height: 4; }
    #lists.hidden { display: none; }
    #lists.quiet { height: 3; min-height: 3; }
    #charts.tall { max-height: 40; }
    #lists .fleet-panel.empty { display: none; }
    .fleet-panel { width: 1fr; height: 100%; border: round $panel; border-title-color: $foreground; padding: 0 1; }
    #lists .fleet-panel { text-wrap: nowrap; text-overflow: ellipsis; }
    #filter { dock: bottom; display: none; }
    #filter.shown { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._columns: tuple[Column, ...] = ()
        self._filter = ""
        self._order: list[str] = []
        self._row_cells: dict[str, tuple[Text | str, ...]] = {}  # row key -> its cells, in column order
        self._panels: dict[str, Text | IndentedText | str] = {}  # what each panel shows now
        self._trend_high: float | None = None  # the shared scale of the rows' trends

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="summary")
            yield Static(id="crit-banner", classes="banner")
            yield Static(id="warn-banner", classes="banner")
            yield RowTable(id="fleet")
            yield Static(id="replicas")
            yield Static(id="detail")
            with Horizontal(id="charts"):
                yield ChartPanel(id="gen-chart", classes="fleet-panel")
                yield ChartPanel(id="ttft-chart", classes="fleet-panel")
            with Horizontal(id="lists"):
                yield Static(id="open-findings", classes="fleet-panel")
                yield Static(id="recent-actions", classes="fleet-panel")
        yield Input(placeholder="filter nodes by name, model or status (escape clears)", id="filter")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._ready = True
        self.query_one("#gen-chart", ChartPanel).border_title = "Fleet generation tok/s"
        self.query_one("#ttft-chart", ChartPanel).border_title = "Worst TTFT p90"
        self.query_one("#open-findings", Static).border_title = "Open findings"
        self.query_one("#recent-actions", Static).border_title = "Recent actions"
        self._rebuild_columns(self.size.width)
        self._fit_panels()
        self.update_views(self.spark.views)

    def on_resize(self, event: events.Resize) -> None:
        wanted = fit_columns(self.size.width, self._mixed())
        if wanted != self._columns:
            self._rebuild_columns(self.size.width)
        self._fit_panels()
        self.update_views(self.spark.views)

    def _fit_panels(self) -> None:
        """The charts take the spare rows of a tall terminal; a short one keeps them for the table."""
        height = self.size.height
        self.query_one("#charts").set_class(height >= CHARTS_MIN_HEIGHT, "shown")
        self.query_one("#lists").set_class(height < 20, "hidden")

    def _mixed(self) -> bool:
        """Whether the fleet runs more than one engine kind (its rows then say which)."""
        spec = self.spark.fleet
        return len({server.engine for node in spec.nodes for server in node.vllm}) > 1

    def _rebuild_columns(self, width: int) -> None:
        self._columns = fit_columns(width, self._mixed())
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

    def _trend_width(self) -> int:
        return next((c.width for c in self._columns if c.key == "trend"), 10)

    def _shared_trend_high(self, rows: Sequence[tuple[str, NodeView, InstanceView | None, str]]) -> float | None:
        """One scale for every row's trend (the highest value any row shows), so rows compare."""
        width = self._trend_width()
        history = self.spark.history
        tops = [
            max(series)
            for _, view, instance, _ in rows
            if instance is not None
            for series in (history.series(view.name, instance.name, "generation_tps", last=width),)
            if series
        ]
        return max(tops) if tops else None

    def _cells(self, view: NodeView, instance: InstanceView | None, label: str) -> dict[str, Text | str]:
        app = self.spark
        colours = app.colours
        limits = app.fleet.thresholds
        state = view.status.state
        serving = instance is not None and instance.status.state.serving
        rates = instance.rates if instance is not None else None
        gen = rates.generation_tokens_per_s if rates else None
        prompt = rates.prompt_tokens_per_s if rates else None
        is_worker = instance is not None and instance.url is None
        width = self._trend_width()
        trend = app.history.series(view.name, instance.name, "generation_tps", last=width) if instance else ()
        # A trend of an instance that no longer serves is its past: drawn dim, not as if it were live.
        trend_colour = colours["status-ok"] if serving else colours["dim"]
        gpu = view.gpu
        age = view.age_s
        services = view.services
        services_up = sum(1 for s in services if s.status.state is State.UP)
        ttft = _ttft_p90(instance)
        # Without colour a down node's name and status are in reverse video and its model is not dimmed:
        # it is the row to see first (status_style).
        marked = app.no_color and state in MARKED_WITHOUT_COLOUR
        cells: dict[str, Text | str] = {
            "node": Text(label, style=status_style(state, colours, no_color=True) if marked else "bold"),
            "status": status_text(state, colours, no_color=app.no_color),
            "engine": instance.engine if instance is not None else NO_DATA,
            "model": "(TP worker)" if is_worker else (_model_name(instance) if instance else NO_DATA),
            "gen": NO_DATA if is_worker else _generation(instance, gen, colours),
            "trend": NO_DATA if is_worker else spark_text(trend, width, trend_colour, high=self._trend_high),
            "prompt": NO_DATA if is_worker else fmt_rate(prompt, ""),
            "bw": NO_DATA,
            "reqs": NO_DATA,
            "kv": NO_DATA,
            "ttft": NO_DATA,
            "accept": NO_DATA,
            "mem": _memory_cell(view, colours, app.no_color, limits),
            # A reading older than its stale limit is not shown as if it were now (a powered-off node).
            "gpu": level_text(
                f"{fmt_number(gpu.temperature_c)}°C {fmt_number(gpu.power_w)}W",
                gpu_temp_level(gpu.temperature_c, limits),
                colours,
            )
            if gpu and not view.is_stale("gpu")
            else NO_DATA,
            "svc": f"{services_up}/{len(services)}" if services else NO_DATA,
            "find": findings_cell(app.findings.get(view.name, ()), colours),
            "age": NO_DATA
            if age is None
            else level_text(fmt_duration(age), Level.WARN if view.is_stale("node") else None, colours),
        }
        if instance is not None and not is_worker:  # a TP worker's numbers are its head's: "–" on its row
            waiting_level_ = waiting_level(instance.waiting, limits)
            reqs = Text(f"{fmt_number(instance.running)}/")
            reqs.append_text(Text.assemble(level_text(fmt_number(instance.waiting), waiting_level_, colours)))
            cells["reqs"] = reqs
            cells["kv"] = level_text(fmt_pct(instance.kv_usage, 0), kv_level(instance.kv_usage, limits), colours)
            cells["ttft"] = level_text(_ttft(instance), ttft_level(ttft, limits), colours)
            cells["bw"] = fmt_pct(instance.roofline.memory_share if instance.roofline else None, 0)
            accept_trend = app.history.series(view.name, instance.name, "acceptance_length", last=120)
            cells["accept"] = level_text(_accept(instance), falling_level(accept_trend), colours)
        if state is not State.UP and instance is not None and instance.status.state is not State.UP and not marked:
            cells["model"] = Text(str(cells["model"]), style=colours["dim"])
        return cells

    def update_views(self, views: Sequence[NodeView], changed: frozenset[str] | None = None) -> None:
        """Draw ``views``; with ``changed``, only those nodes' rows are worked out again (the others
        keep their cells until the next full update)."""
        if not self.drawable:
            return
        rows = self._rows(views)
        if changed is None:
            self._trend_high = self._shared_trend_high(rows)
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
        self._update_summary(views)  # the totals with the rows they add up, also as a node's poll arrives
        self._update_replicas(views)
        if changed is None:  # banners, charts and lists at the render tick
            self._update_banners(views)
            self._update_charts()
            self._update_lists()
        highlighted = self.highlighted(views)
        if changed is None or (highlighted is not None and highlighted.name in changed):
            self._update_detail(views)

    def _update_summary(self, views: Sequence[NodeView]) -> None:
        app = self.spark
        rates = [i.rates for v in views for i in v.instances if i.rates is not None]
        gen = known_sum(r.generation_tokens_per_s for r in rates)
        prompt = known_sum(r.prompt_tokens_per_s for r in rates)
        counts: dict[State, int] = {}
        for view in views:
            counts[view.status.state] = counts.get(view.status.state, 0) + 1
        summary = Text()
        summary.append(f"{fmt_count(len(views), 'node')}  ", style="bold")
        # The screen's clock, with its zone: the one every time on screen is read on (the newest
        # observation's wall clock at this tick: a replay shows the recording's time).
        summary.append(f"{fmt_clock(app.monitor.wall_at(app.clock()))}  ", style=app.colours["dim"])
        for state in (State.UP, State.DEGRADED, State.LOADING, State.FAILING, State.STALE, State.DOWN, State.UNKNOWN):
            if counts.get(state):
                summary.append_text(status_text(state, app.colours, label=False, no_color=app.no_color))
                summary.append(f" {counts[state]} {state.value}  ")
        summary.append(f"│ generation {fmt_rate(gen, ' tok/s')}  prompt {fmt_rate(prompt, ' tok/s')}")
        running = known_sum(i.running for v in views for i in v.instances)
        waiting = known_sum(i.waiting for v in views for i in v.instances)
        summary.append(f"  │ running {fmt_number(running)}  waiting {fmt_number(waiting)}")
        if app.paused:
            summary.append("  │ PAUSED (p resumes)", style=f"bold {app.colours['status-warn']}")
        self._show("#summary", summary)

    def _update_replicas(self, views: Sequence[NodeView]) -> None:
        """One line per model served by several instances: its latency over all of them (merged
        buckets) and its slowest replica; hidden when no model has replicas."""
        found = model_replicas(views)
        if found:
            self._show("#replicas", Text("\n").join(_replicas_line(m, self.spark.colours) for m in found))
        self.query_one("#replicas", Static).set_class(bool(found), "shown")

    def _update_banners(self, views: Sequence[NodeView]) -> None:
        crit, warn = self._banner_lines(views)
        self._banner("#crit-banner", crit)
        self._banner("#warn-banner", warn)

    def _banner_lines(self, views: Sequence[NodeView]) -> tuple[list[str], list[str]]:
        """What is wrong now, by severity: down and stale nodes and critical alerts (red); a recording
        that stopped and warnings (amber)."""
        down = [
            f"{STATUS_GLYPH[v.status.state]} {v.name} {v.status.state.value.upper()}: {node_reason(v)}"
            for v in views
            if v.status.state in (State.FAILING, State.DOWN, State.STALE)
        ]
        crit: list[str] = []
        warn = [f"{SEVERITY_GLYPH['warn']} {problem}" for problem in self.spark.own_problems()]
        for severity, line in self.spark.firing_alerts():
            (crit if severity == "crit" else warn).append(f"{SEVERITY_GLYPH.get(severity, '●')} {line}")
        crit = _capped(crit, BANNER_LINES - 1 if down else BANNER_LINES)
        return (["   ".join(down)] if down else []) + crit, _capped(warn, BANNER_LINES)

    def _banner(self, selector: str, lines: list[str]) -> None:
        if lines:
            self._show(selector, "\n".join(lines))
        self.query_one(selector, Static).set_class(bool(lines), "shown")

    def _update_charts(self) -> None:
        if not self.query_one("#charts").has_class("shown"):
            return
        app = self.spark
        colours = app.colours
        for selector, metric, colour, unit in (
            ("#gen-chart", "generation_tps", colours["status-ok"], " tok/s"),
            ("#ttft-chart", "ttft_p90", colours["status-loading"], ""),
        ):
            panel = self.query_one(selector, ChartPanel)
            width, height = panel.content_size.width, panel.content_size.height
            if width <= 0 or height <= 1:
                continue
            points = app.history.points(FLEET, metric)[-width:]
            head, rows = _chart(points, (width, height), colours["dim"], metric, unit)
            panel.show(head, rows, colour)

    def _update_lists(self) -> None:
        if self.query_one("#lists").has_class("hidden"):
            return
        app = self.spark
        colours = app.colours
        findings = sorted(
            (f for found in app.findings.values() for f in found), key=lambda f: (-f.severity.rank, f.node)
        )
        text = Text()
        room = max(1, self.query_one("#open-findings").content_size.height)
        shown = findings[:room] if len(findings) <= room else findings[: room - 1]
        for index, finding in enumerate(shown):
            if index:
                text.append("\n")
            text.append_text(finding_line(finding, colours, keymap=app.fleet.keymap))
        if len(shown) < len(findings):
            text.append(f"\n… {len(findings) - len(shown)} more (f lists them)", style=colours["dim"])
        actions = Text()
        room = max(1, self.query_one("#recent-actions").content_size.height)
        now = app.clock()
        for running in reversed(app.running_actions[-room:]):  # running ones first, from their first second
            if actions:
                actions.append("\n")
            actions.append(f"{running.at} ", style=colours["dim"])
            actions.append(f"⟳ {running.summary(now)}", style=f"bold {colours['status-loading']}")
        done_room = room - len(app.running_actions)
        for at, lines in reversed(app.action_log[-done_room:] if done_room > 0 else []):
            if actions:
                actions.append("\n")
            actions.append(f"{at} ", style=colours["dim"])
            actions.append(lines[0] if lines else "")
        # No panel that only says "none" while there is something to show: an empty half gives its
        # width to the other; both empty, the row shrinks to one line and the charts take its height.
        quiet = not findings and not actions
        if quiet:
            text = Text("no finding open, no action this session (f findings, a actions)", style=colours["dim"])
        self._show("#open-findings", text if findings or quiet else Text("none open", style=colours["dim"]))
        self._show("#recent-actions", actions if actions else Text("none this session", style=colours["dim"]))
        self.query_one("#open-findings").set_class(not findings and not quiet, "empty")
        self.query_one("#recent-actions").set_class(not actions, "empty")
        self.query_one("#lists").set_class(quiet, "quiet")
        self.query_one("#open-findings").border_title = "Findings and actions" if quiet else "Open findings"
        self.query_one("#charts").set_class(quiet, "tall")

    def _update_detail(self, views: Sequence[NodeView]) -> None:
        view = self.highlighted(views)
        if view is None:
            self._show("#detail", "")
            return
        text = Text()
        text.append(f"{view.name} ({view.host})  ", style="bold")
        text.append_text(status_text(view.status.state, self.spark.colours, no_color=self.spark.no_color))
        for reason in view.status.reasons[:4]:
            text.append(f"\n  {reason}")
        for instance in view.instances:
            if instance.engines:
                style = self.spark.colours["status-warn"] if instance.imbalanced_engines else ""
                text.append(f"\n  {instance.name}: {data_parallel_summary(instance.engines)}", style=style)
                text.append(f"; KV cache {kv_line(instance.kv)}")
        if len(view.status.reasons) > 4:
            text.append(f"\n  … and {len(view.status.reasons) - 4} more (enter opens the node)")
        for job in view.jobs:  # the job's ranks side by side: GPU and link of each
            for line in job_lines(job):
                text.append(f"\n  {line}")
        for finding in self.spark.findings.get(view.name, ())[:2]:
            text.append("\n")
            text.append_text(
                finding_text(finding, self.spark.colours, evidence_lines=1, keymap=self.spark.fleet.keymap)
            )
        self._show("#detail", IndentedText(text))  # a reason or finding wraps under its indent

    def _show(self, selector: str, content: Text | IndentedText | str) -> None:
        """Update a panel only when what it shows changed, reflowing the screen only when its height
        changed with it (``update_panel``: the summary, the charts and the replica lines change every
        tick)."""
        if self._panels.get(selector) != content:
            self._panels[selector] = content
            update_panel(self.query_one(selector, Static), content)

    def highlighted(self, views: Sequence[NodeView] | None = None) -> NodeView | None:
        views = views if views is not None else self.spark.views
        table = self.query_one("#fleet", RowTable)
        if not self._order or table.cursor_row >= len(self._order):
            return None
        node = self._order[table.cursor_row].split("/", 1)[0]
        return next((v for v in views if v.name == node), None)

    def highlighted_instance(self) -> str | None:
        """The instance of the highlighted row (None: a row of a node with none)."""
        table = self.query_one("#fleet", RowTable)
        if not self._order or table.cursor_row >= len(self._order):
            return None
        return self._order[table.cursor_row].partition("/")[2] or None

    def on_row_table_row_highlighted(self, _event: RowTable.RowHighlighted) -> None:
        self._update_detail(self.spark.views)

    def on_row_table_row_selected(self, _event: RowTable.RowSelected) -> None:
        self.action_open_node()

    # --- actions ----------------------------------------------------------------------------------

    def action_open_node(self) -> None:
        view = self.highlighted()
        if view is not None:  # on the row's own instance (a node runs several: a fallback engine)
            self.spark.open_node(view.name, self.highlighted_instance())

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


BANNER_LINES = 3  # lines per banner (the down nodes take one, side by side); the rest are counted


def _capped(lines: list[str], most: int) -> list[str]:
    """At most ``most`` lines, the last one counting what was left out."""
    if len(lines) <= most:
        return lines
    return [*lines[: most - 1], f"… and {len(lines) - most + 1} more (! lists the alerts)"]


def _replicas_line(found: ModelReplicas, colours: Mapping[str, str]) -> Text:
    """``gemma-4-26B-A4B-it on 2 replicas  TTFT p50 … p90 … p99 … over 48 req  slowest spark04 p90 1.70 s
    (26 req)  e2e p90 …  ITL p90 …  queue p90 …``: what a narrow terminal cuts is the least needed."""
    line = Text()
    line.append(found.model.rsplit("/", 1)[-1], style="bold")
    line.append(f" on {len(found.replicas)} replicas", style=colours["dim"])
    if found.reporting < len(found.replicas):
        line.append(f" ({found.reporting} reporting)", style=colours["dim"])
    ttft = found.latency.get("ttft")
    if ttft is None or not ttft.count:
        line.append(f"  TTFT {NO_DATA}  no requests in the window", style=colours["dim"])
        return line
    line.append(f"  {fmt_latency('TTFT', ttft)}")
    line.append(f" over {fmt_number(ttft.count)} req", style=colours["dim"])
    slowest = found.slowest
    if slowest is not None and slowest.ttft is not None:
        line.append("  slowest ")
        line.append(_replica_name(slowest, found), style="bold")
        line.append(f" p90 {fmt_seconds(slowest.ttft.p90, slowest.ttft.floor)}")
        line.append(f" ({fmt_number(slowest.requests)} req)", style=colours["dim"])
    for key, label in (("e2e", "e2e"), ("itl", "ITL"), ("queue", "queue")):
        summary = found.latency.get(key)
        if summary is not None and summary.count:
            line.append(f"  {label} p90 {fmt_seconds(summary.p90, summary.floor)}")
    return line


def _replica_name(replica: Replica, found: ModelReplicas) -> str:
    """The node's name, as in the table's first column; node/instance when the node runs two replicas."""
    shared = sum(1 for r in found.replicas if r.node == replica.node) > 1
    return replica.where if shared else replica.node


def _memory_cell(view: NodeView, colours: Mapping[str, str], patterns: bool, limits: Thresholds) -> Text | str:
    """The unified-memory bar with MemAvailable beside it, coloured against its thresholds."""
    mem = view.fresh_host_memory
    if mem is None:
        return NO_DATA
    cell = memory_bar(view.ledger, MEM_BAR, colours, patterns=patterns)
    cell.append(" ")
    cell.append_text(
        Text.assemble(level_text(fmt_gib_short(mem.mem_available), memory_level(mem.mem_available, limits), colours))
    )
    return cell


def _chart(
    points: Sequence[Point], size: tuple[int, int], dim: str, metric: str, unit: str
) -> tuple[Text, tuple[str, ...]]:
    """A panel's chart (``size``: width, height): the latest value, the scale and the span on the first
    line (labels in ``dim``), the columns' rows under it."""
    width, height = size
    if not points:
        return Text(f"no data yet {NO_DATA}", style=dim), ()
    series = [p.value for p in points]
    top = max(series)

    def shown(value: float) -> str:
        return fmt_seconds(value) if metric == "ttft_p90" else fmt_rate(value, unit)

    head = Text()
    head.append(f"now {shown(series[-1])}", style="bold")
    head.append(f"   max {shown(top)}   over {fmt_duration(points[-1].t - points[0].t)}", style=dim)
    return head, column_rows(series, width, height - 1, high=top or None)


def _job_of(app: Dashboard, node: str, instance: str) -> str | None:
    spec = app.fleet.node(node)
    if spec is None:
        return None
    found = next((v for v in spec.vllm if v.name == instance), None)
    return found.job if found is not None and found.role != "single" else None
