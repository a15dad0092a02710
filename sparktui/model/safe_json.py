"""JSON from a remote, read once into safe values: the one place an endpoint's JSON enters the model.

``loads`` answers what ``json.loads`` would, with three bounds a remote cannot get past:

- **depth**: nesting deeper than ``MAX_DEPTH`` is no answer (``json.loads`` recurses; thousands of
  nested arrays end in ``RecursionError``);
- **numbers**: an integer of more than ``MAX_INT_DIGITS`` digits is read as a float (``10**400``
  becomes ``inf``, which no integer field accepts: ``model/numbers.json_int``), and ``NaN`` and
  ``Infinity``, which JSON does not have, make the answer no JSON;
- **strings**: every key and string value is made safe to show (``safe_text``: no escape sequence,
  control character, bidirectional override or line break) and cut at ``MAX_STRING`` characters.

None when the body is not JSON within those bounds: the caller says so in one line.
"""

from __future__ import annotations

import json

from sparktui.model.safe_text import safe_text

MAX_DEPTH = 32  # the answers read (/v1/models, /version, a completion) nest 4 deep
MAX_INT_DIGITS = 18  # past any count, length or PID; still exact as a float below 2**53
MAX_STRING = 4096  # characters of one string: a model id, a version, an error message


class _NotJson(ValueError):
    pass


def _int(text: str) -> int | float:
    digits = len(text) - text.startswith("-")
    return int(text) if digits <= MAX_INT_DIGITS else float(text)


def _constant(name: str) -> float:
    raise _NotJson(name)


def loads(body: bytes | str) -> object:
    """``body`` as JSON with every string made safe, or None (not JSON, too deep, NaN)."""
    try:
        found = json.loads(body, parse_int=_int, parse_constant=_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    try:
        return _safe(found, 0)
    except _NotJson:
        return None


def _safe(value: object, depth: int) -> object:
    if isinstance(value, str):
        return safe_text(value, MAX_STRING)
    if isinstance(value, dict | list):
        if depth >= MAX_DEPTH:
            raise _NotJson("too deep")
        if isinstance(value, list):
            return [_safe(item, depth + 1) for item in value]
        return {safe_text(key, MAX_STRING): _safe(item, depth + 1) for key, item in value.items()}
    return value
