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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

from sparktui.engines.nim import V1_NAMES
from tests.support.fixture_fleet import METRICS_TYPE
from tests.support.http_server import QuietHandler, served

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


class NimServer:
    def __init__(self, bodies: Sequence[str], model: str) -> None:
        self.bodies = list(bodies)
        self.model = model
        self.served = 0
        self.ready = True
        self.asked: list[str] = []
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.asked.append(self.path)
                path = urlsplit(self.path).path
                if path == "/v1/health/live":
                    self._send(200, b'{"object":"health.response","message":"Service is live."}', "application/json")
                elif path == "/v1/health/ready":
                    ready = {"object": "health.response", "message": "NIM is ready", "status": "ready"}
                    body = json.dumps(ready if server.ready else {"message": "Service is not ready."})
                    self._send(200 if server.ready else 503, body.encode(), "application/json")
                elif path == "/v1/metrics":
                    body = server.bodies[min(server.served, len(server.bodies) - 1)]
                    server.served += 1
                    self._send(200, body.encode(), METRICS_TYPE)
                elif path == "/v1/version":
                    self._send(200, json.dumps({"release": RELEASE, "api": "1.0.0"}).encode(), "application/json")
                elif path == "/v1/models":
                    card = {"id": server.model, "object": "model", "owned_by": "system", "max_model_len": 32768}
                    self._send(200, json.dumps({"object": "list", "data": [card]}).encode(), "application/json")
                else:
                    self._send(404, b'{"detail":"Not Found"}', "application/json")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])

    @contextmanager
    def serving(self) -> Iterator[NimServer]:
        with served(self.httpd):
            yield self
