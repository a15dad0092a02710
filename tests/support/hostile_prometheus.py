"""A hand-made Prometheus on 127.0.0.1: the answers are the test's, for the shapes a real Prometheus
cannot produce (wrong types, a gzip bomb, a million series).

A ``ThreadingHTTPServer`` in a thread of its own, so a CLI run as a subprocess and the test's own event
loop can both ask it::

    with HandMadePrometheus({"/api/v1/query": json_answer(...)}) as prometheus:
        ... prometheus.url ...
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Answer:
    """What the server sends for one path: the body as it goes on the wire, and headers of its own
    (``Content-Encoding``, or a ``Content-Length`` that replaces the true one: "" sends none, and the
    connection's end delimits the body)."""

    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    status: int = 200


def json_answer(payload: object) -> Answer:
    return Answer(json.dumps(payload).encode())


def success(result_type: str, result: object) -> Answer:
    """``{"status": "success", "data": {"resultType": ..., "result": ...}}``."""
    return json_answer({"status": "success", "data": {"resultType": result_type, "result": result}})


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        path = urlsplit(self.path).path
        self.server.asked.append(path)
        answer = self.server.answers.get(path) or Answer(b'{"status":"error","error":"not here"}', status=404)
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/json")
        headers = {"Content-Length": str(len(answer.body)), **answer.headers}
        for name, value in headers.items():
            if value:  # "": not sent (a body without a length ends with the connection)
                self.send_header(name, value)
        self.close_connection = not headers["Content-Length"]
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client refused it part way
            self.wfile.write(answer.body)

    do_GET = _answer
    do_POST = _answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # snapshot --compare sends its 30 queries at once

    def __init__(self, answers: Mapping[str, Answer]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers = answers
        self.asked: list[str] = []

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up mid-answer


class HandMadePrometheus:
    """Serves ``answers`` by path (``/api/v1/query``, ``/api/v1/query_range``, ``/api/v1/targets``)
    until the block ends; any other path is a 404 with Prometheus's error shape."""

    def __init__(self, answers: Mapping[str, Answer]) -> None:
        self.httpd = _Server(answers)
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def asked(self) -> list[str]:
        return self.httpd.asked

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5.0)
