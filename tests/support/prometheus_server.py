"""A real Prometheus server for tests and benchmarks: Debian's ``prometheus`` package, run by hand.

``PrometheusServer(urls)`` writes a config that scrapes the given ``/metrics`` URLs every second,
starts ``/usr/bin/prometheus`` on 127.0.0.1 and a free port with its own data folder in a temporary
directory (never the system service), waits until every target is up, and stops it by PID::

    async with PrometheusServer(fleet_metrics_urls(fleet)) as prometheus:
        ... prometheus.url ...

``require_prometheus()`` skips a test when the binary is missing, and fails it under CI=true, where
``.ci/run`` installs the package.
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
from urllib.parse import urlsplit

import httpx

from sparktui.model.specs import FleetSpec

PROMETHEUS_BINARY = Path("/usr/bin/prometheus")
INSTALL_HINT = "Prometheus is not installed: apt-get install prometheus (Debian's package; .ci/run installs it)"


def prometheus_binary() -> Path | None:
    if PROMETHEUS_BINARY.exists():
        return PROMETHEUS_BINARY
    found = shutil.which("prometheus")
    return Path(found) if found else None


def require_prometheus() -> Path:
    """The binary, or skip the test (fail it when CI=true: CI must have installed it)."""
    import pytest

    found = prometheus_binary()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    return found


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
    config = {
        "global": {"scrape_interval": f"{interval_s:g}s", "scrape_timeout": f"{interval_s:g}s"},
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


class PrometheusServer:
    """One Prometheus process scraping ``urls``; ``async with`` starts it and stops it."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        interval_s: float = 1.0,
        binary: Path | None = None,
        web_config: str | None = None,
        ready_timeout_s: float = 60.0,
    ) -> None:
        self.urls = list(urls)
        self.interval_s = interval_s
        self.binary = binary or prometheus_binary() or PROMETHEUS_BINARY
        self.web_config = web_config  # --web.config.file contents (basic auth users, TLS)
        self.ready_timeout_s = ready_timeout_s
        self.port = 0
        self.directory: Path | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.headers: dict[str, str] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> PrometheusServer:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        self.directory = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="sparktui-prometheus-"))
        config = self.directory / "prometheus.yml"
        config.write_text(scrape_config(self.urls, self.interval_s))
        self.port = free_port()
        args = [
            str(self.binary),
            f"--config.file={config}",
            f"--storage.tsdb.path={self.directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        if self.web_config is not None:
            web = self.directory / "web.yml"
            web.write_text(self.web_config)
            args.append(f"--web.config.file={web}")
        log = (self.directory / "prometheus.log").open("wb")
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
        path = self.directory / "prometheus.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    async def wait_until_up(self, count: int | None = None) -> None:
        """Until Prometheus answers and every target (or ``count`` of them) has been scraped up."""
        wanted = len(self.urls) if count is None else count
        deadline = time.monotonic() + self.ready_timeout_s
        async with httpx.AsyncClient(trust_env=False, timeout=2.0, headers=self.headers) as client:
            while True:
                if self.process is not None and self.process.returncode is not None:
                    raise RuntimeError(f"prometheus exited with {self.process.returncode}: {self.log_tail()}")
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                    answer = (await client.get(f"{self.url}/api/v1/query", params={"query": "up == 1"})).json()
                    if len(answer["data"]["result"]) >= wanted:
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"prometheus: targets not up within {self.ready_timeout_s:g} s: {self.log_tail()}"
                    )
                await asyncio.sleep(0.2)

    async def query(self, expr: str, at: float | None = None) -> list[dict[str, object]]:
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        async with httpx.AsyncClient(trust_env=False, timeout=10.0, headers=self.headers) as client:
            answer = (await client.post(f"{self.url}/api/v1/query", data=params)).json()
        if answer.get("status") != "success":
            raise RuntimeError(f"prometheus: {expr}: {answer.get('error')}")
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
