"""The demo fleet watched two ways at once, for the Prometheus-source tests against any server that
speaks Prometheus's query API (``tests/support/prometheus_server.py``).

``stepped_run(server_class)`` runs the demo fleet in step mode (its state changes only when the run
advances it) with the server scraping it every second. Each step advances the simulation by the wall
time since the last step, waits until the server has scraped every target after the change, then polls
the fleet directly once and refreshes the Prometheus source once. Both sides so see the same sequence
of states, and ``assert_numbers_match_direct`` / ``assert_server_gives_sparktuis_numbers`` check what
the two tests' module docstrings state.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx

from sparktui.config import catalogue_for, parse_config
from sparktui.demo.fleet import DemoFleet, scaled_nodes
from sparktui.engines import readings
from sparktui.headless import compare
from sparktui.model.fleet import FleetState, InstanceView, NodeView
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import HostUpdate, NodeObservation
from sparktui.model.specs import FleetSpec
from sparktui.model.status import State
from sparktui.monitor.core import Monitor
from sparktui.sources.http import make_client
from sparktui.sources.poller import FleetPoller, fleet_origins
from sparktui.sources.prometheus import PrometheusClient, PrometheusSource, collect, discover_nodes
from tests.support.prometheus_server import ScrapingServer, fleet_metrics_urls
from tests.support.wait import wait_until

EXACT = 1e-9
# A rate divides by its window, the difference of two Unix times held as float seconds: at 1.8e9 s a
# double's step is 2.4e-7 s, so over a 20 s window the two sides' windows can differ by ~1e-8 of their
# length (seen: 6.7e-9). Rates are compared to this; every other number to EXACT.
RATE_EXACT = 1e-7
RATES = (
    "generation_tokens_per_s",
    "prompt_tokens_per_s",
    "prompt_tokens_computed_per_s",
    "requests_finished_per_s",
    "preemptions_per_s",
    "admission_rejections_per_s",
)


def with_prometheus(toml: str, url: str, extra: str = "") -> FleetSpec:
    return parse_config(f'{toml}\n[prometheus]\nurl = "{url}"\n{extra}', env={"PROM_TOKEN": "s3cret-token"})


@dataclass
class Run:
    demo: DemoFleet
    server: ScrapingServer
    fleet: FleetSpec  # direct
    prom_fleet: FleetSpec  # the same fleet, metrics from the server
    direct: FleetState
    via_prometheus: FleetState
    source: PrometheusSource
    client: httpx.AsyncClient
    state_lifetimes: list[float] = field(default_factory=list)
    ended: float = 0.0  # monotonic time of the last step

    def views(self) -> tuple[tuple[NodeView, ...], tuple[NodeView, ...]]:
        # As at the end of the run: later, the numbers would be stale (and hidden) on both sides.
        return self.direct.view(self.ended, window_s=None), self.via_prometheus.view(self.ended, window_s=None)


async def scraped_after(server: ScrapingServer, wall: float, count: int, timeout_s: float = 10.0) -> None:
    """Until every target's last scrape started after ``wall`` (it saw the state set up before)."""

    async def scraped() -> bool:
        result = await server.query("timestamp(up)")
        times = [float(str(r["value"][1])) for r in result]  # type: ignore[index]
        return len(times) >= count and min(times) > wall

    await wait_until(scraped, timeout_s, what=f"{server.name} scraping every target", interval_s=0.05)


async def wait_down(server: ScrapingServer, count: int, timeout_s: float = 15.0) -> None:
    async def down() -> bool:
        return len(await server.query("up == 0")) >= count

    await wait_until(down, timeout_s, what=f"{server.name} seeing {count} targets go down", interval_s=0.1)


@asynccontextmanager
async def stepped_run(server_class: type[ScrapingServer], steps: int, nodes: int = 2) -> AsyncIterator[Run]:
    demo = DemoFleet(scaled_nodes(nodes), seed=11)
    await demo.start()
    try:
        toml = demo.config_toml()
        fleet = parse_config(toml, env={})
        urls = fleet_metrics_urls(fleet)
        async with server_class(urls) as server, make_client(fleet_origins(fleet)) as direct_client:
            prom_fleet = with_prometheus(toml, server.url)
            source = PrometheusSource(prom_fleet)
            async with make_client([server.url]) as client:
                found = Run(
                    demo,
                    server,
                    fleet,
                    prom_fleet,
                    FleetState(fleet, readings()),
                    FleetState(prom_fleet, readings()),
                    source,
                    client,
                )
                poller = FleetPoller(fleet, direct_client)
                changed = time.time()
                for step in range(steps + 1):
                    if step:
                        await demo.advance(time.time() - changed)
                        found.state_lifetimes.append(time.time() - changed)
                        changed = time.time()
                    await scraped_after(server, changed, len(urls))
                    for observation in await poller.poll_all():
                        found.direct.apply(observation)
                    for observation in await source.refresh(client):
                        found.via_prometheus.apply(observation)
                found.state_lifetimes.append(time.time() - changed)
                found.ended = time.monotonic()
                yield found
    finally:
        await demo.stop()


