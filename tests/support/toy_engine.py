"""A minimal engine defined outside sparktui, to test the engine seam as a seam: "toy", a server that
says how many requests run and how many tokens it made, and nothing else.

``ENGINE`` is what an engine package exports (``sparktui.engines.Engine``); ``ToyServer`` is a real
HTTP server on 127.0.0.1 serving it; ``install`` writes the entry point an installed package would have
(a ``.dist-info`` folder in a folder put on ``PYTHONPATH``), so sparktui finds the engine the way it finds
any engine a package adds, without a line of sparktui changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

from sparktui.engines import Engine, PollPlan
from sparktui.model.promtext import Exposition
from sparktui.model.reading import Answers, EngineReading
from sparktui.model.scrape import EngineScrape, ModelScrape, ScrapeProblem
from tests.support.http_server import QuietHandler, served

RUNNING = "toy_requests_running"
GENERATED = "toy_tokens_generated_total"
LACKS = "the toy engine exports no latency histograms"


def _normalise(expo: Exposition, answers: Answers) -> EngineScrape:
    running, generated = expo.get(RUNNING), expo.get(GENERATED)
    if not running or not generated:
        raise ScrapeProblem(f"no {RUNNING} or {GENERATED}")
    name = answers.model_name or "toy-model"
    model = ModelScrape(
        model_name=name,
        engines=(),
        counters={"generation_tokens": generated[0][1]},
        histograms={},
        running=running[0][1],
        waiting=0.0,
        waiting_by_reason={},
        kv_usage_by_engine={},
        sleep=None,
        lacks={"latency": LACKS},
    )
    return EngineScrape(models={name: model})


def _version(found: object) -> str | None:
    return found.get("build") if isinstance(found, dict) and isinstance(found.get("build"), str) else None


ENGINE = Engine(
    EngineReading(
        kind="toy",
        label="Toy",
        wanted={RUNNING, GENERATED}.__contains__,
        normalise=_normalise,
        version=_version,
    ),
    PollPlan(info_path="/about"),
)


class ToyServer:
    """The toy engine's server: ``running`` requests, and ``per_scrape`` more tokens generated at each
    ``/metrics`` asked (so a rate shows from the second scrape on)."""

    def __init__(self, per_scrape: int = 50) -> None:
        self.tokens = 0
        self.per_scrape = per_scrape
        self.running = 1
        self.asked: list[str] = []
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.asked.append(self.path)
                if self.path == "/health":
                    self._send(200, b"ok", "text/plain")
                elif self.path == "/metrics":
                    server.tokens += server.per_scrape
                    body = (
                        f"# TYPE {RUNNING} gauge\n{RUNNING} {server.running}\n"
                        f"# TYPE {GENERATED} counter\n{GENERATED} {server.tokens}\n"
                    )
                    self._send(200, body.encode(), "text/plain; version=0.0.4")
                elif self.path == "/about":
                    self._send(200, json.dumps({"build": "toy-1.0"}).encode(), "application/json")
                elif self.path == "/v1/models":
                    self._send(200, json.dumps({"data": [{"id": "toy-model"}]}).encode(), "application/json")
                else:
                    self._send(404, b"no", "text/plain")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])

    @contextmanager
    def serving(self) -> Iterator[ToyServer]:
        with served(self.httpd):
            yield self


def install(site: Path, target: str = "tests.support.toy_engine:ENGINE") -> Path:
    """The entry point of an installed package offering the engine ``target``, under ``site`` (a folder
    to put on ``PYTHONPATH``); ``site``."""
    info = site / "sparktui_toy_engine-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sparktui-toy-engine\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[sparktui.engines]\ntoy = {target}\n")
    return site


def config(port: int) -> str:
    """A fleet of one node whose one instance runs the toy engine."""
    return (
        "poll_interval_s = 0.3\n"
        '[[nodes]]\nname = "box"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
        f'[[nodes.vllm]]\nname = "toy"\nengine = "toy"\nport = {port}\ncanary = false\n'
    )
