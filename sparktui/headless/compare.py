"""``sparktui snapshot --compare``: sparktui's direct numbers beside Prometheus's own for the same nodes
(docs/prometheus.md). The PromQL of each number is its engine's (``Engine.numbers``, through
``sparktui.sources.promql``); here are the two sides (the instance views' numbers, Prometheus's
answers) and the side-by-side text.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from sparktui.engines.base import PromNumber
from sparktui.model.numbers import label_int
from sparktui.sources.promql import compared_engines, engine_numbers, label_matchers, render

if TYPE_CHECKING:
    from sparktui.model.fleet import InstanceView
    from sparktui.model.specs import FleetSpec, PrometheusSpec, PrometheusTarget
    from sparktui.sources.prometheus import PrometheusClient

# --- sparktui's side ------------------------------------------------------------------------------------

Values = dict[str, float | None]


def view_numbers(view: InstanceView) -> Values:
    """The numbers of one instance view, keyed as its engine's ``Engine.numbers`` (per position as
    ``per_position:i``; what the engine reports itself as gauges, SGLang's ``spec_accept_length``,
    under its own key)."""
    out: Values = {"kv_usage": view.kv_usage, "running": view.running, "waiting": view.waiting}
    out.update(view.reported)
    if view.waiting_for_capacity is not None:
        out["waiting_for_capacity"] = view.waiting_for_capacity
    rates = view.rates
    if rates is None:
        return out
    out.update(
        generation_tokens_per_s=rates.generation_tokens_per_s,
        prompt_tokens_per_s=rates.prompt_tokens_per_s,
        prompt_tokens_computed_per_s=rates.prompt_tokens_computed_per_s,
        requests_finished_per_s=rates.requests_finished_per_s,
        prefix_cache_hit_rate=rates.prefix_cache_hit_rate,
        preemptions_per_s=rates.preemptions_per_s,
    )
    # vLLM 0.32's numbers: only where the server publishes them (Prometheus then has no series either)
    if rates.admission_rejections:
        out["admission_rejections_per_s"] = rates.admission_rejections_per_s
    if rates.prompt_sources is not None:
        out["prompt_cache_hit_share"] = rates.prompt_sources.share("local_cache_hit")
    for key, summary in (
        ("tokens_per_step_mean", rates.tokens_per_step),
        ("prefill_computed_mean", rates.prefill_computed_per_request),
    ):
        if summary is not None:
            out[key] = summary.mean
    spec = rates.spec_decode
    if spec is not None:
        out["acceptance_rate"] = spec.acceptance_rate
        out["mean_acceptance_length"] = spec.mean_acceptance_length
        for i, (absolute, conditional) in enumerate(zip(spec.per_position, spec.conditional, strict=True)):
            out[f"per_position:{i}"] = absolute
            out[f"conditional:{i}"] = conditional
    compared = {number.key for number in engine_numbers(view.engine_kind)}
    for key, summary in rates.latency.items():
        stats = {"p50": summary.p50, "p90": summary.p90, "p99": summary.p99, "mean": summary.mean}
        out.update({f"{key}_{stat}": value for stat, value in stats.items() if f"{key}_{stat}" in compared})
    return out


# --- Prometheus's side ----------------------------------------------------------------------------------


def _value(raw: str) -> float | None:
    value = float(raw)  # a number: the reader checked every value (promapi)
    return None if math.isnan(value) or math.isinf(value) else value


async def promql_numbers(
    prometheus: PrometheusClient,
    targets: Sequence[PrometheusTarget],
    *,
    at: float,
    window_s: float,
    selector: str | None = None,
) -> dict[PrometheusTarget, Values]:
    """Every number of every engine target, as Prometheus computes it at ``at`` over ``window_s``: per
    engine, one query per number of its ``Engine.numbers``, all its targets at once, sent together. Per
    model, the first model name (as the dashboard shows); per position also the conditional acceptance
    P[i] / P[i-1]. A target whose engine has no numbers is not asked."""
    out: dict[PrometheusTarget, Values] = {}
    servers = [t for t in targets if t.kind == "vllm"]
    for kind in sorted({t.engine for t in servers}):
        numbers = engine_numbers(kind)
        if numbers:
            of_kind = [t for t in servers if t.engine == kind]
            out.update(await _numbers(prometheus, of_kind, numbers, at=at, window_s=window_s, selector=selector))
    return out


async def _numbers(
    prometheus: PrometheusClient,
    targets: Sequence[PrometheusTarget],
    numbers: Sequence[PromNumber],
    *,
    at: float,
    window_s: float,
    selector: str | None,
) -> dict[PrometheusTarget, Values]:
    """``promql_numbers`` for the targets of one engine."""
    by = sorted({name for t in targets for name, _ in t.labels})
    matchers = label_matchers(targets, selector)
    index = {tuple(dict(t.labels).get(name) for name in by): t for t in targets}
    answers = await asyncio.gather(
        *(prometheus.query(render(n, matchers, window_s, [*by, "model_name"]), at=at) for n in numbers)
    )
    # target -> model -> values
    found: dict[PrometheusTarget, dict[str, Values]] = {}
    for number, answer in zip(numbers, answers, strict=True):
        for series in answer:
            labels = series.labels
            target = index.get(tuple(labels.get(name) for name in by))
            if target is None or not series.samples:
                continue
            key = number.key
            if key == "per_position":
                draft = labels.get("position", "")
                if label_int(draft) is None:
                    continue  # not a draft position ("²" is a digit to isdigit(), not to int())
                key = f"per_position:{draft}"
            found.setdefault(target, {}).setdefault(labels.get("model_name", ""), {})[key] = _value(
                series.samples[-1][1]
            )
    out: dict[PrometheusTarget, Values] = {}
    for target, models in found.items():
        values = models[min(models)]
        positions = sorted((int(k.split(":")[1]), v) for k, v in values.items() if k.startswith("per_position:"))
        for i, (position, absolute) in enumerate(positions):
            before = 1.0 if i == 0 else positions[i - 1][1]
            conditional = None if absolute is None or not before else absolute / before
            values[f"conditional:{position}"] = conditional
        out[target] = values
    return out


# --- snapshot --compare ---------------------------------------------------------------------------------


def _shown(number: PromNumber | None, value: float | None) -> str:
    if value is None:
        return "–"
    if number is not None and number.percent:
        return f"{value * 100:.2f} %"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.4g}"


def _difference(number: PromNumber, direct: float | None, prometheus: float | None) -> str:
    """Prometheus's side against the direct one: a share in percentage points, any other number
    relative to the direct value (in its own unit when the direct value is 0)."""
    if direct is None or prometheus is None:
        return ""
    if direct == prometheus:
        return "same"
    if number.percent:
        return f"{(prometheus - direct) * 100:+.2f} pp"
    if direct == 0:
        return f"{prometheus - direct:+.3g}{number.unit}"
    return f"{(prometheus - direct) / abs(direct) * 100:+.1f} %"


def _rows(numbers: Sequence[PromNumber], direct: Values, prometheus: Values) -> list[tuple[str, str, str, str]]:
    by_key = {n.key: n for n in numbers}
    keys: list[str] = []
    for number in numbers:
        if number.key == "per_position":
            positions = sorted({int(k.split(":")[1]) for k in (*direct, *prometheus) if k.startswith("per_position:")})
            for i in positions:
                keys += [f"per_position:{i}", f"conditional:{i}"]
        else:
            keys.append(number.key)
    rows = []
    for key in keys:
        base, _, position = key.partition(":")
        number = by_key.get(base) or by_key["per_position"]
        label = (
            number.label
            if not position
            else (f"acceptance at position {position}" if base == "per_position" else f"  conditional at {position}")
        )
        left, right = direct.get(key), prometheus.get(key)
        if left is None and right is None:
            continue
        unit = number.unit if not number.percent else ""
        rows.append(
            (
                label,
                _shown(number, left) + unit * (left is not None),
                _shown(number, right) + unit * (right is not None),
                _difference(number, left, right),
            )
        )
    return rows


def _engines_compared() -> str:
    """The engines whose numbers are compared, for people: "vLLM, llama.cpp, SGLang, TensorRT-LLM or NIM"."""
    labels = compared_engines()
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} or {labels[-1]}"


def render_compare(
    fleet: FleetSpec,
    views: Mapping[tuple[str, str], InstanceView],
    prometheus: Mapping[PrometheusTarget, Values],
    window_s: float,
) -> str:
    """The comparison as text: per engine instance, each number direct and from Prometheus (an engine
    with no PromQL of its numbers, ``Engine.numbers``, is named as such)."""
    assert fleet.prometheus is not None
    lines = [
        f"sparktui direct (polled every {fleet.poll_interval_s:g} s) beside Prometheus at {fleet.prometheus.url}, "
        f"over the same {window_s:.1f} s window",
        "Prometheus scrapes at its own instants: rates may differ by the traffic of one scrape interval at each "
        "end of the window, quantiles by the requests that finished in between.",
    ]
    targets = {(t.node, t.endpoint): t for t in fleet.prometheus.targets(fleet.nodes) if t.kind == "vllm"}
    for (node, instance), view in views.items():
        target = targets.get((node, instance))
        if target is None:
            continue
        lines += ["", f"{node}/{instance}  {target.shown()}  direct: {view.status.state.value}"]
        numbers = engine_numbers(target.engine)
        if not numbers:
            lines.append(f"  no PromQL for {view.engine}'s numbers: only {_engines_compared()}'s are compared")
            continue
        theirs = prometheus.get(target)
        if theirs is None:
            lines.append(f"  Prometheus has no {view.engine} series for these labels")
            continue
        rows = _rows(numbers, view_numbers(view), theirs)
        width = max((len(r[0]) for r in rows), default=10)
        lines.append(f"  {'number':{width}}  {'direct':>14}  {'Prometheus':>14}  difference")
        lines += [f"  {a:{width}}  {b:>14}  {c:>14}  {d}" for a, b, c, d in rows]
    return "\n".join(lines) + "\n"


async def compare(
    fleet: FleetSpec,
    *,
    window_s: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
) -> str:
    """Poll the fleet directly for ``window_s`` (every ``poll_interval_s``), then ask Prometheus the same
    numbers over the same stretch of time; return the side-by-side text. Raises ``PrometheusError``."""
    from sparktui.config import catalogue_for
    from sparktui.monitor.core import Monitor
    from sparktui.sources.http import make_client, make_poll_client, origin_of
    from sparktui.sources.poller import FleetPoller, fleet_origins
    from sparktui.sources.prometheus import PrometheusClient, PrometheusError

    spec: PrometheusSpec | None = fleet.prometheus
    if spec is None:
        raise PrometheusError("snapshot --compare needs a [prometheus] table in the config (docs/prometheus.md)")
    monitor = Monitor.once(fleet, catalogue_for(fleet.diagnosis))
    first_wall: float | None = None
    async with make_poll_client(fleet_origins(fleet), ca_file=fleet.ca_file) as client:
        poller = FleetPoller(fleet, client, clock=clock)
        started = clock()
        while True:
            for observation in await poller.poll_all():
                monitor.observation(observation)
            first_wall = first_wall if first_wall is not None else wall()
            if clock() - started >= window_s:
                break
            await asyncio.sleep(fleet.poll_interval_s)
    end_wall = wall()
    monitor.tick(clock())
    views = {(node.name, instance.name): instance for node in monitor.views for instance in node.instances}
    async with make_client([origin_of(spec.url)], ca_file=fleet.ca_file) as prom_client:
        prometheus = PrometheusClient(spec, prom_client, spec.timeout_s or max(fleet.timeout_s, 10.0))
        theirs = await promql_numbers(
            prometheus, spec.targets(fleet.nodes), at=end_wall, window_s=end_wall - first_wall, selector=spec.selector
        )
    return render_compare(fleet, views, theirs, end_wall - first_wall)


def main(fleet: FleetSpec, window_s: float = 30.0, out: TextIO | None = None) -> int:
    """``sparktui snapshot --compare``: 0 when printed, 1 when Prometheus could not be asked."""
    from sparktui.sources.prometheus import PrometheusError

    out = out or sys.stdout
    try:
        out.write(asyncio.run(compare(fleet, window_s=max(1.0, window_s))))
    except PrometheusError as exc:
        print(f"sparktui snapshot --compare: {exc}", file=sys.stderr)
        return 1
    return 0
