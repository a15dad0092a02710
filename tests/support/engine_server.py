"""A real HTTP server on 127.0.0.1 answering an engine's routes, for the engines that cannot run here
(SGLang, TensorRT-LLM and NIM need a CUDA GPU): its Prometheus text at the engine's own path, from
expositions its own metrics code wrote (or written from that code), served in order (the last one again
once they are all served), with prometheus_client's ``name[]`` filter where the engine serves that;
its health routes (200, or the engine's "not ready" status while ``ready`` is False); its JSON pages;
``/v1/models``; and a one-token ``/v1/completions`` for the canary. Every path asked is in ``asked``.

``steady`` plays an engine moving from one exposition to the next at a steady pace instead, whoever
asks and however often: what a direct poller and a Prometheus scraping the same server both see."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
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
        played: Callable[[], str] | None = None,
    ) -> None:
        """``health``: each health path and its body when ready; ``pages``: JSON answered at a path;
        ``played``: the Prometheus text at the time it is asked (``steady``), instead of ``bodies``."""
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
                    body = played() if played else server.bodies[min(server.served, len(server.bodies) - 1)]
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


_CUMULATIVE = frozenset({"counter", "histogram", "summary"})
_SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")


def _samples(text: str) -> dict[str, float]:
    """Each sample line's ``name{labels}`` and value (the fixtures carry no timestamps)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            out[series] = float(value)
    return out


def _kinds(text: str) -> dict[str, str]:
    return {parts[2]: parts[3] for line in text.splitlines() if len(parts := line.split()) == 4 and parts[1] == "TYPE"}


def steady(first: str, second: str, seconds: float, clock: Callable[[], float] = time.monotonic) -> Callable[[], str]:
    """An engine going from exposition ``first`` to ``second`` in ``seconds`` and on at that pace: at
    ``t`` seconds after this call, each counter's and histogram's sample is ``first + (second - first)
    * t / seconds`` (0 where ``first`` has none), each gauge ``second``'s. Every rate over any window is
    then the increase from ``first`` to ``second`` over ``seconds``, and every ratio and quantile of
    increases is that of the two expositions', whenever the samples are taken."""
    start, before, kinds = clock(), _samples(first), _kinds(second)

    def cumulative(name: str) -> bool:
        family = next((name.removesuffix(s) for s in _SUFFIXES if name.removesuffix(s) in kinds), name)
        return kinds.get(family) in _CUMULATIVE and not name.endswith("_created")

    def now() -> str:
        share = (clock() - start) / seconds
        lines = []
        for line in second.splitlines():
            if not line or line.startswith("#"):
                lines.append(line)
                continue
            series, _, raw = line.rpartition(" ")
            if cumulative(series.split("{", 1)[0]):
                was = before.get(series, 0.0)
                lines.append(f"{series} {was + (float(raw) - was) * share!r}")
            else:
                lines.append(line)
        return "\n".join(lines) + "\n"

    return now
