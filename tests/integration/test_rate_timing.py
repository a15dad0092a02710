"""Rates are timed by the moment ``/metrics`` answered, not by the end of the node's whole poll: a side
service on the same node that is slow to answer must not stretch or squeeze the interval (issue 20).

A real engine stand-in on 127.0.0.1 whose generation counter is exactly 1000 tokens per second of
the machine's monotonic clock, at the moment it answers, beside a side service that takes 1.5 s on
every other request; ``sparktui snapshot`` polls the node twice, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

RATE = 1000.0  # tokens per second of the stand-in engine
SLOW_S = 1.5  # the neighbour's delay on every other answer
T0 = time.monotonic()


class _Engine(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/metrics"):
            tokens = RATE * (time.monotonic() - T0)  # the counter of this very moment
            body = (
                "# TYPE vllm:generation_tokens_total counter\n"
                f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {tokens:.6f}\n'
                "# TYPE vllm:num_requests_running gauge\n"
                'vllm:num_requests_running{engine="0",model_name="m"} 1\n'
            )
        elif self.path == "/version":
            body = '{"version": "0.33.0"}'
        elif self.path == "/v1/models":
            body = '{"data": [{"id": "m", "max_model_len": 4096}]}'
        else:
            body = ""
        self._answer(body)

    def _answer(self, body: str) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        pass


class _SlowNeighbour(_Engine):
    calls = 0

    def do_GET(self) -> None:
        type(self).calls += 1
        if type(self).calls % 2 == 1:  # the first answer, the third, ...: slow
            time.sleep(SLOW_S)
        self._answer("ok")


def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


@pytest.fixture
def node_config(tmp_path: Path) -> Iterator[Path]:
    engine, neighbour = _serve(_Engine), _serve(_SlowNeighbour)
    config = tmp_path / "config.toml"
    config.write_text(
        "poll_interval_s = 1.0\ntimeout_s = 5.0\n"
        '[[nodes]]\nname = "spark1"\nhost = "127.0.0.1"\n'
        f'[[nodes.vllm]]\nname = "m"\nport = {engine.server_address[1]}\n'
        f'[[nodes.services]]\nname = "asr"\nkind = "asr"\nport = {neighbour.server_address[1]}\n'
    )
    try:
        yield config
    finally:
        for server in (engine, neighbour):
            server.shutdown()
            server.server_close()


def test_a_slow_neighbour_does_not_change_the_engines_rate(node_config: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sparktui", "snapshot", "--json", "--no-canary", "--interval", "2"],
        env=dict(os.environ, SPARKTUI_CONFIG=str(node_config)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (instance,) = json.loads(done.stdout)["nodes"][0]["instances"]
    rate = instance["rates"]["generation_tokens_per_s"]
    # Timed by the end of the node's poll, the slow first answer squeezed the interval: 1,746 tok/s.
    assert rate == pytest.approx(RATE, rel=0.01)
