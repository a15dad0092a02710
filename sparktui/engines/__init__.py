"""The engines sparktui reads, one package each: what is engine-specific lives there and nowhere else.

A layer of its own, above the pure model and below the rules (``pyproject.toml``'s import contracts):
pure like the model, so the sources, the diagnosis and the discovery can all use it. Each engine package
exports one ``Engine`` (``base.py``): its reading into the engine-neutral scrape and its poll plan.

- ``vllm``: vLLM (``vllm.scrape``: every wire name across versions);
- ``llamacpp``: llama.cpp's ``llama-server`` (``llamacpp.scrape``: ``/metrics``, ``/slots``, ``/props``);
- ``sglang``: SGLang (``sglang.scrape``: its ``sglang:`` names, per-rank gauges read once per engine);
- ``trtllm``: TensorRT-LLM's ``trtllm-serve`` (``trtllm.scrape``: ``/prometheus/metrics``, ``trtllm_`` names);
- ``nim``: NVIDIA NIM for LLMs, a vLLM at NVIDIA's routes (``/v1/metrics``, ``/v1/health/ready``);
- ``ollama``: Ollama (``ollama.ps``: ``/api/ps``, the models it holds; no Prometheus metrics).

``registry()`` is every engine by kind: these, and any an installed package adds through the entry-point
group ``sparktui.engines`` (``docs/engines.md``, "Adding an engine").
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from types import MappingProxyType

from sparktui.engines import llamacpp, nim, ollama, sglang, trtllm, vllm
from sparktui.engines.base import Engine, PollPlan
from sparktui.model.reading import EngineReading

__all__ = ["BUILT_IN", "ENTRY_POINT_GROUP", "Engine", "EngineError", "PollPlan", "readings", "registry"]

BUILT_IN: tuple[Engine, ...] = (vllm.ENGINE, llamacpp.ENGINE, sglang.ENGINE, trtllm.ENGINE, nim.ENGINE, ollama.ENGINE)
ENTRY_POINT_GROUP = "sparktui.engines"


class EngineError(ValueError):
    """An engine an installed package offers that cannot be used: one line naming it."""


@cache
def registry() -> Mapping[str, Engine]:
    """Every engine by kind: the built-in ones, then those installed packages add (each entry point of
    ``sparktui.engines`` names an ``Engine``). Read once per process. A plugin that does not load, is
    not an ``Engine`` or takes a kind already taken raises ``EngineError``: a config naming no such
    engine would otherwise fail further from the cause."""
    found = {engine.kind: engine for engine in BUILT_IN}
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        where = f"engine plugin {point.name} ({point.value})"
        try:
            engine = point.load()
        except Exception as exc:  # a plugin's import can fail any way: one line, not a traceback
            raise EngineError(f"{where} does not load: {type(exc).__name__}: {exc}") from exc
        if not isinstance(engine, Engine):
            raise EngineError(f"{where} is a {type(engine).__name__}, not a sparktui.engines.Engine")
        if engine.kind in found:
            raise EngineError(f"{where}: engine {engine.kind!r} is already defined")
        found[engine.kind] = engine
    return MappingProxyType(found)


def readings() -> Mapping[str, EngineReading]:
    """How each engine kind is read: what the monitor core hands to the fleet state."""
    return {kind: engine.reading for kind, engine in registry().items()}
