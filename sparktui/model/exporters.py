"""GPU exporter detection and normalisation: three wire formats -> one ``GpuReading``.

Three exporters answer on a Spark, two of them on the same port (``:9835``), so the kind is told by
metric names, never by port (``../shared/reference/exporters/``):

* utkuozdemir/nvidia_gpu_exporter: ``nvidia_smi_*``, one ``uuid`` label, ratios already 0..1 and
  clocks already Hz; an unavailable field is simply not exported.
* ateska/dgx-spark-prometheus: bare ``gpu_*`` names with a ``host`` label, percent and MHz; its
  ``memory_*_bytes`` are host RAM, not GPU memory; an ``[N/A]`` reading is written as 0.
* NVIDIA dcgm-exporter: ``DCGM_FI_*`` with ``gpu``/``UUID``/``modelName`` labels, percent, MHz and
  MiB; old builds print DCGM's blank sentinels instead of omitting the series.

Throttling (issue 21): the clock-event ("throttle") reasons active now, where the exporter has them:
nvidia_gpu_exporter's ``nvidia_smi_clocks_event_reasons_*`` 0/1 gauges (drivers before 590 spell them
``clocks_throttle_reasons_*``), DCGM's ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` (older
``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``) bitmask in NVML's bits; dgx-spark-prometheus reports none.

GB10 has no GPU memory series at all (NVML says "not supported"): the reading then says
``unified_memory`` and leaves memory ``None``; memory comes from the host ledger
(``sparktui.model.memory``), never from a fake 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from sparktui.model.memory import DGX_SPARK_MEM_TOTAL, DGX_SPARK_MEM_USED
from sparktui.model.promtext import Exposition, Labels
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.units import NO_DATA

MIB = 1024 * 1024
MHZ = 1e6
PERCENT = 0.01

# A GPU memory total this close to host RAM is the unified pool reported twice (nvitop PR #208 saw
# NVML return total ≈ MemTotal on a GB10), not a discrete GPU.
UNIFIED_TOLERANCE = 0.03


class ExporterKind(StrEnum):
    NVIDIA_GPU_EXPORTER = "nvidia_gpu_exporter"
    DGX_SPARK = "dgx-spark-prometheus"
    DCGM = "dcgm-exporter"
    NODE_EXPORTER = "node_exporter"
    UNKNOWN = "unknown"
    NVIDIA_SMI = "nvidia-smi"  # ``nvidia-smi -q`` read over SSH, where the node runs no GPU exporter


# Wire names, one table per exporter: field -> ((wire name, multiplier), ...), first present wins.
Wires = tuple[tuple[str, float], ...]

NVIDIA_WIRES: Mapping[str, Wires] = {
    "temperature_c": (("nvidia_smi_temperature_gpu", 1.0),),
    "power_w": (
        ("nvidia_smi_power_draw_watts", 1.0),
        ("nvidia_smi_power_draw_average_watts", 1.0),
        ("nvidia_smi_power_draw_instant_watts", 1.0),
    ),
    "utilization": (("nvidia_smi_utilization_gpu_ratio", 1.0),),
    "sm_clock_hz": (
        ("nvidia_smi_clocks_current_sm_clock_hz", 1.0),
        ("nvidia_smi_clocks_current_graphics_clock_hz", 1.0),
    ),
    "max_sm_clock_hz": (
        ("nvidia_smi_clocks_max_sm_clock_hz", 1.0),
        ("nvidia_smi_clocks_max_graphics_clock_hz", 1.0),
    ),
    "memory_total_bytes": (("nvidia_smi_memory_total_bytes", 1.0),),
    "memory_used_bytes": (("nvidia_smi_memory_used_bytes", 1.0),),
}
NVIDIA_INFO = "nvidia_smi_gpu_info"
NVIDIA_INDEX = "nvidia_smi_index"
NVIDIA_COLLECT_OK = "nvidia_smi_last_collect_success"

DGX_SPARK_WIRES: Mapping[str, Wires] = {
    "temperature_c": (("gpu_temperature_celsius", 1.0),),
    "power_w": (("gpu_power_watts", 1.0),),
    "utilization": (("gpu_utilization_percent", PERCENT),),
    "sm_clock_hz": (("gpu_frequency_mhz", MHZ),),
}
# ateska's host-memory families: they identify the exporter but are not GPU memory.
DGX_SPARK_HOST_MEMORY = (DGX_SPARK_MEM_TOTAL, DGX_SPARK_MEM_USED)
DGX_SPARK_NAMES = frozenset(
    (*DGX_SPARK_HOST_MEMORY, *(wire for wires in DGX_SPARK_WIRES.values() for wire, _ in wires))
)
# ateska writes 0 for an [N/A] nvidia-smi field; 0 °C, 0 W and 0 Hz are impossible on a live GPU,
# so these read as "no data". 0 % utilization is a real idle value and is kept.
DGX_SPARK_ZERO_IS_NA = ("temperature_c", "power_w", "sm_clock_hz")

DCGM_WIRES: Mapping[str, Wires] = {
    "temperature_c": (("DCGM_FI_DEV_GPU_TEMP", 1.0),),
    "power_w": (("DCGM_FI_DEV_POWER_USAGE", 1.0),),
    "utilization": (("DCGM_FI_DEV_GPU_UTIL", PERCENT),),
    "sm_clock_hz": (("DCGM_FI_DEV_SM_CLOCK", MHZ),),
    "memory_total_bytes": (("DCGM_FI_DEV_FB_TOTAL", MIB),),
    "memory_used_bytes": (("DCGM_FI_DEV_FB_USED", MIB),),
}
# Without FB_TOTAL (not in the default counters) the total is free + used (+ reserved when exported).
DCGM_FB_PARTS = ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED")

# DCGM blank sentinels (dcgm_structs.h): INT64_BLANK = 0x7ffffffffffffff0 (≈9.22e18) and up;
# FP64_BLANK = 2**47 plus 0..15; INT32_BLANK = 0x7ffffff0 plus 0..15.
DCGM_INT64_BLANK_FLOOR = 9.2e18
DCGM_FP64_BLANK = 2.0**47
DCGM_INT32_BLANK = float(0x7FFFFFF0)

_WIRES: Mapping[ExporterKind, Mapping[str, Wires]] = {
    ExporterKind.NVIDIA_GPU_EXPORTER: NVIDIA_WIRES,
    ExporterKind.DGX_SPARK: DGX_SPARK_WIRES,
    ExporterKind.DCGM: DCGM_WIRES,
}
# The label that tells one GPU's series from another's.
_GPU_KEY: Mapping[ExporterKind, str] = {
    ExporterKind.NVIDIA_GPU_EXPORTER: "uuid",
    ExporterKind.DGX_SPARK: "host",
    ExporterKind.DCGM: "gpu",
}
_GPU_KINDS = (ExporterKind.NVIDIA_GPU_EXPORTER, ExporterKind.DCGM, ExporterKind.DGX_SPARK)
READING_FIELDS = (
    "temperature_c",
    "power_w",
    "utilization",
    "sm_clock_hz",
    "memory_total_bytes",
    "memory_used_bytes",
    "max_sm_clock_hz",
)

# Clock-event ("throttle") reasons: NVML's bit, its nvidia-smi / exporter name, the operator's words.
THROTTLE_REASONS: tuple[tuple[int, str, str], ...] = (
    (0x1, "gpu_idle", "idle"),
    (0x2, "applications_clocks_setting", "applications clocks setting"),
    (0x4, "sw_power_cap", "SW power cap"),
    (0x8, "hw_slowdown", "HW slowdown"),
    (0x10, "sync_boost", "sync boost"),
    (0x20, "sw_thermal_slowdown", "SW thermal slowdown"),
    (0x40, "hw_thermal_slowdown", "HW thermal slowdown"),
    (0x80, "hw_power_brake_slowdown", "HW power brake slowdown"),
    (0x100, "display_clock_setting", "display clock setting"),
)
THROTTLE_WORDS: Mapping[str, str] = {name: words for _, name, words in THROTTLE_REASONS}
THERMAL_THROTTLE = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})
NVIDIA_THROTTLE_PREFIXES = ("nvidia_smi_clocks_event_reasons_", "nvidia_smi_clocks_throttle_reasons_")
DCGM_THROTTLE_MASKS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")


def throttle_series_names() -> tuple[str, ...]:
    """Every series ``_throttle`` may read: the exporters' 0/1 gauges in both spellings, DCGM's masks."""
    gauges = (prefix + name for prefix in NVIDIA_THROTTLE_PREFIXES for _, name, _ in THROTTLE_REASONS)
    return (*gauges, *DCGM_THROTTLE_MASKS)


def throttle_from_mask(mask: int) -> tuple[str, ...]:
    """The reasons of an NVML clock-event bitmask (DCGM's field, nvidia-smi's ``clocks_event_reasons.active``)."""
    return tuple(name for bit, name, _ in THROTTLE_REASONS if mask & bit)


def throttle_text(reading: GpuReading) -> str:
    """What holds the GPU's clocks back now, for the screen: ``SW thermal slowdown``, ``none`` (the
    exporter reports reasons and only "idle", or nothing, is active), or ``NO_DATA`` (it reports none)."""
    if reading.throttle is None:
        return NO_DATA
    return throttle_words(tuple(r for r in reading.throttle if r != "gpu_idle")) or "none"


def clock_figure(reading: GpuReading) -> tuple[str, bool]:
    """The GPU's clock and what holds it back, beside decode tok/s: (``GPU SM 810 MHz, SW thermal
    slowdown``, True when a reason other than idle is active)."""
    mhz = NO_DATA if reading.sm_clock_hz is None else f"{reading.sm_clock_hz / 1e6:,.0f}"
    held = throttle_text(reading)
    if reading.throttle is None:
        return f"GPU SM {mhz} MHz", False
    return f"GPU SM {mhz} MHz, throttle {held}", held != "none"


def throttle_words(reasons: tuple[str, ...]) -> str:
    """The reasons as the operator reads them: ``SW thermal slowdown, SW power cap``."""
    return ", ".join(THROTTLE_WORDS.get(reason, reason) for reason in reasons)


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one scrape, in SI units. ``None`` is "not reported", never a stand-in for 0."""

    kind: ExporterKind
    name: str | None
    temperature_c: float | None
    power_w: float | None
    utilization: float | None  # 0..1
    sm_clock_hz: float | None
    memory_total_bytes: float | None
    memory_used_bytes: float | None
    unified_memory: bool  # GPU memory is the host pool: read it from the host ledger
    collect_ok: bool | None  # nvidia_gpu_exporter's own "last nvidia-smi run worked"; None elsewhere
    problems: tuple[str, ...]
    max_sm_clock_hz: float | None = None  # the clock the GPU could run at (nvidia_gpu_exporter)
    # The clock-event reasons active now (``THROTTLE_REASONS`` names; "gpu_idle" included); None: the
    # exporter reports none (dgx-spark-prometheus), () : it does and none is active.
    throttle: tuple[str, ...] | None = None


