"""Line deltas: a /metrics body as the changes from the same stream's previous body.

A scrape of /metrics repeats its series from one poll to the next and only some values change, so
the delta holds the changed values and counts of lines copied (docs/record.md has the numbers).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from sparktui.record.types import DamagedRecord


def _key(line: bytes) -> bytes:
    """What identifies a line across scrapes: the series (text before the last space), or the line."""
    head, sep, _ = line.rpartition(b" ")
    return head if sep else line


def line_index(lines: Sequence[bytes]) -> dict[bytes, int]:
    """Each line's key to its first position (``encode_lines`` looks ahead with it)."""
    index: dict[bytes, int] = {}
    for i, line in enumerate(lines):
        index.setdefault(_key(line), i)
    return index


def encode_lines(previous: Sequence[bytes], index: Mapping[bytes, int], new: Sequence[bytes]) -> bytes:
    """``new`` as operations on ``previous``, one a line: ``=N`` copy N lines, ``-N`` skip N lines,
    ``~V`` the next line with its value (after the last space) replaced by V, ``+L`` the line L."""
    ops: list[bytes] = []
    copies = 0
    j = 0
    count = len(previous)
    for line in new:
        if j < count and line == previous[j]:
            copies += 1
            j += 1
            continue
        key = _key(line)
        found = index.get(key)
        if j < count and _key(previous[j]) != key and found is not None and found > j:
            if copies:
                ops.append(b"=%d" % copies)
                copies = 0
            ops.append(b"-%d" % (found - j))
            j = found
            if line == previous[j]:
                copies = 1
                j += 1
                continue
        if copies:
            ops.append(b"=%d" % copies)
            copies = 0
        if j < count and key != line and _key(previous[j]) == key:
            ops.append(b"~" + line[len(key) + 1 :])
            j += 1
        else:
            ops.append(b"+" + line)
    if copies:
        ops.append(b"=%d" % copies)
    return b"\n".join(ops)


def _count(rest: bytes) -> int:
    # ASCII digits only: int() would also take a sign, spaces, underscores, and digits of other scripts.
    if not rest.isdigit() or not rest.isascii() or len(rest) > 12:
        raise DamagedRecord(f"line delta count {rest[:16]!r} is not a number of lines")
    return int(rest)


def decode_lines(previous: Sequence[bytes], delta: bytes, max_lines: int = sys.maxsize) -> list[bytes]:
    """The lines ``encode_lines`` encoded. The reading only moves forward through ``previous``, so the
    result is at most ``previous`` and the delta's own lines; more than ``max_lines`` lines, or an
    operation that does not fit ``previous``, raise ``DamagedRecord``."""
    out: list[bytes] = []
    j = 0
    count = len(previous)
    if delta.count(b"\n") >= max_lines:
        raise DamagedRecord(f"line delta rebuilds more than the {max_lines:,} lines allowed")
    for op in delta.split(b"\n"):
        code, rest = op[:1], op[1:]
        if code == b"=":
            n = _count(rest)
            if j + n > count:
                raise DamagedRecord("line delta copies past the previous body")
            if len(out) + n > max_lines:
                raise DamagedRecord(f"line delta rebuilds more than the {max_lines:,} lines allowed")
            out.extend(previous[j : j + n])
            j += n
        elif code == b"-":
            n = _count(rest)
            if j + n > count:
                raise DamagedRecord("line delta skips past the previous body")
            j += n
        elif code == b"~":
            if j >= count:
                raise DamagedRecord("line delta replaces past the previous body")
            head, sep, _ = previous[j].rpartition(b" ")
            if not sep:
                raise DamagedRecord("line delta replaces a value in a line without one")
            out.append(head + b" " + rest)
            j += 1
        elif code == b"+":
            out.append(rest)
        else:
            raise DamagedRecord(f"unknown line delta operation {code!r}")
    if len(out) > max_lines:
        raise DamagedRecord(f"line delta rebuilds more than the {max_lines:,} lines allowed")
    return out
