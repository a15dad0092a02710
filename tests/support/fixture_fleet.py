"""Real HTTP servers on 127.0.0.1 that serve the fixture files: a vLLM instance replaying a scenario's
scrapes, a GPU exporter, node_exporter and side services, with switchable faults.

Used by the integration tests, the benchmarks and the README's first command:

    python tests/support/fixture_fleet.py -- sparktui snapshot

starts three fixture nodes, writes their config, runs the command with ``SPARKTUI_CONFIG`` set, and
stops the servers. Without a command it serves until Ctrl-C and prints the config path.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

DATA = Path(__file__).resolve().parents[1] / "data"
VLLM = DATA / "vllm-0.33"
EXPORTERS = DATA / "exporters"
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def filter_exposition(text: str, names: set[str]) -> str:
    """What prometheus_client serves for ``?name[]=...``: only those samples and their families' HELP/TYPE."""
    out: list[str] = []
    pending: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            pending.append(line)
            continue
        head = line.split("{", 1)[0].split(" ", 1)[0]
        if head in names:
            out.extend(pending)
            pending = []
            out.append(line)
        elif pending and not line.startswith("#"):
            pending = []
    return "\n".join(out) + "\n" if out else ""


@dataclass
class Faults:
    """What a test can break. Everything is read at request time."""

    health_status: int = 200
    metrics: str = "normal"  # normal | garbage | truncated | huge | slow | status500 | bad-bucket-bound
    models_status: int | None = None
    delay_s: float = 0.0
    drop_families: tuple[str, ...] = ()
    redirect_to: str | None = None  # every path answers 302 to it (an auth proxy in front of the server)


@dataclass
class Endpoint:
    """One fake server's content. ``pages`` maps a path to a callable giving (status, type, body)."""

    name: str
    faults: Faults = field(default_factory=Faults)
    scrapes: list[str] = field(default_factory=list)  # vLLM scrape texts, in order
    static_metrics: str | None = None
    version: str = "0.33.0"
    api_key: str | None = None
    model_id: str = "RedHatAI/Qwen3.6-35B-A3B-NVFP4"
    max_model_len: int = 131072  # any integer JSON can write (a hostile one: 10**400)
    index: int = 0
    advance_every_s: float | None = None  # None: tests move ``index`` themselves
    started: float = field(default_factory=time.monotonic)
    requests: list[str] = field(default_factory=list)

    def current_scrape(self) -> str:
        if not self.scrapes:
            return self.static_metrics or ""
        index = self.index
        if self.advance_every_s:
            index = int((time.monotonic() - self.started) / self.advance_every_s)
        return self.scrapes[min(index, len(self.scrapes) - 1)]


