"""What collecting costs per node-scrape: ``sparktui watch`` beside Prometheus, and the floor.

    python benchmarks/bench_collect.py [--nodes 8 32 64] [--seconds 30] [--warmup 10] [--write docs/performance.md]

For each fleet size a fresh ``sparktui demo --serve-only --nodes N`` runs in its own process, and these
run against it one after another, each in its own process, each measured for the same seconds after a
warm-up:

- ``sparktui watch`` (the dashboard's collection and rules with no screen): each second, every node's
  vLLM ``/health`` and ``/metrics?name[]=...``, GPU exporter and side services over HTTP, parsed and
  derived, and the host sampler and one log stream per instance over SSH;
- the same with ``enabled = false`` in every ``[nodes.ssh]`` table: HTTP only, like Prometheus;
- Prometheus (Debian's package) scraping every vLLM ``/metrics`` (all of it) and GPU exporter each
  second, and storing every series;
- the floor: a bare asyncio loop of keep-alive GETs of the same URLs at the same rate, bodies read and
  dropped, once for Prometheus's URLs and once for sparktui's.

CPU is user + system of the process and its children over the window; it is divided by the
node-scrapes each really did in that window: for sparktui the observations its poll loops delivered
(a counting sink beside the watcher, as a recorder would be), for Prometheus its own
``prometheus_target_interval_length_seconds_count``, for the floor its own count of answered rounds.
A node-scrape is every target of one node fetched once; a target-scrape is one vLLM ``/metrics`` or one
exporter.

The child processes are this script again (``_watch`` and ``_floor`` as the first argument).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import cpu_s, demo_fleet, machine_line, stop_on_sigterm, tree_cpu_s, write_section

from sparktui.config import load_config
from sparktui.engines.vllm.scrape import wanted_sample_names
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import HostUpdate, NodeObservation
from sparktui.model.specs import FleetSpec

SECTION = "bench_collect"
HEADING = """## Collection cost per node-scrape, beside Prometheus (issue: performance)

Target: `sparktui watch` costs at most what Prometheus costs per node-scrape, at 8, 32 and 64 nodes
polled every second. Prometheus is Go, but it fetches, parses and stores every series; sparktui needs a
few dozen of the ~640 lines of a vLLM scrape, asks vLLM for only those (`/metrics?name[]=`) and parses
only what it uses. The floor is the cheapest fetch of the same bodies.

Command: `python benchmarks/bench_collect.py --nodes 8 32 64 --seconds 30 --write docs/performance.md`"""
PROMETHEUS = Path("/usr/bin/prometheus")
PROMETHEUS_HINT = "apt-get install prometheus (Debian's package)"
FETCH_TIMEOUT_S = 2.0
SETTLE_S = 2.0  # between two collectors: the last one's connections and SSH sessions close


@dataclass(frozen=True, slots=True)
class Run:
    """One collector measured against one fleet."""

    collector: str
    nodes: int
    seconds: float  # the measured window
    cpu_s: float
    node_scrapes: int  # every target of one node fetched and answered once
    target_scrapes: int  # vLLM /metrics and exporters answered
    failed: int  # node-scrapes (or target-scrapes, for Prometheus) that did not complete
    demo_cpu_s: float
    host_samples: int | None = None
    samples_per_target_scrape: float | None = None  # series stored, for Prometheus
    bytes_per_node_scrape: float | None = None  # for the floor

    @property
    def ms_per_node_scrape(self) -> float:
        return self.cpu_s * 1000 / self.node_scrapes if self.node_scrapes else float("nan")

    @property
    def ms_per_target_scrape(self) -> float:
        return self.cpu_s * 1000 / self.target_scrapes if self.target_scrapes else float("nan")

    @property
    def core_pct(self) -> float:
        return self.cpu_s / self.seconds * 100

    @property
    def scrapes_per_node_s(self) -> float:
        return self.node_scrapes / self.nodes / self.seconds


@dataclass(frozen=True, slots=True)
class Schedule:
    """How each collector is measured: against which demo process, after what warm-up, for how long."""

    demo_pid: int
    warmup_s: float
    seconds: float


@dataclass(frozen=True, slots=True)
class Window:
    started: float  # wall clock
    ended: float
    cpu_s: float
    demo_cpu_s: float


# --- the fleet's URLs -------------------------------------------------------------------------------


def filtered_metrics_url(base: str) -> str:
    """``/metrics`` asking for only the samples sparktui reads, as its collector asks."""
    return f"{base}/metrics?" + urllib.parse.urlencode({"name[]": list(wanted_sample_names())}, doseq=True)


def prometheus_targets(fleet: FleetSpec) -> list[list[str]]:
    """Per node, what Prometheus scrapes: each vLLM's whole ``/metrics`` and each exporter."""
    return [
        [f"{v.base_url}/metrics" for v in node.vllm if v.base_url]
        + [e.url for e in (node.gpu_exporter, node.node_exporter) if e is not None]
        for node in fleet.nodes
    ]