def _is_dgx_spark_name(expo: Exposition, name: str) -> bool:
    # The names are generic; ateska's every own series carries a ``host`` label.
    return name in DGX_SPARK_NAMES and any("host" in labels for labels, _ in expo.get(name))


def detect(expo: Exposition) -> ExporterKind:
    """Which exporter produced this scrape, by metric names. A GPU kind wins over node_exporter."""
    found: set[ExporterKind] = set()
    for name in expo.names():
        if name.startswith("nvidia_smi_"):
            found.add(ExporterKind.NVIDIA_GPU_EXPORTER)
        elif name.startswith("DCGM_FI_"):
            found.add(ExporterKind.DCGM)
        elif name.startswith("node_"):
            found.add(ExporterKind.NODE_EXPORTER)
        elif _is_dgx_spark_name(expo, name):
            found.add(ExporterKind.DGX_SPARK)
    for kind in (*_GPU_KINDS, ExporterKind.NODE_EXPORTER):
        if kind in found:
            return kind
    return ExporterKind.UNKNOWN


def _dcgm_blank(value: float) -> bool:
    return (
        value >= DCGM_INT64_BLANK_FLOOR
        or DCGM_FP64_BLANK <= value < DCGM_FP64_BLANK + 16
        or DCGM_INT32_BLANK <= value < DCGM_INT32_BLANK + 16
    )


