"""Numbers from a remote, validated by their kind: one parser per kind, used where the number enters.

Python's own readers are too kind to a remote: ``str.isdigit()`` accepts ``"²"``, which ``int()``
refuses (a traceback in every mode); ``int()`` accepts ``"٣"`` and ``"1_000"``; JSON's integers have
no bound (``10**400`` overflows the first float it meets); a float may be NaN, infinite or negative
where the thing it counts cannot be. Each reader here returns the number, or None for "not a number of
this kind", and the caller names what it refused in one line on its node.

The kinds (``docs/reliability.md``, "Numbers by kind"):

- a **label-borne integer** (a draft ``position``, an ``engine`` index): ASCII digits only, at most
  ``LABEL_INT_DIGITS`` of them;
- a **JSON integer** (``max_model_len``, a PID): an ``int`` that is not a ``bool``, inside its range;
- a **counter** (a ``_total``, a bucket, a histogram's ``_count`` and ``_sum``): finite and ≥ 0;
- a **count gauge** (requests running or waiting): finite, ≥ 0 and at most ``MAX_COUNT``;
- a **fraction gauge** (KV-cache usage, a hit rate): finite, in [0, 1].
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

LABEL_INT_DIGITS = 9  # a position or an engine index: nothing real has more than a few
# Requests one engine holds running or waiting: vLLM's max_num_seqs is at most a few thousand, and a
# queue in a flood reaches tens of thousands. A gauge beyond a billion is no queue.
MAX_COUNT = 1e9
# The largest JSON integer taken anywhere (a context length, a PID, a port): far past any of them, and
# still exact as a float.
MAX_JSON_INT = 2**53
# A model's context length in tokens: the longest published is 10 million; 2**31 is far past it and
# small enough for any arithmetic on it (a bench's prompt sizes) to stay exact.
MAX_CONTEXT_TOKENS = 2**31


def known_sum(values: Iterable[float | None]) -> float | None:
    """The sum of the known values; None when none is known (shown "–", not 0)."""
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def is_digits(text: str) -> bool:
    """``text`` is ASCII digits only (``str.isdigit()`` alone accepts "²", which ``int()`` refuses)."""
    return text.isascii() and text.isdigit()


def label_int(text: str) -> int | None:
    """A label value that holds a non-negative integer written in ASCII digits, else None."""
    if not text or len(text) > LABEL_INT_DIGITS or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def json_int(value: object, low: int = 0, high: int = MAX_JSON_INT) -> int | None:
    """A JSON integer in ``[low, high]``, else None (a bool, a float, a string or an integer past the range)."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        return None
    return value


def finite_problem(value: float) -> str | None:
    """Why ``value`` cannot be a plain gauge's (None when it can): finite."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return None


def counter_problem(value: float) -> str | None:
    """Why ``value`` cannot be a counter's (None when it can): counters are finite and never negative."""
    problem = finite_problem(value)
    if problem is None and value < 0:
        return f"{value:.6g}, and a counter cannot be negative"
    return problem


def count_problem(value: float) -> str | None:
    """Why ``value`` cannot be a count of requests (None when it can)."""
    problem = counter_problem(value)
    if problem is None and value > MAX_COUNT:
        return f"{value:.6g}, more than any engine holds"
    return problem


def fraction_problem(value: float) -> str | None:
    """Why ``value`` cannot be a fraction (None when it can): finite, in [0, 1]."""
    problem = finite_problem(value)
    if problem is None and not 0.0 <= value <= 1.0:
        return f"{value:.6g}, outside [0, 1]"
    return problem


@dataclass(frozen=True, slots=True)
class NumberKind:
    """A kind of number as a range (for a test of a whole series at C speed: ``low <= value <= high``
    is False for NaN and for what is out of range) and the reason a value is not of it."""

    low: float
    high: float
    problem: Callable[[float], str | None]


_LARGEST = sys.float_info.max
FINITE = NumberKind(-_LARGEST, _LARGEST, finite_problem)
COUNTER = NumberKind(0.0, _LARGEST, counter_problem)
COUNT = NumberKind(0.0, MAX_COUNT, count_problem)
FRACTION = NumberKind(0.0, 1.0, fraction_problem)