def close(a: float | None, b: float | None, rel: float = EXACT) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def instance_pairs(run: Run) -> list[tuple[InstanceView, InstanceView]]:
    direct, via = run.views()
    pairs: list[tuple[InstanceView, InstanceView]] = []
    for d_node, p_node in zip(direct, via, strict=True):
        assert d_node.name == p_node.name
        pairs.extend(zip(d_node.instances, p_node.instances, strict=True))
    return pairs


def assert_numbers_match_direct(run: Run, exact: float = EXACT) -> None:
    """Every number the server's samples give equals direct mode's: to ``exact`` (relative), and rates
    within the difference of the instants the two sides saw each state at."""
    direct_views, prom_views = run.views()
    for d_node, p_node in zip(direct_views, prom_views, strict=True):
        assert d_node.status.state is State.UP and p_node.status.state is State.UP, (d_node.status, p_node.status)
        assert d_node.gpu == p_node.gpu and d_node.gpu is not None
    longest = max(run.state_lifetimes)
    for direct, prom in instance_pairs(run):
        assert direct.rates is not None and prom.rates is not None
        assert direct.rates.spec_decode is not None and prom.rates.spec_decode is not None
        ours, theirs = compare.view_numbers(direct), compare.view_numbers(prom)
        assert set(ours) == set(theirs)
        assert {"kv_usage", "ttft_p90", "itl_p50", "e2e_p99", "per_position:1", "conditional:1"} <= set(ours)
        for key in set(ours) - set(RATES):
            assert close(ours[key], theirs[key], exact), (direct.name, key, ours[key], theirs[key])
        assert direct.rates.histograms.keys() == prom.rates.histograms.keys()
        for name, ours_h in direct.rates.histograms.items():  # the bucket increases of every latency
            theirs_h = prom.rates.histograms[name]
            assert (ours_h.bounds, ours_h.cumulative, ours_h.count) == (
                theirs_h.bounds,
                theirs_h.cumulative,
                theirs_h.count,
            )
            assert close(ours_h.sum, theirs_h.sum, exact), (name, ours_h.sum, theirs_h.sum)
        window_d, window_p = direct.rates.seconds, prom.rates.seconds
        tolerance = 2 * longest / window_p
        for key in RATES:
            d, p = ours[key], theirs[key]
            assert d is not None and p is not None
            assert close(d * window_d, p * window_p, exact), (key, "the counter increases differ")
            if d:
                assert abs(p / d - 1) <= tolerance, (key, d, p, tolerance)
        assert abs(window_p - window_d) <= 2 * longest


async def assert_server_gives_sparktuis_numbers(run: Run, window_starts_after_s: float = 0.0) -> None:
    """The server's own PromQL, at the last scrape sparktui used and over a window that starts
    ``window_starts_after_s`` after the first one, gives sparktui's numbers."""
    spec = run.prom_fleet.prometheus
    assert spec is not None
    prometheus = PrometheusClient(spec, run.client, 10.0)
    views = {(n.name, i.name): i for n in run.views()[1] for i in n.instances}
    checked = 0
    for target in run.source.targets:
        if target.kind != "vllm":
            continue
        span = run.source.scrape_span(target)
        assert span is not None
        first, last = span
        window_s = last - first - window_starts_after_s
        theirs = (await compare.promql_numbers(prometheus, [target], at=last, window_s=window_s))[target]
        ours = compare.view_numbers(views[(target.node, target.endpoint)])
        assert set(ours) == set(theirs), set(ours) ^ set(theirs)
        for key, value in ours.items():
            rel = RATE_EXACT if key.endswith("_per_s") else EXACT
            assert close(value, theirs[key], rel), (target.node, key, value, theirs[key])
            checked += 1
    assert checked >= 2 * 25


