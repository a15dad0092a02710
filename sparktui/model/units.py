"""Formatting numbers for people: one place, so the dashboard and the headless commands agree.

Unknown or "no traffic" values render as an en dash, never as 0.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from enum import Enum

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


def fmt_gib(value: float | None, decimals: int = 1) -> str:
    if value is None or _missing(value):
        return NO_DATA
    return f"{value / GIB:.{decimals}f} GiB"


def fmt_tokens(value: float | None) -> str:
    """Token counts: 983k, 1.6M."""
    if value is None or _missing(value):
        return NO_DATA
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    if value >= 1e4:
        return f"{value / 1e3:.0f}k"
    return f"{value:,.0f}"


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
