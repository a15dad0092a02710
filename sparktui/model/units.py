"""Formatting numbers for people: one place, so the dashboard and the headless commands agree.

Unknown or "no traffic" values render as an en dash, never as 0.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from datetime import datetime, tzinfo
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparktui.model.derive import EngineRates, LatencySummary, PromptShares
    from sparktui.model.roofline import Roofline

NO_DATA = "–"
GIB = 1024**3


def _missing(value: float | None) -> bool:
    return value is None or math.isnan(value)


def fmt_number(value: float | None, decimals: int = 0) -> str:
    if value is None or _missing(value):
        return NO_DATA
    return f"{value:,.{decimals}f}"


def fmt_rate(value: float | None, unit: str = "/s") -> str:
    """Throughput with sensible precision: 1,116 tok/s, 2.9 req/s, 0.05 /s."""
    if value is None or _missing(value):
        return NO_DATA
    magnitude = abs(value)
    decimals = 0 if magnitude >= 100 else 1 if magnitude >= 1 else 2
    return f"{value:,.{decimals}f}{unit}"


def fmt_pct(fraction: float | None, decimals: int = 1) -> str:
    if fraction is None or _missing(fraction):
        return NO_DATA
    return f"{fraction * 100:.{decimals}f}%"


def fmt_seconds(value: float | None, floor: float | None = None) -> str:
    """Latency: 17.5 ms, 0.71 s, 4.3 s. At or below the first bucket bound, say "<bound"."""
    if value is None or _missing(value):
        return NO_DATA
    if floor is not None and value <= floor:
        return "<" + fmt_seconds(floor)
    if value < 1:
        ms = value * 1000
        return f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def fmt_in_seconds(value: float | None) -> str:
    """Latency always in seconds, for figures read side by side (the kiosk's TTFT tiles): 0.83 s beside
    2.07 s, never "825 ms" beside "2.07 s". Two decimals below 10 s, one below 100 s, none above; below
    what two decimals can show, "<0.01 s"."""
    if value is None or _missing(value):
        return NO_DATA
    if value < 0.005:
        return "<0.01 s"
    decimals = 2 if value < 10 else 1 if value < 100 else 0
    return f"{value:,.{decimals}f} s"


def fmt_clock(wall: float | None, *, date: bool = False, tz: tzinfo | None = None) -> str:
    """A unix time as the operator reads a clock: local time with its zone, "09:06:09 CET" (with
    ``date``: "2026-11-26 09:06:09 CET"). Every time sparktui shows (a finding opened or cleared, the
    "at …" of its evidence, a log line quoted, the action log) goes through here. ``tz``: a zone other
    than the machine's local one (tests, a replay shown where it was recorded)."""
    if wall is None or _missing(wall):
        return NO_DATA
    try:
        moment = datetime.fromtimestamp(wall, tz) if tz is not None else datetime.fromtimestamp(wall).astimezone()
    except (OverflowError, OSError, ValueError):
        return NO_DATA
    zone = moment.tzname() or moment.strftime("%z")
    return f"{moment.strftime('%Y-%m-%d %H:%M:%S' if date else '%H:%M:%S')} {zone}"


def fmt_gib(value: float | None, decimals: int = 1) -> str:
    if value is None or _missing(value):
        return NO_DATA
    return f"{value / GIB:.{decimals}f} GiB"


def fmt_gib_short(value: float | None) -> str:
    """Bytes as GiB in at most four cells, for a table cell: ``1.6G``, ``112G``."""
    if value is None or _missing(value):
        return NO_DATA
    gib = value / GIB
    return f"{gib:.1f}G" if gib < 9.95 else f"{gib:.0f}G"


def fmt_duration(seconds: float | None) -> str:
    """A span as an operator says it: ``45s``, ``3m05s``, ``2h10m``."""
    if seconds is None or _missing(seconds):
        return NO_DATA
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def fmt_count(n: int, noun: str, *, zero: str | None = None) -> str:
    """``n`` with ``noun`` in the plural unless it is one: "1 node", "3 nodes" ("no nodes" with zero="no")."""
    shown = zero if n == 0 and zero is not None else str(n)
    return f"{shown} {noun}{'' if n == 1 else 's'}"


def fmt_tokens(value: float | None) -> str:
    """Token counts: 983k, 1.6M."""
    if value is None or _missing(value):
        return NO_DATA
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    if value >= 1e4:
        return f"{value / 1e3:.0f}k"
    return f"{value:,.0f}"


def fmt_token_count(value: float | None, floor: float | None = None) -> str:
    """A token count from a histogram: 13.6, 152, and "≤1" at or below the first bucket bound."""
    if value is None or _missing(value):
        return NO_DATA
    if floor is not None and value <= floor:
        return f"≤{floor:g}"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def fmt_waiting(waiting: float | None, capacity: float | None, deferred: float | None) -> str:
    """Waiting and its split: "3 (capacity 2, deferred 1)"; the split is "–" on a version without it."""
    return f"{fmt_number(waiting)} (capacity {fmt_number(capacity)}, deferred {fmt_number(deferred)})"


# The operator's words for vLLM's label values; an unknown value is shown as it is.
PROMPT_SOURCE_WORDS = {"local_compute": "computed", "local_cache_hit": "cache hit", "external_kv_transfer": "external"}


def _ordered(keys: Mapping[str, object], words: Mapping[str, str]) -> list[str]:
    return [k for k in words if k in keys] + sorted(k for k in keys if k not in words)


def fmt_prompt_sources(sources: PromptShares | None, tiers: PromptShares | None = None) -> str:
    """Where the window's prompt tokens came from, the cache hits by tier in brackets:
    "computed 54% · cache hit 46% (device 100%) · external 0%"."""
    if sources is None:
        return NO_DATA
    shares = sources.shares
    parts = []
    for key in _ordered(shares, PROMPT_SOURCE_WORDS):
        part = f"{PROMPT_SOURCE_WORDS.get(key, key)} {fmt_pct(shares[key], 0)}"
        if key == "local_cache_hit":
            part += f" ({fmt_cache_tiers(tiers)})"
        parts.append(part)
    return " · ".join(parts)


def fmt_cache_tiers(tiers: PromptShares | None) -> str:
    """The tiers that supplied the window's cache hits: "device 100%" (tiers that gave none left out);
    "tier –" without hits or on a version that does not say."""
    if tiers is None:
        return f"tier {NO_DATA}"
    shown = [f"{k} {fmt_pct(v, 0)}" for k, v in tiers.shares.items() if v]
    return ", ".join(shown) if shown else f"tier {NO_DATA}"


def fmt_admission(rates: EngineRates) -> str:
    """Admission rejections per second over the window, and how many by reason (the server's flag that
    refused them): "1.6/s (max_num_queued_reqs 12, max_num_queued_tokens 4)"."""
    counts = rates.admission_rejections
    if not counts:
        return NO_DATA
    reasons = ", ".join(f"{k} {counts[k]:,.0f}" for k in sorted(counts) if counts[k])
    per_s = fmt_rate(rates.admission_rejections_per_s, "/s")
    return f"{per_s} ({reasons})" if reasons else per_s


def fmt_latency(label: str, summary: LatencySummary | None) -> str:
    """A latency histogram over the window: "TTFT p50 225 ms p90 1.15 s p99 2.37 s" ("TTFT –" without requests)."""
    if summary is None or not summary.count:
        return f"{label} {NO_DATA}"
    floor = summary.floor
    return (
        f"{label} p50 {fmt_seconds(summary.p50, floor)} p90 {fmt_seconds(summary.p90, floor)} "
        f"p99 {fmt_seconds(summary.p99, floor)}"
    )


def fmt_token_summary(summary: LatencySummary | None, quantiles: bool = True) -> str:
    """A token histogram over the window: "mean 13.6, p50 ≤1, p90 7.1"."""
    if summary is None or not summary.count:
        return NO_DATA
    mean = f"mean {fmt_token_count(summary.mean)}"
    if not quantiles:
        return mean
    floor = summary.floor
    return f"{mean}, p50 {fmt_token_count(summary.p50, floor)}, p90 {fmt_token_count(summary.p90, floor)}"


def engine_lines(rates: EngineRates | None) -> list[str]:
    """vLLM 0.32's operator numbers over the window, for the node screen and ``snapshot`` alike."""
    if rates is None:
        return []
    return [
        f"admission rejections {fmt_admission(rates)}",
        f"prompt {fmt_prompt_sources(rates.prompt_sources, rates.cached_tiers)}",
        f"tokens per step {fmt_token_summary(rates.tokens_per_step)}",
        f"prefill computed per request {fmt_token_summary(rates.prefill_computed_per_request, quantiles=False)}",
    ]


def to_jsonable(value: object) -> object:
    """Dataclasses, enums, mappings and sequences as plain JSON values; NaN and inf become null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in getattr(type(value), "JSON_PROPERTIES", ()):
            out[name] = to_jsonable(getattr(value, name))
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bytes):
        return None
    return value


def roofline_parts(roofline: Roofline | None) -> list[str]:
    """The roofline as figures in the operator's words: ``memory 151 GB/s (55% of 273 GB/s)``,
    ``compute 3.2 TFLOP/s`` (and its share when the node's peak is configured); "–" and, as a figure of
    its own, why when vLLM gives no estimate. One place for the node screen and ``snapshot``."""
    if roofline is None or roofline.memory_bytes_per_s is None:
        why = [f"({roofline.reason})"] if roofline is not None and roofline.reason else []
        return [f"memory bandwidth {NO_DATA}", *why]
    peak_gb_s = roofline.peak_memory_bytes_per_s / 1e9
    memory = (
        f"memory {fmt_rate(roofline.memory_bytes_per_s / 1e9, ' GB/s')} "
        f"({fmt_pct(roofline.memory_share, 0)} of {peak_gb_s:g} GB/s)"
    )
    flops = roofline.flops_per_s
    compute = f"compute {fmt_rate(None if flops is None else flops / 1e12, ' TFLOP/s')}"
    if roofline.peak_flops_per_s is not None:
        compute += f" ({fmt_pct(roofline.flops_share, 0)} of {roofline.peak_flops_per_s / 1e12:g} TFLOP/s)"
    return [memory, compute]


def fmt_bits(bps: float | None) -> str:
    """A link's rate in bits per second: ``13.2 Gb/s``, ``840 Mb/s``, ``0 b/s``."""
    if bps is None or _missing(bps):
        return NO_DATA
    for unit, scale in (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if abs(bps) >= scale:
            value = bps / scale
            return f"{value:.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"
    return f"{bps:.0f} b/s"
