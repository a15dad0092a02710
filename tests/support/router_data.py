"""A llama.cpp router as its observations, for the model's and the screens' tests: its ``/v1/models``
with each model's status, and its children's ``/metrics`` (the real router's saved bodies,
``tests/data/llamacpp-11434``, with their counters set)."""

from __future__ import annotations

import json

from sparktui.config import parse_config
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation
from tests.conftest import DATA

LLAMA = DATA / "llamacpp-11434"
URL = "http://10.0.0.1:8080"
CONFIG = (
    '[[nodes]]\nname = "box"\nhost = "10.0.0.1"\n[nodes.ssh]\nenabled = false\n'
    '[[nodes.vllm]]\nname = "router"\nengine = "llamacpp"\nport = 8080\n'
)
FLEET = parse_config(CONFIG, source="router.toml")


def models_body(**states: str) -> bytes:
    """A router's ``/v1/models``: each model with its ``status.value`` and a child's ``--port``."""
    cards = [
        {"id": name, "status": {"value": value, "args": ["llama-server", "--port", str(41000 + index)]}}
        for index, (name, value) in enumerate(states.items())
    ]
    return json.dumps({"data": cards, "object": "list"}).encode()


def child_metrics(prompt: int, cached: int, predicted: int, processing: int = 0) -> bytes:
    """A child's /metrics as llama-server serves it (the saved idle body, its counters set)."""
    text = (LLAMA / "idle-metrics.txt").read_text()
    for name, value in (
        ("prompt_tokens_total", prompt),
        ("prompt_tokens_cached_total", cached),
        ("tokens_predicted_total", predicted),
        ("requests_processing", processing),
    ):
        text = text.replace(f"llamacpp:{name} 0\n", f"llamacpp:{name} {value}\n")
    return text.encode()


def ok(body: bytes, status: int = 200) -> HttpResult:
    return HttpResult(url=URL, kind=FetchKind.OK, status=status, body=body)


def router_observation(
    t: float, models: bytes, per_model: tuple[tuple[str, HttpResult], ...] | None, node: str = "box"
) -> NodeObservation:
    """One poll of the router: ``/health``, its ``/props``, ``models`` and each model's ``/metrics``."""
    obs = ServerObservation(
        name="router",
        health=ok(b'{"status":"ok"}'),
        metrics=None,
        version=ok((LLAMA / "router-props.json").read_bytes()),
        models=ok(models),
        model_metrics=per_model,
        metrics_t=t,
    )
    return NodeObservation(node=node, t=t, wall=1e9 + t, vllm=(obs,))
