"""A real HTTP server on 127.0.0.1 answering Ollama's documented JSON, for the Ollama engine's tests
(Ollama's binary is on no package registry, and builds only with a Go toolchain).

The routes and bodies are Ollama's API reference (docs.ollama.com/api): ``GET /`` answers "Ollama is
running" (``server/routes.go``); ``GET /api/version`` (docs.ollama.com/api/version) ``{"version": ...}``;
``GET /api/tags`` (docs.ollama.com/api/tags) every local model, with ``name``, ``model``,
``modified_at``, ``size``, ``digest`` and ``details``; ``GET /api/ps`` (docs.ollama.com/api/ps) the
models loaded, with ``size``, ``size_vram``, ``context_length`` and ``expires_at`` (RFC 3339 with the
server's offset); ``GET /v1/models`` (docs.ollama.com/api/openai-compatibility) the same models as
``/api/tags`` in OpenAI's list; ``POST /api/generate`` (docs.ollama.com/api/generate) an answer with
its own timing fields in nanoseconds (``total_duration``, ``load_duration``, ``prompt_eval_count``,
``prompt_eval_duration``, ``eval_count``, ``eval_duration``; ``answer``, the docs' example unless a
test sets its own), and, as the real server does, it loads the model it names (here: lists it in
``/api/ps``) and keeps it for the request's ``keep_alive`` after it (docs.ollama.com/api/generate: a
number is seconds, a negative one for ever, none Ollama's default 5 minutes; ``server/sched.go`` sets
``expires_at`` from it when the request ends). Every request is in ``asked`` ("POST /api/generate" for
a POST) and each ``/api/generate`` payload in ``generated``, with whether the model it named was
loaded and not overdue when it came (``named_loaded``), so a test can say nothing that loads a model
was asked, and what keep-alive was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

from tests.support.http_server import QuietHandler, served

VERSION = "0.12.6"
DETAILS = {
    "parent_model": "",
    "format": "gguf",
    "family": "gemma3",
    "families": ["gemma3"],
    "parameter_size": "4.3B",
    "quantization_level": "Q4_K_M",
}
# docs.ollama.com/api/generate, its example answer (not streamed): the times are in nanoseconds
GENERATED: dict[str, object] = {
    "model": "gemma3",
    "created_at": "2025-10-17T23:14:07.414671Z",
    "response": "Hello! How can I help you today?",
    "done": True,
    "done_reason": "stop",
    "total_duration": 174560334,
    "load_duration": 101397084,
    "prompt_eval_count": 11,
    "prompt_eval_duration": 13074791,
    "eval_count": 18,
    "eval_duration": 52479709,
}
FOREVER_S = 292 * 365 * 86400.0  # keep_alive -1: Go's MaxInt64 nanoseconds, some 292 years
DEFAULT_KEEP_ALIVE_S = 300.0  # Ollama's OLLAMA_KEEP_ALIVE default: 5 minutes
PACIFIC = timezone(timedelta(hours=-7))  # the docs' examples carry the server's offset: -07:00


@dataclass
class Model:
    """One local model; ``expires_in_s`` set: loaded, due to unload that long after now (negative:
    overdue)."""

    name: str
    size: int
    size_vram: int | None = None
    context_length: int = 4096
    expires_in_s: float | None = None

    def tag(self) -> dict[str, object]:
        return {
            "name": self.name,
            "model": self.name,
            "modified_at": "2025-10-03T23:34:03.409490317-07:00",
            "size": self.size,
            "digest": "a2af6cc3eb7fa8be8504abaf9b04e88f17a119ec3f04a3addf55f92841195f5a",
            "details": DETAILS,
        }

    def running(self) -> dict[str, object]:
        assert self.expires_in_s is not None
        expires = (datetime.now(UTC) + timedelta(seconds=self.expires_in_s)).astimezone(PACIFIC)
        found = {**self.tag(), "expires_at": expires.isoformat(timespec="microseconds")}
        del found["modified_at"]
        size_vram = self.size if self.size_vram is None else self.size_vram
        return {**found, "size_vram": size_vram, "context_length": self.context_length}


def keep_alive_s(value: object) -> float:
    """A request's ``keep_alive`` as the seconds the model stays loaded after it (numbers only: what
    sparktui sends)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return FOREVER_S if value < 0 else float(value)
    return DEFAULT_KEEP_ALIVE_S


class OllamaServer:
    def __init__(self, models: list[Model]) -> None:
        self.models = models
        self.asked: list[str] = []
        self.generated: list[dict[str, object]] = []  # each /api/generate payload, as sent
        self.named_loaded: list[bool] = []  # each one's model: loaded and not past its expiry when it came
        self.answer: dict[str, object] = GENERATED  # what /api/generate answers (its "model" the one named)
        self.ps_body: bytes | None = None  # answered at /api/ps instead of the models' (a hostile body)
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.asked.append(self.path)
                path = urlsplit(self.path).path
                if path == "/":
                    self._send(200, b"Ollama is running", "text/plain; charset=utf-8")
                elif path == "/api/version":
                    self._json({"version": VERSION})
                elif path == "/api/tags":
                    self._json({"models": [m.tag() for m in server.models]})
                elif path == "/api/ps":
                    if server.ps_body is not None:
                        self._send(200, server.ps_body, "application/json")
                        return
                    self._json({"models": [m.running() for m in server.models if m.expires_in_s is not None]})
                elif path == "/v1/models":
                    cards = [
                        {"id": m.name, "object": "model", "created": 1759559643, "owned_by": "library"}
                        for m in server.models
                    ]
                    self._json({"object": "list", "data": cards})
                else:
                    self._send(404, b"404 page not found", "text/plain")

            def do_POST(self) -> None:
                server.asked.append(f"POST {self.path}")
                sent = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if urlsplit(self.path).path != "/api/generate":
                    self._send(404, b"404 page not found", "text/plain")
                    return
                server.generated.append(sent)
                named = next((m for m in server.models if m.name == sent.get("model")), None)
                loaded = named is not None and named.expires_in_s is not None and named.expires_in_s > 0
                server.named_loaded.append(loaded)
                if named is not None:  # a request loads the model it names, and keeps it for its keep_alive
                    named.expires_in_s = keep_alive_s(sent.get("keep_alive"))
                self._json({**server.answer, "model": sent.get("model")})

            def _json(self, found: object) -> None:
                self._send(200, json.dumps(found).encode(), "application/json; charset=utf-8")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])

    @contextmanager
    def serving(self) -> Iterator[OllamaServer]:
        with served(self.httpd):
            yield self
