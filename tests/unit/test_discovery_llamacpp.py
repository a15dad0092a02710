"""``sparktui init``'s pure half on llama.cpp's llama-server: the ``/props`` predicate, what a port's
answers say, the names, and the config written. Bodies are the real server's (``tests/data/llamacpp-11434``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sparktui.config import parse_config
from sparktui.discovery.names import ROUTER_NAME, model_file_stem
from sparktui.discovery.probes import (
    DEFAULT_EXPORTER_PORTS,
    DEFAULT_LLAMACPP_PORTS,
    DEFAULT_SERVICE_PORTS,
    DEFAULT_VLLM_PORTS,
    PROBE_PATHS,
    LlamaAnswer,
    NoAnswer,
    VllmAnswer,
    classify_port,
    port_roles,
)
from sparktui.discovery.render import HostReport, SshSettings, render_config
from sparktui.engines.llamacpp.router import is_llama_server, is_router
from sparktui.model.observations import FetchKind, HttpResult

LLAMA = Path(__file__).resolve().parents[1] / "data" / "llamacpp-11434"
PROPS = ("idle-props.json", "running-props.json", "router-child-props.json")


def answer(path: str, status: int, body: bytes = b"") -> HttpResult:
    return HttpResult(url=f"http://h:1{path}", kind=FetchKind.OK, status=status, body=body)


def llama_results(
    props: str, models: str = "models.json", metrics: str | None = "idle-metrics.txt"
) -> dict[str, HttpResult]:
    results = {path: answer(path, 404) for path in PROBE_PATHS}
    results["/props"] = answer("/props", 200, (LLAMA / props).read_bytes())
    results["/v1/models"] = answer("/v1/models", 200, (LLAMA / models).read_bytes())
    results["/health"] = answer("/health", 200, b'{"status":"ok"}')
    results["/metrics"] = (
        answer("/metrics", 200, (LLAMA / metrics).read_bytes())
        if metrics
        else answer("/metrics", 501, b'{"error":{"message":"This server does not support metrics endpoint."}}')
    )
    return results


@pytest.mark.parametrize("file", [*PROPS, "router-props.json"])
def test_every_props_of_the_real_server_is_a_llama_servers_and_only_the_routers_is_a_routers(file: str) -> None:
    body = (LLAMA / file).read_bytes()
    assert is_llama_server(body)
    assert is_router(body) == (file == "router-props.json")


@pytest.mark.parametrize(
    "body",
    [
        b'{"version":"0.19.0"}',  # vLLM's /version
        b'{"models":[]}',  # Ollama's /api/tags
        b"{}",
        b"[]",
        b"not json",
        b'{"build_info": 7, "default_generation_settings": {}}',
        b'{"build_info": "b1", "default_generation_settings": "x"}',
        b'{"default_generation_settings": {}}',
        b"",
    ],
)
def test_anything_else_is_not_a_llama_servers_props(body: bytes) -> None:
    assert not is_llama_server(body)


@pytest.mark.parametrize("role", ["llamacpp", "vllm", "any", "listening"])
def test_a_llama_server_is_found_by_its_props_whatever_the_port_was_probed_for(role: str) -> None:
    props = json.loads((LLAMA / "idle-props.json").read_bytes())
    models = tuple(card["id"] for card in json.loads((LLAMA / "models.json").read_bytes())["data"])
    found = classify_port(8080, role, llama_results("idle-props.json"))
    assert found == LlamaAnswer(
        port=8080,
        build=props["build_info"],
        router=False,
        model_path=props["model_path"],
        alias=None,  # the real server's alias is its model path unless --alias is given
        total_slots=props["total_slots"],
        n_ctx=props["default_generation_settings"]["n_ctx"],
        models=models,
        metrics=True,
    )


def test_a_router_is_found_as_a_router_with_the_models_of_its_folder() -> None:
    found = classify_port(8080, "llamacpp", llama_results("router-props.json", "router-models-loaded.json", None))
    listed = json.loads((LLAMA / "router-models-loaded.json").read_bytes())["data"]
    assert isinstance(found, LlamaAnswer)
    assert found.router and found.model_path is None and found.alias is None
    assert found.models == tuple(card["id"] for card in listed)
    assert not found.metrics


def test_a_vllm_is_still_a_vllm_and_a_port_with_no_props_is_no_llama_server() -> None:
    results = {path: answer(path, 404) for path in PROBE_PATHS}
    results["/version"] = answer("/version", 200, b'{"version":"0.19.0"}')
    assert classify_port(8000, "vllm", results) == VllmAnswer(8000, "0.19.0", (), needs_api_key=False)
    health_only = {path: answer(path, 404) for path in PROBE_PATHS}
    health_only["/health"] = answer("/health", 200, b"ok")
    found = classify_port(8080, "llamacpp", health_only)
    assert isinstance(found, NoAnswer) and "not /props" in found.reason


def test_8080_is_probed_for_a_llama_server_by_default_and_vllms_ports_stay_first() -> None:
    roles = port_roles(
        DEFAULT_VLLM_PORTS, DEFAULT_SERVICE_PORTS, DEFAULT_EXPORTER_PORTS, llamacpp=DEFAULT_LLAMACPP_PORTS
    )
    assert dict(roles)[8080] == "llamacpp"
    assert [port for port, role in roles if role == "vllm"] == list(DEFAULT_VLLM_PORTS)
    assert "/props" in PROBE_PATHS


@pytest.mark.parametrize(
    ("path", "stem"),
    [
        ("/models/Qwen3-8B-Q4_K_M.gguf", "Qwen3-8B-Q4_K_M"),
        ("/m/gpt-oss-120b-mxfp4-00001-of-00003.gguf", "gpt-oss-120b-mxfp4"),
        ("C:\\models\\tiny.GGUF", "tiny"),
        ("tiny", "tiny"),
    ],
)
def test_the_model_file_stem(path: str, stem: str) -> None:
    assert model_file_stem(path) == stem


def _answer(port: int, **changes: object) -> LlamaAnswer:
    base = classify_port(port, "llamacpp", llama_results("idle-props.json"))
    assert isinstance(base, LlamaAnswer)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_the_config_has_each_llama_server_as_a_llamacpp_instance_named_from_its_model_and_it_loads() -> None:
    router = classify_port(8082, "llamacpp", llama_results("router-props.json", "router-models-loaded.json", None))
    hostile = '/m/evil"\n[[nodes]]\nname = "x.gguf'
    report = HostReport(
        host="10.0.0.7",
        name="spark-7",
        name_how="the host argument",
        findings=(
            VllmAnswer(8000, "0.19.0", ("Qwen/Qwen3-8B",), needs_api_key=False),
            _answer(8080),
            _answer(8081),  # the same model again: a name of its own
            router,
            _answer(8083, model_path=hostile, build='b1"\n[x]'),
            _answer(8084, alias="qwen3-8b"),
        ),
        ssh=None,
        ssh_skipped="--no-ssh was given",
    )
    text = render_config([report], SshSettings(), written_at="2026-11-26 10:00 UTC", hosts=["10.0.0.7"])
    (node,) = parse_config(text, env={}).nodes
    by_port = {v.port: v for v in node.vllm}
    assert by_port[8000].engine == "vllm"
    assert {port: v.engine for port, v in by_port.items() if port != 8000} == dict.fromkeys(
        (8080, 8081, 8082, 8083, 8084), "llamacpp"
    )
    assert [by_port[p].name for p in (8080, 8081, 8082, 8084)] == ["tiny", "tiny-8081", ROUTER_NAME, "qwen3-8b"]
    assert by_port[8083].name.startswith("evil-")  # made a valid name; nothing it held became a key
    assert len(node.vllm) == 6
    assert "/metrics did not answer: start llama-server with --metrics" in text  # the router's
