"""Ollama's ``/api/ps`` (the models it holds in memory) and ``/v1/models`` (every model it has), read
into the models of an engine that loads them on demand.

What ``/api/ps`` answers (docs.ollama.com/api/ps; ``api/types.go``, ``ProcessModelResponse``):
``{"models": [{"name", "model", "size", "digest", "details": {...}, "expires_at", "size_vram",
"context_length"}]}``, one entry per model loaded: ``size`` is the bytes it holds in all, ``size_vram``
those in GPU memory, ``context_length`` the context it was loaded with, ``expires_at`` (RFC 3339, with
nanoseconds and the server's offset) when the server will unload it, its keep-alive after its last
request. A model still listed some time after that holds memory it was meant to give back: it is
"overdue". ``/api/ps`` does not say whether a model runs a request, and Ollama sets ``expires_at`` when a
request ends, so a request longer than its keep-alive reads as overdue too; ``OVERDUE_GRACE_S`` covers
the unload itself and a small difference between the two hosts' clocks. Go's zero time (year 1) is no
time.

``/v1/models`` (Ollama's OpenAI-compatible list, the same models as ``/api/tags``) names every model it
has, loaded or not: those ``/api/ps`` does not list are ``unloaded``.

Everything here is untrusted: at most ``MAX_LOADED`` loaded models and ``MAX_LISTED`` in all are kept;
an entry that is not an object, or has no name, is skipped; a field of the wrong type or out of range is
unknown, never 0.
"""

from __future__ import annotations

from datetime import datetime

from sparktui.model import safe_json
from sparktui.model.numbers import MAX_CONTEXT_TOKENS, json_int
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.scrape import MAX_MODELS, ModelLoad, ScrapeProblem, ServedModel

PS_PATH = "/api/ps"
MAX_LOADED = MAX_MODELS  # loaded models kept of one /api/ps (Ollama keeps 3 per GPU by default)
MAX_LISTED = 64  # models kept of one /v1/models, loaded ones first
MAX_BYTES = 2**50  # a model's size: a pebibyte is far past any model a Spark holds
OVERDUE_GRACE_S = 60.0  # past its expiry before a loaded model is called overdue
_FIRST_YEAR = 1970  # an expiry before the unix epoch is Go's zero time: not set


def read_ps(body: bytes, wall: float | None) -> tuple[ServedModel, ...]:
    """The models an ``/api/ps`` answer says are loaded, in its order (a name listed twice: its first
    entry), each overdue when ``wall`` (the poll's unix time; None: not judged) is more than
    ``OVERDUE_GRACE_S`` past its ``expires_at``. ``ScrapeProblem`` when it is not that list."""
    found = safe_json.loads(body)
    entries = found.get("models") if isinstance(found, dict) else None
    if not isinstance(entries, list):
        raise ScrapeProblem(f"{PS_PATH}: not Ollama's list of running models")
    loaded: list[ServedModel] = []
    seen: set[str] = set()
    for entry in entries:
        model = _loaded(entry, wall) if isinstance(entry, dict) else None
        if model is not None and model.id not in seen:
            seen.add(model.id)
            loaded.append(model)
            if len(loaded) == MAX_LOADED:
                break
    return tuple(loaded)


def served_models(loaded: tuple[ServedModel, ...], models: bytes | None) -> tuple[ServedModel, ...]:
    """Every model: the loaded ones, then each other model ``/v1/models`` (``models``; None: not known
    yet) lists, ``unloaded``; at most ``MAX_LISTED``."""
    found = safe_json.loads(models) if models is not None else None
    cards = found.get("data") if isinstance(found, dict) else None
    names = {model.id for model in loaded}
    unloaded: list[ServedModel] = []
    for card in cards if isinstance(cards, list) else ():
        name = _name(card.get("id")) if isinstance(card, dict) else None
        if name is not None and name not in names:
            names.add(name)
            unloaded.append(ServedModel(name, ModelLoad.UNLOADED))
    return (*loaded, *unloaded)[:MAX_LISTED]


def expiry(text: object) -> float | None:
    """An ``expires_at`` as a unix time; None for anything else (not RFC 3339, no offset, Go's zero
    time, out of range)."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None or moment.year < _FIRST_YEAR:
        return None
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def _name(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return safe_text(value, LABEL_LIMIT)


def _loaded(entry: dict[str, object], wall: float | None) -> ServedModel | None:
    name = _name(entry.get("name")) or _name(entry.get("model"))
    if name is None:
        return None
    expires = entry.get("expires_at")
    expires_wall = expiry(expires)
    late = wall - expires_wall if wall is not None and expires_wall is not None else None
    return ServedModel(
        name,
        ModelLoad.LOADED,
        size_bytes=json_int(entry.get("size"), 0, MAX_BYTES),
        gpu_bytes=json_int(entry.get("size_vram"), 0, MAX_BYTES),
        context_tokens=json_int(entry.get("context_length"), 1, MAX_CONTEXT_TOKENS),
        expires_at=safe_text(expires, LABEL_LIMIT) if expires_wall is not None and isinstance(expires, str) else None,
        expires_wall=expires_wall,
        overdue_s=late if late is not None and late > OVERDUE_GRACE_S else None,
    )
