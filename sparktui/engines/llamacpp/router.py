"""A llama-server in router mode (``--models-dir DIR``, no ``-m``), read without waking any model.

What build 11434.0.0 serves (checked on the real server by
``tests/integration/test_real_llamacpp_router.py``; bodies in ``tests/data/llamacpp-11434/router-*``):

- ``/props`` without ``?model=`` is the router's own: ``"role": "router"``, ``max_instances``
  (``--models-max``), ``models_autoload``. A single-model server's ``/props`` has no ``role``.
- ``/v1/models`` lists every GGUF of the directory, loaded or not, each with ``status.value``
  (``unloaded``, ``loading``, ``loaded``, ``sleeping``) and ``status.args``, the command line of its
  child ``llama-server``, whose ``--port`` is where the child listens on the router's host. A child
  that failed to start is ``unloaded`` with ``status.failed`` true and its ``status.exit_code``.
- Asking ``/health``, ``/props`` and ``/v1/models`` loads nothing. A ``?model=X`` on ``/metrics``,
  ``/props`` or ``/slots`` is proxied to X's child and loads X when it is not (evicting another at
  ``--models-max``): sparktui sends one only with ``&autoload=false``, which is 400 for a model that
  is not loaded, loading nothing, and passes a loaded or sleeping child's ``/metrics`` on, waking nothing.

The port is given only while the child runs and answers (``loaded`` or ``sleeping``): an unloaded
model's args keep ``--port 0`` before its first load and the last child's port after it, and a
loading child does not answer yet. The host is always the router's: the body names none that is
trusted. The body is untrusted: at most ``MAX_MODELS`` models are kept, those with a child first; an
entry that is not an object, or has no string id, is skipped; a field of the wrong type is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from sparktui.model import safe_json
from sparktui.model.numbers import json_int
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.scrape import ScrapeProblem

ROLE = "router"  # /props "role" of a router; a single-model server's /props has no role
MAX_MODELS = 64  # models kept of one /v1/models (a GGUF folder larger than this is shown in part)
PORT_FLAG = "--port"
MAX_PORT = 65535


class ModelState(StrEnum):
    """A router's model, from its ``status`` in ``/v1/models``."""

    UNLOADED = "unloaded"  # no child
    LOADING = "loading"  # its child is starting: not answering yet
    LOADED = "loaded"  # its child answers on its port
    SLEEPING = "sleeping"  # its child answers, its model freed (--sleep-idle-seconds)
    FAILED = "failed"  # unloaded after its child exited with an error (status.failed, exit_code)
    UNKNOWN = "unknown"  # a status this reading does not know

    @property
    def has_child(self) -> bool:
        """A child that answers on its port: read it there, not through the router."""
        return self in (ModelState.LOADED, ModelState.SLEEPING)


_STATES = {
    state.value: state for state in (ModelState.UNLOADED, ModelState.LOADING, ModelState.LOADED, ModelState.SLEEPING)
}


@dataclass(frozen=True, slots=True)
class RouterModel:
    """One model of a router: its id (the name its requests carry), its state, and where its child
    listens on the router's host while it has one that answers."""

    id: str
    state: ModelState
    port: int | None  # the child's port, only while state.has_child
    exit_code: int | None = None  # of the child that failed, when state is FAILED


@dataclass(frozen=True, slots=True)
class RouterModels:
    """What a router's ``/v1/models`` says of its models, in the order it lists them."""

    models: tuple[RouterModel, ...]
    left_out: int = 0  # models past MAX_MODELS, not read

    @property
    def children(self) -> tuple[RouterModel, ...]:
        """The models whose child answers on its own port."""
        return tuple(model for model in self.models if model.port is not None)

    @property
    def answering(self) -> tuple[RouterModel, ...]:
        """The models whose child answers (``loaded`` or ``sleeping``), port known or not: those whose
        ``/metrics`` the router passes on with ``?model=X&autoload=false``."""
        return tuple(model for model in self.models if model.state.has_child)


def is_router(body: bytes | str) -> bool:
    """Whether a ``/props`` answer is a router's (``"role": "router"``); False for anything else,
    JSON or not."""
    found = safe_json.loads(body)
    return isinstance(found, dict) and found.get("role") == ROLE


def is_llama_server(body: bytes | str) -> bool:
    """Whether a ``/props`` answer is a llama-server's, single-model or router: a JSON object with a
    string ``build_info`` and a ``default_generation_settings`` object (both build 11434's, router and
    not). False for anything else, JSON or not: a vLLM has no ``/props``."""
    found = safe_json.loads(body)
    return (
        isinstance(found, dict)
        and isinstance(found.get("build_info"), str)
        and isinstance(found.get("default_generation_settings"), dict)
    )


def read_router_models(body: bytes | str) -> RouterModels:
    """A router's ``/v1/models``; ``ScrapeProblem`` (one line) when it is not the OpenAI model list.
    A model listed twice is kept once (its first entry)."""
    found = safe_json.loads(body)
    data = found.get("data") if isinstance(found, dict) else None
    if not isinstance(data, list):
        raise ScrapeProblem("/v1/models: not the OpenAI model list")
    models: list[RouterModel] = []
    seen: set[str] = set()
    for card in data:
        model = _model(card) if isinstance(card, dict) else None
        if model is not None and model.id not in seen:
            seen.add(model.id)
            models.append(model)
    kept = _kept(models)
    return RouterModels(kept, left_out=len(models) - len(kept))


def _kept(models: Sequence[RouterModel]) -> tuple[RouterModel, ...]:
    """At most ``MAX_MODELS``, those with a child first (the ones to read), in the listed order."""
    if len(models) <= MAX_MODELS:
        return tuple(models)
    ranked = sorted(range(len(models)), key=lambda index: (not models[index].state.has_child, index))
    return tuple(models[index] for index in sorted(ranked[:MAX_MODELS]))


def _model(card: dict[str, object]) -> RouterModel | None:
    name = card.get("id")
    if not isinstance(name, str) or not name.strip():
        return None
    found = card.get("status")
    status: dict[str, object] = found if isinstance(found, dict) else {}
    state = _state(status)
    port = _port(status.get("args")) if state.has_child else None
    exit_code = json_int(status.get("exit_code"), -255, 255) if state is ModelState.FAILED else None
    return RouterModel(safe_text(name, LABEL_LIMIT), state, port, exit_code)


def _state(status: dict[str, object]) -> ModelState:
    value = status.get("value")
    state = _STATES.get(value, ModelState.UNKNOWN) if isinstance(value, str) else ModelState.UNKNOWN
    if state is ModelState.UNLOADED and status.get("failed") is True:
        return ModelState.FAILED
    return state


def _port(args: object) -> int | None:
    """The value of the one ``--port`` of a child's command line, 1 to 65535; None when it is not
    there, not a plain decimal number, out of range, or given twice."""
    if not isinstance(args, list):
        return None
    places = [index for index, arg in enumerate(args) if arg == PORT_FLAG]
    if len(places) != 1 or places[0] + 1 >= len(args):
        return None
    text = args[places[0] + 1]
    if not isinstance(text, str):
        return None
    if not (text.isascii() and text.isdecimal()) or len(text) > len(str(MAX_PORT)):
        return None
    port = int(text)
    return port if 1 <= port <= MAX_PORT else None