async def assert_snapshot_has_rates_at_once(run: Run) -> None:
    """``snapshot`` from the server: every node up with rates, from one range query and one instant query."""
    monitor, _now = await collect(Monitor.once(run.prom_fleet, catalogue_for(run.prom_fleet.diagnosis)), window_s=10.0)
    views = monitor.views
    for view in views:
        assert view.status.state is State.UP, view.status
        (instance,) = view.instances
        assert instance.rates is not None and instance.rates.generation_tokens_per_s
        assert instance.kv_usage is not None and view.gpu is not None


async def assert_discovery_finds_the_demo_node(run: Run) -> None:
    spec = run.prom_fleet.prometheus
    assert spec is not None
    nodes = await discover_nodes(spec, run.client)
    # Every demo endpoint is on 127.0.0.1: one node with both vLLMs and a GPU exporter.
    (node,) = nodes
    assert node.host == "127.0.0.1" and not node.ssh.enabled
    assert sorted(v.base_url or "" for v in node.vllm) == sorted(
        v.base_url or "" for n in run.fleet.nodes for v in n.vllm
    )
    assert node.gpu_exporter is not None


class Recorder:
    def __init__(self) -> None:
        self.observations: list[NodeObservation] = []
        self.hosts: list[HostUpdate] = []
        self.errors: list[str] = []

    def observation(self, observation: NodeObservation) -> None:
        self.observations.append(observation)

    def host(self, update: HostUpdate) -> None:
        self.hosts.append(update)

    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None:
        pass

    def error(self, node: str, exc: Exception) -> None:
        self.errors.append(f"{node}: {exc}")


async def assert_mixed_mode(run: Run) -> None:
    """Metrics from the server, host state over SSH, from one running source."""
    recorder = Recorder()
    source = PrometheusSource(run.prom_fleet, logs=False)
    task = asyncio.create_task(source.deliver(recorder))
    names = {n.name for n in run.prom_fleet.nodes}

    def every_node_seen() -> bool:
        hosts = {u.node for u in recorder.hosts if u.sample is not None}
        metrics = {o.node for o in recorder.observations if o.vllm and o.vllm[0].metrics is not None}
        return hosts == names and metrics == names

    try:
        await wait_until(
            every_node_seen, 20.0, what="host state and metrics of every node", detail=lambda: str(recorder.errors)
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert {u.node for u in recorder.hosts if u.sample is not None} == names, recorder.hosts[-3:]
    assert {o.node for o in recorder.observations if o.vllm} == names
    # The metrics came from Prometheus, not from the endpoints.
    answers = [v.metrics for o in recorder.observations for v in o.vllm]
    assert answers and all(a is not None and a.url.startswith(run.server.url + " {instance=") for a in answers)
    assert not recorder.errors


async def assert_a_target_down_is_down_here(run: Run) -> str:
    """Powers the second node off: it is down here as in direct mode, and so is a configured node the
    server does not scrape at all. The reasons shown for the node powered off."""
    down = run.demo.nodes[1].name
    await run.demo.power_off(down)
    await wait_down(run.server, 2)  # its vLLM and its GPU exporter
    # A node Prometheus does not scrape at all is down as well.
    toml = run.demo.config_toml() + '\n[[nodes]]\nname = "ghost"\nhost = "127.0.0.1"\n[[nodes.vllm]]\nport = 9\n'
    fleet = with_prometheus(toml, run.server.url)
    direct_fleet = parse_config(toml, env={})
    via, direct = FleetState(fleet, readings()), FleetState(direct_fleet, readings())
    async with make_client(fleet_origins(direct_fleet)) as client:
        for observation in await FleetPoller(direct_fleet, client).poll_all():
            direct.apply(observation)
    for observation in await PrometheusSource(fleet).refresh(run.client):
        via.apply(observation)
    now = time.monotonic()
    states: Mapping[str, tuple[NodeView, NodeView]] = {
        d.name: (d, p) for d, p in zip(direct.view(now), via.view(now), strict=True)
    }
    for name in (down, "ghost"):
        d, p = states[name]
        assert d.status.state is State.DOWN and p.status.state is State.DOWN, (d.status, p.status)
        assert p.instances[0].status.state is d.instances[0].status.state is State.DOWN
    reasons = " ".join(states[down][1].status.reasons)
    assert "down in Prometheus (up == 0" in reasons, reasons
    assert "not in Prometheus: no up series" in " ".join(states["ghost"][1].status.reasons)
    up = run.demo.nodes[0].name
    assert states[up][1].status.state is State.UP
    return reasons