def _gpu_keys(expo: Exposition, kind: ExporterKind) -> dict[str, Labels]:
    """Every GPU key seen in the GPU series, with the labels of its first sample."""
    key_label = _GPU_KEY[kind]
    names = [wire for wires in _WIRES[kind].values() for wire, _ in wires]
    if kind is ExporterKind.NVIDIA_GPU_EXPORTER:
        names.append(NVIDIA_INFO)
    if kind is ExporterKind.DCGM:
        names.extend(DCGM_FB_PARTS)
    keys: dict[str, Labels] = {}
    for name in names:
        for labels, _ in expo.get(name):
            keys.setdefault(labels.get(key_label, ""), labels)
    return keys


def _choose_gpu(expo: Exposition, kind: ExporterKind, keys: Mapping[str, Labels]) -> str:
    """GPU 0 when the exporter says which one that is, else the lowest UUID (or host name)."""
    if kind is ExporterKind.NVIDIA_GPU_EXPORTER:
        index_0 = [labels.get("uuid", "") for labels, _ in expo.get(NVIDIA_INFO) if labels.get("index") == "0"]
        index_0 += [labels.get("uuid", "") for labels, value in expo.get(NVIDIA_INDEX) if value == 0]
        for uuid in index_0:
            if uuid in keys:
                return uuid
    if kind is ExporterKind.DCGM:
        if "0" in keys:
            return "0"
        return min(keys, key=lambda gpu: (keys[gpu].get("UUID", ""), gpu))
    return min(keys)


