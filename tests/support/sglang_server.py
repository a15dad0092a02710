"""A real HTTP server on 127.0.0.1 answering SGLang's routes as SGLang 0.5.23 answers them
(``srt/entrypoints/http_server.py``): ``/ready`` (200, or 503 while starting), ``/health`` (recorded:
on a real server it runs a one-token generation), ``/metrics`` with prometheus_client's ``name[]``
filter (only when started with ``enable_metrics``, as with ``--enable-metrics``; else 404), ``/server_info``
(a realistic subset of its fields, ``server_info``), ``/v1/models`` and its Ollama-compatible
``/api/tags``. SGLang itself cannot serve on a CPU-only machine; its
``/metrics`` bodies here are the expositions its own metrics code wrote (``tests/data/sglang-0.5.23/``),
served in the order of a scenario's phases (the last one again once they are all served)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.support.fixture_fleet import METRICS_TYPE, filter_exposition
from tests.support.http_server import QuietHandler, served

DATA = Path(__file__).resolve().parents[1] / "data" / "sglang-0.5.23"
VERSION = "0.5.23"


# Each scenario's parallelism, as make_expositions.py ran it (its tp_rank and dp ranks).
_PARALLEL = {"tp2": (2, 1), "dp2": (1, 2)}


class SglangServer:
    def __init__(self, scenario: str, *, enable_metrics: bool = True, served_model_name: str | None = None) -> None:
        scenarios = json.loads((DATA / "scenarios.json").read_text())
        self.model_path = scenarios[scenario]["model_name"]
        # What /v1/models calls it: --served-model-name, else the model path (arg_groups/serving_hook.py).
        self.model = served_model_name or self.model_path
        self.enable_metrics = enable_metrics
        self.tp_size, self.dp_size = _PARALLEL.get(scenario, (1, 1))
        self.bodies = [(DATA / f"{scenario}-{p['name']}.txt").read_text() for p in scenarios[scenario]["phases"]]
        self.served = 0
        self.ready = True
        self.asked: list[str] = []
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.asked.append(self.path)
                url = urlsplit(self.path)
                if url.path == "/ready" or url.path in ("/health", "/health_generate"):
                    self._send(200 if server.ready else 503, b"", "text/plain")
                elif url.path == "/metrics" and server.enable_metrics:
                    body = server.bodies[min(server.served, len(server.bodies) - 1)]
                    server.served += 1
                    names = parse_qs(url.query).get("name[]")
                    text = filter_exposition(body, set(names)) if names else body
                    self._send(200, text.encode(), METRICS_TYPE)
                elif url.path == "/server_info":
                    self._send(200, json.dumps(server.server_info()).encode(), "application/json")
                elif url.path == "/api/tags":  # its Ollama-compatible list (srt/entrypoints/ollama/serving.py)
                    details = {
                        "format": "sglang",
                        "family": server.model.rsplit("/", 1)[-1],
                        "parameter_size": "unknown",
                    }
                    tag = {"name": server.model, "model": server.model, "size": 0, "details": details}
                    self._send(200, json.dumps({"models": [tag]}).encode(), "application/json")
                elif url.path == "/v1/models":
                    card = {"id": server.model, "object": "model", "owned_by": "sglang", "max_model_len": 32768}
                    self._send(200, json.dumps({"object": "list", "data": [card]}).encode(), "application/json")
                else:
                    self._send(404, b'{"detail":"Not Found"}', "application/json")

            def do_POST(self) -> None:
                server.asked.append(f"POST {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                if urlsplit(self.path).path != "/v1/completions":
                    self._send(404, b'{"detail":"Not Found"}', "application/json")
                    return
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                answer = {"id": "cmpl-1", "object": "text_completion", "model": server.model, "usage": usage}
                answer["choices"] = [{"index": 0, "text": " ok", "finish_reason": "length"}]
                self._send(200, json.dumps(answer).encode(), "application/json")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])

    def server_info(self) -> dict[str, object]:
        return server_info(
            self.model_path,
            port=self.port,
            served_model_name=self.model if self.model != self.model_path else None,
            tp_size=self.tp_size,
            dp_size=self.dp_size,
            enable_metrics=self.enable_metrics,
        )

    @contextmanager
    def serving(self) -> Iterator[SglangServer]:
        with served(self.httpd):
            yield self


def server_info(
    model_path: str,
    *,
    port: int,
    served_model_name: str | None = None,
    tp_size: int = 1,
    dp_size: int = 1,
    enable_metrics: bool = True,
) -> dict[str, object]:
    """``/server_info`` as SGLang 0.5.23 builds it (``srt/entrypoints/http_server.py`` ``server_info``
    and ``srt/utils/common.py`` ``build_server_info``): the resolved server arguments (a subset of the
    fields of ``srt/arg_groups/fields/``, with their defaults where the scenario sets nothing), the
    launch command, the scheduler's ``get_init_info`` (``srt/managers/scheduler.py``), then
    ``internal_states`` (one per data-parallel engine), ``version`` and ``frontend``."""
    metrics = " --enable-metrics" if enable_metrics else ""
    served = f" --served-model-name {served_model_name}" if served_model_name else ""
    return {
        "model_path": model_path,
        "tokenizer_path": model_path,
        "load_format": "auto",
        "trust_remote_code": False,
        "context_length": None,
        "host": "127.0.0.1",
        "port": port,
        "served_model_name": served_model_name or model_path,  # resolution: the model path when none given
        "api_key": None,
        "mem_fraction_static": 0.836,
        "max_running_requests": None,
        "chunked_prefill_size": 8192,
        "tp_size": tp_size,
        "dp_size": dp_size,
        "pp_size": 1,
        "nnodes": 1,
        "node_rank": 0,
        "enable_metrics": enable_metrics,
        "log_level": "info",
        "speculative_algorithm": None,
        "launch_command": (
            f"python3 -m sglang.launch_server --model-path {model_path}{served} --host 127.0.0.1 "
            f"--port {port} --tp-size {tp_size} --dp-size {dp_size}{metrics}"
        ),
        "status": "ready",
        "max_total_num_tokens": 404_000,
        "max_req_input_len": 40_954,
        "startup_time": 1_765_000_000.0,
        "hicache_object_layout": None,
        "kv_events": None,
        "internal_states": [{"last_gen_throughput": 0.0} for _ in range(dp_size)],
        "version": VERSION,
        "frontend": "python",
    }


def config(port: int, name: str = "sglang") -> str:
    return (
        'poll_interval_s = 0.5\n[[nodes]]\nname = "spark1"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
        f'[[nodes.vllm]]\nname = "{name}"\nengine = "sglang"\nport = {port}\n'
    )
