"""The engines sparktui reads, one package each: what is engine-specific lives there and nowhere else.

A layer of its own, above the pure model and below the rules (``pyproject.toml``'s import contracts):
pure like the model, so the sources, the diagnosis and the discovery can all use it. The model reads an
engine through its ``EngineReading`` (``sparktui.model.reading``); ``READINGS`` are every engine's,
which the monitor core hands to the fleet state.

- ``llamacpp``: llama.cpp's ``llama-server``: what is polled, and its ``/metrics``, ``/slots`` and
  ``/props`` read into the engine-neutral scrape (``llamacpp.scrape``).

vLLM's reading is still in ``sparktui.model`` (``model/vllm.py``, ``model/reading.py``), whose scrape
types are the neutral ones; it moves here as the engine seam is built (issue 34).
"""

from __future__ import annotations

from collections.abc import Mapping

from sparktui.engines import llamacpp
from sparktui.model.reading import VLLM, EngineReading

READINGS: Mapping[str, EngineReading] = {VLLM.kind: VLLM, llamacpp.READING.kind: llamacpp.READING}
