"""The table ``sparktui snapshot --compare`` prints, read back for the tests that compare an engine's
numbers with a real Prometheus's, and the precision the two sides must agree to."""

from __future__ import annotations

import math
import re

from sparktui.engines.base import PromNumber

ROW = re.compile(r" {2,}")


def compare_rows(stdout: str, instance: str | None = None) -> dict[str, tuple[str, str, str]]:
    """``snapshot --compare``'s rows of ``instance`` (None: its first): label -> (direct, Prometheus,
    difference)."""
    lines = stdout.splitlines()
    begin = 0 if instance is None else next(i for i, line in enumerate(lines) if line.startswith(f"spark1/{instance} "))
    start = next(i for i in range(begin, len(lines)) if lines[i].strip().startswith("number "))
    rows: dict[str, tuple[str, str, str]] = {}
    for line in lines[start + 1 :]:
        parts = ROW.split(line.strip())
        if len(parts) < 3:
            break
        label, direct, prometheus, *difference = parts
        rows[label] = (direct, prometheus, difference[0] if difference else "")
    return rows


def agrees(number: PromNumber, direct: str, prometheus: str, difference: str) -> bool:
    """Prometheus's side equals the direct one to the precision compare prints the difference at; a
    rate to 3 %: the direct polls and Prometheus's scrapes read the counters at their own instants
    (a steady engine's some milliseconds from the time each is stamped with, a few tenths of a
    percent over the window, more on a loaded machine; a burst inside the window is extrapolated by
    Prometheus to the window's ends from its first and last scrape in it); ratios, quantiles, means
    and gauges do not move with that."""
    if difference == "same" or re.fullmatch(r"[+-]0\.0+ (%|pp)", difference):
        return True
    if number.unit.endswith("/s") and not number.percent:
        ours, theirs = (float(side.split()[0]) for side in (direct, prometheus))
        return math.isclose(ours, theirs, rel_tol=0.03)
    return False
