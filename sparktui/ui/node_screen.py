"""The node screen, an incident cockpit: the findings, the unified-memory ledger, the GPU, throughput
and KV trends, requests and latency, and a live tail of the node's logs, all on one 160x48 screen
without scrolling (three columns of panels from 140 cells: host, engine output, requests; two from
100, one below; the less urgent panels, side services and the TTFT histogram, at the bottom); a
data-parallel instance's engines in a row of the screen's width above the log tail. ``l`` opens the
full log view (``log_screen.py``).

An instance that is not serving (down, loading, a tensor-parallel worker) shows "–" and why, never the
last numbers it had."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import ClassVar

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Sparkline, Static

from sparktui.model.canary import canary_text
from sparktui.model.derive import EngineRates
from sparktui.model.engines import EngineView, kv_line
from sparktui.model.exporters import clock_figure
from sparktui.model.fabric import fabric_lines
from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.status import State
from sparktui.model.units import (
    NO_DATA,
    engine_lines,
    fmt_duration,
    fmt_gib,
    fmt_number,
    fmt_pct,
    fmt_rate,
    fmt_seconds,
    fmt_tokens,
    fmt_waiting,
    roofline_parts,
)
from sparktui.ui.base import SparkScreen, update_panel
from sparktui.ui.footer import KeyFooter
from sparktui.ui.keys import NODE_BINDINGS
from sparktui.ui.lists import KeyedScroll
from sparktui.ui.log_reader import LogReader
from sparktui.ui.log_screen import LogView
from sparktui.ui.render import (
    IMBALANCED,
    MEMORY_PATTERNS,
    IndentedText,
    finding_text,
    level_bar,
    memory_bar,
    status_text,
)
from sparktui.ui.themes import MEMORY_VARIABLES

LATENCIES = (
    ("ttft", "TTFT"),
    ("itl", "ITL"),
    ("tpot", "TPOT"),
    ("e2e", "e2e"),
    ("queue", "queue"),
    ("prefill", "prefill"),
    ("decode", "decode"),
)


WIDE = 140  # three columns of panels from this width
MEDIUM = 100  # two from this one
SHORT = 32  # below this height the log tail keeps only a few lines
SERVING = frozenset(s for s in State if s.serving)  # judged FAILING still serves
TAIL_LINES = 500  # the log tail holds no more (the log view holds the node's whole log)


def _panel_title(text: str) -> Text:
    return Text(text, style="bold")


class _Fitted:
    """A line drawn at the width Rich gives it at render time (the panel's, after layout)."""

    def __init__(self, draw: Callable[[int], Text]) -> None:
        self.draw = draw

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.draw(options.max_width)


def packed(items: Iterable[Text], width: int, gap: int = 2) -> Text:
    """Items on as few lines as fit ``width``, a line broken only between two items (a legend entry
    never splits mid-value)."""
    out = Text()
    used = 0
    for item in items:
        if used and used + gap + item.cell_len > width:
            out.append("\n")
            used = 0
        elif used:
            out.append(" " * gap)
            used += gap
        out.append_text(item)
        used += item.cell_len
    return out


def packed_lines(groups: Sequence[Sequence[Text]], gap: int = 3) -> Group:
    """Each group of figures on its own lines, packed to the panel's width (``packed``)."""
    return Group(*(_Fitted(partial(packed, group, gap=gap)) for group in groups))


def not_serving(instance: InstanceView | None) -> str | None:
    """Why an instance has no live numbers to show, in a few words (the status reasons above the panels
    say more); None: it is serving."""
    if instance is None:
        return "no vLLM instance configured"
    if instance.role == "worker":
        return f"{instance.name} is a tensor-parallel worker: its head serves and reports"
    if instance.status.state in SERVING:
        return None
    return f"{instance.name} is {instance.status.state.value}"


def _text_table(rows: Sequence[Sequence[Text | str]], right: Sequence[bool], header: bool = False) -> Text:
    """Rows of cells in aligned columns two cells apart, as one Text (a Rich Table costs ten times as
    much to render, and these panels are drawn at every scrape of the node)."""
    cells = [[cell if isinstance(cell, Text) else Text(cell) for cell in row] for row in rows]
    widths = [max((row[i].cell_len for row in cells), default=0) for i in range(len(right))]
    out = Text()
    for index, row in enumerate(cells):
        if index:
            out.append("\n")
        for column, (cell, width) in enumerate(zip(row, widths, strict=True)):
            pad = " " * (width - cell.cell_len)
            if column:
                out.append("  ")
            if right[column]:
                out.append(pad)
            out.append_text(cell)
            if not right[column] and column < len(widths) - 1:
                out.append(pad)
        if header and index == 0:
            out.stylize("bold", 0, len(out))
    return out


def _latency_table(rates: EngineRates | None, dim: str) -> RenderableType:
    """p50, p90, p99, mean and count per latency; on a narrow panel the mean, then the count, are left out."""
    rows: list[list[Text | str]] = [["Latency", "p50", "p90", "p99", "mean", "n"]]  # the header is the title
    for key, label in LATENCIES:
        summary = rates.latency.get(key) if rates else None
        if summary is None:
            continue
        floor = summary.floor
        rows.append(
            [
                label,
                fmt_seconds(summary.p50, floor),
                fmt_seconds(summary.p90, floor),
                fmt_seconds(summary.p99, floor),
                fmt_seconds(summary.mean),
                fmt_number(summary.count),
            ]
        )
    if len(rows) == 1:
        return Group(_panel_title("Latency (window)"), Text(f"{NO_DATA}  no request finished in the window", style=dim))

    def fitted(width: int) -> Text:
        for keep in ((0, 1, 2, 3, 4, 5), (0, 1, 2, 3, 5), (0, 1, 2, 3)):
            table = _text_table([[row[i] for i in keep] for row in rows], [i > 0 for i in keep], header=True)
            if max(line.cell_len for line in table.split()) <= width:
                break
        return table

    return _Fitted(fitted)


def _ttft_histogram(rates: EngineRates | None, width: int, colour: str, dim: str) -> RenderableType:
    """Bars per TTFT bucket over the window (increases, not cumulative)."""
    hist = rates.histograms.get("ttft") if rates else None
    if hist is None or not hist.count:
        return Text(f"no request got its first token in the window {NO_DATA}", style=dim)
    counts: list[tuple[str, float]] = []
    previous = 0.0
    for bound, cumulative in zip(hist.bounds, hist.cumulative, strict=True):
        in_bucket = max(0.0, cumulative - previous)
        previous = max(previous, cumulative)
        label = "+Inf" if math.isinf(bound) else f"≤{fmt_seconds(bound)}"
        counts.append((label, in_bucket))
    # Trim empty buckets at both ends so the shape fills the panel.
    first = next((i for i, (_, c) in enumerate(counts) if c), 0)
    last = max((i for i, (_, c) in enumerate(counts) if c), default=len(counts) - 1)
    counts = counts[max(0, first - 1) : last + 2]
    peak = max(c for _, c in counts) or 1.0
    lines = Text()
    for index, (label, count) in enumerate(counts):
        cells = round(count / peak * width)
        lines.append(f"{chr(10) if index else ''}{label:>9} ")
        lines.append("█" * cells, style=colour)
        lines.append(f" {count:.0f}", style=dim)
    return lines


def _reported_spec(reported: Mapping[str, float], why: str | None, colours: dict[str, str]) -> RenderableType:
    """Speculative decoding from the engine's own gauges: its numbers over its recent batches, not a
    window of sparktui's, and no position of the draft."""
    head = packed_lines(
        [
            [
                Text(f"acceptance {fmt_pct(reported.get('spec_accept_rate'))}"),
                Text(f"mean length {fmt_number(reported.get('spec_accept_length'), 2)}"),
            ]
        ]
    )
    return Group(head, Text(why or "per draft position: –", style=colours["dim"]))


def _spec_decode(rates: EngineRates | None, colours: dict[str, str], trend: Sequence[float]) -> RenderableType:
    spec = rates.spec_decode if rates else None
    if spec is None:
        return Text("no speculative decoding on this instance", style=colours["dim"])
    head = packed_lines(
        [
            [
                Text(f"acceptance {fmt_pct(spec.acceptance_rate)}"),
                Text(f"mean length {fmt_number(spec.mean_acceptance_length, 2)}"),
                Text(f"drafts {fmt_rate(spec.draft_tokens_per_s, ' tok/s')}"),
                Text(f"accepted {fmt_rate(spec.accepted_tokens_per_s, ' tok/s')}"),
            ]
        ]
    )
    rows: list[list[Text | str]] = [["pos", "absolute", "", "conditional", ""]]
    weak = spec.weak_last_position
    for index, (absolute, conditional) in enumerate(zip(spec.per_position, spec.conditional, strict=True)):
        colour = colours["status-warn"] if index == weak else colours["status-ok"]
        rows.append(
            [
                str(index),
                level_bar(absolute, 16, colour, colours["mem-free"]),
                fmt_pct(absolute, 0),
                level_bar(conditional, 16, colour, colours["mem-free"]),
                fmt_pct(conditional, 0),
            ]
        )
    bars = _text_table(rows, (True, False, True, False, True), header=True)
    parts: list[RenderableType] = [head, bars]
    if trend:
        parts.append(Text(f"mean length trend {min(trend):.2f} … {max(trend):.2f}", style=colours["dim"]))
    if weak is not None:
        parts.append(
            Text(
                f"position {weak} adds only {fmt_number(spec.per_position[weak], 2)} tokens per step: "
                f"num_speculative_tokens={weak} may decode faster",
                style=colours["status-warn"],
            )
        )
    return Group(*parts)


ENGINE_COLUMNS = (
    *("engine", "gen t/s", "share", "prompt t/s", "run", "wait", "KV", "of tokens"),
    *("TTFT p50", "TTFT p90", "TTFT p99", "prefix hit"),
)
# On a narrower panel the less urgent columns go first: capacity, TTFT p50 and p99, prompt, TTFT p90.
ENGINE_FITS = (
    tuple(range(len(ENGINE_COLUMNS))),
    (0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11),
    (0, 1, 2, 3, 4, 5, 6, 9, 11),
    (0, 1, 2, 4, 5, 6, 9, 11),
    (0, 1, 2, 4, 5, 6, 11),
    (0, 1, 2, 6),
)


def engines_table(engines: Sequence[EngineView], warn: str) -> RenderableType:
    """One row per engine of a data-parallel instance, its own numbers over the window; an engine off
    its share of the generation by more than ``engine_imbalance_warn`` marked in the warning colour."""
    rows: list[list[Text | str]] = [list(ENGINE_COLUMNS)]
    for engine in engines:
        rates = engine.rates
        ttft = rates.latency.get("ttft") if rates else None
        floor = ttft.floor if ttft else None
        share = f"{fmt_number(engine.share_ratio, 2)}×" if engine.share_ratio is not None else NO_DATA
        share = f"{IMBALANCED}{share}" if engine.imbalanced else share
        rows.append(
            [
                Text(engine.engine, style="bold"),
                fmt_rate(rates.generation_tokens_per_s if rates else None, ""),
                Text(share, style=warn) if engine.imbalanced else share,
                fmt_rate(rates.prompt_tokens_per_s if rates else None, ""),
                fmt_number(engine.running),
                fmt_number(engine.waiting),
                fmt_pct(engine.kv_usage),
                fmt_tokens(engine.kv_capacity_tokens),
                fmt_seconds(ttft.p50 if ttft else None, floor),
                fmt_seconds(ttft.p90 if ttft else None, floor),
                fmt_seconds(ttft.p99 if ttft else None, floor),
                fmt_pct(rates.prefix_cache_hit_rate if rates else None),
            ]
        )

    def fitted(width: int) -> Text:
        for keep in ENGINE_FITS:
            table = _text_table([[row[i] for i in keep] for row in rows], [i > 0 for i in keep], header=True)
            if max(line.cell_len for line in table.split()) <= width:
                break
        return table

    return _Fitted(fitted)


class NodeScreen(SparkScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = NODE_BINDINGS
    DEFAULT_CSS = """
    NodeScreen { layout: vertical; }
    #title { height: 1; padding: 0 1; background: $panel; }
    #reasons { height: auto; max-height: 3; padding: 0 1; }
    #upper { height: auto; max-height: 75%; }
    #findings { max-height: 10; overflow-y: auto; }
    #columns { height: auto; layout: horizontal; }
    .column { width: 1fr; height: auto; }
    NodeScreen.-cols-2 #columns { layout: grid; grid-size: 2; grid-rows: auto; }
    NodeScreen.-cols-2 #col-c { column-span: 2; layout: horizontal; }
    NodeScreen.-cols-1 #columns { layout: vertical; }
    NodeScreen.-cols-1 #upper { height: 1fr; max-height: 100%; }
    NodeScreen.-cols-1 #findings { max-height: 8; }
    .panel { border: round $panel; padding: 0 1; height: auto; width: 1fr; }
    .panel Sparkline { height: 2; }
    #tail-panel { height: 1fr; min-height: 7; border: round $panel; padding: 0 1; }
    NodeScreen.-cols-1 #tail-panel { height: 9; min-height: 0; }
    NodeScreen.-short #tail-panel { height: 6; }
    #tail-title { height: 1; }
    #tail { height: 1fr; background: $background; }
    """

    def __init__(self, node: str, instance: str | None = None) -> None:
        """``instance``: the one whose engine the panels show (None: the node's first)."""
        super().__init__()
        self.node = node
        self.instance = instance
        self._shown: dict[str, object] = {}  # panel -> the key of what it shows (see _put)
        self._tail: LogReader | None = None

    @property
    def tail_reader(self) -> LogReader:
        if self._tail is None:
            self._tail = LogReader(signatures=self.spark.signature_patterns, measure=cell_len, max_lines=TAIL_LINES)
        return self._tail

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        yield Static(id="reasons")
        with KeyedScroll(id="upper"):
            yield Static(classes="panel", id="findings")
            # Three columns, each a stack of panels: the host, the engine's output, its requests. Two
            # columns put the third under them, its panels side by side; one stacks them all.
            with Horizontal(id="columns"):
                with Vertical(classes="column", id="col-a"):
                    yield Static(classes="panel", id="memory")
                    yield Static(classes="panel", id="gpu")
                    yield Static(classes="panel", id="services")
                with Vertical(classes="column", id="col-b"):
                    with Vertical(classes="panel", id="throughput-panel"):
                        yield Static(id="throughput")
                        yield Sparkline((), id="gen-spark")
                        yield Static(id="kv")
                        yield Sparkline((), id="kv-spark")
                    yield Static(classes="panel", id="spec")
                    yield Static(classes="panel", id="ttft-hist")
                with Vertical(classes="column", id="col-c"):
                    yield Static(classes="panel", id="requests")
                    yield Static(classes="panel", id="latency")
        # A data-parallel instance's engines, the width of the screen: every engine's row on one line,
        # never scrolled out of view (it takes its rows from the log tail).
        yield Static(classes="panel", id="engines")
        with Vertical(id="tail-panel"):
            yield Static(id="tail-title")
            yield LogView(self.tail_reader, wrap=True, id="tail", classes="tail")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._ready = True
        self._fit(self.size.width, self.size.height)
        self.update_views(self.spark.views)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        """Three columns of panels on a wide terminal, two on a medium one, one below (then the body
        scrolls); a short terminal keeps a few log lines."""
        columns = 3 if width >= WIDE else 2 if width >= MEDIUM else 1
        for n in (1, 2, 3):
            self.set_class(n == columns, f"-cols-{n}")
        self.set_class(height < SHORT, "-short")

    def on_screen_resume(self) -> None:
        """Shown again (a kept screen reopened): bring it up to date at once."""
        if self._ready:
            self.update_views(self.spark.views)

    def _view(self, views: Sequence[NodeView]) -> NodeView | None:
        return next((v for v in views if v.name == self.node), None)

    def update_views(self, views: Sequence[NodeView], changed: frozenset[str] | None = None) -> None:
        """Draw this node's view (``changed``: the nodes just observed, unused here: one node is shown)."""
        if not self.drawable:
            return
        view = self._view(views)
        if view is None:
            return
        app = self.spark
        colours = app.colours
        title = Text()
        title.append(f"{view.name} ({view.host})  ", style="bold")
        title.append_text(status_text(view.status.state, colours, no_color=app.no_color))
        instance = self._instance(view)
        if len(view.instances) > 1 and instance is not None:  # the engine panels show one of them
            at = view.instances.index(instance) + 1
            title.append(f"   {instance.name} ({instance.engine}, {at} of {len(view.instances)}, i next)", style="bold")
        title.append(f"   window {app.window_s:.0f} s   ← → other nodes, esc fleet, l logs")
        self._put("#title", title)
        banner = Text("\n").join(Text(r) for r in view.status.reasons)
        for running in app.running_actions:  # an action on this node, from its first second, above the reasons
            if view.name in running.nodes:
                line = Text(f"⟳ {running.summary(app.clock())}", style=f"bold {colours['status-loading']}")
                banner = Text("\n").join([line, banner]) if banner else line
        reasons = self.query_one("#reasons", Static)
        reasons.display = bool(banner)
        self._put("#reasons", banner)
        self._findings(view)
        idle = not_serving(instance)
        self._throughput(view, instance, idle)
        self._requests(instance, idle)
        rates = None if idle else instance.rates if instance else None
        theme = app.theme
        idle_text, dim = self._idle(idle), colours["dim"]
        # An engine that exports no latency at all says so, instead of "no request finished".
        lacking = instance.lacks.get("latency") if instance is not None else None
        no_latency = Text(f"{NO_DATA}  {lacking}", style=dim) if lacking else None
        explained = idle_text or no_latency
        self._put(
            "#latency",
            (rates, idle, theme, lacking),
            lambda: Group(_panel_title("Latency (window)"), explained) if explained else _latency_table(rates, dim),
        )
        self._put(
            "#ttft-hist",
            (rates, idle, theme, lacking),
            lambda: Group(
                _panel_title("TTFT histogram (window)"),
                self._idle(idle) or no_latency or _ttft_histogram(rates, 24, colours["status-loading"], colours["dim"]),
            ),
        )
        self._spec(view, instance, rates)
        self._engines(instance, idle)
        self._memory(view)
        self._gpu(view)
        self._services(view)
        self._logs(instance)

    def _idle(self, reason: str | None) -> Text | None:
        """ "–" and why, for a panel of an instance that is not serving."""
        return None if reason is None else Text(f"{NO_DATA}  {reason}", style=self.spark.colours["dim"])

    def _put(self, selector: str, key: object, build: Callable[[], RenderableType] | None = None) -> None:
        """Update a panel only when what it shows changed: ``key`` is the content itself (text) or what
        it is built from (``build`` then makes it). An update costs a render, and the
        screen is drawn at each tick and again as its node's observation arrives; ``update_panel`` lays
        the screen out again only when the panel's height changed."""
        if selector in self._shown and self._shown[selector] == key:
            return
        self._shown[selector] = key
        content = build() if build is not None else key
        update_panel(self.query_one(selector, Static), content)  # type: ignore[arg-type]

    def _findings(self, view: NodeView) -> None:
        app = self.spark
        findings = app.findings.get(view.name, ())
        panel = self.query_one("#findings", Static)
        panel.display = bool(findings)
        if not findings:
            return
        body = Text()
        body.append(f"Findings ({len(findings)})", style="bold")
        body.append("   f: all findings", style=app.colours["dim"])
        for finding in findings:
            body.append("\n")
            body.append_text(finding_text(finding, app.colours, evidence_lines=1, keymap=app.fleet.keymap))
        self._put("#findings", body, lambda: IndentedText(body))  # evidence wraps under its indent

    def _throughput(self, view: NodeView, instance: InstanceView | None, idle: str | None) -> None:
        app = self.spark
        rates = instance.rates if instance and not idle else None
        gen = rates.generation_tokens_per_s if rates else None
        prompt = rates.prompt_tokens_per_s if rates else None
        # The roofline beside decode: how much of the GPU's memory bandwidth (and compute) it uses.
        roofline = roofline_parts(instance.roofline if instance and not idle else None)
        # The GPU's clock and what holds it back, beside decode: a throttled GPU decodes slower.
        live_gpu = view.gpu if not view.is_stale("gpu") else None  # a dead node's last reading is not live
        clock, held = clock_figure(live_gpu) if live_gpu is not None else ("", False)
        lacking = instance.lacks.get("requests") if instance is not None and not idle else None
        figures = [
            Text("Throughput", style="bold"),
            Text(f"generation {fmt_rate(gen, ' tok/s')}"),
            *([Text(clock, style=app.colours["status-warn"] if held else "")] if clock else []),
            Text(f"prompt {fmt_rate(prompt, ' tok/s')}"),
            *([Text(f"({lacking})", style=app.colours["dim"])] if lacking else []),
            *(Text(part) for part in roofline),
        ]
        kv = Text()
        kv.append("KV cache  ", style="bold")
        if instance is not None and not idle:
            kv.append(kv_line(instance.kv))
        else:
            kv.append(NO_DATA)
        idle_text = self._idle(idle)
        self._put(
            "#throughput",
            (gen, prompt, idle, tuple(roofline), clock, held, lacking, self.spark.theme),
            lambda: Group(packed_lines([figures]), *([idle_text] if idle_text else [])),
        )
        self._put("#kv", kv)
        name = instance.name if instance else ""
        # The trends of an instance that is not serving would read as live: they go until it serves again.
        for spark_id, series in (("#gen-spark", "generation_tps"), ("#kv-spark", "kv_usage")):
            spark = self.query_one(spark_id, Sparkline)
            spark.display = idle is None
            spark.data = () if idle else app.history.series(view.name, name, series, last=120)

    def _requests(self, instance: InstanceView | None, idle: str | None) -> None:
        """Requests and the engine's state; each group of figures packed on as few lines as the panel's
        width allows, a figure never split."""
        colours = self.spark.colours
        head = [Text("Requests", style="bold")]
        groups: list[list[Text]] = [head]
        if instance is None:
            self._put("#requests", Text("Requests", style="bold"))
            return
        rates = instance.rates
        lacking = instance.lacks.get("requests")  # an engine that counts no request (Ollama) says so
        if idle:
            head.append(Text(NO_DATA))
        else:
            waiting = fmt_waiting(instance.waiting, instance.waiting_for_capacity, instance.waiting_deferred)
            head += [Text(f"running {fmt_number(instance.running)}"), Text(f"waiting {waiting}")]
            if lacking:
                head.append(Text(f"{NO_DATA}  {lacking}", style=colours["dim"]))
        if instance.asleep and instance.sleep is not None:
            groups.append([Text(f"engine {instance.sleep.description}", style=colours["status-loading"])])
        if rates is not None and not idle and not lacking:
            reasons = ", ".join(f"{k} {v:.0f}" for k, v in sorted(rates.finished_by_reason.items()) if v)
            groups.append(
                [
                    Text(f"finished {fmt_rate(rates.requests_finished_per_s, ' req/s')}"),
                    Text(f"preemptions {fmt_number(rates.preemptions)} ({fmt_rate(rates.preemptions_per_s, '/s')})"),
                    Text(f"prefix-cache hit {fmt_pct(rates.prefix_cache_hit_rate)}"),
                    Text(f"finish reasons: {reasons or NO_DATA}"),
                ]
            )
            groups.append([Text(line) for line in engine_lines(rates)])
        engine = [
            Text(f"{instance.engine} {instance.version or NO_DATA}"),
            Text(f"max_model_len {fmt_number(instance.max_model_len)}"),
        ]
        if instance.models:  # a router: each model and where it is
            engine.append(Text("models: " + ", ".join(m.words for m in instance.models)))
            engine.extend(Text(f"  {numbers.words}") for numbers in instance.model_numbers)
        if instance.service is not None:
            service = instance.service
            restarts = f", {service.restarts} restarts" if service.restarts else ""
            engine.append(Text(f"{service.manager} {service.name}: {service.state}{restarts}"))
        groups.append(engine)
        if instance.canary is not None and instance.status.state in SERVING:  # else none is sent
            style = colours["status-crit"] if instance.canary.wedged else ""
            groups.append([Text(canary_text(instance.canary), style=style)])
        if instance.launch is not None:
            groups.append([Text(f"launch readiness: {instance.launch.reason}")])
        key = (tuple(tuple(t.plain for t in group) for group in groups), self.spark.theme)
        self._put("#requests", key, lambda: packed_lines(groups))

    def _spec(self, view: NodeView, instance: InstanceView | None, rates: EngineRates | None) -> None:
        """Speculative decoding, when the instance serves with it; nothing is said of one that does not
        serve (it may well decode speculatively once it is back)."""
        app = self.spark
        panel = self.query_one("#spec", Static)
        reported = instance.reported if instance is not None else {}
        panel.display = (rates is not None and rates.spec_decode is not None) or "spec_accept_length" in reported
        if not panel.display or instance is None:
            return
        if rates is None or rates.spec_decode is None:  # the engine's own gauges (SGLang), as it reports them
            colours = self.spark.colours
            self._put(
                "#spec",
                (tuple(reported.items()), instance.engine, instance.lacks.get("spec_positions"), self.spark.theme),
                lambda: Group(
                    _panel_title(f"Speculative decoding (as {instance.engine} reports it)"),
                    _reported_spec(reported, instance.lacks.get("spec_positions"), colours),
                ),
            )
            return
        trend = app.history.series(view.name, instance.name, "acceptance_length")
        colours = app.colours
        self._put(
            "#spec",
            (rates, f"{min(trend):.2f} {max(trend):.2f}" if trend else "", app.theme),  # the trend shows as its range
            lambda: Group(_panel_title("Speculative decoding (window)"), _spec_decode(rates, colours, trend)),
        )

    def _engines(self, instance: InstanceView | None, idle: str | None) -> None:
        """The engines of a data-parallel instance, one row each; no panel for one engine."""
        panel = self.query_one("#engines", Static)
        engines = instance.engines if instance is not None and not idle else ()
        panel.display = bool(engines)
        if not engines or instance is None:
            return
        colours = self.spark.colours
        title = Text("Engines (window)", style="bold")
        off = instance.imbalanced_engines
        if off:
            limit = fmt_pct(self.spark.fleet.thresholds.engine_imbalance_warn, 0)
            title.append(
                f"  {IMBALANCED} imbalanced: engine {', '.join(off)} off an even share by over {limit}",
                style=colours["status-warn"],
            )
        self._put(
            "#engines",
            (engines, self.spark.theme),
            lambda: Group(title, engines_table(engines, colours["status-warn"])),
        )

    def _memory(self, view: NodeView) -> None:
        key = (
            view.host_memory,
            view.ledger,
            view.pressure,
            view.shm_leftovers,
            view.stale_workers,
            view.status.state is State.STALE,
            view.host_problem,
            self.spark.theme,
        )
        self._put("#memory", key, lambda: self._memory_panel(view))

    def _memory_panel(self, view: NodeView) -> Group:
        colours = self.spark.colours
        mem = view.host_memory
        title = Text.assemble(("Unified memory", "bold"))
        if mem is not None:
            title.append(f"  total {fmt_gib(mem.mem_total)}")
        parts: list[RenderableType] = [title]
        if view.status.state is State.STALE:
            parts.append(
                Text(f"{NO_DATA}  no answer from {view.name}: the last reading is not shown", style=colours["dim"])
            )
            return Group(*parts)
        if view.host_problem and mem is not None:  # the sampler lost the node: these are its last figures
            parts.append(Text(f"last good reading; now {view.host_problem}", style=colours["status-warn"]))
        if mem is None:
            parts.append(Text(f"no host state {NO_DATA} (SSH or node_exporter)", style=colours["dim"]))
        else:
            ledger = view.ledger
            patterns = self.spark.no_color  # without colour, each part has its own shade, in the legend too
            parts.append(_Fitted(lambda width: memory_bar(ledger, width, colours, patterns=patterns)))
            if ledger is not None:
                items = [
                    Text.assemble(
                        (f"{MEMORY_PATTERNS[label] if patterns else '■'} ", colours[MEMORY_VARIABLES[label]]),
                        f"{label} {fmt_gib(size)}",
                    )
                    for label, size in ledger.segments()
                ]
                parts.append(packed_lines([items], gap=2))
            figures = [
                Text(f"available {fmt_gib(mem.mem_available)}", style="bold"),
                Text(f"droppable cache {fmt_gib(mem.page_cache_droppable)}"),
            ]
            parts.append(packed_lines([figures]))
        pressure = view.pressure
        if pressure is not None and pressure.some_avg10 is not None:
            psi = [
                Text("PSI (10 s / 60 s)"),
                Text(f"some {fmt_number(pressure.some_avg10, 2)}% / {fmt_number(pressure.some_avg60, 2)}%"),
                Text(f"full {fmt_number(pressure.full_avg10, 2)}% / {fmt_number(pressure.full_avg60, 2)}%"),
            ]
            parts.append(packed_lines([psi], gap=2))
        if view.shm_leftovers:
            held = sum(e.held_bytes for e in view.shm_leftovers)
            parts.append(
                Text(
                    f"/dev/shm leftovers: {len(view.shm_leftovers)} entries, {fmt_gib(held)}",
                    style=colours["status-warn"],
                )
            )
        if view.stale_workers:
            pids = ", ".join(str(p.pid) for p in view.stale_workers)
            parts.append(Text(f"stale workers: {pids}", style=colours["status-warn"]))
        return Group(*parts)

    def _gpu(self, view: NodeView) -> None:
        gpu = view.gpu
        app = self.spark
        dim = app.colours["dim"]
        text = Text.assemble(("GPU", "bold"))
        if view.status.state is State.STALE:
            text.append(f"\n{NO_DATA}  no answer from {view.name}: the last reading is not shown", style=dim)
        elif gpu is not None and view.is_stale("gpu") and view.gpu_age_s is not None:
            # The exporter stopped answering (a node powered off): its last numbers would pass for live ones.
            age = fmt_duration(view.gpu_age_s)
            text.append(f"\n{NO_DATA}  no GPU reading for {age}: the last one is not shown", style=dim)
        elif gpu is None:
            text.append(f"\nno GPU exporter reading {NO_DATA}", style=dim)
        else:
            clock = None if gpu.sm_clock_hz is None else gpu.sm_clock_hz / 1e6
            memory = "unified with the host" if gpu.unified_memory else fmt_gib(gpu.memory_used_bytes)
            text.append(f"  {gpu.name or gpu.kind.value}")
            text.append(
                f"\n{fmt_number(gpu.temperature_c)} °C   {fmt_number(gpu.power_w, 1)} W   "
                f"util {fmt_pct(gpu.utilization, 0)}   SM {fmt_number(clock)} MHz\nmemory {memory}"
            )
            cpu = view.host_state.cpu_freq if view.host_state is not None else None
            if cpu is not None:  # the CPUs beside the GPU: a capped CPU slows tokenisation and scheduling
                text.append(f"\n{cpu.text}", style=app.colours["status-warn"] if cpu.capped else "")
            temps = app.history.series(view.name, "gpu_temp", last=60)
            power = app.history.series(view.name, "gpu_power", last=60)
            if temps and power:
                text.append(
                    f"\nlast minute: {min(temps):.0f}–{max(temps):.0f} °C, {min(power):.0f}–{max(power):.0f} W",
                    style=dim,
                )
        for line in fabric_lines(view.fabric, view.jobs):  # the link to the job's other ranks, side by side
            text.append(f"\n{line}")
        self._put("#gpu", text)

    def _services(self, view: NodeView) -> None:
        colours = self.spark.colours
        text = Text()
        text.append("Side services", style="bold")
        if not view.services:
            text.append("  none configured", style=colours["dim"])
        for service in view.services:
            text.append("\n")
            text.append_text(status_text(service.status.state, colours, label=False, no_color=self.spark.no_color))
            text.append(f" {service.name} ({service.kind})  {fmt_seconds(service.latency_s)}  {service.url}")
        self._put("#services", text)

    def _logs(self, instance: InstanceView | None) -> None:
        """The live tail: the newest lines of the node's logs, wrapped, signature lines in the critical
        colour (the same view as the full log screen, following)."""
        reader = self.tail_reader
        reader.follow.resume()  # the tail always shows the end; reading back is the log screen's
        title = Text("Log", style="bold")
        if reader.instances:
            title.append(f"  {', '.join(reader.instances)}")
        title.append("   l: full view, search, wrap", style=self.spark.colours["dim"])
        self._put("#tail-title", title)
        if reader.pull(self.spark.log_buffers(self.node)):
            self.query_one("#tail", LogView).lines_changed()

    # --- actions ----------------------------------------------------------------------------------

    def action_back(self) -> None:
        self.spark.close_node()

    def action_open_logs(self) -> None:
        self.spark.open_logs(self.node)

    def _instance(self, view: NodeView) -> InstanceView | None:
        """The instance whose engine the panels show: the one picked, else the node's first."""
        picked = next((i for i in view.instances if i.name == self.instance), None)
        return picked or (view.instances[0] if view.instances else None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``i`` is offered only on a node that runs more than one instance."""
        if action == "next_instance":  # from the config: known before the first poll
            node = next((n for n in self.spark.fleet.nodes if n.name == self.node), None)
            return node is not None and len(node.vllm) > 1
        return True

    def shown_instance(self) -> str | None:
        """The name of the instance whose engine the panels show (None: the node has none)."""
        view = self._view(self.spark.views)
        shown = self._instance(view) if view is not None else None
        return shown.name if shown is not None else None

    def action_next_instance(self) -> None:
        """``i``: the node's next instance (a llama.cpp fallback beside a vLLM, two vLLMs...)."""
        view = self._view(self.spark.views)
        if view is None or len(view.instances) < 2:
            return
        shown = self._instance(view)
        at = view.instances.index(shown) if shown is not None else -1
        self.instance = view.instances[(at + 1) % len(view.instances)].name
        self.update_views(self.spark.views)

    def action_previous_node(self) -> None:
        self.spark.step_node(self.node, -1)

    def action_next_node(self) -> None:
        self.spark.step_node(self.node, +1)
