"""The node screen: one node in depth — throughput and KV history, latency, the TTFT histogram,
speculative decoding per draft position, the unified-memory ledger, the GPU, side services, the
service manager's state, and the live log."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, RichLog, Sparkline, Static

from sparktui.model.canary import canary_text
from sparktui.model.derive import VllmRates
from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.logbuffer import LogLine
from sparktui.model.status import State
from sparktui.model.units import (
    NO_DATA,
    engine_lines,
    fmt_gib,
    fmt_number,
    fmt_pct,
    fmt_rate,
    fmt_seconds,
    fmt_tokens,
    fmt_waiting,
)
from sparktui.ui.base import SparkScreen
from sparktui.ui.keys import NODE_BINDINGS
from sparktui.ui.render import finding_text, level_bar, memory_bar, status_text
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


def _panel_title(text: str) -> Text:
    return Text(text, style="bold")


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


def _latency_table(rates: VllmRates | None) -> RenderableType:
    rows: list[list[Text | str]] = [["", "p50", "p90", "p99", "mean", "n"]]
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
    return _text_table(rows, (False, True, True, True, True, True), header=True)


def _ttft_histogram(rates: VllmRates | None, width: int, colour: str, dim: str) -> RenderableType:
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
    for label, count in counts:
        cells = round(count / peak * width)
        lines.append(f"{label:>9} ")
        lines.append("█" * cells, style=colour)
        lines.append(f" {count:.0f}\n", style=dim)
    return lines


def _spec_decode(rates: VllmRates | None, colours: dict[str, str], trend: Sequence[float]) -> RenderableType:
    spec = rates.spec_decode if rates else None
    if spec is None:
        return Text("no speculative decoding on this instance", style=colours["dim"])
    head = Text()
    head.append(
        f"acceptance {fmt_pct(spec.acceptance_rate)}   mean length {fmt_number(spec.mean_acceptance_length, 2)}"
    )
    head.append(
        f"   drafts {fmt_rate(spec.draft_tokens_per_s, ' tok/s')}"
        f"   accepted {fmt_rate(spec.accepted_tokens_per_s, ' tok/s')}"
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


class NodeScreen(SparkScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = NODE_BINDINGS
    DEFAULT_CSS = """
    NodeScreen { layout: vertical; }
    #title { height: 1; padding: 0 1; background: $panel; }
    #reasons { height: auto; max-height: 6; padding: 0 1; }
    #body { height: 1fr; }
    .row { height: auto; }
    .panel { border: round $panel; padding: 0 1; height: auto; width: 1fr; }
    .panel Sparkline { height: 3; margin: 0 0 1 0; }
    #log { height: 16; border: round $panel; display: none; }
    #log.shown { display: block; }
    """

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node
        self._log_seq: dict[str, int] = {}  # instance -> next log line to show
        self._shown: dict[str, object] = {}  # panel -> the key of what it shows (see _put)

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        yield Static(id="reasons")
        with VerticalScroll(id="body"):
            yield Static(classes="panel", id="findings")
            with Horizontal(classes="row"):
                with VerticalScroll(classes="panel", id="throughput-panel"):
                    yield Static(id="throughput")
                    yield Sparkline((), id="gen-spark")
                    yield Static(id="kv")
                    yield Sparkline((), id="kv-spark")
                yield Static(classes="panel", id="requests")
            with Horizontal(classes="row"):
                yield Static(classes="panel", id="latency")
                yield Static(classes="panel", id="ttft-hist")
            yield Static(classes="panel", id="spec")
            with Horizontal(classes="row"):
                yield Static(classes="panel", id="memory")
                yield Static(classes="panel", id="gpu")
            yield Static(classes="panel", id="services")
            yield RichLog(id="log", max_lines=2000, markup=False, highlight=False, wrap=False)
        yield Footer()

    def on_mount(self) -> None:
        self._ready = True
        self.update_views(self.spark.views)

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
        title.append_text(status_text(view.status.state, colours))
        title.append(f"    window {app.window_s:.0f} s   ← → other nodes, esc fleet, l logs")
        self._put("#title", title)
        self._put("#reasons", "\n".join(view.status.reasons))
        findings = app.findings.get(view.name, ())
        panel = self.query_one("#findings", Static)
        panel.display = bool(findings)
        if findings:
            body = Text()
            body.append(f"Findings ({len(findings)})", style="bold")
            for finding in findings:
                body.append("\n")
                body.append_text(finding_text(finding, colours, keymap=app.fleet.keymap))
            self._put("#findings", body)
        instance = view.instances[0] if view.instances else None
        self._throughput(view, instance)
        self._requests(instance)
        rates = instance.rates if instance else None
        theme = app.theme
        self._put("#latency", (rates, theme), lambda: Group(_panel_title("Latency (window)"), _latency_table(rates)))
        self._put(
            "#ttft-hist",
            (rates, theme),
            lambda: Group(
                _panel_title("TTFT histogram (window)"),
                _ttft_histogram(rates, 24, colours["status-loading"], colours["dim"]),
            ),
        )
        trend = app.history.series(view.name, instance.name, "acceptance_length") if instance else ()
        self._put(
            "#spec",
            (rates, f"{min(trend):.2f} {max(trend):.2f}" if trend else "", theme),  # the trend shows as its range
            lambda: Group(_panel_title("Speculative decoding (window)"), _spec_decode(rates, colours, trend)),
        )
        self._memory(view)
        self._gpu(view)
        self._services(view)
        self._logs()

    def _put(self, selector: str, key: object, build: Callable[[], RenderableType] | None = None) -> None:
        """Update a panel only when what it shows changed: ``key`` is the content itself (text) or what
        it is built from (``build`` then makes it). An update costs a render and a layout pass, and the
        screen is drawn at each tick and again as its node's observation arrives."""
        if selector in self._shown and self._shown[selector] == key:
            return
        self._shown[selector] = key
        content = build() if build is not None else key
        self.query_one(selector, Static).update(content)  # type: ignore[arg-type]

    def _throughput(self, view: NodeView, instance: InstanceView | None) -> None:
        app = self.spark
        rates = instance.rates if instance else None
        gen = rates.generation_tokens_per_s if rates else None
        prompt = rates.prompt_tokens_per_s if rates else None
        text = Text()
        text.append("Throughput  ", style="bold")
        text.append(f"generation {fmt_rate(gen, ' tok/s')}   prompt {fmt_rate(prompt, ' tok/s')}")
        self._put("#throughput", text)
        name = instance.name if instance else ""
        self.query_one("#gen-spark", Sparkline).data = app.history.series(view.name, name, "generation_tps", last=120)
        kv = Text()
        kv.append("KV cache  ", style="bold")
        if instance is not None:
            kv.append(f"{fmt_pct(instance.kv_usage)} of {fmt_tokens(instance.kv_capacity_tokens)} tokens")
        self._put("#kv", kv)
        self.query_one("#kv-spark", Sparkline).data = app.history.series(view.name, name, "kv_usage", last=120)

    def _requests(self, instance: InstanceView | None) -> None:
        text = Text()
        text.append("Requests\n", style="bold")
        if instance is None:
            self._put("#requests", text)
            return
        rates = instance.rates
        if instance.asleep and instance.sleep is not None:
            text.append(f"engine {instance.sleep.description}\n", style=self.spark.colours["status-loading"])
        waiting = fmt_waiting(instance.waiting, instance.waiting_for_capacity, instance.waiting_deferred)
        text.append(f"running {fmt_number(instance.running)}   waiting {waiting}\n")
        if rates is not None:
            text.append(f"finished {fmt_rate(rates.requests_finished_per_s, ' req/s')}   ")
            text.append(f"preemptions {fmt_number(rates.preemptions)} ({fmt_rate(rates.preemptions_per_s, '/s')})\n")
            text.append(f"prefix-cache hit {fmt_pct(rates.prefix_cache_hit_rate)}\n")
            for line in engine_lines(rates):
                text.append(line + "\n")
            reasons = ", ".join(f"{k} {v:.0f}" for k, v in sorted(rates.finished_by_reason.items()) if v)
            text.append(f"finish reasons: {reasons or NO_DATA}\n")
        text.append(f"vLLM {instance.version or NO_DATA}   max_model_len {fmt_number(instance.max_model_len)}\n")
        if instance.service is not None:
            service = instance.service
            restarts = f", {service.restarts} restarts" if service.restarts else ""
            text.append(f"{service.manager} {service.name}: {service.state}{restarts}\n")
        if instance.canary is not None and instance.status.state in (State.UP, State.DEGRADED):  # else none is sent
            colours = self.spark.colours
            style = colours["status-crit"] if instance.canary.wedged else ""
            text.append(canary_text(instance.canary) + "\n", style=style)
        if instance.launch is not None:
            text.append(f"launch readiness: {instance.launch.reason}\n")
        self._put("#requests", text)

    def _memory(self, view: NodeView) -> None:
        key = (view.host_memory, view.ledger, view.pressure, view.shm_leftovers, view.stale_workers, self.spark.theme)
        self._put("#memory", key, lambda: self._memory_panel(view))

    def _memory_panel(self, view: NodeView) -> Group:
        colours = self.spark.colours
        parts: list[RenderableType] = [_panel_title("Unified memory")]
        mem = view.host_memory
        if mem is None:
            parts.append(Text(f"no host state {NO_DATA} (SSH or node_exporter)", style=colours["dim"]))
        else:
            parts.append(memory_bar(view.ledger, 40, colours))
            if view.ledger is not None:
                legend = Text()
                for label, size in view.ledger.segments():
                    legend.append("■ ", style=colours[MEMORY_VARIABLES[label]])
                    legend.append(f"{label} {fmt_gib(size)}  ")
                parts.append(legend)
            parts.append(
                Text(
                    f"total {fmt_gib(mem.mem_total)}   available {fmt_gib(mem.mem_available)}   "
                    f"free {fmt_gib(mem.mem_free)}   droppable cache {fmt_gib(mem.page_cache_droppable)}"
                )
            )
        pressure = view.pressure
        if pressure is not None and pressure.some_avg10 is not None:
            parts.append(
                Text(
                    f"PSI some {fmt_number(pressure.some_avg10, 2)}% / {fmt_number(pressure.some_avg60, 2)}%   "
                    f"full {fmt_number(pressure.full_avg10, 2)}% / {fmt_number(pressure.full_avg60, 2)}% (10 s / 60 s)"
                )
            )
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
        parts: list[RenderableType] = [_panel_title("GPU")]
        if gpu is None:
            parts.append(Text(f"no GPU exporter reading {NO_DATA}", style=app.colours["dim"]))
        else:
            clock = None if gpu.sm_clock_hz is None else gpu.sm_clock_hz / 1e6
            parts.append(
                Text(
                    f"{gpu.name or gpu.kind.value}\n"
                    f"{fmt_number(gpu.temperature_c)} °C   {fmt_number(gpu.power_w, 1)} W   "
                    f"util {fmt_pct(gpu.utilization, 0)}   SM {fmt_number(clock)} MHz\n"
                    f"memory: {'unified with the host' if gpu.unified_memory else fmt_gib(gpu.memory_used_bytes)}"
                )
            )
            temps = app.history.series(view.name, "gpu_temp", last=60)
            power = app.history.series(view.name, "gpu_power", last=60)
            if temps:
                parts.append(
                    Text(
                        f"temp {min(temps):.0f}–{max(temps):.0f} °C   power {min(power):.0f}–{max(power):.0f} W "
                        "(last minute)",
                        style=app.colours["dim"],
                    )
                )
        self._put("#gpu", Text("\n").join(p for p in parts if isinstance(p, Text)))

    def _services(self, view: NodeView) -> None:
        colours = self.spark.colours
        text = Text()
        text.append("Side services\n", style="bold")
        if not view.services:
            text.append("none configured", style=colours["dim"])
        for service in view.services:
            text.append_text(status_text(service.status.state, colours, label=False))
            text.append(f" {service.name} ({service.kind})  {fmt_seconds(service.latency_s)}  {service.url}\n")
        self._put("#services", text)

    def _logs(self) -> None:
        log = self.query_one("#log", RichLog)
        if not log.has_class("shown"):
            return
        buffers = self.spark.log_buffers(self.node)
        if not buffers:
            if not self._log_seq:
                log.write("no log: it is streamed over SSH from each instance's unit or container")
                self._log_seq["-"] = 0
            return
        batch: list[tuple[str, LogLine]] = []
        for instance, buffer in buffers.items():
            lines = buffer.since(self._log_seq.get(instance, 0))
            if lines:
                self._log_seq[instance] = lines[-1].seq + 1
                batch.extend((instance, line) for line in lines)
        batch.sort(key=lambda item: (item[1].timestamp.timestamp() if item[1].timestamp else 0.0, item[1].seq))
        prefix = len(buffers) > 1
        signatures = self.spark.signature_patterns
        colours = self.spark.colours
        for instance, line in batch:
            text = (f"[{instance}] " if prefix else "") + (f"{line.timestamp:%H:%M:%S} " if line.timestamp else "")
            text += line.text
            # A line that matches a known failure signature stands out (the finding explains it).
            if any(p.search(line.text) for p in signatures):
                log.write(Text(text, style=f"bold {colours['status-crit']}"))
            elif line.gap:
                log.write(Text(text, style=colours["dim"]))
            else:
                log.write(Text(text))

    # --- actions ----------------------------------------------------------------------------------

    def action_back(self) -> None:
        self.spark.close_node()

    def action_toggle_logs(self) -> None:
        log = self.query_one("#log", RichLog)
        log.toggle_class("shown")
        self._logs()
        if log.has_class("shown"):
            log.scroll_end(animate=False)

    def action_previous_node(self) -> None:
        self.spark.step_node(self.node, -1)

    def action_next_node(self) -> None:
        self.spark.step_node(self.node, +1)