def _gpu_name(expo: Exposition, kind: ExporterKind, key: str, labels: Labels) -> str | None:
    if kind is ExporterKind.NVIDIA_GPU_EXPORTER:
        for info, _ in expo.get(NVIDIA_INFO):
            if info.get("uuid", "") == key:
                return safe_text(info.get("name") or "", LABEL_LIMIT) or None
        return None
    if kind is ExporterKind.DCGM:
        return safe_text(labels.get("modelName") or "", LABEL_LIMIT) or None
    return None


class _Reader:
    """Reads one GPU's fields, cleaning "no data" values into None and noting why."""

    def __init__(self, expo: Exposition, kind: ExporterKind, key: str) -> None:
        self.expo = expo
        self.kind = kind
        self.key_label = _GPU_KEY[kind]
        self.key = key
        self.problems: list[str] = []

    def raw(self, name: str) -> float | None:
        for labels, value in self.expo.get(name):
            if labels.get(self.key_label, "") != self.key:
                continue
            if math.isnan(value) or math.isinf(value):
                self.problems.append(f"{name} is {value}: treated as no data")
                return None
            if self.kind is ExporterKind.DCGM and _dcgm_blank(value):
                self.problems.append(f"{name} holds DCGM's no-data value {value:.0f}: treated as no data")
                return None
            return value
        return None

    def field(self, field: str) -> float | None:
        for name, multiplier in _WIRES[self.kind].get(field, ()):
            if name in self.expo:
                value = self.raw(name)
                return None if value is None else value * multiplier
        return None


def _dcgm_total_from_parts(reader: _Reader) -> float | None:
    free, used, reserved = (reader.raw(name) for name in DCGM_FB_PARTS)
    if free is None or used is None:
        return None
    return (free + used + (reserved or 0.0)) * MIB


