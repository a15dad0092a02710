"""How a number reads against its threshold: normal, warning or critical.

The screens colour a cell by its level; the thresholds are the config's ``[thresholds]`` (the same that
the node's status reasons and the default alert rules use), so a cell turns amber exactly when the
node's reasons start to name it. Unknown values have no level (None): the cell says "–" uncoloured.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from enum import Enum

from sparktui.model.specs import Thresholds

GIB = 1024**3
FALLING_DROP = 0.15  # the mean acceptance length fell this fraction below its recent median
FALLING_MIN_POINTS = 10  # points of trend needed before a fall is judged


class Level(Enum):
    OK = "ok"
    WARN = "warn"
    CRIT = "crit"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Level.OK: 0, Level.WARN: 1, Level.CRIT: 2}


def _above(value: float | None, warn: float) -> Level | None:
    if value is None or math.isnan(value):
        return None
    return Level.WARN if value >= warn else Level.OK


def kv_level(kv_usage: float | None, t: Thresholds) -> Level | None:
    """KV cache usage (0..1) against ``kv_usage_warn``."""
    return _above(kv_usage, t.kv_usage_warn)


def waiting_level(waiting: float | None, t: Thresholds) -> Level | None:
    """Requests waiting against ``waiting_warn`` (0 disables the warning)."""
    if waiting is None:
        return None
    return Level.WARN if t.waiting_warn > 0 and waiting >= t.waiting_warn else Level.OK


def ttft_level(ttft_p90_s: float | None, t: Thresholds) -> Level | None:
    """TTFT p90 over the window against ``ttft_p90_warn_s`` (above it, as the node's reasons say)."""
    if ttft_p90_s is None:
        return None
    return Level.WARN if ttft_p90_s > t.ttft_p90_warn_s else Level.OK


def memory_level(mem_available_bytes: float | None, t: Thresholds) -> Level | None:
    """MemAvailable against ``mem_available_crit_gib`` and ``mem_available_warn_gib``."""
    if mem_available_bytes is None:
        return None
    gib = mem_available_bytes / GIB
    if gib < t.mem_available_crit_gib:
        return Level.CRIT
    return Level.WARN if gib < t.mem_available_warn_gib else Level.OK


def gpu_temp_level(temperature_c: float | None, t: Thresholds) -> Level | None:
    return _above(temperature_c, t.gpu_temp_warn_c)


def falling_level(trend: Sequence[float], drop: float = FALLING_DROP) -> Level | None:
    """WARN when the last value of ``trend`` is ``drop`` or more below the median of the values before
    it (a falling mean acceptance length); None with fewer than FALLING_MIN_POINTS points."""
    if len(trend) < FALLING_MIN_POINTS:
        return None
    baseline = statistics.median(trend[:-1])
    if baseline <= 0:
        return Level.OK
    return Level.WARN if trend[-1] < baseline * (1.0 - drop) else Level.OK
