"""A real HTTP server on 127.0.0.1 answering an engine's routes, for the engines that cannot run here
(SGLang, TensorRT-LLM and NIM need a CUDA GPU): its Prometheus text at the engine's own path, from
expositions its own metrics code wrote (or written from that code), served in order (the last one again
once they are all served), with prometheus_client's ``name[]`` filter where the engine serves that;
its health routes (200, or the engine's "not ready" status while ``ready`` is False); its JSON pages;
``/v1/models``; and a one-token ``/v1/completions`` for the canary. Every path asked is in ``asked``."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.support.fixture_fleet import METRICS_TYPE, filter_exposition
from tests.support.http_server import QuietHandler, served


class EngineServer:
    def __init__(
        self,
        *,
        bodies: Sequence[str],
        model: str,
        metrics_path: str,
        health: Mapping[str, bytes],
        pages: Mapping[str, object],
        filterable: bool,
        owned_by: str,
    ) -> None:
        """``health``: each health path and its body when ready; ``pages``: JSON answered at a path."""
        self.bodies = list(bodies)
        self.model = model
        self.served = 0
        self.ready = True
        self.asked: list[str] = []
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.asked.append(self.path)
                url = urlsplit(self.path)
                if url.path in health:
                    self._send(200 if server.ready else 503, health[url.path] if server.ready else b"", "text/plain")
                elif url.path == metrics_path:
                    body = server.bodies[min(server.served, len(server.bodies) - 1)]
                    server.served += 1
                    names = parse_qs(url.query).get("name[]") if filterable else None
                    text = filter_exposition(body, set(names)) if names else body
                    self._send(200, text.encode(), METRICS_TYPE)
                elif url.path in pages:
                    self._send(200, json.dumps(pages[url.path]).encode(), "application/json")
                elif url.path == "/v1/models":
                    card = {"id": server.model, "object": "model", "owned_by": owned_by, "max_model_len": 32768}
                    self._send(200, json.dumps({"object": "list", "data": [card]}).encode(), "application/json")
                else:
                    self._send(404, b'{"detail":"Not Found"}', "application/json")

            def do_POST(self) -> None:
                server.asked.append(f"POST {self.path}")
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if urlsplit(self.path).path != "/v1/completions":
                    self._send(404, b'{"detail":"Not Found"}', "application/json")
                    return
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                choice = {"index": 0, "text": " ok", "finish_reason": "length"}
                answer = {"id": "cmpl-1", "object": "text_completion", "model": server.model, "choices": [choice]}
                self._send(200, json.dumps({**answer, "usage": usage}).encode(), "application/json")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])

    @contextmanager
    def serving(self) -> Iterator[EngineServer]:
        with served(self.httpd):
            yield self


def one_node_config(port: int, engine: str, name: str | None = None) -> str:
    """A fleet of one node (no SSH) whose one instance runs ``engine`` on ``port``, polled every 0.5 s."""
    return (
        'poll_interval_s = 0.5\n[[nodes]]\nname = "spark1"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
        f'[[nodes.vllm]]\nname = "{name or engine}"\nengine = "{engine}"\nport = {port}\n'
    )
