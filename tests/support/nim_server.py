"""A real HTTP server on 127.0.0.1 answering NIM for LLMs' routes as its docs describe them
(docs.nvidia.com/nim/large-language-models, the 2.x API reference and "Logging and Observability"):
``/v1/health/live`` (200 while the container runs), ``/v1/health/ready`` (200 once the model is loaded,
503 before), ``/v1/metrics`` (the vLLM inside's own Prometheus text, passed through), ``/v1/version``
and ``/v1/models``. NIM ships as GPU containers and cannot run here; its ``/v1/metrics`` bodies are
real vLLM 0.33 scrapes (``tests/data/vllm-0.33/``, written by vLLM's own metrics code), served in order
(the last one again once they are all served), and for NIM 1.x the same with the ``vllm:`` prefix
dropped from the names its observability page lists."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from sparktui.engines.nim import V1_NAMES
from tests.support.engine_server import EngineServer

RELEASE = "2.0.1"
_UNPREFIXED = {prefixed: name for name, prefixed in V1_NAMES.items()}


def as_nim_1x(text: str) -> str:
    """A vLLM exposition as NIM 1.x names it: the numbers its page lists without the ``vllm:`` prefix,
    the rest left out (1.x exported only those); its KV usage under the older name it lists
    (``gpu_cache_usage_perc``)."""
    out = []
    for line in text.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc").splitlines():
        head = line.split(" ", 3)[2] if line.startswith(("# HELP", "# TYPE")) else line.split("{", 1)[0].split(" ")[0]
        family = next((n for n in (head, *(head + s for s in ("_bucket", "_sum", "_count"))) if n in _UNPREFIXED), None)
        if family is not None:
            out.append(line.replace("vllm:", "", 1))
    return "\n".join(out) + "\n"


def nim_server(bodies: Sequence[str], model: str, played: Callable[[], str] | None = None) -> EngineServer:
    """NIM's routes: ``/v1/health/live`` and ``/v1/health/ready`` (503 before the model is loaded),
    ``/v1/metrics`` (not filtered: NIM's front is not documented to pass ``name[]`` on), ``/v1/version``."""
    ready = {"object": "health.response", "message": "NIM is ready", "status": "ready"}
    return EngineServer(
        bodies=bodies,
        model=model,
        metrics_path="/v1/metrics",
        health={"/v1/health/ready": json.dumps(ready).encode()},
        pages={
            "/v1/health/live": {"object": "health.response", "message": "Service is live."},
            "/v1/version": {"release": RELEASE, "api": "1.0.0"},
        },
        filterable=False,
        owned_by="system",
        played=played,
    )