class _Handler(BaseHTTPRequestHandler):
    endpoint: ClassVar[Endpoint]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def _send(
        self, status: int, body: bytes, content_type: str = "application/json", length: int | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        ep = self.endpoint
        url = urlsplit(self.path)
        ep.requests.append(self.path)
        faults = ep.faults
        if faults.delay_s:
            time.sleep(faults.delay_s)
        if faults.redirect_to is not None:
            self.send_response(302)
            self.send_header("Location", faults.redirect_to)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif url.path == "/health":
            self._send(faults.health_status, b"")
        elif url.path == "/version":
            self._send(200, json.dumps({"version": ep.version}).encode())
        elif url.path == "/v1/models":
            self._models()
        elif url.path == "/metrics":
            self._metrics(parse_qs(url.query).get("name[]"))
        else:
            self._send(404, b'{"detail":"Not Found"}')

    def _models(self) -> None:
        ep = self.endpoint
        if ep.faults.models_status is not None:
            self._send(ep.faults.models_status, b'{"error":"boom"}')
            return
        if ep.api_key is not None and self.headers.get("Authorization") != f"Bearer {ep.api_key}":
            self._send(401, b'{"error":"Unauthorized"}')
            return
        card = {
            "id": ep.model_id,
            "object": "model",
            "created": 0,
            "owned_by": "vllm",
            "root": ep.model_id,
            "parent": None,
            "max_model_len": ep.max_model_len,
        }
        self._send(200, json.dumps({"object": "list", "data": [card]}).encode())

    def _metrics(self, names: list[str] | None) -> None:
        ep = self.endpoint
        mode = ep.faults.metrics
        text = ep.current_scrape()
        for family in ep.faults.drop_families:
            text = "\n".join(line for line in text.splitlines() if family not in line) + "\n"
        if names:
            text = filter_exposition(text, set(names))
        body = text.encode()
        if mode == "garbage":
            self._send(200, b"<html><body>502 Bad Gateway</body></html>\n", "text/html")
        elif mode == "status500":
            self._send(500, b"Internal Server Error", "text/plain")
        elif mode == "truncated":
            # Promise the whole body, send half, close: the client sees the connection end early.
            self._send(200, body[: len(body) // 2], METRICS_TYPE, length=len(body))
            self.close_connection = True
        elif mode == "bad-bucket-bound":
            self._send(200, body.replace(b'le="0.001"', b'le="abc"', 1), METRICS_TYPE)
        elif mode == "huge":
            self._send(200, body * 200, METRICS_TYPE)
        elif mode == "slow":
            time.sleep(3.0)
            self._send(200, body, METRICS_TYPE)
        else:
            self._send(200, body, METRICS_TYPE)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        # Clients that give up (timeouts, size caps) reset the connection: expected here.
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class FixtureServer:
    """A ThreadingHTTPServer on 127.0.0.1 (port 0) serving one ``Endpoint``."""

    def __init__(self, endpoint: Endpoint) -> None:
        handler = type(f"Handler_{endpoint.name}", (_Handler,), {"endpoint": endpoint})
        self.endpoint = endpoint
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def start(self) -> FixtureServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def node_exporter_page(meminfo: str, pressure: str) -> str:
    """node_exporter's meminfo and pressure collectors' output for a /proc/meminfo and PSI text."""
    lines: list[str] = []
    for raw in meminfo.splitlines():
        key, _, rest = raw.partition(":")
        parts = rest.split()
        if not parts:
            continue
        name = key.replace("(", "_").replace(")", "")
        value = float(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
        metric = f"node_memory_{name}_bytes" if parts[1:] == ["kB"] else f"node_memory_{name}"
        lines += [
            f"# HELP {metric} Memory information field {name}.",
            f"# TYPE {metric} gauge",
            f"{metric} {value:g}",
        ]
    for raw in pressure.splitlines():
        kind, *fields = raw.split()
        total = dict(f.split("=") for f in fields)["total"]
        metric = "waiting" if kind == "some" else "stalled"
        name = f"node_pressure_memory_{metric}_seconds_total"
        lines += [
            f"# HELP {name} Total time in seconds of memory {metric}.",
            f"# TYPE {name} counter",
            f"{name} {float(total) / 1e6:g}",
        ]
    return "\n".join(lines) + "\n"


def gb10_nvidia_exporter_page() -> str:
    """The real H100 capture less its memory series: what nvidia_gpu_exporter shows on a GB10,
    where nvidia-smi answers [N/A] for memory and the exporter omits the series."""
    text = (EXPORTERS / "nvidia_gpu_exporter.prom").read_text()
    return "\n".join(line for line in text.splitlines() if "nvidia_smi_memory_" not in line) + "\n"


SLEEP_FLAGS = {  # vllm:engine_sleep_state after /sleep?level=N (vLLM's record_sleep_state)
    0: {"awake": 1.0, "weights_offloaded": 0.0, "discard_all": 0.0},
    1: {"awake": 0.0, "weights_offloaded": 1.0, "discard_all": 0.0},
    2: {"awake": 0.0, "weights_offloaded": 0.0, "discard_all": 1.0},
}


def put_to_sleep(text: str, level: int) -> str:
    """A scrape as the engine publishes it asleep at ``level`` (1, 2; 0: awake again). A real vLLM
    on CPU cannot sleep (no sleep mode there), so the flags are set the way ``record_sleep_state`` does."""
    flags = SLEEP_FLAGS[level]
    out = []
    for line in text.splitlines():
        if line.startswith("vllm:engine_sleep_state{"):
            state = line.split('sleep_state="', 1)[1].split('"', 1)[0]
            out.append(f"{line.rsplit(' ', 1)[0]} {flags[state]}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def scenario_scrapes(scenario: str) -> list[str]:
    entries = json.loads((VLLM / scenario / "scrapes.json").read_text())
    return [(VLLM / scenario / e["file"]).read_text() for e in entries]


def free_port() -> int:
    """A port nothing listens on (bound then released), for 'connection refused' tests."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass
class FixtureNode:
    name: str
    vllm: FixtureServer
    gpu: FixtureServer
    node_exporter: FixtureServer
    service: FixtureServer

    def servers(self) -> list[FixtureServer]:
        return [self.vllm, self.gpu, self.node_exporter, self.service]


NODE_SETUPS = (
    ("spark1", "mtp2-steady", "gb10"),
    ("spark2", "mtp3-poor-pos2", "dgx_spark_prometheus.prom"),
    ("spark3", "restart", "nvidia_gpu_exporter.prom"),
)


def start_node(name: str, scenario: str, gpu_file: str, advance_every_s: float | None = None) -> FixtureNode:
    """A node's servers. ``gpu_file`` names a capture in tests/data/exporters, or "gb10"."""
    vllm = Endpoint(name=f"{name}-vllm", scrapes=scenario_scrapes(scenario), advance_every_s=advance_every_s)
    gpu_page = gb10_nvidia_exporter_page() if gpu_file == "gb10" else (EXPORTERS / gpu_file).read_text()
    gpu = Endpoint(name=f"{name}-gpu", static_metrics=gpu_page)
    host_page = node_exporter_page(
        (DATA / "proc" / "meminfo-gb10.txt").read_text(), (DATA / "proc" / "pressure-memory.txt").read_text()
    )
    node = Endpoint(name=f"{name}-node", static_metrics=host_page)
    service = Endpoint(name=f"{name}-asr")
    return FixtureNode(
        name=name,
        vllm=FixtureServer(vllm).start(),
        gpu=FixtureServer(gpu).start(),
        node_exporter=FixtureServer(node).start(),
        service=FixtureServer(service).start(),
    )


def node_config(node: FixtureNode, *, interval_s: float = 1.0, extra_vllm: str = "") -> str:
    return f"""
[[nodes]]
name = "{node.name}"
host = "127.0.0.1"

[nodes.ssh]
enabled = false  # fixture nodes serve HTTP only

[[nodes.vllm]]
name = "vllm"
url = "{node.vllm.url}"
gpu_memory_utilization = 0.55
{extra_vllm}
[nodes.gpu_exporter]
url = "{node.gpu.url}/metrics"

[nodes.node_exporter]
url = "{node.node_exporter.url}/metrics"

[[nodes.services]]
name = "parakeet-asr"
kind = "asr"
url = "{node.service.url}/health"
"""


def fleet_config(nodes: list[FixtureNode], *, interval_s: float = 1.0, timeout_s: float = 1.0) -> str:
    head = f"poll_interval_s = {interval_s}\ntimeout_s = {timeout_s}\n"
    return head + "".join(node_config(n) for n in nodes)


@contextmanager
def fixture_fleet(advance_every_s: float | None = 1.0) -> Iterator[tuple[list[FixtureNode], Path]]:
    nodes = [start_node(name, scenario, gpu, advance_every_s) for name, scenario, gpu in NODE_SETUPS]
    with tempfile.TemporaryDirectory(prefix="sparktui-fixtures-") as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(fleet_config(nodes))
        try:
            yield nodes, config
        finally:
            for node in nodes:
                for server in node.servers():
                    server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="command to run against the fixture fleet")
    args = parser.parse_args(argv)
    command = [c for c in args.command if c != "--"]
    with fixture_fleet() as (nodes, config):
        env = dict(os.environ, SPARKTUI_CONFIG=str(config))
        if command:
            return subprocess.call(command, env=env)
        print(f"fixture fleet of {len(nodes)} nodes on 127.0.0.1; config: {config}")
        print(f"try: SPARKTUI_CONFIG={config} sparktui snapshot   (Ctrl-C stops)")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