def sparktui_requests(fleet: FleetSpec) -> list[list[tuple[str, bool]]]:
    """Per node, what sparktui's poll asks each second, each URL with whether it is a target (a metrics
    page): ``/health`` and the filtered ``/metrics`` of each vLLM, the exporters, the side services.
    (``/version`` and ``/v1/models`` come every 60th and 30th poll: left out.)"""
    plan: list[list[tuple[str, bool]]] = []
    for node in fleet.nodes:
        urls: list[tuple[str, bool]] = []
        for v in node.vllm:
            if v.base_url:
                metrics = filtered_metrics_url(v.base_url) if v.metrics_filter else f"{v.base_url}/metrics"
                urls += [(f"{v.base_url}/health", False), (metrics, True)]
        urls += [(e.url, True) for e in (node.gpu_exporter, node.node_exporter) if e is not None]
        urls += [(s.url, False) for s in node.services]
        plan.append(urls)
    return plan


def without_ssh(config_text: str) -> str:
    """The same fleet config with SSH turned off for every node (no host sampler, no log streams)."""
    return config_text.replace("[nodes.ssh]\n", "[nodes.ssh]\nenabled = false\n")


# --- measuring a child process ----------------------------------------------------------------------


def _measure_window(child: subprocess.Popen[bytes], schedule: Schedule) -> Window:
    """CPU of ``child`` (and its children) and of the demo over the schedule's seconds, after its warm-up."""
    demo_pid = schedule.demo_pid
    deadline = time.monotonic() + schedule.warmup_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"exited with status {child.returncode} during the warm-up")
        time.sleep(0.2)
    started, cpu0, demo0 = time.time(), tree_cpu_s(child.pid), cpu_s(demo_pid)
    time.sleep(schedule.seconds)
    if child.poll() is not None:
        raise RuntimeError(f"exited with status {child.returncode} while measured")
    cpu1, demo1, ended = tree_cpu_s(child.pid), cpu_s(demo_pid), time.time()
    return Window(started, ended, cpu1 - cpu0, demo1 - demo0)


def _stop(process: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _tail(path: Path, chars: int = 1500) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def _child(mode: str, *args: str, tmp: Path) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp / f"{mode}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), mode, *args], stdout=out, stderr=subprocess.STDOUT
        )
    return process, log


# --- sparktui watch -----------------------------------------------------------------------------------


class ScrapeCount:
    """A ``FleetSink`` beside the watcher: when each node-scrape and host sample arrived, and what it held."""

    def __init__(self) -> None:
        self.scrapes: list[tuple[float, int, int]] = []  # (wall, targets answered 2xx, targets asked)
        self.hosts: list[float] = []
        self.errors = 0

    def observation(self, observation: NodeObservation) -> None:
        answered = asked = 0
        for result in (
            *(v.metrics for v in observation.vllm),
            observation.gpu_exporter,
            observation.node_exporter,
        ):
            if result is not None:
                asked += 1
                answered += result.ok
        self.scrapes.append((observation.wall, answered, asked))

    def host(self, update: HostUpdate) -> None:
        if update.sample is not None:
            self.hosts.append(time.time())

    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None:
        pass

    def error(self, node: str, exc: Exception) -> None:
        self.errors += 1


