"""Exporting a recording's derived numbers for analysis elsewhere: one row per node per tick.

The recording is replayed through the model (``FleetState`` and the ``DiagnosisEngine``, as the
dashboard runs them) and each tick's node views give the numbers: the recorded ticks when the
recorder was told of them, else one every poll interval. Unknown values are empty (CSV) or null
(JSON), never 0.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal, TextIO

from sparktui.diagnosis.catalogue import Catalogue
from sparktui.diagnosis.engine import Finding
from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.history import NODE_METRICS
from sparktui.monitor.core import WINDOW_S, Monitor
from sparktui.record.replay import Feeder
from sparktui.record.store import RecordingReader

Value = float | str | None
Metric = Callable[[NodeView, Sequence[Finding]], Value]
Format = Literal["jsonl", "csv"]


def _known(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _instances(metric: Callable[[InstanceView], float | None], combine: Callable[[list[float]], float]) -> Metric:
    def value(view: NodeView, _findings: Sequence[Finding]) -> Value:
        known = _known(metric(i) for i in view.instances)
        return combine(known) if known else None

    return value


def _node(metric: Callable[[NodeView], float | None]) -> Metric:
    return lambda view, _findings: metric(view)


def _ttft_p90(instance: InstanceView) -> float | None:
    latency = instance.rates.latency.get("ttft") if instance.rates else None
    return latency.p90 if latency is not None else None


def _acceptance(instance: InstanceView) -> float | None:
    spec = instance.rates.spec_decode if instance.rates else None
    return spec.mean_acceptance_length if spec is not None else None


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


# The names a user passes to --metrics. The node numbers are the sparklines' (model.history), so the
# export and the screen agree; the instance numbers are combined over the node's vLLM instances.
METRICS: dict[str, Metric] = {
    "status": lambda view, _findings: view.status.state.value,
    "findings": lambda _view, findings: " ".join(sorted({f.id for f in findings})),
    **{name: _node(metric) for name, metric in NODE_METRICS.items()},
    "running": _instances(lambda i: i.running, sum),
    "waiting": _instances(lambda i: i.waiting, sum),
    "ttft_p90": _instances(_ttft_p90, max),
    "acceptance_length": _instances(_acceptance, _mean),
    "mem_total": _node(lambda n: n.host_memory.mem_total if n.host_memory else None),
    "page_cache_droppable": _node(lambda n: n.host_memory.page_cache_droppable if n.host_memory else None),
}


def check_metrics(names: Sequence[str] | None) -> list[str]:
    """The metrics to export (all when None); raises ValueError naming an unknown one."""
    if not names:
        return list(METRICS)
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric {unknown[0]!r}; choose from: {', '.join(METRICS)}")
    return list(names)


def _number(value: Value) -> Value:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def export(
    path: Path | str,
    to: Format = "jsonl",
    metrics: Sequence[str] | None = None,
    out: TextIO | None = None,
    *,
    catalogue_for: Callable[[Mapping[str, float]], Catalogue],
    window_s: float = WINDOW_S,
) -> tuple[int, str | None]:
    """Write the derived numbers of the recording at ``path`` to ``out`` (default stdout).

    Each row: ``time`` (ISO 8601, local time with its offset), ``t`` (seconds since the recording
    starts), ``node``, then ``metrics`` (all of ``METRICS`` when None). Returns (rows written, one line
    on the recording's damage and the records it skipped, or None). Raises ``RecordingError`` or
    ValueError with one line; what writing ``out`` raises goes through.
    """
    if to not in ("jsonl", "csv"):
        raise ValueError(f"unknown export format {to!r}; choose jsonl or csv")
    names = check_metrics(metrics)
    stream = out if out is not None else sys.stdout
    reader = RecordingReader(path)
    columns = ["time", "t", "node", *names]
    writer = csv.writer(stream, lineterminator="\n") if to == "csv" else None
    if writer is not None:
        writer.writerow(columns)
    rows = 0

    monitor = Monitor(reader.fleet, catalogue_for(reader.fleet.diagnosis), window_s=window_s, keep_history=False)

    def on_tick(now: float) -> None:
        nonlocal rows
        stamp = datetime.fromtimestamp(reader.wall_at(now)).astimezone().isoformat(timespec="milliseconds")
        offset = round(now - reader.start_t, 3)
        for view in monitor.views:
            findings = monitor.findings.get(view.name, ())
            values = [_number(METRICS[name](view, findings)) for name in names]
            if writer is not None:
                writer.writerow([stamp, offset, view.name, *("" if v is None else v for v in values)])
            else:
                row = dict(zip(columns, [stamp, offset, view.name, *values], strict=True))
                stream.write(json.dumps(row, separators=(",", ":")) + "\n")
            rows += 1

    try:
        feeder = Feeder(monitor, reader.gap_s, on_tick)
        for record in reader.records():
            feeder.feed(record)
    finally:
        reader.close()
    problems = [p for p in (reader.problem, reader.skipped_note) if p is not None]
    return rows, "; ".join(problems) if problems else None


def open_output(path: Path) -> TextIO:
    """The export's output file, for the owner only (0600, also when it existed): it holds what the
    fleet did, like the recording it comes from."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "w", encoding="utf-8", newline="")