def _throttle(reader: _Reader) -> tuple[str, ...] | None:
    if reader.kind is ExporterKind.NVIDIA_GPU_EXPORTER:
        for prefix in NVIDIA_THROTTLE_PREFIXES:
            flags = {name: reader.raw(prefix + name) for _, name, _ in THROTTLE_REASONS if prefix + name in reader.expo}
            if flags:
                return tuple(name for name, value in flags.items() if value is not None and value >= 0.5)
        return None
    if reader.kind is ExporterKind.DCGM:
        for name in DCGM_THROTTLE_MASKS:
            if name in reader.expo:
                mask = reader.raw(name)
                return None if mask is None or mask < 0 else throttle_from_mask(int(mask))
    return None


def gpu_reading(expo: Exposition, host_mem_total_bytes: float | None = None) -> GpuReading | None:
    """The first GPU of a GPU exporter's scrape; None when the scrape holds no GPU series.

    ``host_mem_total_bytes`` (MemTotal) lets a GPU memory total equal to host RAM be recognised as
    unified memory. On unified memory the memory fields are None: the host ledger is the one source.
    """
    kind = detect(expo)
    if kind not in _GPU_KINDS:
        return None
    collect_ok: bool | None = None
    problems: list[str] = []
    if kind is ExporterKind.NVIDIA_GPU_EXPORTER:
        success = expo.first_value(NVIDIA_COLLECT_OK)
        if success is not None and not math.isnan(success):
            collect_ok = success == 1
            if not collect_ok:
                problems.append("nvidia-smi's last collection failed: GPU readings may be stale or missing")
    keys = _gpu_keys(expo, kind)
    if not keys:
        if collect_ok is False:
            # No GPU series because nvidia-smi failed: say so rather than "no GPU".
            return GpuReading(kind, None, None, None, None, None, None, None, False, False, tuple(problems))
        return None
    key = _choose_gpu(expo, kind, keys)
    if len(keys) > 1:
        what = "hosts" if kind is ExporterKind.DGX_SPARK else "GPUs"
        problems.append(
            f"{len(keys)} {what} in this scrape; showing only {_GPU_KEY[kind]}={safe_text(key, LABEL_LIMIT)}"
        )

    reader = _Reader(expo, kind, key)
    values = {field: reader.field(field) for field in READING_FIELDS}
    if kind is ExporterKind.DCGM and values["memory_total_bytes"] is None:
        values["memory_total_bytes"] = _dcgm_total_from_parts(reader)
    if kind is ExporterKind.DGX_SPARK:
        zeroed = [field for field in DGX_SPARK_ZERO_IS_NA if values[field] == 0]
        if len(zeroed) == len(DGX_SPARK_ZERO_IS_NA) and values["utilization"] == 0:
            zeroed.append("utilization")  # every field 0: nvidia-smi answered nothing, 0 % included
        for field in zeroed:
            values[field] = None
        if zeroed:
            problems.append(
                f"{', '.join(zeroed)} read 0: dgx-spark-prometheus writes 0 when nvidia-smi has no value;"
                " treated as no data"
            )

    total = values["memory_total_bytes"]
    unified = (
        total is None
        or total <= 0
        or (
            host_mem_total_bytes is not None
            and host_mem_total_bytes > 0
            and abs(total - host_mem_total_bytes) <= UNIFIED_TOLERANCE * host_mem_total_bytes
        )
    )
    if unified:
        values["memory_total_bytes"] = values["memory_used_bytes"] = None

    return GpuReading(
        max_sm_clock_hz=values["max_sm_clock_hz"],
        throttle=_throttle(reader),
        kind=kind,
        name=_gpu_name(expo, kind, key, keys[key]),
        temperature_c=values["temperature_c"],
        power_w=values["power_w"],
        utilization=values["utilization"],
        sm_clock_hz=values["sm_clock_hz"],
        memory_total_bytes=values["memory_total_bytes"],
        memory_used_bytes=values["memory_used_bytes"],
        unified_memory=unified,
        collect_ok=collect_ok,
        problems=tuple(dict.fromkeys((*problems, *reader.problems))),
    )


