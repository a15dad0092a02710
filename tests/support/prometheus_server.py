"""Real Prometheus-compatible servers for tests and benchmarks, Debian's packages run by hand.

``PrometheusServer(urls)`` (``prometheus``) and ``VictoriaMetricsServer(urls)`` (single-node
``victoria-metrics``, which scrapes with the same Prometheus scrape config) write a config that scrapes
the given ``/metrics`` URLs every second, start the binary on 127.0.0.1 and a free port with its own
data folder in a temporary directory (never the system service), wait until every target is up, and
stop it by PID::

    async with PrometheusServer(fleet_metrics_urls(fleet)) as prometheus:
        ... prometheus.url ...

``require_prometheus()`` / ``require_victoria_metrics()`` skip a test when the binary is missing, and
fail it under CI=true, where ``.ci/run`` installs the package.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

import httpx

from sparktui.model.specs import FleetSpec
from sparktui.sources.prometheus import FRESH

PROMETHEUS_BINARY = Path("/usr/bin/prometheus")
INSTALL_HINT = "Prometheus is not installed: apt-get install prometheus (Debian's package; .ci/run installs it)"
VICTORIA_METRICS_BINARY = Path("/usr/bin/victoria-metrics")
VICTORIA_METRICS_HINT = (
    "VictoriaMetrics is not installed: apt-get install victoria-metrics (Debian's package; .ci/run installs it)"
)
# What makes a fresh scrape visible to the next query (docs/prometheus.md#victoriametrics): no 30 s
# latency offset, no cached answers.
VICTORIA_METRICS_FLAGS = ("-search.latencyOffset=0s", "-search.disableCache")


def _binary(path: Path) -> Path | None:
    if path.exists():
        return path
    found = shutil.which(path.name)
    return Path(found) if found else None


def prometheus_binary() -> Path | None:
    return _binary(PROMETHEUS_BINARY)


def victoria_metrics_binary() -> Path | None:
    return _binary(VICTORIA_METRICS_BINARY)


def _require(found: Path | None, hint: str) -> Path:
    """The binary, or skip the test (fail it when CI=true: CI must have installed it)."""
    import pytest

    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(hint)
        pytest.skip(hint)
    return found


def require_prometheus() -> Path:
    return _require(prometheus_binary(), INSTALL_HINT)


def require_victoria_metrics() -> Path:
    return _require(victoria_metrics_binary(), VICTORIA_METRICS_HINT)


def fleet_metrics_urls(fleet: FleetSpec) -> list[str]:
    """Every metrics page of the fleet: each vLLM's ``/metrics`` and each exporter's URL."""
    urls: list[str] = []
    for node in fleet.nodes:
        urls.extend(f"{v.base_url}/metrics" for v in node.vllm if v.base_url)
        urls.extend(e.url for e in (node.gpu_exporter, node.node_exporter) if e is not None)
    return urls


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def scrape_config(urls: Iterable[str], interval_s: float) -> str:
    """prometheus.yml (JSON is YAML): one job, the targets grouped by metrics path."""
    groups: dict[str, list[str]] = {}
    for url in urls:
        parts = urlsplit(url)
        groups.setdefault(parts.path or "/metrics", []).append(parts.netloc)
    # Prometheus's durations are whole numbers of a unit: "1s", "100ms" (never "0.1s")
    interval = f"{interval_s:g}s" if float(interval_s).is_integer() else f"{round(interval_s * 1000)}ms"
    config = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval},
        "scrape_configs": [
            {
                "job_name": "sparktui",
                "static_configs": [
                    {"targets": sorted(targets), "labels": {"__metrics_path__": path}}
                    for path, targets in sorted(groups.items())
                ],
            }
        ],
    }
    return json.dumps(config, indent=2)


class ScrapingServer:
    """One server process scraping ``urls`` and answering Prometheus's query API; ``async with`` starts
    it and stops it. Subclasses say how to run their binary (``command``)."""

    name = "server"
    log_name = "server.log"
    default_flags: tuple[str, ...] = ()

    def __init__(
        self,
        urls: Sequence[str],
        *,
        interval_s: float = 1.0,
        binary: Path | None = None,
        flags: Sequence[str] | None = None,
        ready_timeout_s: float = 60.0,
    ) -> None:
        """``flags``: more command-line flags for the binary (None: ``default_flags``)."""
        self.urls = list(urls)
        self.interval_s = interval_s
        self.binary = binary or self.default_binary()
        self.flags = tuple(self.default_flags if flags is None else flags)
        self.ready_timeout_s = ready_timeout_s
        self.port = 0
        self.directory: Path | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.headers: dict[str, str] = {}

    def default_binary(self) -> Path:
        raise NotImplementedError

    def command(self, config: Path, directory: Path) -> list[str]:
        """The command line that scrapes as ``config`` says, keeps its data in ``directory`` and listens
        on 127.0.0.1:``self.port``."""
        raise NotImplementedError

    async def make_searchable(self, client: httpx.AsyncClient) -> None:
        """Before a query of the test's own: what the server needs so that the samples it has scraped
        are in the answer (nothing, for Prometheus)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        self.directory = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=f"sparktui-{self.name}-"))
        config = self.directory / "prometheus.yml"
        config.write_text(scrape_config(self.urls, self.interval_s))
        self.port = free_port()
        args = self.command(config, self.directory)
        log = (self.directory / self.log_name).open("wb")
        self.process = await asyncio.create_subprocess_exec(*args, stdout=log, stderr=log)
        log.close()
        try:
            await self.wait_until_up()
        except BaseException:
            await self.stop()
            raise

    def log_tail(self) -> str:
        if self.directory is None:
            return ""
        path = self.directory / self.log_name
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    async def wait_until_up(self, count: int | None = None) -> None:
        """Until the server answers and every target (or ``count`` of them) has been scraped up."""
        wanted = len(self.urls) if count is None else count
        deadline = time.monotonic() + self.ready_timeout_s
        async with httpx.AsyncClient(trust_env=False, timeout=2.0, headers=self.headers) as client:
            while True:
                if self.process is not None and self.process.returncode is not None:
                    raise RuntimeError(f"{self.name} exited with {self.process.returncode}: {self.log_tail()}")
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                    await self.make_searchable(client)
                    form = {"query": "up == 1", **FRESH}
                    answer = (await client.get(f"{self.url}/api/v1/query", params=form)).json()
                    if len(answer["data"]["result"]) >= wanted:
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{self.name}: targets not up within {self.ready_timeout_s:g} s: {self.log_tail()}"
                    )
                await asyncio.sleep(0.2)

    async def query(self, expr: str, at: float | None = None) -> list[dict[str, object]]:
        params = {"query": expr, **FRESH} if at is None else {"query": expr, "time": f"{at:.3f}", **FRESH}
        async with httpx.AsyncClient(trust_env=False, timeout=10.0, headers=self.headers) as client:
            await self.make_searchable(client)
            answer = (await client.post(f"{self.url}/api/v1/query", data=params)).json()
        if answer.get("status") != "success":
            raise RuntimeError(f"{self.name}: {expr}: {answer.get('error')}")
        result: list[dict[str, object]] = answer["data"]["result"]
        return result

    async def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self.directory is not None:
            await asyncio.to_thread(shutil.rmtree, self.directory, True)
            self.directory = None


