"""The engines sparktui reads, one package each: what is engine-specific lives there and nowhere else.

A layer of its own, above the pure model and below the rules (``pyproject.toml``'s import contracts):
pure like the model, so the sources, the diagnosis and the discovery can all use it.

- ``llamacpp``: llama.cpp's ``llama-server``: its ``/metrics``, ``/slots`` and ``/props`` read into
  the engine-neutral scrape (``llamacpp.scrape``).

vLLM's reading is still in ``sparktui.model.vllm``, whose scrape types are the neutral ones; it moves
here as the engine seam is built (issue 34).
"""
