"""Host memory on a unified-memory Spark: the ledger, memory pressure, and launch readiness.

On GB10 the GPU allocates from host RAM, so "GPU memory" is host memory
(``../shared/reference/exporters/linux_memory.md``, ``vllm_free_memory.md``). The sources are
``/proc/meminfo`` and ``/proc/pressure/memory`` read over SSH (or psutil locally), or a
node_exporter / dgx-spark-prometheus scrape. Everything here is bytes and plain numbers; a field a
source lacks is ``None``, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sparktui.model.numbers import is_digits
from sparktui.model.promtext import Exposition
from sparktui.model.units import fmt_gib

KIB = 1024
GIB = 1024**3

# node_exporter names each /proc/meminfo key node_memory_<Key>_bytes.
NODE_MEMORY = "node_memory_{key}_bytes"
NODE_PSI_SOME_TOTAL = "node_pressure_memory_waiting_seconds_total"
NODE_PSI_FULL_TOTAL = "node_pressure_memory_stalled_seconds_total"
# ateska/dgx-spark-prometheus: MemTotal, and MemTotal − MemFree − Buffers − Cached.
DGX_SPARK_MEM_TOTAL = "memory_total_bytes"
DGX_SPARK_MEM_USED = "memory_used_bytes"


@dataclass(frozen=True, slots=True)
class HostMemory:
    """The /proc/meminfo fields the dashboard uses, in bytes; None where the source lacks one.

    ``available_estimated`` is True when ``mem_available`` is not the kernel's MemAvailable but an
    estimate (dgx-spark-prometheus gives only total and used; see ``host_memory_from_exposition``).
    """

    mem_total: float | None = None
    mem_available: float | None = None
    mem_free: float | None = None
    buffers: float | None = None
    cached: float | None = None
    shmem: float | None = None
    dirty: float | None = None
    writeback: float | None = None
    sreclaimable: float | None = None
    available_estimated: bool = False

    @property
    def used(self) -> float | None:
        """MemTotal − MemAvailable: what nvtop and DGX Dashboard show as used on GB10."""
        if self.mem_total is None or self.mem_available is None:
            return None
        return self.mem_total - self.mem_available

    @property
    def page_cache_droppable(self) -> float | None:
        """Cached − Shmem: the page cache ``drop_caches`` can free (tmpfs and /dev/shm are not freed)."""
        if self.cached is None or self.shmem is None:
            return None
        return max(0.0, self.cached - self.shmem)

    @property
    def cited_figures(self) -> tuple[str, ...]:
        """The memory figures as a memory finding's evidence cites them and the kiosk's node page shows
        them: MemAvailable of the total, the page cache drop_caches can free, Shmem (written here once,
        so the two say the same numbers the same way); () without MemAvailable."""
        if self.mem_available is None:
            return ()
        parts = [f"MemAvailable {fmt_gib(self.mem_available)}"]
        if self.mem_total:
            parts[0] += f" of {fmt_gib(self.mem_total)}"
        droppable = self.page_cache_droppable
        if droppable is not None:
            parts.append(f"page cache drop_caches can free (Cached − Shmem) {fmt_gib(droppable)}")
        if self.shmem is not None:
            parts.append(f"Shmem {fmt_gib(self.shmem)}")
        return tuple(parts)

    @property
    def available_fraction(self) -> float | None:
        if self.mem_total is None or self.mem_available is None or self.mem_total <= 0:
            return None
        return self.mem_available / self.mem_total


def _ledger(value: Callable[[str], float | None]) -> HostMemory:
    """A HostMemory from a lookup of /proc/meminfo keys to bytes."""
    return HostMemory(
        mem_total=value("MemTotal"),
        mem_available=value("MemAvailable"),
        mem_free=value("MemFree"),
        buffers=value("Buffers"),
        cached=value("Cached"),
        shmem=value("Shmem"),
        dirty=value("Dirty"),
        writeback=value("Writeback"),
        sreclaimable=value("SReclaimable"),
    )


@dataclass(frozen=True, slots=True)
class MemoryPressure:
    """Memory PSI: averages in percent (0..100), totals in cumulative seconds."""

    some_avg10: float | None = None
    some_avg60: float | None = None
    full_avg10: float | None = None
    full_avg60: float | None = None
    some_total_s: float | None = None
    full_total_s: float | None = None


def _snippet(line: str) -> str:
    return repr(line if len(line) <= 60 else line[:57] + "...")


def parse_meminfo(text: str) -> HostMemory:
    """Parse /proc/meminfo (``Key:   value kB`` lines). Raises ValueError naming the bad line."""
    values: dict[str, float] = {}
    seen_any = False
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        seen_any = True
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if (
            not sep
            or not key
            or key != key.strip()
            or len(parts) not in (1, 2)
            or (len(parts) == 2 and parts[1] != "kB")
            or not is_digits(parts[0])
        ):
            raise ValueError(f"/proc/meminfo line {line_no} is not 'Key: value [kB]': {_snippet(line)}")
        values[key] = float(int(parts[0]) * KIB if len(parts) == 2 else int(parts[0]))
    if not seen_any:
        raise ValueError("/proc/meminfo is empty")
    if "MemTotal" not in values:
        raise ValueError("/proc/meminfo has no MemTotal line")
    return _ledger(values.get)


_PSI_SHAPE = "'some|full avg10=… avg60=… avg300=… total=…'"


def _psi_line(line: str) -> tuple[str, dict[str, float]] | None:
    """``some avg10=0.00 avg60=0.00 avg300=0.00 total=0`` -> ("some", {...}); None if malformed."""
    kind, *pairs = line.split()
    fields: dict[str, float] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        try:
            fields[name] = float(value)
        except ValueError:
            return None
        if not sep or math.isnan(fields[name]):
            return None
    if kind not in ("some", "full") or not {"avg10", "avg60", "total"} <= fields.keys():
        return None
    return kind, fields


def parse_pressure(text: str) -> MemoryPressure:
    """Parse /proc/pressure/memory. Raises ValueError naming the bad line."""
    lines: dict[str, dict[str, float]] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parsed = _psi_line(line)
        if parsed is None:
            raise ValueError(f"/proc/pressure/memory line {line_no} is not {_PSI_SHAPE}: {_snippet(line)}")
        lines[parsed[0]] = parsed[1]
    if "some" not in lines:
        raise ValueError("/proc/pressure/memory has no 'some' line")
    some, full = lines["some"], lines.get("full", {})
    return MemoryPressure(
        some_avg10=some["avg10"],
        some_avg60=some["avg60"],
        full_avg10=full.get("avg10"),
        full_avg60=full.get("avg60"),
        some_total_s=some["total"] / 1e6,  # µs
        full_total_s=full["total"] / 1e6 if "total" in full else None,
    )


def _gauge(expo: Exposition, name: str) -> float | None:
    value = expo.first_value(name)
    return None if value is None or math.isnan(value) else value


def host_memory_from_exposition(expo: Exposition) -> HostMemory | None:
    """Host memory from a node_exporter or dgx-spark-prometheus scrape; None if it has neither.

    dgx-spark-prometheus exports only ``memory_total_bytes`` and ``memory_used_bytes`` =
    MemTotal − MemFree − Buffers − Cached. The result then has ``mem_total`` and an *estimated*
    ``mem_available`` = total − used = MemFree + Buffers + Cached, so ``used`` is the exporter's own
    number. Caveat: that counts Shmem (/dev/shm leftovers) and dirty pages as free and ignores
    SReclaimable, so it is not MemAvailable; ``available_estimated`` is set and
    ``launch_readiness`` refuses to judge from it.
    """
    if _gauge(expo, NODE_MEMORY.format(key="MemTotal")) is not None:
        return _ledger(lambda key: _gauge(expo, NODE_MEMORY.format(key=key)))
    total = _gauge(expo, DGX_SPARK_MEM_TOTAL)
    if total is None:
        return None
    used = _gauge(expo, DGX_SPARK_MEM_USED)
    return HostMemory(
        mem_total=total,
        mem_available=None if used is None else total - used,
        available_estimated=used is not None,
    )


def pressure_from_exposition(expo: Exposition) -> MemoryPressure | None:
    """Memory PSI totals from node_exporter (it exports no averages: take a rate of the totals)."""
    some = _gauge(expo, NODE_PSI_SOME_TOTAL)
    full = _gauge(expo, NODE_PSI_FULL_TOTAL)
    if some is None and full is None:
        return None
    return MemoryPressure(some_total_s=some, full_total_s=full)


@dataclass(frozen=True, slots=True)
class LaunchReadiness:
    """Would vLLM's startup memory check pass now? ``reason`` is one sentence for the operator."""

    ready: bool | None
    needed_bytes: float | None
    available_bytes: float | None
    shortfall_bytes: float | None
    droppable_bytes: float | None
    would_fit_after_drop: bool | None
    reason: str