def watch_child(config: Path, counts: Path) -> int:
    """``sparktui watch --config CONFIG`` as its ``main`` runs it, with a ``ScrapeCount`` beside it; the
    counts go to ``counts`` when SIGTERM stops it."""
    from sparktui.headless.watch import watch

    fleet = load_config(config)
    count = ScrapeCount()

    async def run() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        return await watch(fleet, stop=stop, taps=(count,))

    code = asyncio.run(run())
    counts.write_text(json.dumps({"scrapes": count.scrapes, "hosts": count.hosts, "errors": count.errors}))
    return code


def run_watch(label: str, config: Path, nodes: int, schedule: Schedule) -> Run:
    with tempfile.TemporaryDirectory(prefix="sparktui-bench-watch-") as tmp_name:
        tmp = Path(tmp_name)
        counts = tmp / "counts.json"
        child, log = _child("_watch", str(config), str(counts), tmp=tmp)
        try:
            window = _measure_window(child, schedule)
        except RuntimeError as exc:
            raise SystemExit(f"bench_collect: sparktui watch {exc}; its output:\n{_tail(log)}") from None
        finally:
            _stop(child)
        if not counts.exists():
            raise SystemExit(f"bench_collect: sparktui watch stopped without its counts; its output:\n{_tail(log)}")
        found = json.loads(counts.read_text())
    inside = [s for s in found["scrapes"] if window.started <= s[0] < window.ended]
    complete = [s for s in inside if s[2] and s[1] == s[2]]
    return Run(
        collector=label,
        nodes=nodes,
        seconds=window.ended - window.started,
        cpu_s=window.cpu_s,
        node_scrapes=len(complete),
        target_scrapes=sum(s[1] for s in inside),
        failed=len(inside) - len(complete),
        demo_cpu_s=window.demo_cpu_s,
        host_samples=sum(1 for t in found["hosts"] if window.started <= t < window.ended),
    )


# --- Prometheus ---------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def scrape_config(urls: Sequence[str], interval_s: float) -> str:
    """prometheus.yml (JSON is YAML): one job, the targets grouped by metrics path."""
    groups: dict[str, list[str]] = {}
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        groups.setdefault(parts.path or "/metrics", []).append(parts.netloc)
    config = {
        "global": {"scrape_interval": f"{interval_s:g}s", "scrape_timeout": f"{interval_s:g}s"},
        "scrape_configs": [
            {
                "job_name": "bench",
                "static_configs": [
                    {"targets": sorted(targets), "labels": {"__metrics_path__": path}}
                    for path, targets in sorted(groups.items())
                ],
            }
        ],
    }
    return json.dumps(config, indent=2)