class PrometheusServer(ScrapingServer):
    """Debian's ``prometheus``."""

    name = "prometheus"
    log_name = "prometheus.log"
    web_config: str | None = None  # --web.config.file contents (basic auth users, TLS), set before start()

    def default_binary(self) -> Path:
        return prometheus_binary() or PROMETHEUS_BINARY

    def command(self, config: Path, directory: Path) -> list[str]:
        args = [
            str(self.binary),
            f"--config.file={config}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
            *self.flags,
        ]
        if self.web_config is not None:
            web = directory / "web.yml"
            web.write_text(self.web_config)
            args.append(f"--web.config.file={web}")
        return args


class VictoriaMetricsServer(ScrapingServer):
    """Debian's single-node ``victoria-metrics``, scraping by itself (``-promscrape.config``).

    By default VictoriaMetrics answers a query for "now" as of 30 s ago (``-search.latencyOffset``), so
    that samples still on their way are complete; with one scraper on loopback there are none on their
    way, and the flag is set to 0. ``-search.disableCache``: a test asks for the same instants again
    after the data changed. Samples become searchable when VictoriaMetrics flushes its in-memory
    buffers, about once a second, and a new series' index entry up to ~10 s after its first sample:
    the test's own queries ask for a flush first (``/internal/force_flush``), sparktui's do not."""

    name = "victoria-metrics"
    log_name = "victoria-metrics.log"
    default_flags = VICTORIA_METRICS_FLAGS  # flags=() runs it with VictoriaMetrics's own defaults

    def default_binary(self) -> Path:
        return victoria_metrics_binary() or VICTORIA_METRICS_BINARY

    async def make_searchable(self, client: httpx.AsyncClient) -> None:
        (await client.get(f"{self.url}/internal/force_flush")).raise_for_status()

    def command(self, config: Path, directory: Path) -> list[str]:
        return [
            str(self.binary),
            f"-promscrape.config={config}",
            f"-storageDataPath={directory / 'data'}",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            *self.flags,
            "-loggerLevel=WARN",
        ]
