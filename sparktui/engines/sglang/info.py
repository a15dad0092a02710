"""SGLang's ``/server_info``: how it is told apart from other engines' JSON, and what it says.

SGLang 0.5.23 answers ``/server_info`` with its resolved server arguments (``ServerArgs.resolved_dict()``:
``model_path``, ``served_model_name``, ``host``, ``port``, ``tp_size``, ``dp_size``, ``enable_metrics``...,
``srt/utils/common.py`` ``build_server_info``), the scheduler's limits, ``internal_states`` (one per
data-parallel engine), ``version`` and ``frontend`` (``srt/entrypoints/http_server.py``). Resolution fills
``served_model_name`` with ``model_path`` when none was given (``arg_groups/serving_hook.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sparktui.model import safe_json
from sparktui.model.safe_text import LABEL_LIMIT, safe_text


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``/server_info`` says about the server (remote text made safe)."""

    version: str
    model_path: str | None
    served_model_name: str | None  # None when it is the model path (none given)
    port: int | None
    host: str | None
    tp_size: int | None
    dp_size: int | None
    enable_metrics: bool | None


def _text(found: dict[str, object], key: str) -> str | None:
    value = found.get(key)
    return safe_text(value, LABEL_LIMIT) or None if isinstance(value, str) else None


def _count(found: dict[str, object], key: str, most: int) -> int | None:
    value = found.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 1 <= value <= most else None


def read_server_info(body: bytes) -> ServerInfo | None:
    """SGLang's ``/server_info``, or None when the body is not one: JSON with a ``version`` string and
    SGLang's own server-argument fields (``model_path`` and ``tp_size``)."""
    found = safe_json.loads(body)
    if not isinstance(found, dict):
        return None
    version = _text(found, "version")
    model_path = _text(found, "model_path")
    if version is None or model_path is None or _count(found, "tp_size", 1 << 20) is None:
        return None
    served = _text(found, "served_model_name")
    metrics = found.get("enable_metrics")
    return ServerInfo(
        version=version,
        model_path=model_path,
        served_model_name=None if served == model_path else served,
        port=_count(found, "port", 65535),
        host=_text(found, "host"),
        tp_size=_count(found, "tp_size", 4096),
        dp_size=_count(found, "dp_size", 4096),
        enable_metrics=metrics if isinstance(metrics, bool) else None,
    )
