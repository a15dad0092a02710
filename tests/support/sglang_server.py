"""A real HTTP server on 127.0.0.1 answering SGLang's routes as SGLang 0.5.23 answers them
(``srt/entrypoints/http_server.py``): ``/ready`` (200, or 503 while starting), ``/health`` (recorded:
on a real server it runs a one-token generation), ``/metrics`` with prometheus_client's ``name[]``
filter, ``/server_info`` and ``/v1/models``. SGLang itself cannot serve on a CPU-only machine; its
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


class SglangServer:
    def __init__(self, scenario: str) -> None:
        scenarios = json.loads((DATA / "scenarios.json").read_text())
        self.model = scenarios[scenario]["model_name"]
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
                elif url.path == "/metrics":
                    body = server.bodies[min(server.served, len(server.bodies) - 1)]
                    server.served += 1
                    names = parse_qs(url.query).get("name[]")
                    text = filter_exposition(body, set(names)) if names else body
                    self._send(200, text.encode(), METRICS_TYPE)
                elif url.path == "/server_info":
                    info = {"version": VERSION, "served_model_name": server.model, "internal_states": [{}]}
                    self._send(200, json.dumps(info).encode(), "application/json")
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

    @contextmanager
    def serving(self) -> Iterator[SglangServer]:
        with served(self.httpd):
            yield self


def config(port: int, name: str = "sglang") -> str:
    return (
        'poll_interval_s = 0.5\n[[nodes]]\nname = "spark1"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
        f'[[nodes.vllm]]\nname = "{name}"\nengine = "sglang"\nport = {port}\n'
    )
