"""Exporting a recording's derived numbers for analysis elsewhere: one row per node per tick.

The recording is replayed through the model (``FleetState`` and the ``DiagnosisEngine``, as the
dashboard runs them) and each tick's node views give the numbers: the recorded ticks when the
recorder was told of them, else one every poll interval. Unknown values are empty (CSV) or null
(JSON), never 0.

The output file is written beside its place under a temporary name and renamed over it at the end
(``output_file``): a failure leaves what was there, and the recording itself is never an output.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal, TextIO

from sparktui.diagnosis.catalogue import Catalogue
from sparktui.diagnosis.engine import Finding
from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.history import NODE_METRICS
from sparktui.monitor.core import WINDOW_S, Monitor
from sparktui.record.replay import replay_into
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
        replay_into(reader, monitor, on_tick)  # the same feed as every replay
    finally:
        reader.close()
    problems = [p for p in (reader.problem, reader.skipped_note) if p is not None]
    return rows, "; ".join(problems) if problems else None


class OutputError(Exception):
    """The export's output cannot be written; the message is one line that names it."""


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _check_not_the_recording(path: Path, found: os.stat_result, recording: Path) -> None:
    """Refuse an output that is the recording (through a symlink or a hard link too) or its WAL."""
    source = Path(os.path.realpath(recording))
    for tail in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            if _same_file(found, source.with_name(source.name + tail).stat()):
                what = "the recording" if path == recording else f"the recording {recording}"
                raise OutputError(f"{path} is {what}{' (its journal)' if tail else ''}: give another output file")


@contextlib.contextmanager
def output_file(path: Path, recording: Path) -> Iterator[TextIO]:
    """The export's output, for the owner only (0600): it holds what the fleet did, like the recording.

    A regular file (or a new one) is written under a temporary name in its folder, synced, and renamed
    over it when the body is done, so a failure leaves what was there and never half a file; a symlink
    keeps pointing at it. A device or a pipe (``/dev/stdout``) is written as it is. An output that is
    the recording, a folder, or cannot be written raises ``OutputError`` (one line).
    """
    try:
        found: os.stat_result | None = path.stat()
    except FileNotFoundError:
        found = None
    except OSError as exc:
        raise OutputError(f"cannot write {path} ({exc.strerror})") from None
    if found is not None:
        _check_not_the_recording(path, found, recording)
        if stat.S_ISDIR(found.st_mode):
            raise OutputError(f"cannot write {path}: it is a folder; give a file name")
        if not stat.S_ISREG(found.st_mode):
            with _writing(path), path.open("w", encoding="utf-8", newline="") as out:
                yield out
            return
    target = Path(os.path.realpath(path))
    with _writing(path):
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
        temporary = Path(name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                yield out
                out.flush()
                os.fsync(out.fileno())
            temporary.replace(target)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """An error writing ``path`` as ``OutputError``, one line."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"cannot write {path} ({exc.strerror or exc})") from None
