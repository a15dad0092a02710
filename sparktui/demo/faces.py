"""What each engine's demo server answers, and at which paths: its face.

Every demo engine server runs the same simulated engine (``sim.Engine``: requests, batches, the KV
cache); what differs between a vLLM, an SGLang, a TensorRT-LLM ``trtllm-serve`` and a NIM is what they
serve of it, and where. Each face says that, from the engine's own routes (``docs/engines.md`` has the
sources):

- vLLM: ``/health`` (503 once the engine core died), ``/metrics`` (``name[]`` honoured), ``/version``;
- SGLang 0.5.23 (``srt/entrypoints/http_server.py``): ``/ready`` and ``/health`` (503 until the
  scheduler serves), ``/metrics`` in SGLang's names (``engine_metrics.SglangExposition``),
  ``/server_info`` and its older ``/get_server_info``; ``owned_by: "sglang"``;
- trtllm-serve (``tensorrt_llm/serve/openai_server.py``): ``/health`` (200 with an empty body, 503),
  ``/version``, ``/prometheus/metrics`` in ``trtllm_`` names (``engine_metrics.TrtllmExposition``) and
  ``/metrics``, its JSON iteration stats (a list, emptied by each read); ``owned_by: "tensorrt_llm"``;
- NIM for LLMs 2.x: ``/v1/health/live`` (the container runs), ``/v1/health/ready`` (the model is
  loaded), ``/v1/metrics`` (vLLM's metrics passed through), ``/v1/version``; ``owned_by: "system"``.

The OpenAI-compatible routes every engine serves (``/v1/models``, ``/v1/completions``,
``/v1/chat/completions``) are the instance's (``fleet.DemoInstance.handle``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from prometheus_client import CollectorRegistry

from sparktui.demo.engine_metrics import SglangExposition, TrtllmExposition
from sparktui.demo.exposition import VllmExposition
from sparktui.demo.httpserver import Request, Response
from sparktui.demo.sim import EngineState, MetricsSink, ModelProfile

if TYPE_CHECKING:
    from sparktui.demo.fleet import DemoInstance

DemoEngineKind = Literal["vllm", "sglang", "trtllm", "nim"]
SGLANG_VERSION = "0.5.23"
TRTLLM_VERSION = "1.2.0rc2"
NIM_RELEASE = "2.0.1"


class Exposition(MetricsSink, Protocol):
    """An engine's metrics page: the simulated engine's events in, the page out (prometheus_client's
    ``registry``, which the tests read back)."""

    registry: CollectorRegistry

    def render(self, names: list[str] | None = None) -> bytes: ...
    def count_http(self, handler: str, status: int, seconds: float) -> None: ...


@dataclass(frozen=True, slots=True)
class Face:
    """One engine's server: its config name and label, its metrics page, its own routes (None: not one
    of them) and the card ``/v1/models`` lists."""

    kind: DemoEngineKind
    label: str
    exposition: Callable[[ModelProfile], Exposition]
    route: Callable[[DemoInstance, Request], Response | None]
    owned_by: str

    def model_card(self, instance: DemoInstance) -> dict[str, object]:
        served = instance.profile.served_name
        card: dict[str, object] = {
            "id": served,
            "object": "model",
            "created": int(instance.started_wall),
            "owned_by": self.owned_by,
        }
        if self.kind in ("vllm", "nim"):  # vLLM's card, behind NIM's front too
            card.update(
                root=served,
                parent=None,
                max_model_len=instance.profile.max_model_len,
                permission=[{"object": "model_permission", "allow_sampling": True}],
            )
        return card


def _serving(instance: DemoInstance) -> bool:
    return instance.engine.state not in (EngineState.DEAD, EngineState.LOADING, EngineState.STOPPED)


def _vllm(instance: DemoInstance, request: Request) -> Response | None:
    return instance.vllm_route(request)


def _sglang(instance: DemoInstance, request: Request) -> Response | None:
    path = request.path
    if path in ("/ready", "/health", "/health_generate"):
        return Response(status=200 if _serving(instance) else 503, body=b"", content_type="text/plain")
    if path == "/metrics":
        return instance.metrics_response(request)
    if path in ("/server_info", "/get_server_info"):
        return Response.of_json(sglang_server_info(instance))
    return None


def sglang_server_info(instance: DemoInstance) -> dict[str, object]:
    """``/server_info`` as SGLang 0.5.23 builds it: a subset of its resolved server arguments, the
    scheduler's state and ``version`` (``tests/support/sglang_server.py`` has the sources)."""
    p = instance.profile
    port = instance.http.port if instance.http is not None else 30000
    return {
        "model_path": p.served_name,
        "tokenizer_path": p.served_name,
        "host": "0.0.0.0",
        "port": port,
        "served_model_name": p.served_name,
        "mem_fraction_static": p.gpu_memory_utilization,
        "chunked_prefill_size": 8192,
        "tp_size": 1,
        "dp_size": 1,
        "pp_size": 1,
        "enable_metrics": True,
        "speculative_algorithm": "EAGLE" if p.num_speculative_tokens else None,
        "speculative_num_steps": p.num_speculative_tokens or None,
        "max_total_num_tokens": p.kv_capacity_tokens,
        "max_req_input_len": p.max_model_len - 5,
        "internal_states": [{"last_gen_throughput": 0.0, "memory_usage": {"weight": p.weights_gib}}],
        "version": SGLANG_VERSION,
    }


def _trtllm(instance: DemoInstance, request: Request) -> Response | None:
    path = request.path
    if path == "/health":
        return Response(status=200 if _serving(instance) else 503, body=b"", content_type="text/plain")
    if path == "/version":
        return Response.of_json({"version": TRTLLM_VERSION})
    if path == "/prometheus/metrics":
        return instance.metrics_response(request)
    if path == "/metrics":  # the iteration stats since the last read: sparktui never reads them
        return Response.of_json([])
    return None


def _nim(instance: DemoInstance, request: Request) -> Response | None:
    path = request.path
    if path == "/v1/health/live":
        return Response.of_json({"object": "health.response", "message": "Service is live."})
    if path == "/v1/health/ready":
        if _serving(instance):
            return Response.of_json({"object": "health.response", "message": "NIM is ready", "status": "ready"})
        return Response.of_json({"object": "health.response", "message": "NIM is not ready"}, status=503)
    if path == "/v1/metrics":
        return instance.metrics_response(request)
    if path == "/v1/version":
        return Response.of_json({"release": NIM_RELEASE, "api": "1.0.0"})
    return None


FACES: dict[DemoEngineKind, Face] = {
    "vllm": Face("vllm", "vLLM", VllmExposition, _vllm, "vllm"),
    "sglang": Face("sglang", "SGLang", SglangExposition, _sglang, "sglang"),
    "trtllm": Face("trtllm", "TensorRT-LLM", TrtllmExposition, _trtllm, "tensorrt_llm"),
    "nim": Face("nim", "NIM", VllmExposition, _nim, "system"),
}