# --- nvidia-smi -q, where the node has no GPU exporter ----------------------------------------------

NVIDIA_SMI_Q_COMMAND = "nvidia-smi -q -d PERFORMANCE,CLOCK,POWER,TEMPERATURE,UTILIZATION"
# The section headers of ``Clocks Event Reasons`` (driver ≥ 535; older ``Clocks Throttle Reasons``)
# and their lines, in nvidia-smi's words -> THROTTLE_REASONS names.
_SMI_REASONS: Mapping[str, str] = {
    "Idle": "gpu_idle",
    "Applications Clocks Setting": "applications_clocks_setting",
    "SW Power Cap": "sw_power_cap",
    "HW Slowdown": "hw_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Brake Slowdown": "hw_power_brake_slowdown",
    "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal_slowdown",
    "Display Clock Setting": "display_clock_setting",
}
_SMI_REASON_SECTIONS = ("Clocks Event Reasons", "Clocks Throttle Reasons")
_SMI_VALUE_SECTIONS: Mapping[tuple[str, str], str] = {
    ("Clocks", "SM"): "sm_clock_hz",
    ("Max Clocks", "SM"): "max_sm_clock_hz",
    ("Temperature", "GPU Current Temp"): "temperature_c",
    ("GPU Power Readings", "Average Power Draw"): "power_w",
    ("GPU Power Readings", "Power Draw"): "power_w",
    ("Utilization", "GPU"): "utilization",
}
_SMI_UNITS: Mapping[str, float] = {"MHz": MHZ, "C": 1.0, "W": 1.0, "%": PERCENT}


def _smi_number(text: str) -> float | None:
    number, _, unit = text.partition(" ")
    try:
        value = float(number)
    except ValueError:
        return None  # N/A, [N/A], Not Found, [Not Supported]
    return value * _SMI_UNITS.get(unit.strip(), 1.0) if math.isfinite(value) else None


def nvidia_smi_q_reading(text: str) -> GpuReading | None:
    """The first GPU of ``nvidia-smi -q -d PERFORMANCE,CLOCK,POWER,TEMPERATURE,UTILIZATION``: clocks,
    power, temperature, utilisation and the clock-event reasons; None when the text has no GPU."""
    name: str | None = None
    values: dict[str, float | None] = {}
    reasons: dict[str, bool] = {}
    section = ""
    gpus = 0
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("GPU ") and not line.startswith(" "):
            gpus += 1
            if gpus > 1:
                break
            continue
        if gpus == 0 or not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 4
        key, colon, value = line.strip().partition(":")
        key, value = key.strip(), value.strip()
        if depth == 1 and (not colon or not value):
            section = key
            continue
        if depth == 1 and key == "Product Name":
            name = safe_text(value, LABEL_LIMIT) or None
        if section in _SMI_REASON_SECTIONS and key in _SMI_REASONS and value in ("Active", "Not Active"):
            reasons[_SMI_REASONS[key]] = value == "Active"
        field = _SMI_VALUE_SECTIONS.get((section, key))
        if field is not None and values.get(field) is None:
            values[field] = _smi_number(value)
    if gpus == 0:
        return None
    return GpuReading(
        kind=ExporterKind.NVIDIA_SMI,
        name=name,
        temperature_c=values.get("temperature_c"),
        power_w=values.get("power_w"),
        utilization=values.get("utilization"),
        sm_clock_hz=values.get("sm_clock_hz"),
        memory_total_bytes=None,
        memory_used_bytes=None,
        unified_memory=True,  # not asked: the host ledger is the one source of memory
        collect_ok=None,
        problems=(),
        max_sm_clock_hz=values.get("max_sm_clock_hz"),
        throttle=tuple(r for r, active in reasons.items() if active) if reasons else None,
    )