def _get(url: str, timeout_s: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as answer:
        body: bytes = answer.read()
        return body


def _query_scalar(base: str, expr: str) -> float | None:
    answer = json.loads(_get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
    result = answer.get("data", {}).get("result", [])
    return float(result[0]["value"][1]) if result else None


def _sum_of(exposition: str, name: str) -> float:
    """The sum of every sample of ``name`` (any labels) in Prometheus text."""
    total = 0.0
    for line in exposition.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


@contextlib.contextmanager
def prometheus(urls: Sequence[str], interval_s: float, ready_timeout_s: float) -> Iterator[tuple[int, str]]:
    """A Prometheus scraping ``urls``, in a temporary folder, until every target is up: (pid, base URL)."""
    with tempfile.TemporaryDirectory(prefix="sparktui-bench-prometheus-") as tmp_name:
        tmp = Path(tmp_name)
        config = tmp / "prometheus.yml"
        config.write_text(scrape_config(urls, interval_s))
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        log = tmp / "prometheus.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    str(PROMETHEUS),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + ready_timeout_s
            while True:
                if process.poll() is not None:
                    raise SystemExit(f"bench_collect: prometheus exited with {process.returncode}:\n{_tail(log)}")
                with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
                    if (_query_scalar(base, "count(up == 1)") or 0) >= len(urls):
                        break
                if time.monotonic() > deadline:
                    raise SystemExit(
                        f"bench_collect: prometheus: targets not up in {ready_timeout_s:g} s:\n{_tail(log)}"
                    )
                time.sleep(0.5)
            yield process.pid, base
        finally:
            _stop(process)


def run_prometheus(fleet: FleetSpec, schedule: Schedule) -> Run:
    per_node = prometheus_targets(fleet)
    urls = [url for node in per_node for url in node]
    with prometheus(urls, fleet.poll_interval_s, ready_timeout_s=60.0 + len(urls) / 4) as (pid, base):
        time.sleep(schedule.warmup_s)
        own0 = _get(f"{base}/metrics").decode()
        started, cpu0, demo0 = time.time(), tree_cpu_s(pid), cpu_s(schedule.demo_pid)
        time.sleep(schedule.seconds)
        cpu1, demo1, ended = tree_cpu_s(pid), cpu_s(schedule.demo_pid), time.time()
        own1 = _get(f"{base}/metrics").decode()
        up = _query_scalar(base, "count(up == 1)") or 0.0
    scrapes = _sum_of(own1, "prometheus_target_interval_length_seconds_count") - _sum_of(
        own0, "prometheus_target_interval_length_seconds_count"
    )
    samples = _sum_of(own1, "prometheus_tsdb_head_samples_appended_total") - _sum_of(
        own0, "prometheus_tsdb_head_samples_appended_total"
    )
    targets_per_node = len(urls) / len(per_node)
    return Run(
        collector="Prometheus",
        nodes=len(per_node),
        seconds=ended - started,
        cpu_s=cpu1 - cpu0,
        node_scrapes=round(scrapes / targets_per_node),
        target_scrapes=round(scrapes),
        failed=len(urls) - round(up),  # targets down at the end
        demo_cpu_s=demo1 - demo0,
        samples_per_target_scrape=samples / scrapes if scrapes else None,
    )


# --- the floor ----------------------------------------------------------------------------------------


class KeepAliveGet:
    """One keep-alive HTTP/1.1 connection GETting one URL again and again; the body is read and dropped."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        self.request = f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode("latin-1")
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def get(self) -> int:
        """The body's length; -1 for an answer that is not 2xx."""
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        writer.write(self.request)
        head = (await reader.readuntil(b"\r\n\r\n")).lower()
        at = head.index(b"content-length:") + 15
        length = int(head[at : head.index(b"\r\n", at)])
        await reader.readexactly(length)
        return length if head[9:10] == b"2" else -1

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


async def _floor_node(
    gets: list[tuple[KeepAliveGet, bool]], offset_s: float, interval_s: float, rounds: list[tuple[float, int, int, int]]
) -> None:
    """Every ``interval_s``: all of one node's GETs at once; a round is (wall, targets answered, all
    answered, bytes)."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(offset_s)
    next_at = loop.time()
    while True:
        results: list[int | BaseException] = []
        try:
            async with asyncio.timeout(FETCH_TIMEOUT_S):
                results = await asyncio.gather(*(get.get() for get, _ in gets), return_exceptions=True)
        except TimeoutError:
            pass
        if len(results) != len(gets):
            results = [TimeoutError()] * len(gets)
        for (get, _), result in zip(gets, results, strict=True):
            if isinstance(result, BaseException):
                get.close()
        answered = [(r, target) for r, (_, target) in zip(results, gets, strict=True) if isinstance(r, int) and r >= 0]
        rounds.append(
            (
                time.time(),
                sum(1 for _, target in answered if target),
                int(len(answered) == len(gets)),
                sum(r for r, _ in answered),
            )
        )
        next_at += interval_s
        now = loop.time()
        if next_at < now:
            next_at = now + interval_s - ((now - next_at) % interval_s)
        await asyncio.sleep(next_at - now)


async def _floor(plan: list[list[tuple[str, bool]]], interval_s: float) -> list[tuple[float, int, int, int]]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    rounds: list[tuple[float, int, int, int]] = []
    nodes = [[(KeepAliveGet(url), target) for url, target in urls] for urls in plan]
    tasks = [
        asyncio.create_task(_floor_node(gets, interval_s * index / len(nodes), interval_s, rounds))
        for index, gets in enumerate(nodes)
    ]
    await stop.wait()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for gets in nodes:
        for get, _ in gets:
            get.close()
    return rounds


def floor_child(plan_file: Path, out: Path) -> int:
    """The floor's process: reads its plan, GETs until SIGTERM, writes its rounds."""
    plan = json.loads(plan_file.read_text())
    rounds = asyncio.run(_floor([[(u, bool(t)) for u, t in node] for node in plan["nodes"]], plan["interval_s"]))
    out.write_text(json.dumps(rounds))
    return 0


def run_floor(label: str, plan: list[list[tuple[str, bool]]], interval_s: float, schedule: Schedule) -> Run:
    with tempfile.TemporaryDirectory(prefix="sparktui-bench-floor-") as tmp_name:
        tmp = Path(tmp_name)
        plan_file, out = tmp / "plan.json", tmp / "rounds.json"
        plan_file.write_text(json.dumps({"interval_s": interval_s, "nodes": plan}))
        child, log = _child("_floor", str(plan_file), str(out), tmp=tmp)
        try:
            window = _measure_window(child, schedule)
        except RuntimeError as exc:
            raise SystemExit(f"bench_collect: the floor {exc}; its output:\n{_tail(log)}") from None
        finally:
            _stop(child)
        if not out.exists():
            raise SystemExit(f"bench_collect: the floor stopped without its counts; its output:\n{_tail(log)}")
        rounds = json.loads(out.read_text())
    inside = [r for r in rounds if window.started <= r[0] < window.ended]
    complete = [r for r in inside if r[2]]
    return Run(
        collector=label,
        nodes=len(plan),
        seconds=window.ended - window.started,
        cpu_s=window.cpu_s,
        node_scrapes=len(complete),
        target_scrapes=sum(r[1] for r in inside),
        failed=len(inside) - len(complete),
        demo_cpu_s=window.demo_cpu_s,
        bytes_per_node_scrape=sum(r[3] for r in complete) / len(complete) if complete else None,
    )


# --- one fleet size, and the report -------------------------------------------------------------------


def measure(nodes: int, seconds: float, warmup_s: float) -> list[Run]:
    """Every collector in turn against one fresh demo fleet of ``nodes``."""
    runs: list[Run] = []
    with demo_fleet(nodes) as demo, tempfile.TemporaryDirectory(prefix="sparktui-bench-collect-") as tmp:
        schedule = Schedule(demo.pid, warmup_s, seconds)
        fleet = load_config(demo.config)
        http_only = Path(tmp) / "http-only.toml"
        http_only.write_text(without_ssh(demo.config.read_text()))
        if any(node.ssh.enabled for node in load_config(http_only).nodes):
            raise SystemExit("bench_collect: could not turn SSH off in the demo's config (no [nodes.ssh] tables?)")
        interval = fleet.poll_interval_s
        whole = [[(url, True) for url in urls] for urls in prometheus_targets(fleet)]
        steps: list[tuple[str, Callable[[], Run]]] = [
            ("sparktui watch", lambda: run_watch("sparktui watch", demo.config, nodes, schedule)),
            ("sparktui watch, HTTP only", lambda: run_watch("sparktui watch, HTTP only", http_only, nodes, schedule)),
            ("Prometheus", lambda: run_prometheus(fleet, schedule)),
            ("the floor", lambda: run_floor("floor: Prometheus's GETs", whole, interval, schedule)),
            ("the floor", lambda: run_floor("floor: sparktui's GETs", sparktui_requests(fleet), interval, schedule)),
        ]
        for index, (what, step) in enumerate(steps):
            if index:
                time.sleep(SETTLE_S)
            print(f"bench_collect: {nodes} nodes: {what} ...", file=sys.stderr, flush=True)
            runs.append(step())
    return runs


def _verdict(runs: Sequence[Run]) -> list[str]:
    lines: list[str] = []
    for nodes in sorted({r.nodes for r in runs}):
        by = {r.collector: r for r in runs if r.nodes == nodes}
        prom = by.get("Prometheus")
        if prom is None or not prom.node_scrapes:
            continue
        parts = []
        for label, name in (("with SSH", "sparktui watch"), ("HTTP only", "sparktui watch, HTTP only")):
            ours = by.get(name)
            if ours is None or not ours.node_scrapes:
                continue
            ratio = ours.ms_per_node_scrape / prom.ms_per_node_scrape
            verdict = "met" if ratio <= 1.0 else "not met"
            parts.append(
                f"{label} {ours.ms_per_node_scrape:.2f} ms = {ratio:.2f}x Prometheus's "
                f"{prom.ms_per_node_scrape:.2f} ms ({verdict})"
            )
        lines.append(f"- {nodes} nodes: " + "; ".join(parts) + ".")
    return lines


def report(runs: Sequence[Run], seconds: float, warmup_s: float) -> str:
    rows = [
        "| nodes | collector | node-scrapes (per node per s) | target-scrapes | not complete | host samples | "
        "CPU | **ms per node-scrape** | ms per target-scrape | demo CPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        extra = ""
        if r.samples_per_target_scrape is not None:
            extra = f" ({r.samples_per_target_scrape:.0f} series stored per target-scrape)"
        if r.bytes_per_node_scrape is not None:
            extra = f" ({r.bytes_per_node_scrape / 1024:.0f} KiB per node-scrape)"
        rows.append(
            f"| {r.nodes} | {r.collector}{extra} | {r.node_scrapes:,} ({r.scrapes_per_node_s:.2f}) | "
            f"{r.target_scrapes:,} | {r.failed} | {'' if r.host_samples is None else f'{r.host_samples:,}'} | "
            f"{r.core_pct:.1f} % of a core | **{r.ms_per_node_scrape:.2f}** | {r.ms_per_target_scrape:.2f} | "
            f"{r.demo_cpu_s / r.seconds * 100:.0f} % |"
        )
    verdict = _verdict(runs)
    return "\n".join(
        [
            *rows,
            "",
            "Target (sparktui at or below Prometheus per node-scrape):",
            *verdict,
            "",
            f"Each collector measured for {seconds:g} s after a {warmup_s:g} s warm-up, alone against a fresh demo "
            "fleet per size (the demo's own CPU in the last column), at a 1 s interval; CPU is user + system of "
            "the process and its children, read in 10 ms clock ticks (so a short window is coarse). Node-scrapes "
            "are counted, not assumed: sparktui's from the observations its poll loops delivered (`sparktui "
            "watch`'s own code, `sparktui.headless.watch.watch`, with a counting sink beside it), Prometheus's from "
            "its `prometheus_target_interval_length_seconds_count`, the floor's from its own rounds. "
            "sparktui's node-scrape is "
            "`/health` and `/metrics?name[]=…` of its vLLM, its GPU exporter and, on 1 node in 4, a side service, "
            "then parsing, deriving, the views, the diagnosis and the alert rules of each tick; with SSH it also "
            "carries the host sampler and a log stream per instance (the host samples column), which Prometheus "
            "does not do: the HTTP-only row compares like with like. Prometheus's node-scrape is the whole "
            "`/metrics` of the vLLM and the GPU exporter (2 target-scrapes), parsed and every series stored "
            "(not complete: its targets down at the end). The floor is Python (asyncio streams, keep-alive, "
            "Content-Length bodies read and dropped): the least a Python collector can spend on the same bytes. "
            "The demo serves bodies uncompressed, so nobody pays for gzip.",
            "",
            f"Measured on {machine_line()}.",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["_watch"] and len(args_in) == 3:
        return watch_child(Path(args_in[1]), Path(args_in[2]))
    if args_in[:1] == ["_floor"] and len(args_in) == 3:
        return floor_child(Path(args_in[1]), Path(args_in[2]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, nargs="+", default=[8, 32, 64], metavar="N")
    ap.add_argument("--seconds", type=float, default=30.0, help="the measured window of each collector")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds each collector runs before it is measured")
    ap.add_argument("--write", type=Path, help="replace this benchmark's section of PATH (docs/performance.md)")
    args = ap.parse_args(args_in)
    if not PROMETHEUS.exists():
        raise SystemExit(f"bench_collect: {PROMETHEUS} is missing: {PROMETHEUS_HINT}")
    if any(n < 1 for n in args.nodes) or args.seconds <= 0 or args.warmup < 0:
        raise SystemExit("bench_collect: --nodes must be at least 1, --seconds above 0 and --warmup not negative")
    stop_on_sigterm()
    runs: list[Run] = []
    try:
        for nodes in args.nodes:
            runs += measure(nodes, args.seconds, args.warmup)
    except KeyboardInterrupt:
        print("bench_collect: interrupted; everything it started is stopped", file=sys.stderr)
        return 130
    body = report(runs, args.seconds, args.warmup)
    print(body)
    if args.write:
        write_section(args.write, SECTION, body, heading=HEADING)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