def _as_float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _gib(value: float) -> str:
    gib = value / GIB
    return f"{gib:.2f}" if 0 < abs(gib) < 0.1 else f"{gib:.1f}"


def vllm_free_memory(mem: HostMemory) -> float | None:
    """What vLLM reads as free memory on an integrated GPU: psutil ``virtual_memory().available``.

    That is MemAvailable, or MemFree when MemAvailable exceeds MemTotal (psutil's container guard).
    None when MemAvailable is missing or 0: psutil would then estimate it from /proc/zoneinfo,
    which sparktui does not read, and an estimate from an exporter is not that number either.
    """
    available = mem.mem_available
    if available is None or available <= 0 or mem.available_estimated:
        return None
    if mem.mem_total is not None and available > mem.mem_total:
        return mem.mem_free
    return available


def launch_readiness(
    mem: HostMemory,
    gpu_memory_utilization: float,
    *,
    device_total_bytes: float | None = None,
) -> LaunchReadiness:
    """Would ``vllm serve --gpu-memory-utilization u`` pass its startup memory check now?

    vLLM (``vllm/v1/worker/utils.py`` ``request_memory``) raises unless
    ``free_memory >= ceil(total_memory * u)``; on GB10 ``free_memory`` is psutil's available, i.e.
    /proc/meminfo MemAvailable, and ``total_memory`` is cudaMemGetInfo's total
    (``vllm_free_memory.md`` §1-2, §4 "MemAvailable ≥ ceil(T × u)"). Pass that total as
    ``device_total_bytes`` when known (the ``(x/T GiB)`` of a vLLM log line); else MemTotal stands in,
    which is 0-2 GiB larger on GB10 and so errs towards "not ready".

    After ``sync; echo 3 > drop_caches`` the clean page cache (Cached − Shmem) becomes free, so
    MemAvailable would be at least MemFree + (Cached − Shmem); what MemAvailable already counts is
    not added twice. An estimate: field reports disagree in both directions.
    """
    u = gpu_memory_utilization
    if not 0 < u <= 1:
        return LaunchReadiness(
            None, None, None, None, None, None, f"gpu_memory_utilization {u} is outside vLLM's range (0, 1]"
        )
    total, total_name = (
        (device_total_bytes, "device total") if device_total_bytes is not None else (mem.mem_total, "MemTotal")
    )
    if total is None or total <= 0:
        return LaunchReadiness(
            None, None, None, None, None, None, "cannot judge launch readiness: memory total is unknown"
        )
    needed = float(math.ceil(total * u))
    need = f"needs {_gib(needed)} GiB ({u:g} × {_gib(total)} GiB {total_name})"
    droppable = _as_float(mem.page_cache_droppable)
    available = _as_float(vllm_free_memory(mem))
    if available is None:
        if mem.available_estimated:
            why = "this exporter reports only total and used, which counts shmem as free"
        elif mem.mem_available is None:
            why = "this sample has no MemAvailable"
        else:
            why = "MemAvailable reads 0"
        return LaunchReadiness(None, needed, None, None, droppable, None, f"{need}, but {why}")

    have = f"{need}, {_gib(available)} GiB available"
    if available >= needed:
        return LaunchReadiness(
            True,
            needed,
            available,
            0.0,
            droppable,
            True,
            f"{have}: fits with {_gib(available - needed)} GiB to spare",
        )
    shortfall = needed - available
    short = f"{have}: short by {_gib(shortfall)} GiB"
    if droppable is None or mem.mem_free is None:
        return LaunchReadiness(
            False, needed, available, shortfall, droppable, None, f"{short}; page cache size unknown"
        )
    freed = mem.mem_free + droppable
    if freed <= available:
        return LaunchReadiness(
            False,
            needed,
            available,
            shortfall,
            droppable,
            False,
            f"{short}; dropping {_gib(droppable)} GiB of page cache would not help much:"
            " MemAvailable already counts it",
        )
    fits = freed >= needed
    drop = f"dropping {_gib(droppable)} GiB of page cache would"
    tail = f"{drop} fit" if fits else f"{drop} leave about {_gib(freed)} GiB, still short"
    return LaunchReadiness(False, needed, available, shortfall, droppable, fits, f"{short}; {tail}")
